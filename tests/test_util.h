// Helpers shared by the tests.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "layers/attention_path.h"
#include "linformer/compute_type.h"
#include "linformer/config.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/rng.h"

namespace lf::test {

// The precisions this CPU runs: f32, and bf16 where oneDNN has a bf16 matmul (AVX-512). A test
// of both loops over these; a test of bf16 alone starts with LF_REQUIRE_BF16().
inline std::vector<ComputeType> compute_types() {
  if (compute_type_supported(ComputeType::bf16)) return {ComputeType::f32, ComputeType::bf16};
  return {ComputeType::f32};
}
#define LF_REQUIRE_BF16()                                                           \
  do {                                                                              \
    if (!::lf::compute_type_supported(::lf::ComputeType::bf16))                     \
      GTEST_SKIP() << "this CPU has no bf16 matmul in oneDNN (bf16 needs AVX-512)"; \
  } while (0)
// The same for int8 (oneDNN's int8 matmul needs AVX2).
#define LF_REQUIRE_INT8()                                                   \
  do {                                                                      \
    if (!::lf::compute_type_supported(::lf::ComputeType::int8))             \
      GTEST_SKIP() << "this CPU has no int8 matmul in oneDNN (needs AVX2)"; \
  } while (0)

// Skips a test of inference precision t for an attention kind that does not run it, after
// checking that the model refuses t with an error naming the kind (attention_path.h,
// runs_precision).
#define LF_REQUIRE_KIND_RUNS(cfg, t)                                                              \
  do {                                                                                            \
    const ::lf::AttentionPath& kind_ = ::lf::attention_path(cfg);                                 \
    if (!kind_.runs_precision(t, false)) {                                                        \
      ::lf::Model refusing_(cfg);                                                                 \
      EXPECT_THROW(                                                                               \
          {                                                                                       \
            try {                                                                                 \
              refusing_.set_compute_type(t);                                                      \
            } catch (const ::lf::Error& e) {                                                      \
              EXPECT_NE(std::string(e.what()).find(kind_.name()), std::string::npos) << e.what(); \
              throw;                                                                              \
            }                                                                                     \
          },                                                                                      \
          ::lf::Error);                                                                           \
      GTEST_SKIP() << kind_.name() << " does not run " << ::lf::compute_type_name(t)              \
                   << " (refused, as checked)";                                                   \
    }                                                                                             \
  } while (0)

// A fresh, empty temporary folder for one test.
inline std::string temp_dir(const std::string& tag) {
  namespace fs = std::filesystem;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // ctest runs some tests twice, the second time as bf16_emulated.* with
  // LINFORMER_EMULATE_BF16 set (tests/CMakeLists.txt), possibly at the same time: that copy
  // gets a folder of its own. (Not the process id: these folders outlive the run and would
  // pile up.)
  const char* emulated = std::getenv("LINFORMER_EMULATE_BF16");
  std::string name = std::string(info->test_suite_name()) + "_" + info->name() + "_" + tag +
                     (emulated && *emulated ? "_bf16_emulated" : "");
  for (char& c : name)
    if (c == '/') c = '_';
  fs::path p = fs::temp_directory_path() / ("lf_test_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// A fresh, empty folder per TempDir (one test may make several), removed afterwards.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* ti = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("lf_") + (ti ? ti->test_suite_name() : "x") + "_" +
                       (ti ? ti->name() : "y") + "_" + std::to_string(::getpid()) + "_" +
                       std::to_string(counter++);
    dir_ = std::filesystem::path(::testing::TempDir()) / name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// Writes text to path, creating its folder.
inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// v as 8 little-endian bytes (the length prefix of a safetensors file).
inline std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// What a run of the linformer binary (built beside the tests) gave.
struct CliRun {
  int code = -1;         // exit status, or 128 + signal number
  bool crashed = false;  // ended by a signal
  std::string out, err;
};

// Runs `linformer ARGS` (ARGS is shell text; stdin_text, when not empty, its standard input;
// env, when not empty, shell assignments such as "LINFORMER_ISA=avx2" put before the command)
// with stdout and stderr captured into files in dir.
inline CliRun run_cli(const std::string& dir, const std::string& args,
                      const std::string& stdin_text = "", const std::string& env = "") {
  const std::string bin = std::string(LF_BINARY_DIR) + "/linformer";
  EXPECT_TRUE(std::filesystem::exists(bin)) << bin << " is missing: build the `linformer` target";
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  std::string cmd = (env.empty() ? "" : env + " ") + "'" + bin + "' " + args + " > '" + out +
                    "' 2> '" + err + "'";
  if (!stdin_text.empty()) {
    write_text(dir + "/stdin.txt", stdin_text);
    cmd += " < '" + dir + "/stdin.txt'";
  }
  const int st = std::system(cmd.c_str());
  CliRun r;
  if (st != -1 && WIFEXITED(st)) {
    r.code = WEXITSTATUS(st);
    r.crashed = r.code >= 128;  // the shell reports a signal as 128 + signal
  } else if (st != -1 && WIFSIGNALED(st)) {
    r.code = 128 + WTERMSIG(st);
    r.crashed = true;
  }
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

inline std::string show(const CliRun& r) {
  return "exit " + std::to_string(r.code) + "\n--- stdout:\n" + r.out + "\n--- stderr:\n" + r.err;
}

// Keeps the OpenMP thread count: restores it when it goes out of scope, and sets it to
// `threads` meanwhile when given.
struct ThreadGuard {
  const int saved = omp_get_max_threads();
  ThreadGuard() = default;
  explicit ThreadGuard(int threads) { omp_set_num_threads(threads); }
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

// The message of the lf::Error thrown by f ("" if none was thrown).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Runs fn, which must throw an lf::Error whose message contains every phrase; `what` names the
// case in a failure.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& phrases,
                         const std::string& what = "") {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : phrases)
      EXPECT_NE(msg.find(p), std::string::npos)
          << what << ": message lacks \"" << p << "\"\n  message: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-lf::Error exception: " << e.what();
    return;
  }
  ADD_FAILURE() << what << ": no exception; expected one mentioning \"" << phrases.at(0) << "\"";
}

// stmt throws an lf::Error whose message contains phrase.
#define EXPECT_ERROR_MENTIONS(stmt, phrase)                                 \
  do {                                                                      \
    const std::string msg_ = ::lf::test::error_of([&] { stmt; });           \
    EXPECT_FALSE(msg_.empty()) << #stmt " did not throw lf::Error";         \
    EXPECT_NE(msg_.find(phrase), std::string::npos) << "message: " << msg_; \
  } while (0)

// A small model shape used across tests (Linformer, k = 4, no dropout, 3 classes).
inline Config tiny_config() {
  return Config::from_json(R"({"vocab_size": 37, "max_len": 16, "d_model": 16, "n_heads": 2,
      "d_ff": 24, "n_layers": 2, "k": 4, "dropout": 0, "attention_dropout": 0, "num_classes": 3,
      "position_offset": 2})");
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

// Random, non-trivial weights: init(seed), then noise on every tensor (LayerNorm and biases
// too), so that no parameter sits at a special value (0, 1) where a bug could hide.
inline void randomise(Model& m, uint64_t seed) {
  m.init(seed);
  float* w = m.param_data();
  for (const ParamInfo& p : m.params())
    for (size_t i = 0; i < p.numel; ++i)
      w[p.offset + i] += 0.1f * rng_normal(seed + 1, p.offset, i);
}

// Turns arena guard words on (or off) for its lifetime (core/buffer.h): a block written past
// its end then makes the model's pass throw, in release builds too.
struct GuardWords {
  const bool before = Arena::guard_words();
  explicit GuardWords(bool on = true) { Arena::set_guard_words(on); }
  ~GuardWords() { Arena::set_guard_words(before); }
};

// A configuration with the name its parameterised tests carry.
struct NamedConfig {
  std::string name;
  Config cfg;
};
inline void PrintTo(const NamedConfig& c, std::ostream* os) { *os << c.name; }

// The attention-option matrix every whole-model test runs over, built on `base`: every
// variant of every attention kind in the registry (attention_variants: standard attention,
// Linformer with every sharing x every projection), standard attention pre-norm and causal,
// and two pre-norm Linformer models with a different k per layer (`per_layer_k`, whose values
// must divide base.max_len).
inline std::vector<NamedConfig> attention_matrix(const Config& base,
                                                 std::vector<int64_t> per_layer_k = {8, 2}) {
  std::vector<NamedConfig> v;
  for (const AttentionVariant& a : attention_variants(base)) v.push_back({a.name, a.cfg});
  {
    Config c = base;
    c.attention = AttentionKind::standard;
    c.norm = NormPlacement::pre;
    v.push_back({"standard_pre", c});
    c.norm = NormPlacement::post;
    c.causal = true;
    v.push_back({"standard_causal", c});
  }
  {
    Config c = base;
    c.attention = AttentionKind::linformer;
    c.norm = NormPlacement::pre;
    c.k = per_layer_k;
    c.sharing = Sharing::headwise;
    v.push_back({"headwise_linear_pre_perlayer_k", c});
    c.sharing = Sharing::none;
    c.projection = Projection::conv;
    v.push_back({"none_conv_pre_perlayer_k", c});
  }
  return v;
}

inline std::vector<float> random_vec(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng_normal(seed, 7, i);
  return v;
}

}  // namespace lf::test
