// Batched products' bf16 operand forms (an operand given only rounded, an output written in
// bf16) against the f64-accumulating naive GEMM; the plain batched products and the bias
// epilogue are op harness cases (tests/ops/cases_gemm.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/vec_math.h"
#include "test_util.h"

namespace lf {
namespace {

// An operand kept only in bf16 (A null, its rounded copy given, as the queries of bf16
// training are): against gemm_naive on the widened copy, both when the product runs in bf16
// and when it is too small for bf16 and runs in f32 (the copy is widened back).
TEST(GemmBatched, OperandGivenOnlyRounded) {
  LF_REQUIRE_BF16();
  const int64_t nh = 2, N = 48, K = 16;
  for (int64_t M : {64, 4}) {  // 64: the bf16 product; 4: below its size, f32
    const int64_t nb = M == 64 ? 8 : 1;
    const bool bf16 = gemm_batched_runs_bf16(ComputeType::bf16, nb, nh, M, N, K);
    ASSERT_EQ(bf16, M == 64);
    const BatchLayout la{M * nh * K, K, nh * K}, lb{K * nh * N, N, nh * N},
        lc{M * nh * N, N, nh * N};
    auto A = test::random_vec(nb * M * la.ld, 21), B = test::random_vec(nb * K * lb.ld, 22);
    Buffer<uint16_t> a16;
    round_batch_bf16(a16, nb, nh, M, K, la, A.data());
    std::vector<float> Aw(A.size());
    vm::from_bf16_n(Aw.data(), a16.data(), static_cast<int64_t>(A.size()));
    std::vector<float> C(nb * M * lc.ld, 0.f), R(C.size(), 0.f);
    gemm_batched(ComputeType::bf16, nb, nh, false, false, M, N, K, 1.f, a16.data(), la, B.data(),
                 lb, 0.f, C.data(), lc);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t h = 0; h < nh; ++h)
        gemm_naive(false, false, M, N, K, 1.f, Aw.data() + b * la.sb + h * la.sh, la.ld,
                   B.data() + b * lb.sb + h * lb.sh, lb.ld, 0.f, R.data() + b * lc.sb + h * lc.sh,
                   lc.ld);
    double num = 0, den = 0;
    for (size_t i = 0; i < C.size(); ++i) {
      num += (C[i] - R[i]) * double(C[i] - R[i]);
      den += double(R[i]) * R[i];
    }
    EXPECT_LT(std::sqrt(num / den), bf16 ? 1e-2 : 1e-6) << "M=" << M;
  }
}

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
