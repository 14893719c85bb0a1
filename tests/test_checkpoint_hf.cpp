// Model folders from Hugging Face RoBERTa-style files (written by
// tests/reference/make_hf_roberta.py: Python + numpy, independent of the engine's writer):
// standard and Linformer models, half precision, bare RoBERTa files, missing projections.
// See docs/checkpoint.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "checkpoint_util.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/safetensors.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

using namespace checkpoint_test;

// HF sizes matching test::tiny_config(): max_position_embeddings = max_len + 2.
std::string make_hf_file(const std::string& dir, const std::string& dtype = "F32",
                         bool bare = false) {
  const Config c = test::tiny_config();
  const std::string out = dir + "/hf_" + dtype + (bare ? "_bare" : "") + ".safetensors";
  const std::string cmd = std::string("/usr/bin/python3 ") + LF_SOURCE_DIR +
                          "/tests/reference/make_hf_roberta.py --out " + out + " --dtype " + dtype +
                          " --vocab " + std::to_string(c.vocab_size) + " --max-pos " +
                          std::to_string(c.max_len + 2) + " --hidden " + std::to_string(c.d_model) +
                          " --ffn " + std::to_string(c.d_ff) + " --layers " +
                          std::to_string(c.n_layers) + " --seed 4" + (bare ? " --bare" : "");
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return out;
}

// The config docs/checkpoint.md prescribes for a RoBERTa checkpoint.
Config hf_config(AttentionKind attention) {
  Config c = test::tiny_config();
  c.attention = attention;
  c.position_offset = 2;
  c.type_vocab_size = 1;
  c.pad_id = 1;
  c.cls_id = 0;
  c.layer_norm_eps = 1e-5f;
  return c;
}

const std::vector<std::string> kHfIgnored = {
    "lm_head.decoder.bias", "lm_head.decoder.weight", "roberta.embeddings.position_ids",
    "roberta.pooler.dense.bias", "roberta.pooler.dense.weight"};

// Loads the HF file through a model folder (config.json + the file) and checks everything.
void check_hf_load(const std::string& hf, const Config& cfg, const std::string& dir) {
  const std::string what = describe(cfg);
  fs::create_directories(dir);
  fs::copy_file(hf, dir + "/model.safetensors", fs::copy_options::overwrite_existing);
  cfg.save(dir + "/config.json");
  LoadOptions opt;
  opt.seed = 9;
  LoadReport rep;
  auto m = load_model(dir, opt, &rep);
  EXPECT_EQ(m->config().to_json(), cfg.to_json()) << what;

  SafeTensorsReader r(hf);
  std::set<std::string> expect_init;
  for (const ParamInfo& p : m->params()) {
    const float* got = m->param_data() + p.offset;
    if (r.has(p.name)) {
      std::vector<int64_t> shape;
      std::vector<float> want = r.read_f32(p.name, &shape);
      EXPECT_EQ(shape, p.shape) << what << ": " << p.name;
      EXPECT_TRUE(same_bits(got, want.data(), p.numel)) << what << ": " << p.name << " differs";
    } else {
      expect_init.insert(p.name);
      const bool projection = p.name.find("_proj.weight") != std::string::npos &&
                              p.name.find("out_proj") == std::string::npos;
      EXPECT_TRUE(projection || p.name.rfind("classifier.", 0) == 0)
          << what << ": unexpected absent tensor " << p.name;
    }
  }
  // Freshly initialised exactly as init(seed) would, and listed in the report.
  EXPECT_EQ(std::set<std::string>(rep.initialised.begin(), rep.initialised.end()), expect_init)
      << what;
  Model fresh(cfg);
  fresh.init(opt.seed);
  for (const std::string& n : expect_init) {
    const ParamInfo* p = m->find(n);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(same_bits(m->param(n), fresh.param(n), p->numel)) << what << ": " << n;
  }
  std::vector<std::string> ignored = rep.ignored;
  std::sort(ignored.begin(), ignored.end());
  EXPECT_EQ(ignored, kHfIgnored) << what;

  // The loaded model runs.
  const int64_t B = 2, N = 9;
  std::vector<int32_t> ids(B * N);
  std::vector<float> mask(B * N, 1.f);
  for (int64_t i = 0; i < B * N; ++i) ids[i] = static_cast<int32_t>((7 * i + 3) % cfg.vocab_size);
  for (int64_t t = 5; t < N; ++t) {
    ids[N + t] = static_cast<int32_t>(cfg.pad_id);
    mask[N + t] = 0.f;
  }
  m->forward(Batch{ids.data(), mask.data(), B, N}, false);
  for (int64_t i = 0; i < B * N * cfg.d_model; ++i)
    ASSERT_TRUE(std::isfinite(m->hidden()[i])) << what << ": hidden[" << i << "]";
}

TEST(CheckpointHf, RobertaFileLoadsAsStandardModel) {
  const std::string dir = test::temp_dir("hf");
  const std::string hf = make_hf_file(dir);
  Config c = hf_config(AttentionKind::standard);
  check_hf_load(hf, c, dir + "/standard");
  // Exactly the classification head is new.
  LoadReport rep;
  load_model(dir + "/standard", {}, &rep);
  std::vector<std::string> init = rep.initialised;
  std::sort(init.begin(), init.end());
  EXPECT_EQ(init,
            (std::vector<std::string>{"classifier.dense.bias", "classifier.dense.weight",
                                      "classifier.out_proj.bias", "classifier.out_proj.weight"}));
}

TEST(CheckpointHf, RobertaFileLoadsAsLinformerModel) {
  const std::string dir = test::temp_dir("hf");
  const std::string hf = make_hf_file(dir);
  int i = 0;
  for (const Config& c : linformer_configs()) {
    Config h = hf_config(AttentionKind::linformer);
    h.sharing = c.sharing;
    h.projection = c.projection;
    h.k = c.k;
    check_hf_load(hf, h, dir + "/lin" + std::to_string(i++));
  }
  ASSERT_EQ(i, 6);
  // Layerwise: one projection for the whole encoder, reported once.
  Config h = hf_config(AttentionKind::linformer);
  Model m(h);
  const LoadReport rep = load_weights(m, hf);
  EXPECT_EQ(
      std::count(rep.initialised.begin(), rep.initialised.end(), "roberta.encoder.kv_proj.weight"),
      1);
  EXPECT_EQ(rep.initialised.size(), 5u);  // kv_proj + 4 classifier tensors
}

TEST(CheckpointHf, HalfPrecisionFilesLoadToTheSameValues) {
  const std::string dir = test::temp_dir("hf");
  const Config c = hf_config(AttentionKind::standard);
  Model f32(c);
  load_weights(f32, make_hf_file(dir, "F32"));
  for (const std::string dt : {"F16", "BF16"}) {
    const std::string path = make_hf_file(dir, dt);
    SafeTensorsReader r(path);
    EXPECT_EQ(r.info("roberta.embeddings.word_embeddings.weight").dtype,
              dt == "F16" ? DType::F16 : DType::BF16);
    Model m(c);
    load_weights(m, path);
    expect_params_equal(f32, m, dt);
  }
  // Written back as F32.
  save_model(f32, dir + "/resaved");
  SafeTensorsReader r(dir + "/resaved/model.safetensors");
  for (const std::string& n : r.names()) EXPECT_EQ(r.info(n).dtype, DType::F32) << n;
}

TEST(CheckpointHf, BareRobertaModelFileLoadsWithoutPrefix) {
  // Hugging Face's RobertaModel (no MLM head) names tensors without "roberta.".
  const std::string dir = test::temp_dir("hf");
  const std::string bare = make_hf_file(dir, "F32", /*bare=*/true);
  const std::string full = make_hf_file(dir, "F32");
  SafeTensorsReader r(bare);
  ASSERT_TRUE(r.has("embeddings.word_embeddings.weight"));
  ASSERT_FALSE(r.has("roberta.embeddings.word_embeddings.weight"));
  for (AttentionKind kind : {AttentionKind::standard, AttentionKind::linformer}) {
    const Config c = hf_config(kind);
    Model from_bare(c), from_full(c);
    const LoadReport rep = load_weights(from_bare, bare);
    load_weights(from_full, full);
    for (const ParamInfo& p : from_bare.params()) {
      if (p.name.rfind("roberta.", 0) != 0 || p.name.find("kv_proj") != std::string::npos) continue;
      EXPECT_TRUE(same_bits(from_bare.param(p.name), from_full.param(p.name), p.numel)) << p.name;
    }
    std::set<std::string> init(rep.initialised.begin(), rep.initialised.end());
    EXPECT_TRUE(init.count("lm_head.dense.weight") && init.count("lm_head.bias") &&
                init.count("classifier.out_proj.weight"));
    EXPECT_EQ(init.count("roberta.encoder.kv_proj.weight"), kind == AttentionKind::linformer);
    EXPECT_EQ(init.size(), 9u + (kind == AttentionKind::linformer));  // 5 lm_head + 4 classifier
    EXPECT_EQ(rep.ignored, (std::vector<std::string>{"embeddings.position_ids", "pooler.dense.bias",
                                                     "pooler.dense.weight"}));
  }
}

TEST(CheckpointHf, InitMissingFalseRejectsFileWithoutProjections) {
  const std::string dir = test::temp_dir("hf");
  const std::string hf = make_hf_file(dir);
  LoadOptions strict;
  strict.init_missing = false;
  {
    Model m(hf_config(AttentionKind::linformer));  // layerwise linear
    const std::vector<float> before = snapshot(m);
    expect_error([&] { load_weights(m, hf, strict); },
                 {hf, "missing", "roberta.encoder.kv_proj.weight", "classifier.dense.weight"},
                 "strict linformer");
    EXPECT_EQ(snapshot(m), before) << "a failed load changed the model";
  }
  {
    Config c = hf_config(AttentionKind::linformer);
    c.sharing = Sharing::none;
    Model m(c);
    expect_error([&] { load_weights(m, hf, strict); },
                 {"missing", "roberta.encoder.layer.0.attention.self.key_proj.weight",
                  "roberta.encoder.layer.0.attention.self.value_proj.weight"},
                 "strict linformer none");
  }
  // A complete checkpoint loads strictly.
  Model full(hf_config(AttentionKind::linformer));
  randomise(full, 2);
  save_model(full, dir + "/full");
  auto back = load_model(dir + "/full", strict);
  expect_params_equal(full, *back, "strict complete");
}

}  // namespace
}  // namespace lf
