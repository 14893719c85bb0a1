// Finite-difference gradient checks, shared by test_gradcheck.cpp (every backward function)
// and test_gradcheck_model.cpp (the whole model).
//
// Method: random inputs, a random weighting r, scalar loss = sum(r * output) accumulated in
// double; analytic gradient from the backward function (into zeroed buffers: backward
// accumulates); numeric gradient (L(x + h) - L(x - h)) / (2h) using the step actually applied
// in float.
//
// Tolerances for the kernel checks (inputs and r are O(1), h = 1e-2):
//   - truncation error of the central difference: |f'''| h^2 / 6 ~ 2e-5 |f'''|;
//   - rounding: the forward runs in float32, so each evaluation of L carries an error of about
//     2^-24 * sqrt(#outputs) * O(1) ~ 1e-6, which the division by 2h turns into ~5e-5.
//   Both are far below kAtol = 1e-3 (absolute) + kRtol = 1e-2 (relative to |analytic|); the
//   measured worst error is ~0.02 of that bound, while a wrong gradient (missing term, wrong
//   factor, wrong index) is off by O(|gradient|) = O(1).
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "linformer/rng.h"
#include "test_util.h"

namespace lf::gradcheck {

inline constexpr float kH = 1e-2f;
inline constexpr double kAtol = 1e-3, kRtol = 1e-2;

inline double weighted_sum(const float* out, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < r.size(); ++i) s += double(r[i]) * out[i];
  return s;
}

// Indices to check: all when n <= max_entries, else a random subset of max_entries.
inline std::vector<size_t> pick(size_t n, size_t max_entries, uint64_t seed) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  if (n <= max_entries) return idx;
  for (size_t i = 0; i < max_entries; ++i) {  // partial Fisher-Yates
    const size_t j = i + rng_bits(seed, 91, i) % (n - i);
    std::swap(idx[i], idx[j]);
  }
  idx.resize(max_entries);
  return idx;
}

// Central difference of loss() w.r.t. x[i], with the float step actually taken.
inline double numeric_grad(float* x, size_t i, float h, const std::function<double()>& loss) {
  const float x0 = x[i];
  const float xp = x0 + h, xm = x0 - h;
  x[i] = xp;
  const double lp = loss();
  x[i] = xm;
  const double lm = loss();
  x[i] = x0;
  return (lp - lm) / (double(xp) - double(xm));
}

// Finite differences run many tiny forwards: on one thread, to avoid paying an OpenMP fork per
// call (the analytic gradients are computed with the default thread count; thread-count
// independence itself is tested in test_invariance.cpp).
struct OneThread : test::ThreadGuard {
  OneThread() : ThreadGuard(1) {}
};

// Compares analytic[i] with the central difference for the chosen entries of x.
inline void check_grad(const std::string& what, float* x, size_t n, const float* analytic,
                       const std::function<double()>& loss, size_t max_entries = 400,
                       uint64_t seed = 1) {
  OneThread one;
  int bad = 0;
  double worst = 0;
  for (size_t i : pick(n, max_entries, seed)) {
    const double num = numeric_grad(x, i, kH, loss);
    const double err = std::abs(num - analytic[i]);
    const double tol = kAtol + kRtol * std::abs(analytic[i]);
    worst = std::max(worst, err / tol);
    if (err > tol && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " numeric " << num;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " entries out of tolerance";
  ::testing::Test::RecordProperty(what + "_worst_err_over_tol", std::to_string(worst));
}

inline std::vector<float> zeros(size_t n) { return std::vector<float>(n, 0.f); }

}  // namespace lf::gradcheck
