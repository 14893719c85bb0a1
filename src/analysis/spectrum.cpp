// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 packet transposes
// (_mm512_undefined_*), inlined into this file; it is not about this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "analysis/spectrum.h"

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>

#include "linformer/error.h"
#include "linformer/rng.h"

namespace lf::analysis {

Vec singular_values(const Mat& A) {
  if (A.size() == 0) return Vec();
  Eigen::BDCSVD<Mat> svd(A);  // values only
  return svd.singularValues();
}

Svd thin_svd(const Mat& A) {
  LF_CHECK(A.size() > 0, "thin_svd: empty matrix");
  Eigen::BDCSVD<Mat> svd(A, Eigen::ComputeThinU | Eigen::ComputeThinV);
  return Svd{svd.matrixU(), svd.singularValues(), svd.matrixV()};
}

std::vector<double> normalised_cumsum(const Vec& s) {
  std::vector<double> c(static_cast<size_t>(s.size()));
  const double total = s.sum();
  double acc = 0;
  for (Eigen::Index i = 0; i < s.size(); ++i) {
    acc += s[i];
    c[static_cast<size_t>(i)] = total > 0 ? acc / total : 1.0;
  }
  return c;
}

double share_of_first(const std::vector<double>& cumulative, int64_t k) {
  LF_CHECK(!cumulative.empty(), "share_of_first: empty spectrum");
  const int64_t n = static_cast<int64_t>(cumulative.size());
  k = std::clamp<int64_t>(k, 1, n);
  return cumulative[static_cast<size_t>(k - 1)];
}

Mat rank_k(const Svd& svd, int64_t k) {
  k = std::clamp<int64_t>(k, 0, svd.s.size());
  return svd.U.leftCols(k) * svd.s.head(k).asDiagonal() * svd.V.leftCols(k).transpose();
}

double tail_frobenius(const Vec& s, int64_t k) {
  k = std::clamp<int64_t>(k, 0, s.size());
  return s.tail(s.size() - k).norm();
}

double rank_k_product_error(const Svd& svd, const Mat& A, const Mat& Y, int64_t k) {
  LF_CHECK(A.cols() == Y.rows(), "rank_k_product_error: A is ", A.rows(), "x", A.cols(),
           " but Y has ", Y.rows(), " rows");
  k = std::clamp<int64_t>(k, 0, svd.s.size());
  const Mat exact = A * Y;
  // A_k Y = U_k (diag(s_k) (V_k^T Y)): never forms the n x n matrix A_k.
  const Mat vy = svd.V.leftCols(k).transpose() * Y;
  const Mat approx = svd.U.leftCols(k) * (svd.s.head(k).asDiagonal() * vy);
  const double den = exact.norm();
  return den > 0 ? (exact - approx).norm() / den : 0.0;
}

Mat jl_matrix(int64_t k, int64_t n, uint64_t seed, uint64_t stream) {
  LF_CHECK(k > 0 && n > 0, "jl_matrix: k and n must be positive, got ", k, " and ", n);
  Mat R(k, n);
  const double scale = 1.0 / std::sqrt(static_cast<double>(k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j)
      R(i, j) = scale * rng_normal(seed, stream, static_cast<uint64_t>(i * n + j));
  return R;
}

double jl_product_error(const Mat& A, const Mat& Y, const Mat& R) {
  LF_CHECK(A.cols() == Y.rows() && R.cols() == A.cols(), "jl_product_error: A is ", A.rows(),
           "x", A.cols(), ", Y has ", Y.rows(), " rows, R has ", R.cols(), " columns");
  const Mat exact = A * Y;
  const Mat approx = (A * R.transpose()) * (R * Y);
  const double den = exact.norm();
  return den > 0 ? (exact - approx).norm() / den : 0.0;
}

}  // namespace lf::analysis
