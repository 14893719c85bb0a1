// Kernel behaviour beyond the op harness's reference comparisons (tests/ops): what GEMM does
// with beta = 0, K = 0 and empty outputs, fully masked softmax rows, cross-entropy in place and
// with every row ignored, and dropout's statistics and thread independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "ops/harness.h"
#include "test_util.h"

namespace lf {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Restores the OpenMP thread count when a test changes it.
using test::ThreadGuard;

// ---------------------------------------------------------------------------------------------
// GEMM

TEST(Gemm, BetaZeroDoesNotReadC) {
  // With beta = 0, C is output only: NaN or Inf already there must not reach the result.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t M = 9, N = 6, K = 5;
      std::vector<float> A = test::random_vec(M * K, 1), B = test::random_vec(K * N, 2);
      std::vector<float> C(M * N, kNaN), ref(M * N);
      for (size_t i = 0; i < C.size(); i += 3) C[i] = std::numeric_limits<float>::infinity();
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      gemm(ComputeType::f32, ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(), N);
      ops::naive_gemm(ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, ref.data(), N);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_TRUE(std::isfinite(C[i])) << "gemm propagated NaN/Inf from C with beta=0";
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
    std::vector<float> C = test::random_vec(M * ldc, 9);
    if (beta == 0.f) C.assign(M * ldc, kNaN);
    for (int64_t i = 0; i < M; ++i) C[i * ldc + 6] = 77.f;  // padding column
    const std::vector<float> C0 = C;
    gemm(ComputeType::f32, false, true, M, N, 0, 2.f, A.data(), 1, B.data(), 1, beta, C.data(),
         ldc);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const int64_t k = i * ldc + j;
        const float want = j >= N ? C0[k] : (beta == 0.f ? 0.f : beta * C0[k]);
        if (j >= N && std::isnan(want)) {
          EXPECT_TRUE(std::isnan(C[k]));
          continue;
        }
        EXPECT_EQ(C[k], want) << "gemm beta=" << beta << " at " << i << "," << j;
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

// The gradient written over the logits (dlogits aliasing logits) equals the one written apart;
// with every row ignored, loss and count are 0.
TEST(Kernel, CrossEntropyInPlaceAndAllIgnored) {
  const int64_t rows = 9, V = 13;
  const std::vector<float> logits = test::random_vec(rows * V, 11, 2.f);
  const std::vector<int32_t> tgt = {3, -100, 0, 2, 12, -1, 7, 7, -100};
  std::vector<float> d(rows * V, kNaN), alias = logits;
  int64_t count = 0, c2 = 0;
  const double loss = cross_entropy(d.data(), logits.data(), tgt.data(), rows, V, 0.37f, &count);
  EXPECT_EQ(cross_entropy(alias.data(), alias.data(), tgt.data(), rows, V, 0.37f, &c2), loss);
  EXPECT_EQ(c2, count);
  EXPECT_EQ(alias, d);
  const std::vector<int32_t> none(rows, -100);
  EXPECT_EQ(cross_entropy(nullptr, logits.data(), none.data(), rows, V, 1.f, &c2), 0.0);
  EXPECT_EQ(c2, 0);
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
