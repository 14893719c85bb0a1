// Spectral analysis of attention matrices (the paper's Figure 1 and Theorem 1, measured).
// Singular value decompositions come from Eigen (BDCSVD); nothing here is a hand-written SVD.
#pragma once
// Eigen runs single-threaded here: the analysis parallelises over matrices itself, and Eigen's
// own OpenMP GEMM threads are very slow on an oversubscribed machine. Include this header
// before any Eigen header.
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace lf::analysis {

using Mat = Eigen::MatrixXd;
using Vec = Eigen::VectorXd;

// Singular values of A, in descending order (min(rows, cols) of them).
Vec singular_values(const Mat& A);

// Thin SVD A = U diag(s) V^T, s descending.
struct Svd {
  Mat U;  // [rows, r]
  Vec s;  // [r]
  Mat V;  // [cols, r]
};
Svd thin_svd(const Mat& A);

// Normalised cumulative singular values: c[i] = (s[0] + ... + s[i]) / sum(s).
// All zeros (a zero matrix) gives all ones, the convention that the (empty) spectrum is held.
std::vector<double> normalised_cumsum(const Vec& s);

// The share of the spectrum held by the first k singular values: c[k-1] (k clamped to
// [1, size]).
double share_of_first(const std::vector<double>& cumulative, int64_t k);

// Best rank-k approximation of the decomposed matrix (Eckart-Young): U_k diag(s_k) V_k^T.
Mat rank_k(const Svd& svd, int64_t k);

// sqrt(sum_{i >= k} s_i^2): the Frobenius error of the best rank-k approximation.
double tail_frobenius(const Vec& s, int64_t k);

// ||A Y - A_k Y||_F / ||A Y||_F with A_k the best rank-k approximation of A (from svd of A),
// computed explicitly as the product of the truncated factors with Y.
double rank_k_product_error(const Svd& svd_of_a, const Mat& A, const Mat& Y, int64_t k);

// A k x n matrix of independent N(0, 1/k) entries: the Johnson-Lindenstrauss projection R.
// Entry (i, j) is a function of (seed, stream, i * n + j) only.
Mat jl_matrix(int64_t k, int64_t n, uint64_t seed, uint64_t stream);

// ||A Y - A R^T R Y||_F / ||A Y||_F for a JL matrix R (k x n, n = A.cols() = Y.rows()).
double jl_product_error(const Mat& A, const Mat& Y, const Mat& R);

}  // namespace lf::analysis
