// Finite-difference helpers: which entries to check (test_gradcheck_model.cpp, the whole
// model's gradients, and the op harness, tests/ops/harness.cpp, every kernel's backward), and
// the model check's step and single-threaded forwards.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <numeric>
#include <vector>

#include "linformer/rng.h"
#include "test_util.h"

namespace lf::gradcheck {

inline constexpr float kH = 1e-2f;

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

// Finite differences run many tiny forwards: on one thread, to avoid paying an OpenMP fork per
// call (the analytic gradients are computed with the default thread count; thread-count
// independence itself is tested in test_invariance.cpp).
struct OneThread : test::ThreadGuard {
  OneThread() : ThreadGuard(1) {}
};

}  // namespace lf::gradcheck
