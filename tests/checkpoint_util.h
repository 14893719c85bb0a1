// Helpers shared by the model-folder tests (test_checkpoint.cpp, test_checkpoint_hf.cpp).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "linformer/model.h"
#include "linformer/safetensors.h"
#include "test_util.h"

namespace lf::checkpoint_test {

using test::expect_error;
using test::randomise;

inline std::vector<float> snapshot(Model& m) {
  std::vector<float> v;
  for (const ParamInfo& p : m.params())
    v.insert(v.end(), m.param_data() + p.offset, m.param_data() + p.offset + p.numel);
  return v;
}

inline bool same_bits(const float* a, const float* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Every parameter of a and b (same table) is bit-identical.
inline void expect_params_equal(Model& a, Model& b, const std::string& what) {
  ASSERT_EQ(a.params().size(), b.params().size()) << what;
  for (size_t i = 0; i < a.params().size(); ++i) {
    const ParamInfo& p = a.params()[i];
    ASSERT_EQ(p.name, b.params()[i].name) << what;
    ASSERT_EQ(p.shape, b.params()[i].shape) << what;
    EXPECT_TRUE(
        same_bits(a.param_data() + p.offset, b.param_data() + b.params()[i].offset, p.numel))
        << what << ": " << p.name << " differs";
  }
}

inline Config standard_config() {
  Config c = test::tiny_config();
  c.attention = AttentionKind::standard;
  return c;
}

// The Linformer variants whose tensor sets differ.
inline std::vector<Config> linformer_configs() {
  std::vector<Config> v;
  Config c = test::tiny_config();
  c.sharing = Sharing::layerwise;
  c.projection = Projection::linear;
  v.push_back(c);
  c.sharing = Sharing::none;
  v.push_back(c);
  c.projection = Projection::conv;
  v.push_back(c);
  c.sharing = Sharing::kv;
  c.projection = Projection::linear;
  c.k = {8, 2};
  c.norm = NormPlacement::pre;
  v.push_back(c);
  c.sharing = Sharing::headwise;
  c.projection = Projection::conv;
  v.push_back(c);
  c.k = {4};
  c.projection = Projection::mean_pool;
  v.push_back(c);
  return v;
}

inline std::string describe(const Config& c) {
  return std::string(to_string(c.attention)) + "/" + to_string(c.sharing) + "/" +
         to_string(c.projection) + "/" + to_string(c.norm);
}

// Writes a checkpoint of m's parameters, with `edit` deciding per tensor: return false to
// omit it, or modify the writer (and return false) to store something else under the name.
inline void write_edited(Model& m, const std::string& path,
                         const std::function<bool(const ParamInfo&, SafeTensorsWriter&)>& edit,
                         bool with_metadata = true) {
  SafeTensorsWriter w;
  if (with_metadata) w.set_metadata("linformer_config", m.config().to_json());
  for (const ParamInfo& p : m.params())
    if (edit(p, w)) w.add_f32(p.name, p.shape, m.param_data() + p.offset);
  w.write(path);
}

}  // namespace lf::checkpoint_test
