// Helpers shared by the tests.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/rng.h"
#include "linformer/config.h"

namespace lf::test {

// A fresh, empty temporary folder for one test.
inline std::string temp_dir(const std::string& tag) {
  namespace fs = std::filesystem;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name() + "_" + tag;
  for (char& c : name)
    if (c == '/') c = '_';
  fs::path p = fs::temp_directory_path() / ("lf_test_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// A small model shape used across tests.
inline Config tiny_config() {
  Config c;
  c.vocab_size = 37;
  c.max_len = 16;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 24;
  c.n_layers = 2;
  c.k = {4};
  c.dropout = 0.f;
  c.attention_dropout = 0.f;
  c.num_classes = 3;
  c.position_offset = 2;
  return c;
}

// ||a - b|| / ||b|| (Frobenius), with a floor on the denominator.
inline double rel_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-12);
}

inline std::vector<float> random_vec(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng_normal(seed, 7, i);
  return v;
}

}  // namespace lf::test
