// Hostile and careless input, one section per class of problem: sizes beyond the
// documented limits, deeply nested JSON, non-finite numbers, options out of range, and
// commands that would destroy a user's files. Each test fails on the code before the fix
// (see docs/errors.md for the messages).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/limits.h"
#include "io/json_read.h"
#include "io/run_lock.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "linformer/checkpoint.h"
#include "linformer/config.h"
#include "linformer/file_util.h"
#include "linformer/finetune.h"
#include "linformer/model.h"
#include "linformer/pretrain.h"
#include "linformer/safetensors.h"
#include "test_util.h"
#include "train/run_io.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::temp_dir;
using test::tiny_config;
using test::write_text;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Sets LINFORMER_MEMORY_LIMIT for one scope (the memory check then sees a small machine).
struct MemoryLimit {
  explicit MemoryLimit(const std::string& bytes) {
    setenv("LINFORMER_MEMORY_LIMIT", bytes.c_str(), 1);
  }
  ~MemoryLimit() { unsetenv("LINFORMER_MEMORY_LIMIT"); }
};

// ---------------------------------------------------------------------------------------------
// 1. Limits: every size is bounded before any arithmetic or allocation.

TEST(HostileLimits, EveryConfigSizeHasAnUpperBound) {
  struct Case {
    const char* key;
    int64_t Config::*field;
    int64_t too_big;
  };
  const Case cases[] = {
      {"vocab_size", &Config::vocab_size, limits::kMaxVocab + 1},
      {"max_len", &Config::max_len, limits::kMaxLen + 1},
      {"d_model", &Config::d_model, int64_t{1} << 40},
      {"n_heads", &Config::n_heads, limits::kMaxHeads * 2},
      {"d_ff", &Config::d_ff, int64_t{1} << 50},
      {"n_layers", &Config::n_layers, 100000000},
      {"type_vocab_size", &Config::type_vocab_size, int64_t{1} << 40},
      {"position_offset", &Config::position_offset, int64_t{1} << 62},
      {"num_classes", &Config::num_classes, int64_t{1} << 40},
  };
  for (const Case& c : cases) {
    Config cfg = tiny_config();
    cfg.*c.field = c.too_big;
    if (c.field == &Config::n_heads) cfg.d_model = c.too_big;  // divisible, but too many heads
    const std::string msg = error_of([&] { cfg.validate(); });
    EXPECT_NE(msg.find(c.key), std::string::npos) << c.key << ": " << msg;
    EXPECT_NE(msg.find("must be in ["), std::string::npos) << c.key << ": " << msg;
  }
  // The same through a config file (what a user hands the program).
  EXPECT_ERROR_MENTIONS(Config::from_json("{\"position_offset\": 4611686018427387904}"),
                        "position_offset");
  EXPECT_ERROR_MENTIONS(Config::from_json("{\"n_layers\": 100000000}"), "n_layers");
  EXPECT_ERROR_MENTIONS(Config::from_json("{\"vocab_size\": 18446744073709551615}"), "vocab_size");
  EXPECT_ERROR_MENTIONS(Config::from_json("{\"k\": [-1]}"), "k[0]");
}

TEST(HostileLimits, ParameterCountIsBoundedAndCheckedAgainstMemory) {
  // Each size within its own bound, the product beyond the parameter limit: refused by
  // validate(), without building anything.
  Config big = tiny_config();
  big.vocab_size = limits::kMaxVocab;
  big.d_model = limits::kMaxDModel;
  big.n_heads = 1;
  EXPECT_ERROR_MENTIONS(big.validate(), "parameters exceed the limit");
  // Within the limit but more than this (pretend) machine has: refused before allocating,
  // with the bytes it would need.
  const Config cfg = tiny_config();
  const int64_t n = cfg.num_parameters();
  EXPECT_GT(n, 1000);
  MemoryLimit small(std::to_string(4 * n / 2));
  const std::string msg = error_of([&] { Model m(cfg); });
  EXPECT_NE(msg.find("parameters"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(4 * n / 2)), std::string::npos) << msg;
}

TEST(HostileLimits, ParameterCountMatchesTheTable) {
  // num_parameters() is what validate() bounds: it must count what the model allocates.
  for (const char* kind : {"standard", "linformer"}) {
    Config c = tiny_config();
    c.attention =
        std::string(kind) == "standard" ? AttentionKind::standard : AttentionKind::linformer;
    size_t sum = 0;
    for (const ParamInfo& p : param_table(c)) {
      size_t e = 1;
      for (int64_t d : p.shape) e *= static_cast<size_t>(d);
      sum += e;
    }
    EXPECT_EQ(static_cast<size_t>(c.num_parameters()), sum) << kind;
  }
}

TEST(HostileLimits, ForwardShapeTooLargeIsRefusedBeforeReadingIds) {
  Model m(tiny_config());
  m.init(1);
  const int32_t ids[16] = {0};
  // A batch claiming 2^50 sequences: refused from its shape alone (the ids are never read).
  EXPECT_ERROR_MENTIONS(m.forward(Batch{ids, nullptr, int64_t{1} << 50, 16}, false), "too large");
  // Activations beyond the (pretend) machine's memory: refused with the bytes needed.
  MemoryLimit small("100000");
  std::vector<int32_t> many(64 * 16, 5);
  EXPECT_ERROR_MENTIONS(m.forward(Batch{many.data(), nullptr, 64, 16}, true), "needs");
}

TEST(HostileLimits, TensorElementCountsNeverWrap) {
  TensorInfo t;
  t.name = "t";
  t.shape = {int64_t{1} << 32, int64_t{1} << 32, 0};  // a zero dimension: empty, no overflow
  EXPECT_EQ(t.numel(), 0);
  t.shape = {int64_t{1} << 62, 4};  // wraps int64: an error, not a negative count
  EXPECT_ERROR_MENTIONS(t.numel(), "no valid element count");
  // A shape of absurd rank is refused while the header is read.
  const std::string dir = temp_dir("rank");
  std::string shape = "[";
  for (int i = 0; i < 100; ++i) shape += i ? ",1" : "1";
  shape += "]";
  std::string header = "{\"t\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,4]}}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_text(dir + "/r.safetensors", file + header + std::string(4, '\0'));
  EXPECT_ERROR_MENTIONS(SafeTensorsReader(dir + "/r.safetensors"), "dimensions (limit 64)");
}

// ---------------------------------------------------------------------------------------------
// 2. No recursion on untrusted structure.

std::string nested(int depth, const std::string& leaf = "1") {
  return std::string(depth, '[') + leaf + std::string(depth, ']');
}

TEST(HostileJson, DeepNestingIsRefusedWhereverJsonIsRead) {
  const std::string dir = temp_dir("deep");
  const int deep = 200000;  // far beyond any stack a recursive walk could survive
  // A safetensors header whose shape is nested: the message used to dump() it recursively.
  const std::string header =
      "{\"t\":{\"dtype\":\"F32\",\"shape\":" + nested(deep) + ",\"data_offsets\":[0,4]}}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_text(dir + "/deep.safetensors", file + header + std::string(4, '\0'));
  EXPECT_ERROR_MENTIONS(SafeTensorsReader(dir + "/deep.safetensors"), "nested deeper than 32");
  // A config file (re-serialised after overrides) and a config text.
  write_text(dir + "/config.json", "{\"k\": " + nested(deep) + "}");
  EXPECT_ERROR_MENTIONS(Config::load_with_overrides(dir + "/config.json", {"d_ff=32"}),
                        "nested deeper than 32");
  EXPECT_ERROR_MENTIONS(Config::load(dir + "/config.json"), "nested deeper than 32");
  // Run files: a resumed run's train_args.json.
  write_text(dir + "/run/train_args.json", nested(deep));
  PretrainOptions po;
  po.out = dir + "/run";
  EXPECT_ERROR_MENTIONS(pretrain(po, true), "nested deeper than 32");
  // Up to the limit is fine.
  EXPECT_NO_THROW(parse_json_bounded(nested(limits::kMaxJsonDepth), "x"));
  EXPECT_ERROR_MENTIONS(parse_json_bounded(nested(limits::kMaxJsonDepth + 1), "x"), "nested");
}

// Found by tests/fuzz/fuzz_config: a --set value that is not JSON is kept as a string, and
// one that is not UTF-8 either made the re-serialisation of the overrides throw a
// nlohmann::json exception instead of an lf::Error naming the key.
TEST(HostileJson, NonUtf8SetValueIsAnErrorNamingTheKey) {
  EXPECT_ERROR_MENTIONS(Config::load_with_overrides("", {"k=\x82}"}), "'k' must be an integer");
  EXPECT_ERROR_MENTIONS(Config::load_with_overrides("", {"attention=\xff"}), "'attention'");
  EXPECT_ERROR_MENTIONS(Config::load_with_overrides("", {"k=\xef"}), "'k' must be an integer");
  EXPECT_THROW(Config::load_with_overrides("", {"\xff\xfe=1"}), Error);  // an unknown key
}

TEST(HostileJson, ErrorMessagesQuoteABoundedExcerpt) {
  const std::string dir = temp_dir("excerpt");
  // A shape "dimension" that is a huge string: the message quotes a prefix, not all of it.
  const std::string big(1 << 20, 'x');
  const std::string header =
      "{\"t\":{\"dtype\":\"F32\",\"shape\":[\"" + big + "\"],\"data_offsets\":[0,4]}}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_text(dir + "/s.safetensors", file + header + std::string(4, '\0'));
  const std::string msg = error_of([&] { SafeTensorsReader r(dir + "/s.safetensors"); });
  EXPECT_NE(msg.find("is not an integer"), std::string::npos) << msg.substr(0, 300);
  EXPECT_LT(msg.size(), 1000u);
  EXPECT_EQ(json_excerpt(nlohmann::json::array({1, 2, 3})), "an array of 3 element(s)");
}

// ---------------------------------------------------------------------------------------------
// 3. NaN and infinity are never hidden.

// The scalar references: std::exp and GELU's erfc form, x/2 erfc(-x/sqrt 2).
float ref_exp(float x) { return std::exp(x); }
float ref_gelu(float x) { return 0.5f * x * std::erfc(-x / std::sqrt(2.f)); }
float ref_gelu_grad(float x) {
  return 0.5f * std::erfc(-x / std::sqrt(2.f)) + x * std::exp(-0.5f * x * x) / std::sqrt(2.f * 3.14159265f);
}

void expect_same_class(float got, float want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
  } else if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_TRUE(std::isfinite(got)) << what << ": got " << got << ", want " << want;
    EXPECT_NEAR(got, want, 1e-5f * std::max(1.f, std::fabs(want)) + 1e-30f) << what;
  }
}

TEST(HostileNonFinite, VectorisedKernelsFollowTheScalarReference) {
  const float specials[] = {kNaN,  -kNaN, kInf,  -kInf, 0.f,   -0.f,   1.f,   -1.f,  30.f,
                            -30.f, 88.f,  88.6f, 89.f,  1e30f, -1e30f, -87.f, -88.f, -100.f};
  // 37 values: two full AVX-512 vectors and a masked tail, each special in several lanes.
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = specials[(i * 7) % (sizeof specials / 4)];
  std::vector<float> y(x.size());
  vm::exp_n(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const std::string what = "exp(" + std::to_string(x[i]) + ") lane " + std::to_string(i);
    if (x[i] < vm::kExpMin && x[i] > -kInf) {
      EXPECT_LE(y[i], 1e-37f) << what;  // flushed below the normal range: documented
      continue;
    }
    expect_same_class(y[i], ref_exp(x[i]), what);
    expect_same_class(vm::exp_scalar(x[i]), ref_exp(x[i]), "scalar " + what);
  }
  vm::gelu_n(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const std::string what = "gelu(" + std::to_string(x[i]) + ") lane " + std::to_string(i);
    expect_same_class(y[i], ref_gelu(x[i]), what);
    expect_same_class(vm::gelu_scalar(x[i]), ref_gelu(x[i]), "scalar " + what);
  }
  // GELU's derivative: accumulated (gelu_backward) and in place; a NaN or infinite input
  // gives what the erfc form gives (GELU'(+inf) = 1 + inf * 0 = NaN, as std::exp's form).
  std::vector<float> ones(x.size(), 1.f), d(x.size(), 0.f);
  vm::gelu_backward_n(d.data(), x.data(), ones.data(), static_cast<int64_t>(x.size()));
  std::vector<float> dip = ones;
  vm::gelu_backward_inplace_n(dip.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const std::string what = "gelu'(" + std::to_string(x[i]) + ") lane " + std::to_string(i);
    expect_same_class(d[i], ref_gelu_grad(x[i]), what);
    expect_same_class(dip[i], ref_gelu_grad(x[i]), "in place " + what);
    expect_same_class(vm::gelu_grad_scalar(x[i]), ref_gelu_grad(x[i]), "scalar " + what);
  }
}

TEST(HostileNonFinite, SoftmaxOfNaNScoresIsNaN) {
  // A row whose visible scores are all NaN (a poisoned key projection) used to become zero
  // attention, a finite and plausible answer.
  std::vector<float> row(20, kNaN), out(20);
  softmax_forward(out.data(), row.data(), 1, 20, 1.f, nullptr);
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  // One NaN among finite scores poisons its row too.
  std::vector<float> mixed(20, 1.f);
  mixed[3] = kNaN;
  softmax_forward(out.data(), mixed.data(), 1, 20, 1.f, nullptr);
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  // A fully masked row is still all zeros (masking is not NaN).
  std::vector<float> mask(20, 0.f);
  softmax_forward(out.data(), row.data(), 1, 20, 1.f, mask.data());
  for (float v : out) EXPECT_EQ(v, 0.f);
}

TEST(HostileNonFinite, ANaNWeightGivesNaNOutputsInEveryAttentionPath) {
  struct Path {
    const char* name;
    AttentionKind kind;
    Projection proj;
    Model::ExactAttention exact;
  };
  const Path paths[] = {
      {"standard tiled", AttentionKind::standard, Projection::linear, Model::ExactAttention::tiled},
      {"standard streaming", AttentionKind::standard, Projection::linear,
       Model::ExactAttention::streaming},
      {"standard materialized", AttentionKind::standard, Projection::linear,
       Model::ExactAttention::materialized},
      {"linformer linear", AttentionKind::linformer, Projection::linear,
       Model::ExactAttention::tiled},
      {"linformer max_pool", AttentionKind::linformer, Projection::max_pool,
       Model::ExactAttention::tiled},
  };
  for (const Path& p : paths) {
    Config c = tiny_config();
    c.attention = p.kind;
    c.projection = p.proj;
    Model m(c);
    m.init(3);
    m.set_exact_attention(p.exact);
    // One weight of the key map: every key has a NaN coordinate, so every score of head 0 is
    // NaN. The old fast exp mapped them to 0 and the head silently attended to nothing.
    m.param("roberta.encoder.layer.0.attention.self.key.weight")[0] = kNaN;
    std::vector<int32_t> ids(2 * 16);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(5 + i % 30);
    for (bool train : {false, true}) {
      m.forward(Batch{ids.data(), nullptr, 2, 16}, train);
      int64_t nan = 0;
      for (int64_t i = 0; i < 2 * 16 * c.d_model; ++i) nan += std::isnan(m.hidden()[i]);
      EXPECT_GT(nan, 0) << p.name << (train ? " (training)" : " (inference)");
    }
  }
}

TEST(HostileNonFinite, LoadingNonFiniteWeightsNamesTheTensor) {
  const std::string dir = temp_dir("nan");
  Model m(tiny_config());
  m.init(1);
  const std::string name = "roberta.encoder.layer.1.output.dense.weight";
  m.param(name)[5] = kInf;
  save_model(m, dir + "/m");
  const std::string msg = error_of([&] { load_model(dir + "/m"); });
  EXPECT_NE(msg.find(name), std::string::npos) << msg;
  EXPECT_NE(msg.find("non-finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("element 5"), std::string::npos) << msg;
  // The same for a NaN in a half-precision file (the check reads the raw bits of each dtype).
  SafeTensorsWriter w;
  SafeTensorsReader r(dir + "/m/model.safetensors");
  for (const std::string& n : r.names()) {
    std::vector<int64_t> shape;
    std::vector<float> v = r.read_f32(n, &shape);
    std::vector<uint16_t> bf(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      uint32_t b;
      std::memcpy(&b, &v[i], 4);
      bf[i] = static_cast<uint16_t>(b >> 16);
    }
    if (n == name) bf[5] = 0x7fc0;  // bf16 NaN
    w.add_raw(n, DType::BF16, shape, bf.data());
  }
  w.write(dir + "/bf16.safetensors");
  Model m2(tiny_config());
  EXPECT_ERROR_MENTIONS(load_weights(m2, dir + "/bf16.safetensors"), name);
}

TEST(HostileNonFinite, ConfigNeverHoldsNonFiniteValues) {
  // 1e39 does not fit a float: it became inf, written as null, and the folder never loaded.
  EXPECT_ERROR_MENTIONS(Config::load_with_overrides("", {"init_std=1e39"}), "not a finite float");
  EXPECT_ERROR_MENTIONS(Config::load_with_overrides("", {"layer_norm_eps=-1e39"}),
                        "not a finite float");
  Config c = tiny_config();
  c.init_std = kNaN;
  EXPECT_ERROR_MENTIONS(c.validate(), "init_std");
  c = tiny_config();
  c.layer_norm_eps = kInf;
  EXPECT_ERROR_MENTIONS(c.validate(), "layer_norm_eps");
  // save() refuses to write what load() could not read back.
  const std::string dir = temp_dir("cfg");
  EXPECT_ERROR_MENTIONS(c.save(dir + "/config.json"), "layer_norm_eps");
  EXPECT_FALSE(fs::exists(dir + "/config.json"));
}

TEST(HostileNonFinite, TrainingStopsBeforeApplyingANonFiniteStep) {
  const std::string dir = temp_dir("stop");
  fs::create_directories(dir + "/checkpoints/step-00000004");
  write_text(dir + "/checkpoints/step-00000004/state.json", "{}");
  write_text(dir + "/checkpoints/latest", "step-00000004\n");
  EXPECT_NO_THROW(check_step_finite("pretrain", 2.5, 1.0, 5, dir));
  std::string msg = error_of([&] { check_step_finite("pretrain", kNaN, 1.0, 5, dir); });
  EXPECT_NE(msg.find("loss became nan at step 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("step-00000004"), std::string::npos) << msg;
  msg = error_of([&] { check_step_finite("finetune", 2.5, kInf, 5, dir); });
  EXPECT_NE(msg.find("gradient norm became inf"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------
// 4. Options out of range: the library refuses them before reading or writing anything.

TEST(HostileOptions, PretrainOptionsOutOfRangeNameTheRange) {
  const std::string dir = temp_dir("popt");
  auto expect_refused = [&](auto set, const std::string& phrase) {
    PretrainOptions o;
    o.train = {dir + "/absent.txt"};
    o.out = dir + "/run";
    set(o);
    const std::string msg = error_of([&] { pretrain(o, false); });
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(dir + "/run")) << phrase << ": the run folder was created";
  };
  expect_refused([](PretrainOptions& o) { o.valid_fraction = std::nan(""); },
                 "--valid-fraction must be in [0, 1), got nan");
  expect_refused([](PretrainOptions& o) { o.mask_prob = 2; }, "--mask-prob must be in (0, 1)");
  expect_refused([](PretrainOptions& o) { o.batch_size = -3; }, "--batch-size must be in [1, ");
  expect_refused([](PretrainOptions& o) { o.optim.lr = 0; }, "--lr must be positive");
  expect_refused([](PretrainOptions& o) { o.optim.lr = kNaN; }, "--lr must be positive");
  expect_refused([](PretrainOptions& o) { o.optim.beta2 = 1; }, "--beta2 must be in [0, 1)");
  expect_refused([](PretrainOptions& o) { o.log_every = 0; }, "--log-every must be in [1, ");
  expect_refused([](PretrainOptions& o) { o.time_limit = -1; }, "--time-limit");
}

TEST(HostileOptions, FinetuneOptionsOutOfRangeNameTheRange) {
  const std::string dir = temp_dir("fopt");
  auto expect_refused = [&](auto set, const std::string& phrase) {
    FinetuneOptions o;
    o.train = dir + "/absent.tsv";
    o.out = dir + "/run";
    set(o);
    const std::string msg = error_of([&] { finetune(o, false); });
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(dir + "/run")) << phrase << ": the run folder was created";
  };
  expect_refused([](FinetuneOptions& o) { o.warmup_ratio = std::nan(""); }, "--warmup-ratio");
  expect_refused([](FinetuneOptions& o) { o.dropout = kNaN; }, "--dropout must be in [0, 1)");
  expect_refused([](FinetuneOptions& o) { o.eval_batch_size = 0; }, "--eval-batch-size");
  expect_refused([](FinetuneOptions& o) { o.epochs = -1; }, "--epochs must be in [1, ");
  expect_refused([](FinetuneOptions& o) { o.optim.eps = -1e-8f; }, "--eps must be positive");
  expect_refused([](FinetuneOptions& o) { o.optim.weight_decay = kInf; }, "--weight-decay");
}

// ---------------------------------------------------------------------------------------------
// 5. Nothing a user has is lost.

TEST(HostileRuns, FinetuneRefusesAnExistingRunUnlessOverwrite) {
  const std::string dir = temp_dir("exists");
  write_text(dir + "/run/train_args.json", "{}");
  write_text(dir + "/run/best/model.safetensors", "precious");
  FinetuneOptions o;
  o.train = dir + "/absent.tsv";
  o.out = dir + "/run";
  EXPECT_ERROR_MENTIONS(finetune(o, false), "already holds a run");
  EXPECT_TRUE(fs::exists(dir + "/run/best/model.safetensors"));
  PretrainOptions p;
  p.train = {dir + "/absent.txt"};
  p.out = dir + "/run";
  EXPECT_ERROR_MENTIONS(pretrain(p, false), "--overwrite");
  // With overwrite the old run goes (then the missing data stops the new one).
  o.overwrite = true;
  EXPECT_FALSE(error_of([&] { finetune(o, false); }).empty());
  EXPECT_FALSE(fs::exists(dir + "/run/best"));
  EXPECT_FALSE(fs::exists(dir + "/run/train_args.json"));
}

TEST(HostileRuns, AnOutputMayNotBeAnInput) {
  const std::string dir = temp_dir("inout");
  write_text(dir + "/run/config.json", "{}");
  PretrainOptions p;
  p.train = {dir + "/corpus.txt"};
  write_text(dir + "/corpus.txt", "text\n");
  p.out = dir + "/run";
  p.config = dir + "/run/config.json";
  EXPECT_ERROR_MENTIONS(pretrain(p, false), "would overwrite the input");
  // Through another spelling of the same path (a symbolic link to the run folder).
  fs::create_directory_symlink(dir + "/run", dir + "/alias");
  p.config = dir + "/alias/config.json";
  EXPECT_ERROR_MENTIONS(pretrain(p, false), "--config");
  // finetune --out INIT_FROM would replace the model it starts from.
  write_text(dir + "/m/config.json", "{}");
  FinetuneOptions f;
  f.train = dir + "/corpus.txt";
  f.out = dir + "/m";
  f.init_from = dir + "/m";
  EXPECT_ERROR_MENTIONS(finetune(f, false), "--init-from");
  EXPECT_NO_THROW(check_not_an_input(dir + "/new.txt", "x", {{"--in", dir + "/corpus.txt"}}));
  EXPECT_ERROR_MENTIONS(check_not_an_input(dir, "x", {{"--in", dir + "/corpus.txt"}}), "--in");
}

TEST(HostileRuns, ARunFolderIsLockedWhileInUse) {
  const std::string dir = temp_dir("lock");
  RunLock held(dir + "/run", "test");
  const std::string pid = std::to_string(::getpid());
  FinetuneOptions o;
  o.train = dir + "/absent.tsv";
  o.out = dir + "/run";
  const std::string msg = error_of([&] { finetune(o, true); });
  // (resume fails earlier without train_args.json; a new run meets the lock)
  EXPECT_FALSE(msg.empty());
  const std::string msg2 = error_of([&] { finetune(o, false); });
  EXPECT_NE(msg2.find("in use by process " + pid), std::string::npos) << msg2;
  PretrainOptions p;
  p.train = {dir + "/absent.txt"};
  p.out = dir + "/run";
  EXPECT_ERROR_MENTIONS(pretrain(p, false), "in use by process " + pid);
  EXPECT_ERROR_MENTIONS(RunLock(dir + "/run", "again"), dir + "/run/.lock");
}

TEST(HostileRuns, TemporariesOfAKilledRunAreRemoved) {
  const std::string dir = temp_dir("tmp");
  write_text(dir + "/metrics.jsonl.tmp.4242", "half");
  write_text(dir + "/checkpoints/step-00000002.tmp/model.safetensors", "half");
  write_text(dir + "/checkpoints/latest.tmp.99", "x");
  write_text(dir + "/keep.tmp.txt", "not ours");
  write_text(dir + "/metrics.jsonl", "{}\n");
  take_run_folder(dir, "test", true, false, {});
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl.tmp.4242"));
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step-00000002.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/latest.tmp.99"));
  EXPECT_TRUE(fs::exists(dir + "/keep.tmp.txt"));
  EXPECT_TRUE(fs::exists(dir + "/metrics.jsonl"));
}

}  // namespace
}  // namespace lf
