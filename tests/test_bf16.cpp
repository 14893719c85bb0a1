// Mixed precision: bf16 matrix products against the f64-accumulating naive GEMM, and a
// training step in bf16 against the same step in f32.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/gemm.h"
#include "linformer/model.h"
#include "test_util.h"

namespace lf {
namespace {

struct PrecisionGuard {
  explicit PrecisionGuard(GemmPrecision p) { set_gemm_precision(p); }
  ~PrecisionGuard() { set_gemm_precision(GemmPrecision::f32); }
};

TEST(Bf16Gemm, MatchesNaiveWithinBf16Rounding) {
  PrecisionGuard g(GemmPrecision::bf16);
  const int64_t M = 96, N = 80, K = 200;  // big enough to take the bf16 path
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
      auto A = test::random_vec((ta ? K : M) * lda, 1);
      auto B = test::random_vec((tb ? N : K) * ldb, 2);
      auto C = test::random_vec(M * ldc, 3);
      auto R = C;
      gemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.25f, C.data(), ldc);
      gemm_naive(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.25f, R.data(), ldc);
      // bf16 keeps 8 significant bits: each input carries relative error <= 2^-9, so a sum of
      // K random-sign products has relative error of order 2^-9; 1e-2 leaves a wide margin
      // while an f32-only result (error ~1e-7) or a wrong transpose (error ~1) is told apart.
      double num = 0, den = 0, diff_f32 = 0;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const double d = C[i * ldc + j] - R[i * ldc + j];
          num += d * d;
          den += double(R[i * ldc + j]) * R[i * ldc + j];
          diff_f32 = std::max(diff_f32, std::abs(d));
        }
      const double rel = std::sqrt(num / den);
      EXPECT_LT(rel, 1e-2) << "ta=" << ta << " tb=" << tb;
      EXPECT_GT(rel, 1e-6) << "bf16 path not taken (result as exact as f32)";
      // Leading-dimension padding of C is untouched.
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = N; j < ldc; ++j) EXPECT_EQ(C[i * ldc + j], R[i * ldc + j]);
    }
}

TEST(Bf16Training, LossAndGradientsCloseToF32) {
  Config c = test::tiny_config();
  c.d_model = 64;
  c.d_ff = 128;
  c.max_len = 64;
  c.k = {16};
  Model m(c);
  m.init(5);
  const int64_t B = 4, N = 64;
  std::vector<int32_t> ids(B * N), labels(B * N, -100);
  for (int64_t i = 0; i < B * N; ++i) {
    ids[i] = static_cast<int32_t>(rng_bits(9, 0, i) % c.vocab_size);
    if (i % 5 == 0) labels[i] = static_cast<int32_t>(rng_bits(9, 1, i) % c.vocab_size);
  }
  auto run = [&](GemmPrecision p, std::vector<float>* grad) {
    PrecisionGuard g(p);
    m.zero_grad();
    m.forward(Batch{ids.data(), nullptr, B, N}, true);
    int64_t cnt = 0;
    const double loss = m.mlm_loss(labels.data(), true, 1.f, &cnt) / cnt;
    m.backward();
    grad->assign(m.grad_data(), m.grad_data() + m.params().back().offset + m.params().back().numel);
    return loss;
  };
  std::vector<float> g32, g16;
  const double l32 = run(GemmPrecision::f32, &g32);
  const double l16 = run(GemmPrecision::bf16, &g16);
  EXPECT_NEAR(l16, l32, 1e-2 * l32);
  EXPECT_NE(l16, l32);  // the bf16 path was really used
  EXPECT_LT(test::rel_error(g16.data(), g32.data(), g32.size()), 5e-2);
}

}  // namespace
}  // namespace lf
