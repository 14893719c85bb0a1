// A batched product's bf16 output is its f32 output rounded, bit for bit. The batched products
// against a naive reference (plain, an operand given only rounded) are op cases
// (tests/ops/cases_gemm.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/vec_math.h"
#include "test_util.h"

namespace lf {
namespace {

// A bf16 output (C16, as attention's context in bf16 training): the same product as with an
// f32 output, rounded, in both the bf16 product and the f32 one; one head of two only (the
// head columns interleave in C's layout), so the other head's columns must stay untouched.
TEST(GemmBatched, Bf16OutputIsTheRoundedF32Output) {
  LF_REQUIRE_BF16();
  const int64_t nh = 1, N = 48, K = 32, ld = 2 * N;
  for (int64_t M : {64, 4}) {  // 64: the bf16 product; 4: below its size, f32
    const int64_t nb = M == 64 ? 8 : 1;
    ASSERT_EQ(gemm_batched_runs_bf16(ComputeType::bf16, nb, nh, M, N, K), M == 64);
    const BatchLayout la{M * K, 0, K}, lb{K * N, 0, N}, lc{M * ld, 0, ld};
    auto A = test::random_vec(nb * M * K, 23), B = test::random_vec(nb * K * N, 24);
    std::vector<float> C(nb * M * ld, 0.f);
    gemm_batched(ComputeType::bf16, nb, nh, false, false, M, N, K, 1.f, A.data(), la, B.data(), lb,
                 0.f, C.data(), lc);
    const uint16_t kMark = 0x7fc1;  // a NaN pattern no product writes here
    std::vector<uint16_t> C16(C.size(), kMark), want(C.size(), kMark);
    gemm_batched(ComputeType::bf16, nb, nh, false, false, M, N, K, 1.f, A.data(), la, B.data(), lb,
                 0.f, C16.data(), lc);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t r = 0; r < M; ++r) {
        const int64_t o = b * lc.sb + r * ld;
        vm::to_bf16_n(want.data() + o, C.data() + o, N);
      }
    int64_t bad = 0;
    for (size_t i = 0; i < C16.size(); ++i) bad += C16[i] != want[i];
    EXPECT_EQ(bad, 0) << "M=" << M << ": elements differing from the rounded f32 output";
  }
}

}  // namespace
}  // namespace lf
