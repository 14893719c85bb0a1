// Helpers of the command-line tests (test_cli*.cpp): expectations on a finished `linformer`
// process, a padded input batch and `init`.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "linformer/checkpoint.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/safetensors.h"
#include "test_util.h"

namespace lf::cli_test {

namespace fs = std::filesystem;

using test::CliRun;
using test::run_cli;
using test::show;

inline void expect_ok(const CliRun& r, const std::string& what) {
  EXPECT_EQ(r.code, 0) << what << "\n" << show(r);
}

// Fails (not by a signal) with every phrase in stderr.
inline void expect_fail(const CliRun& r, std::initializer_list<std::string> phrases,
                 const std::string& what) {
  EXPECT_FALSE(r.crashed) << what << ": crashed\n" << show(r);
  EXPECT_NE(r.code, 0) << what << "\n" << show(r);
  EXPECT_FALSE(r.err.empty()) << what << ": nothing on stderr";
  for (const std::string& p : phrases)
    EXPECT_NE(r.err.find(p), std::string::npos) << what << ": stderr lacks \"" << p << "\"\n"
                                                << show(r);
}

inline void expect_mentions(const std::string& text, std::initializer_list<std::string> words,
                     const std::string& what) {
  for (const std::string& w : words)
    EXPECT_NE(text.find(w), std::string::npos) << what << " lacks \"" << w << "\":\n" << text;
}

// A padded batch: B = 3, N = 12, lengths 12, 7, 10; ids start with cls_id, padding is pad_id.
struct Inputs {
  int64_t B = 3, N = 12;
  std::vector<int64_t> ids, mask;
};

inline Inputs make_inputs(const Config& c) {
  Inputs in;
  const int64_t lens[3] = {12, 7, 10};
  in.ids.resize(in.B * in.N);
  in.mask.resize(in.B * in.N);
  for (int64_t b = 0; b < in.B; ++b)
    for (int64_t t = 0; t < in.N; ++t) {
      const int64_t i = b * in.N + t;
      const bool real = t < lens[b];
      in.mask[i] = real;
      in.ids[i] = !real    ? c.pad_id
                  : t == 0 ? c.cls_id
                           : static_cast<int64_t>(rng_bits(21, 3, i) % c.vocab_size);
    }
  return in;
}

inline void write_inputs(const Inputs& in, const std::string& path, bool int32) {
  SafeTensorsWriter w;
  if (int32) {
    std::vector<int32_t> ids(in.ids.begin(), in.ids.end()), mask(in.mask.begin(), in.mask.end());
    w.add_i32("input_ids", {in.B, in.N}, ids.data());
    w.add_i32("attention_mask", {in.B, in.N}, mask.data());
  } else {
    w.add_i64("input_ids", {in.B, in.N}, in.ids.data());
    w.add_i64("attention_mask", {in.B, in.N}, in.mask.data());
  }
  w.write(path);
}

// `init` a model folder from cfg; returns its path.
inline std::string init_model(const std::string& dir, const Config& cfg, const std::string& name,
                       uint64_t seed) {
  cfg.save(dir + "/" + name + ".json");
  const CliRun r = run_cli(dir, "init --config " + dir + "/" + name + ".json --seed " +
                                       std::to_string(seed) + " --out " + dir + "/" + name);
  EXPECT_EQ(r.code, 0) << show(r);
  return dir + "/" + name;
}

}  // namespace lf::cli_test
