// The products under the layers: a bias row in the epilogue and batched products (attention's
// heads side by side), f32 and bf16, against the f64-accumulating naive GEMM.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/vec_math.h"
#include "test_util.h"

namespace lf {
namespace {

// A bias row (the linear maps' epilogue in bf16, a copy under sgemm) against gemm_naive plus
// the bias, in both precisions; C's padding stays untouched.
TEST(GemmBias, AddedToEveryRow) {
  const int64_t M = 96, N = 80, K = 200, ldc = N + 3;
  for (ComputeType t : test::compute_types()) {
    auto A = test::random_vec(M * K, 4), B = test::random_vec(N * K, 5),
         bias = test::random_vec(N, 6), C = test::random_vec(M * ldc, 7);
    auto R = C;
    gemm(t, false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, C.data(), ldc, {},
         bias.data());
    gemm_naive(false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, R.data(), ldc);
    double num = 0, den = 0;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        const double want = double(R[i * ldc + j]) + bias[j];
        num += (C[i * ldc + j] - want) * (C[i * ldc + j] - want);
        den += want * want;
      }
      for (int64_t j = N; j < ldc; ++j) EXPECT_EQ(C[i * ldc + j], R[i * ldc + j]);
    }
    EXPECT_LT(std::sqrt(num / den), t == ComputeType::bf16 ? 1e-2 : 1e-6);
  }
}

// Batched products (attention's heads side by side in a row, as in [B, N, H * Dh]; a
// projection matrix shared by the batch) against gemm_naive on each matrix, f32 and bf16,
// every transpose, with alpha and beta; C's padding columns stay untouched.
TEST(GemmBatched, MatchesNaivePerMatrix) {
  const int64_t nb = 3, nh = 2, M = 64, N = 48, K = 72;
  for (ComputeType t : test::compute_types())
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int shared : {0, 1, 2}) {  // 1: A shared across b, 2: B shared across h
          const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
          const BatchLayout la{shared == 1 ? 0 : ar * (nh * ac + 3), ac, nh * ac + 3};
          const BatchLayout lb{br * (nh * bc + 1), shared == 2 ? 0 : bc, nh * bc + 1};
          const BatchLayout lc{M * (nh * N + 5), N, nh * N + 5};
          auto A = test::random_vec(nb * ar * la.ld, 11), B = test::random_vec(nb * br * lb.ld, 12);
          auto C = test::random_vec(nb * M * lc.ld, 13);
          auto R = C;
          gemm_batched(t, nb, nh, ta, tb, M, N, K, 0.5f, A.data(), la, B.data(), lb, 0.25f,
                       C.data(), lc);
          double num = 0, den = 0;
          for (int64_t b = 0; b < nb; ++b)
            for (int64_t h = 0; h < nh; ++h) {
              const int64_t co = b * lc.sb + h * lc.sh;
              gemm_naive(ta, tb, M, N, K, 0.5f, A.data() + b * la.sb + h * la.sh, la.ld,
                         B.data() + b * lb.sb + h * lb.sh, lb.ld, 0.25f, R.data() + co, lc.ld);
            }
          for (size_t i = 0; i < C.size(); ++i) {
            num += (C[i] - R[i]) * double(C[i] - R[i]);
            den += double(R[i]) * R[i];
          }
          for (int64_t r = 0; r < nb * M; ++r)
            for (int64_t j = nh * N; j < lc.ld; ++j)
              EXPECT_EQ(C[r * lc.ld + j], R[r * lc.ld + j]) << "padding written";
          const double rel = std::sqrt(num / den);
          const std::string tag = std::string(t == ComputeType::bf16 ? "bf16" : "f32") +
                                  " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                                  " shared=" + std::to_string(shared);
          if (t == ComputeType::f32) {
            EXPECT_LT(rel, 1e-5) << tag;
          } else {
            EXPECT_LT(rel, 1e-2) << tag;
            EXPECT_GT(rel, 1e-6) << tag << ": bf16 path not taken";
          }
        }
}

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
    gemm_batched(ComputeType::bf16, nb, nh, false, false, M, N, K, 1.f, nullptr, la, B.data(), lb,
                 0.f, C.data(), lc, Bf16Inputs{a16.data(), nullptr});
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
                 0.f, nullptr, lc, {}, C16.data());
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
