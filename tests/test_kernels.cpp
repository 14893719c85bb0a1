// Forward kernels and the GEMM entry point against plain loops written here (double
// precision), independent of the code under test.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Restores the OpenMP thread count when a test changes it.
using test::ThreadGuard;

// ---------------------------------------------------------------------------------------------
// GEMM

// C = alpha op(A) op(B) + beta C, written out from the definition (double accumulation).
// beta == 0 means C is not read.
void gemm_loop(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
               const std::vector<float>& A, int64_t lda, const std::vector<float>& B, int64_t ldb,
               double beta, std::vector<double>& C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < K; ++p) {
        const double a = ta ? A[p * lda + i] : A[i * lda + p];
        const double b = tb ? B[j * ldb + p] : B[p * ldb + j];
        s += a * b;
      }
      double& c = C[i * ldc + j];
      c = alpha * s + (beta == 0 ? 0.0 : beta * c);
    }
}

struct GemmCase {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;  // extra leading-dimension elements per row (0: packed)
  float alpha, beta;
};

// Runs one case through gemm and gemm_naive and checks both against gemm_loop. Also checks
// that the padding columns of C (beyond N in each row) are never written.
void run_gemm_case(const GemmCase& g, uint64_t seed) {
  const int64_t a_rows = g.ta ? g.K : g.M, a_cols = g.ta ? g.M : g.K;
  const int64_t b_rows = g.tb ? g.N : g.K, b_cols = g.tb ? g.K : g.N;
  const int64_t lda = a_cols + g.pad, ldb = b_cols + 2 * g.pad, ldc = g.N + 3 * g.pad;
  std::vector<float> A = test::random_vec(std::max<int64_t>(a_rows * lda, 1), seed);
  std::vector<float> B = test::random_vec(std::max<int64_t>(b_rows * ldb, 1), seed + 1);
  std::vector<float> C0 = test::random_vec(std::max<int64_t>(g.M * ldc, 1), seed + 2);
  const float sentinel = 12345.f;
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = g.N; j < ldc; ++j) C0[i * ldc + j] = sentinel;

  std::vector<double> ref(C0.begin(), C0.end());
  gemm_loop(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A, lda, B, ldb, g.beta, ref, ldc);

  std::vector<float> C1 = C0, C2 = C0;
  gemm(ComputeType::f32, g.ta, g.tb, g.M, g.N, g.K, g.alpha, A.data(), lda, B.data(), ldb, g.beta,
       C1.data(), ldc);
  gemm_naive(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A.data(), lda, B.data(), ldb, g.beta, C2.data(),
             ldc);
  // Each output is a K-term dot product of O(1) values: float32 accumulation error is at most
  // ~K * 2^-24 * sum|a b| (worst case), typically far less; 1e-6 * (K + 1) relative to
  // sum |a b| + |beta c| is a safe bound. gemm_naive accumulates in double, so its only error is
  // the final rounding (1 ulp).
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const int64_t idx = i * ldc + j;
      if (j >= g.N) {
        EXPECT_EQ(C1[idx], sentinel) << "gemm wrote into the ldc padding at " << i << "," << j;
        EXPECT_EQ(C2[idx], sentinel) << "gemm_naive wrote into the ldc padding";
        continue;
      }
      double mag = std::abs(g.beta * C0[idx]);
      for (int64_t p = 0; p < g.K; ++p) {
        const double a = g.ta ? A[p * lda + i] : A[i * lda + p];
        const double b = g.tb ? B[j * ldb + p] : B[p * ldb + j];
        mag += std::abs(g.alpha * a * b);
      }
      const double tol = 1e-6 * (g.K + 1) * std::max(mag, 1e-3);
      ASSERT_NEAR(C1[idx], ref[idx], tol)
          << "gemm ta=" << g.ta << " tb=" << g.tb << " M=" << g.M << " N=" << g.N << " K=" << g.K
          << " at " << i << "," << j;
      ASSERT_NEAR(C2[idx], ref[idx], 2e-7 * std::max(std::abs(ref[idx]), 1e-3) + 1e-30)
          << "gemm_naive at " << i << "," << j;
    }
}

TEST(Gemm, AllTransposesShapesAndLeadingDims) {
  const int64_t shapes[][3] = {{5, 7, 3},    {7, 5, 9},    {1, 9, 4},   {8, 1, 6},   {1, 1, 11},
                               {13, 11, 17}, {64, 33, 70}, {3, 130, 2}, {130, 3, 65}};
  uint64_t seed = 100;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const auto& s : shapes)
        for (int64_t pad : {0, 3}) {
          GemmCase g{ta != 0, tb != 0, s[0], s[1], s[2], pad, 1.f, 0.f};
          run_gemm_case(g, seed += 3);
          g.alpha = -1.7f;
          g.beta = 0.6f;
          run_gemm_case(g, seed += 3);
          g.alpha = 0.5f;
          g.beta = 1.f;
          run_gemm_case(g, seed += 3);
        }
}

// Tall, narrow products reducing over many rows (a weight gradient dW = dY^T X) run as
// oneDNN's matmul primitive instead of its sgemm: the same contract, leading dimensions,
// alpha, beta and bias included.
TEST(Gemm, WeightGradientShapesRunAsMatmul) {
  uint64_t seed = 900;
  for (const auto& s : {std::array<int64_t, 3>{1024, 40, 512}, {1030, 17, 600}})
    for (int64_t pad : {0, 5}) {
      GemmCase g{true, false, s[0], s[1], s[2], pad, 1.f, 1.f};
      run_gemm_case(g, seed += 3);
      g.alpha = -0.5f;
      g.beta = 0.f;
      run_gemm_case(g, seed += 3);
    }
  const int64_t M = 1024, N = 24, K = 512;
  const std::vector<float> A = test::random_vec(K * M, 7), B = test::random_vec(K * N, 8),
                           bias = test::random_vec(N, 9);
  std::vector<float> C(M * N, 99.f), ref(M * N);
  gemm(ComputeType::f32, true, false, M, N, K, 1.f, A.data(), M, B.data(), N, 0.f, C.data(), N, {},
       bias.data());
  gemm_naive(true, false, M, N, K, 1.f, A.data(), M, B.data(), N, 0.f, ref.data(), N);
  for (int64_t i = 0; i < M * N; ++i)
    ASSERT_NEAR(C[i], ref[i] + bias[i % N], 1e-4) << "with a bias, at " << i;
}

TEST(Gemm, BetaZeroDoesNotReadC) {
  // With beta = 0, C is output only: NaN or Inf already there must not reach the result.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t M = 9, N = 6, K = 5;
      std::vector<float> A = test::random_vec(M * K, 1), B = test::random_vec(K * N, 2);
      std::vector<float> C(M * N, kNaN), Cn(M * N, kNaN);
      for (size_t i = 0; i < C.size(); i += 3)
        C[i] = Cn[i] = std::numeric_limits<float>::infinity();
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      gemm(ComputeType::f32, ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(), N);
      gemm_naive(ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, Cn.data(), N);
      std::vector<double> ref(M * N, 0.0);
      gemm_loop(ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, ref, N);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_TRUE(std::isfinite(C[i])) << "gemm propagated NaN/Inf from C with beta=0";
        ASSERT_TRUE(std::isfinite(Cn[i])) << "gemm_naive propagated NaN/Inf from C with beta=0";
        EXPECT_NEAR(C[i], ref[i], 1e-5);
      }
    }
}

TEST(Gemm, ZeroInnerDimension) {
  // K = 0: op(A) op(B) is an M x N zero matrix, so C = beta C (and exactly 0 for beta = 0,
  // even over NaN).
  const int64_t M = 4, N = 5, ldc = 7;
  std::vector<float> A(1, kNaN), B(1, kNaN);  // never read
  for (float beta : {0.f, 0.5f, 1.f}) {
    std::vector<float> C = test::random_vec(M * ldc, 9), Cn;
    if (beta == 0.f) C.assign(M * ldc, kNaN);
    for (int64_t i = 0; i < M; ++i) C[i * ldc + 6] = 77.f;  // padding column
    Cn = C;
    const std::vector<float> C0 = C;
    gemm(ComputeType::f32, false, true, M, N, 0, 2.f, A.data(), 1, B.data(), 1, beta, C.data(),
         ldc);
    gemm_naive(false, true, M, N, 0, 2.f, A.data(), 1, B.data(), 1, beta, Cn.data(), ldc);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const int64_t k = i * ldc + j;
        const float want = j >= N ? C0[k] : (beta == 0.f ? 0.f : beta * C0[k]);
        if (j >= N && std::isnan(want)) {
          EXPECT_TRUE(std::isnan(C[k]));
          continue;
        }
        EXPECT_EQ(C[k], want) << "gemm beta=" << beta << " at " << i << "," << j;
        EXPECT_EQ(Cn[k], want) << "gemm_naive beta=" << beta << " at " << i << "," << j;
      }
  }
}

TEST(Gemm, EmptyOutputTouchesNothing) {
  std::vector<float> A = test::random_vec(8, 1), B = test::random_vec(8, 2);
  std::vector<float> C(8, 3.f);
  gemm(ComputeType::f32, false, false, 0, 4, 2, 1.f, A.data(), 2, B.data(), 4, 0.f, C.data(), 4);
  gemm(ComputeType::f32, false, false, 4, 0, 2, 1.f, A.data(), 2, B.data(), 1, 0.f, C.data(), 1);
  for (float c : C) EXPECT_EQ(c, 3.f);
}

// ---------------------------------------------------------------------------------------------
// Row-wise and element-wise kernels

namespace {

// y, mean, rstd of a LayerNorm of x [rows, C] against a double-precision loop.
void expect_layernorm_of(const std::vector<float>& x, const std::vector<float>& y,
                         const std::vector<float>& mean, const std::vector<float>& rstd,
                         const std::vector<float>& w, const std::vector<float>& b, int64_t rows,
                         int64_t C, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < C; ++i) m += x[r * C + i];
    m /= C;
    for (int64_t i = 0; i < C; ++i) v += (x[r * C + i] - m) * (x[r * C + i] - m);
    v /= C;  // biased variance, as in PyTorch
    const double rs = 1.0 / std::sqrt(v + eps);
    EXPECT_NEAR(mean[r], m, 1e-6 * (1 + std::abs(m)));
    EXPECT_NEAR(rstd[r], rs, 1e-6 * rs);
    for (int64_t i = 0; i < C; ++i) {
      const double want = (x[r * C + i] - m) * rs * w[i] + b[i];
      EXPECT_NEAR(y[r * C + i], want, 2e-6 * (1 + std::abs(want))) << r << "," << i;
    }
  }
}

}  // namespace

TEST(Kernel, LayerNormMatchesLoop) {
  const int64_t rows = 7, C = 37;
  const float eps = 1e-5f;
  std::vector<float> x = test::random_vec(rows * C, 3, 2.f);
  for (int64_t i = 0; i < C; ++i) x[i] += 5.f;       // a row with a large mean
  for (int64_t i = 0; i < C; ++i) x[C + i] = 0.25f;  // a constant row: variance 0
  std::vector<float> w = test::random_vec(C, 4), b = test::random_vec(C, 5);
  std::vector<float> y(rows * C), mean(rows), rstd(rows);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C, eps);
  expect_layernorm_of(x, y, mean, rstd, w, b, rows, C, eps);
  // In place is not promised for layernorm; gelu and softmax state it, tested below.
}

// The residual sum and its LayerNorm in one pass: the sum exactly x1 + x2, the LayerNorm of
// that sum against the loop, and the bf16 copy the rounding of the f32 output.
TEST(Kernel, AddLayerNormIsTheLayerNormOfTheSum) {
  const int64_t rows = 9, C = 40;
  const float eps = 1e-5f;
  const std::vector<float> x1 = test::random_vec(rows * C, 6, 2.f),
                           x2 = test::random_vec(rows * C, 7, 3.f);
  const std::vector<float> w = test::random_vec(C, 8), b = test::random_vec(C, 9);
  std::vector<float> sum(rows * C), y(rows * C), mean(rows), rstd(rows);
  std::vector<uint16_t> y16(rows * C), want16(rows * C);
  add_layernorm_forward(sum.data(), y.data(), mean.data(), rstd.data(), x1.data(), x2.data(),
                        w.data(), b.data(), rows, C, eps, y16.data());
  for (int64_t i = 0; i < rows * C; ++i) ASSERT_EQ(sum[i], x1[i] + x2[i]) << i;
  expect_layernorm_of(sum, y, mean, rstd, w, b, rows, C, eps);
  vm::to_bf16_n(want16.data(), y.data(), rows * C);
  EXPECT_EQ(y16, want16);
}

// layernorm_backward's RoundedGrad: the bf16 copy of dropout_backward(dx) and its column sums,
// against the separate steps (layernorm_backward, dropout_backward, round_output_gradient),
// without dropout and with it, and with the parameter gradients and dx unchanged.
TEST(Kernel, LayerNormBackwardRoundsTheNextGradient) {
  const int64_t rows = 37, C = 24;
  const float eps = 1e-5f;
  const std::vector<float> x = test::random_vec(rows * C, 11, 2.f),
                           dy = test::random_vec(rows * C, 12), w = test::random_vec(C, 13),
                           b = test::random_vec(C, 14);
  std::vector<float> y(rows * C), mean(rows), rstd(rows);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C, eps);
  for (float p : {0.f, 0.3f}) {
    std::vector<float> dx(rows * C), dw(C, 0.5f), db(C, 0.25f), g(rows * C), cs(C, 1.f);
    std::vector<uint16_t> g16(rows * C);
    layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), rows, C, GradInto::overwrite);
    dropout_backward(g.data(), dx.data(), rows * C, p, 5, 6, 7, GradInto::overwrite);
    round_output_gradient(g16.data(), cs.data(), g.data(), rows, C);

    std::vector<float> dx2(rows * C), dw2(C, 0.5f), db2(C, 0.25f), cs2(C, 1.f);
    std::vector<uint16_t> h16(rows * C);
    const RoundedGrad also{h16.data(), cs2.data(), p, 5, 6, 7};
    layernorm_backward(dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), rows, C, GradInto::overwrite, &also);
    EXPECT_EQ(dx2, dx) << "p=" << p;
    EXPECT_EQ(dw2, dw) << "p=" << p;
    EXPECT_EQ(db2, db) << "p=" << p;
    EXPECT_EQ(h16, g16) << "p=" << p;
    for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(cs2[c], cs[c], 1e-5f) << "p=" << p << " c=" << c;
    if (p > 0.f) {  // the mask was applied: some rows of g differ from dx
      int64_t dropped = 0;
      for (int64_t i = 0; i < rows * C; ++i) dropped += g[i] == 0.f && dx[i] != 0.f;
      EXPECT_GT(dropped, 0);
    }
  }
}

TEST(Kernel, GeluIsExactErfForm) {
  const int64_t n = 2001;
  std::vector<float> x(n), y(n), y2(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -10.f + 0.01f * i;
  gelu_forward(y.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    // The tanh approximation differs by up to ~5e-4 near |x| = 2, far above this tolerance.
    ASSERT_NEAR(y[i], want, 1e-6 * (1 + std::abs(want))) << "x=" << v;
  }
  y2 = x;
  gelu_forward(y2.data(), y2.data(), n);  // out may alias inp
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y2[i], y[i]);
}

TEST(Kernel, GeluBackwardIsTheExactDerivative) {
  // GELU'(x) = Phi(x) + x phi(x), in double, against both forms: accumulating into dinp, and in
  // place on the incoming gradient. n is not a multiple of 16 (the vector tail).
  const int64_t n = 2001;
  std::vector<float> x(n), g(n), acc(n), inplace(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = -10.f + 0.01f * i;
    g[i] = 0.5f + 0.25f * std::sin(0.1f * i);
    acc[i] = 0.125f * i;  // gelu_backward adds to what is there
  }
  const std::vector<float> acc0 = acc;
  inplace = g;
  gelu_backward(acc.data(), x.data(), g.data(), n);
  gelu_backward_inplace(inplace.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double d =
        0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    const double want = g[i] * d;
    ASSERT_NEAR(inplace[i], want, 2e-6 * (1 + std::abs(want))) << "x=" << v;
    ASSERT_NEAR(acc[i], acc0[i] + want, 2e-6 * (1 + std::abs(acc0[i] + want))) << "x=" << v;
  }
}

TEST(Kernel, TanhMatchesLoop) {
  const int64_t n = 301;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -7.5f + 0.05f * i;
  tanh_forward(y.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], std::tanh(double(x[i])), 2e-7);
}

TEST(Kernel, SoftmaxWithScaleAndKeyMask) {
  const int64_t rows = 5, cols = 11;
  const float scale = 0.35f;
  std::vector<float> x = test::random_vec(rows * cols, 8, 3.f);
  x[2 * cols + 4] = 80.f;  // large logit: needs the max subtraction to stay finite
  x[2 * cols + 5] = 200.f;
  std::vector<float> mask(cols, 1.f);
  mask[0] = mask[3] = mask[10] = 0.f;
  x[1 * cols + 3] = 1000.f;  // a huge value at a masked key must not matter
  std::vector<float> y(rows * cols, kNaN);
  softmax_forward(y.data(), x.data(), rows, cols, scale, mask.data());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e300;
    for (int64_t j = 0; j < cols; ++j)
      if (mask[j] != 0.f) mx = std::max(mx, double(scale) * x[r * cols + j]);
    double s = 0;
    for (int64_t j = 0; j < cols; ++j)
      if (mask[j] != 0.f) s += std::exp(double(scale) * x[r * cols + j] - mx);
    double total = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const float got = y[r * cols + j];
      total += got;
      if (mask[j] == 0.f) {
        EXPECT_EQ(got, 0.f) << "masked key must get exactly 0";
        continue;
      }
      const double want = std::exp(double(scale) * x[r * cols + j] - mx) / s;
      EXPECT_NEAR(got, want, 1e-6 * std::max(want, 1e-3)) << r << "," << j;
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  // Without a mask, and in place.
  std::vector<float> z = x;
  softmax_forward(z.data(), z.data(), rows, cols, 1.f, nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, double(x[r * cols + j]));
    for (int64_t j = 0; j < cols; ++j) s += std::exp(x[r * cols + j] - mx);
    for (int64_t j = 0; j < cols; ++j) {
      const double want = std::exp(x[r * cols + j] - mx) / s;
      EXPECT_NEAR(z[r * cols + j], want, 1e-6 * std::max(want, 1e-3));
    }
  }
}

TEST(Kernel, SoftmaxFullyMaskedRowIsZero) {
  const int64_t rows = 3, cols = 6;
  std::vector<float> x = test::random_vec(rows * cols, 9);
  std::vector<float> mask(cols, 0.f);
  std::vector<float> y(rows * cols, kNaN);
  softmax_forward(y.data(), x.data(), rows, cols, 0.5f, mask.data());
  for (float v : y) EXPECT_EQ(v, 0.f);
  // Also when the masked logits are -inf or huge (nothing of them may leak).
  x.assign(rows * cols, -std::numeric_limits<float>::infinity());
  softmax_forward(y.data(), x.data(), rows, cols, 1.f, mask.data());
  for (float v : y) EXPECT_EQ(v, 0.f);
}

TEST(Kernel, CrossEntropyLossCountAndGradient) {
  const int64_t rows = 9, V = 13;
  std::vector<float> logits = test::random_vec(rows * V, 11, 2.f);
  logits[3 * V + 2] = 60.f;  // a confident row
  std::vector<int32_t> tgt = {3, -100, 0, 2, 12, -1, 7, 7, -100};
  const float gs = 0.37f;
  std::vector<float> d(rows * V, kNaN);  // written, not added: prior contents irrelevant
  int64_t count = -5;
  const double loss = cross_entropy(d.data(), logits.data(), tgt.data(), rows, V, gs, &count);
  double want_loss = 0;
  int64_t want_count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (tgt[r] < 0) {
      for (int64_t j = 0; j < V; ++j) EXPECT_EQ(d[r * V + j], 0.f) << "ignored row " << r;
      continue;
    }
    ++want_count;
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(logits[r * V + j]));
    for (int64_t j = 0; j < V; ++j) s += std::exp(logits[r * V + j] - mx);
    want_loss += mx + std::log(s) - logits[r * V + tgt[r]];
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(logits[r * V + j] - mx) / s;
      const double want = gs * (p - (j == tgt[r] ? 1.0 : 0.0));
      EXPECT_NEAR(d[r * V + j], want, 1e-6 * gs) << r << "," << j;
    }
  }
  EXPECT_EQ(count, want_count);
  EXPECT_NEAR(loss, want_loss, 1e-5 * want_loss);

  // Without a gradient buffer: same loss; with dlogits aliasing logits: same gradient.
  int64_t c2 = 0;
  EXPECT_NEAR(cross_entropy(nullptr, logits.data(), tgt.data(), rows, V, gs, &c2), want_loss,
              1e-5 * want_loss);
  EXPECT_EQ(c2, want_count);
  std::vector<float> alias = logits;
  const double l3 = cross_entropy(alias.data(), alias.data(), tgt.data(), rows, V, gs, nullptr);
  EXPECT_NEAR(l3, want_loss, 1e-5 * want_loss);
  for (int64_t i = 0; i < rows * V; ++i) EXPECT_EQ(alias[i], d[i]) << i;

  // All rows ignored: zero loss and count.
  std::vector<int32_t> none(rows, -100);
  EXPECT_EQ(cross_entropy(nullptr, logits.data(), none.data(), rows, V, 1.f, &c2), 0.0);
  EXPECT_EQ(c2, 0);
}

TEST(Kernel, EmbeddingWithPositionOffset) {
  const int64_t B = 3, N = 5, C = 6, Vw = 10, off = 2, P = N + off + 1;
  std::vector<float> word = test::random_vec(Vw * C, 21), pos = test::random_vec(P * C, 22),
                     type = test::random_vec(2 * C, 23);
  std::vector<int32_t> ids(B * N);
  for (int64_t i = 0; i < B * N; ++i) ids[i] = static_cast<int32_t>(rng_bits(4, 4, i) % Vw);
  std::vector<float> out(B * N * C, kNaN);
  embedding_forward(out.data(), ids.data(), word.data(), pos.data(), type.data(),
                    EmbedDims{/*B=*/B, /*N=*/N, /*C=*/C, /*pos_offset=*/off});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < N; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t r = b * N + t;
        const float want = word[ids[r] * C + c] + pos[(t + off) * C + c] + type[c];
        EXPECT_NEAR(out[r * C + c], want, 1e-6) << b << "," << t << "," << c;
      }
}

TEST(Kernel, DropoutKeepFractionScalingAndBackwardMask) {
  const int64_t n = 1 << 20;  // many elements, larger than one parallel chunk
  const float p = 0.3f;
  std::vector<float> x(n), y(n), dx(n, 0.5f), dy(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 1.f + (i % 17) * 0.125f;  // never 0, so a dropped element is recognisable
    dy[i] = -2.f + (i % 5) * 0.75f;
  }
  dropout_forward(y.data(), x.data(), n, p, 42, 7);
  dropout_backward(dx.data(), dy.data(), n, p, 42, 7);
  int64_t kept = 0;
  const double scale = 1.0 / (1.0 - p);
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == 0.f) {
      ASSERT_EQ(dx[i], 0.5f) << "backward must drop the same elements as forward (" << i << ")";
      continue;
    }
    ++kept;
    ASSERT_NEAR(y[i], x[i] * scale, 1e-6 * y[i]);
    ASSERT_NEAR(dx[i], 0.5 + dy[i] * scale, 1e-6 * (1 + std::abs(dx[i])))
        << "backward scales kept gradients by 1/(1-p) and accumulates";
  }
  // Binomial(n, 0.7): standard deviation sqrt(n p (1-p)) / n = 4.5e-4; allow 6 sigma.
  const double frac = double(kept) / n;
  EXPECT_NEAR(frac, 1.0 - p, 6 * std::sqrt(p * (1 - p) / n));
  // Expectation preserved: mean of y / mean of x ~ 1.
  double sx = 0, sy = 0;
  for (int64_t i = 0; i < n; ++i) sx += x[i], sy += y[i];
  EXPECT_NEAR(sy / sx, 1.0, 0.005);

  // Different stream or seed: a different mask (agreement ~ p^2 + (1-p)^2 = 0.58).
  std::vector<float> y2(n), y3(n);
  dropout_forward(y2.data(), x.data(), n, p, 42, 8);
  dropout_forward(y3.data(), x.data(), n, p, 43, 7);
  int64_t same2 = 0, same3 = 0;
  for (int64_t i = 0; i < n; ++i)
    same2 += (y2[i] == 0.f) == (y[i] == 0.f), same3 += (y3[i] == 0.f) == (y[i] == 0.f);
  EXPECT_LT(double(same2) / n, 0.62);
  EXPECT_LT(double(same3) / n, 0.62);

  // In place gives the same result; p = 0 is the identity.
  std::vector<float> z = x;
  dropout_forward(z.data(), z.data(), n, p, 42, 7);
  EXPECT_EQ(std::memcmp(z.data(), y.data(), n * sizeof(float)), 0);
  dropout_forward(z.data(), x.data(), n, 0.f, 42, 7);
  EXPECT_EQ(std::memcmp(z.data(), x.data(), n * sizeof(float)), 0);
}

// The mask is the one the header specifies: element i kept iff the (j % 4)-th 16 bits of
// rng_bits(seed, stream, j / 4), j = first + i, are >= round(p * 65536), computed here from
// rng_bits alone; for every start offset modulo 4 and lengths that are not multiples of the
// vectorised block, in dropout_forward, dropout_backward and dropout_round.
TEST(Kernel, DropoutMaskIsTheCounterBasedSpecification) {
  const int64_t n = 1000 + 37;
  const std::vector<float> x = test::random_vec(n, 41), g0 = test::random_vec(n, 42);
  for (float p : {0.1f, 0.5f, 0.9f})
    for (int64_t first : {0, 1, 2, 3, 6, 101}) {
      const uint32_t thr = static_cast<uint32_t>(std::lround(double(p) * 65536.0));
      const float keep_scale = 1.f / (1.f - p);
      auto keep = [&](int64_t i) {
        const uint64_t j = static_cast<uint64_t>(first + i);
        return ((rng_bits(9, 4, j >> 2) >> (16 * (j & 3))) & 0xFFFFu) >= thr;
      };
      std::vector<float> y(n), dx(n, 0.f);
      dropout_forward(y.data(), x.data(), n, p, 9, 4, first);
      dropout_backward(dx.data(), g0.data(), n, p, 9, 4, first, GradInto::overwrite);
      int64_t kept = 0;
      for (int64_t i = 0; i < n; ++i) {
        const bool k = keep(i);
        kept += k;
        ASSERT_EQ(y[i], k ? x[i] * keep_scale : 0.f)
            << "p " << p << " first " << first << " i " << i;
        ASSERT_EQ(dx[i], k ? 0.f + g0[i] * keep_scale : 0.f) << i;
      }
      EXPECT_NEAR(double(kept) / n, 1.0 - p, 0.06);
      if (first != 0) continue;  // dropout_round: the attention tiles' masks start at 0
      std::vector<uint16_t> y16(n);
      std::vector<float> g = g0;
      dropout_round(y16.data(), x.data(), g.data(), n, p, 9, 4);
      for (int64_t i = 0; i < n; ++i) {
        const bool k = keep(i);
        ASSERT_EQ(y16[i], vm::bf16_round(k ? x[i] * keep_scale : 0.f)) << i;
        ASSERT_EQ(g[i], k ? g0[i] * keep_scale : 0.f) << i;
      }
    }
}

TEST(Kernel, DropoutIndependentOfThreadCount) {
  ThreadGuard guard;
  const int64_t n = (1 << 18) + 77;  // several parallel chunks, not a multiple of the grain
  const float p = 0.15f;
  std::vector<float> x = test::random_vec(n, 31), g = test::random_vec(n, 32);
  std::vector<float> y1(n), y2(n), d1(n, 0.f), d2(n, 0.f);
  omp_set_num_threads(1);
  dropout_forward(y1.data(), x.data(), n, p, 5, 99);
  dropout_backward(d1.data(), g.data(), n, p, 5, 99);
  omp_set_num_threads(2);
  ASSERT_EQ(omp_get_max_threads(), 2);
  dropout_forward(y2.data(), x.data(), n, p, 5, 99);
  dropout_backward(d2.data(), g.data(), n, p, 5, 99);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(d1.data(), d2.data(), n * sizeof(float)), 0);
  // And the mask is a function of (seed, stream, index) only: a sub-range computed alone
  // matches (the counter is the element index, so this checks there is no per-thread state).
  std::vector<float> part(1000);
  dropout_forward(part.data(), x.data(), 1000, p, 5, 99);
  EXPECT_EQ(std::memcmp(part.data(), y1.data(), 1000 * sizeof(float)), 0);
}

}  // namespace
}  // namespace lf
