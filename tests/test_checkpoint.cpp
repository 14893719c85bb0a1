// Model folders (config.json + model.safetensors): round trips, malformed and mismatching
// files, failed saves. See docs/checkpoint.md. (Hugging Face RoBERTa-style files:
// test_checkpoint_hf.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
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
using test::u64_le;
using test::write_text;

// ---------------------------------------------------------------------------------------------
// Round trips

void round_trip(const Config& cfg, const std::string& dir) {
  const std::string what = describe(cfg);
  Model a(cfg);
  randomise(a, 3);
  // Values that only a bit-exact path preserves.
  float* w = a.param("roberta.embeddings.word_embeddings.weight");
  w[0] = -0.0f;
  w[1] = std::numeric_limits<float>::denorm_min();
  w[2] = std::numeric_limits<float>::max();  // (an infinity is refused on load)
  w[3] = std::nextafter(1.0f, 2.0f);
  save_model(a, dir);
  ASSERT_TRUE(fs::exists(dir + "/config.json")) << what;
  ASSERT_TRUE(fs::exists(dir + "/model.safetensors")) << what;
  LoadReport rep;
  rep.initialised = {"sentinel"};
  auto b = load_model(dir, {}, &rep);
  EXPECT_EQ(b->config().to_json(), cfg.to_json()) << what;
  EXPECT_TRUE(rep.initialised.empty()) << what << ": " << rep.initialised.size();
  EXPECT_TRUE(rep.ignored.empty()) << what;
  expect_params_equal(a, *b, what);

  // The file holds exactly the parameter table, as F32, and the config in its metadata.
  SafeTensorsReader r(dir + "/model.safetensors");
  EXPECT_EQ(r.names().size(), a.params().size()) << what;
  for (const ParamInfo& p : a.params()) {
    ASSERT_TRUE(r.has(p.name)) << what << ": " << p.name;
    EXPECT_EQ(r.info(p.name).dtype, DType::F32) << p.name;
    EXPECT_EQ(r.info(p.name).shape, p.shape) << p.name;
  }
  ASSERT_TRUE(r.metadata().count("linformer_config")) << what;
  EXPECT_EQ(Config::from_json(r.metadata().at("linformer_config")).to_json(), cfg.to_json());
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_TRUE(e.path().filename() == "config.json" || e.path().filename() == "model.safetensors")
        << "stray file " << e.path();
}

TEST(Checkpoint, RoundTripStandardIsBitExact) {
  Config c = standard_config();
  round_trip(c, test::temp_dir("post") + "/m");
  c.norm = NormPlacement::pre;
  c.causal = true;
  round_trip(c, test::temp_dir("pre") + "/m");
}

TEST(Checkpoint, RoundTripLinformerIsBitExact) {
  int i = 0;
  for (const Config& c : linformer_configs()) round_trip(c, test::temp_dir(std::to_string(i++)));
}

TEST(Checkpoint, SaveOverwritesAnExistingFolder) {
  const std::string dir = test::temp_dir("m");
  Model a(standard_config());
  randomise(a, 1);
  save_model(a, dir);
  Model b(linformer_configs()[0]);
  randomise(b, 2);
  save_model(b, dir);
  auto c = load_model(dir);
  EXPECT_EQ(c->config().to_json(), b.config().to_json());
  expect_params_equal(b, *c, "overwrite");
}

TEST(Checkpoint, FolderWithoutConfigJsonUsesMetadataConfig) {
  const std::string dir = test::temp_dir("m");
  Config cfg = linformer_configs()[3];  // kv sharing, per-layer k, pre-norm
  cfg.dropout = 0.25f;
  Model a(cfg);
  randomise(a, 5);
  save_model(a, dir);
  fs::remove(dir + "/config.json");
  auto b = load_model(dir);
  EXPECT_EQ(b->config().to_json(), cfg.to_json());
  expect_params_equal(a, *b, "metadata config");

  // With both present, config.json wins (here: a different dropout, same tensors).
  Config edited = cfg;
  edited.dropout = 0.f;
  edited.save(dir + "/config.json");
  auto c = load_model(dir);
  EXPECT_EQ(c->config().dropout, 0.f);
  expect_params_equal(a, *c, "config.json wins");

  // Neither config.json nor metadata: a clear error.
  fs::remove(dir + "/config.json");
  write_edited(
      a, dir + "/model.safetensors", [](const ParamInfo&, SafeTensorsWriter&) { return true; },
      /*with_metadata=*/false);
  expect_error([&] { load_model(dir); }, {dir, "no config.json", "no configuration"},
               "no config anywhere");
}

// ---------------------------------------------------------------------------------------------
// Malformed and incompatible files

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::temp_dir("m");
    good = std::make_unique<Model>(linformer_configs()[0]);
    randomise(*good, 7);
    save_model(*good, dir);
    weights = dir + "/model.safetensors";
    bytes = read_file(weights);
    target = std::make_unique<Model>(linformer_configs()[0]);
    randomise(*target, 8);
    before = snapshot(*target);
  }

  // Both load paths fail with the phrases, and the target model is untouched and usable.
  void expect_load_error(std::initializer_list<std::string> phrases, const std::string& what) {
    expect_error([&] { load_model(dir); }, phrases, what + " (load_model)");
    expect_error([&] { load_weights(*target, weights); }, phrases, what + " (load_weights)");
    EXPECT_EQ(snapshot(*target), before) << what << ": a failed load changed the model";
    std::vector<int32_t> ids = {0, 5, 9, 2};
    target->forward(Batch{ids.data(), nullptr, 1, 4}, false);
    EXPECT_TRUE(std::isfinite(target->hidden()[0])) << what;
  }

  uint64_t header_len() const {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    return n;
  }

  std::string dir, weights, bytes;
  std::unique_ptr<Model> good, target;
  std::vector<float> before;
};

TEST_F(CheckpointErrors, TruncatedFile) {
  write_text(weights, bytes.substr(0, 5));
  expect_load_error({weights, "too short"}, "5 bytes");
  write_text(weights, "");
  expect_load_error({weights, "too short"}, "empty");
  // Cut inside the data: the last tensors' byte ranges now lie beyond the data.
  write_text(weights, bytes.substr(0, bytes.size() - 100));
  expect_load_error({weights, "beyond the data buffer"}, "cut data");
  // Cut inside the header.
  write_text(weights, bytes.substr(0, 8 + header_len() / 2));
  expect_load_error({weights, "exceeds the file size"}, "cut header");
}

TEST_F(CheckpointErrors, HeaderLengthBeyondFile) {
  write_text(weights, u64_le(bytes.size()) + bytes.substr(8));
  expect_load_error({weights, "header length", "exceeds the file size"}, "length = file size");
  write_text(weights, u64_le(~0ull) + bytes.substr(8));
  expect_load_error({weights, "header length"}, "length 2^64-1");
}

TEST_F(CheckpointErrors, GarbageJsonHeader) {
  std::string bad = bytes;
  const std::string junk = "{\"roberta\": [1, 2,,";
  std::memcpy(&bad[8], junk.data(), junk.size());
  write_text(weights, bad);
  expect_load_error({weights, "not valid JSON"}, "garbage header");
  write_text(weights, u64_le(8) + "[1,2,3] " + bytes.substr(8 + header_len()));
  expect_load_error({weights, "not a JSON object"}, "array header");
}

TEST_F(CheckpointErrors, OffsetsOutOfRange) {
  const std::string header =
      "{\"roberta.embeddings.word_embeddings.weight\":{\"dtype\":\"F32\",\"shape\":[37,16],"
      "\"data_offsets\":[0,2368]}}";
  write_text(weights, u64_le(header.size()) + header + std::string(64, '\0'));
  expect_load_error({weights, "roberta.embeddings.word_embeddings.weight", "data_offsets",
                     "beyond the data buffer"},
                    "offsets out of range");
  const std::string reversed =
      "{\"lm_head.bias\":{\"dtype\":\"F32\",\"shape\":[37],\"data_offsets\":[148,0]}}";
  write_text(weights, u64_le(reversed.size()) + reversed + std::string(148, '\0'));
  expect_load_error({weights, "lm_head.bias", "data_offsets"}, "reversed offsets");
}

TEST_F(CheckpointErrors, WrongDtype) {
  const std::string name = "roberta.encoder.layer.1.intermediate.dense.weight";
  write_edited(*good, weights, [&](const ParamInfo& p, SafeTensorsWriter& w) {
    if (p.name != name) return true;
    std::vector<int32_t> v(p.numel, 1);
    w.add_i32(p.name, p.shape, v.data());
    return false;
  });
  expect_load_error({weights, name, "I32", "F32"}, "I32 parameter");
}

TEST_F(CheckpointErrors, WrongShape) {
  const std::string name = "roberta.embeddings.word_embeddings.weight";
  write_edited(*good, weights, [&](const ParamInfo& p, SafeTensorsWriter& w) {
    if (p.name != name) return true;
    std::vector<float> v((p.shape[0] + 1) * p.shape[1], 0.5f);
    w.add_f32(p.name, {p.shape[0] + 1, p.shape[1]}, v.data());
    return false;
  });
  expect_load_error({weights, name, "[38, 16]", "expected [37, 16]"}, "wrong shape");
}

TEST_F(CheckpointErrors, MissingRequiredTensor) {
  const std::string name = "roberta.encoder.layer.1.output.dense.weight";
  write_edited(*good, weights,
               [&](const ParamInfo& p, SafeTensorsWriter&) { return p.name != name; });
  expect_load_error({weights, "missing", name}, "missing tensor");
  // Many missing: the list is shortened but counted.
  write_edited(*good, weights, [&](const ParamInfo& p, SafeTensorsWriter&) {
    return p.name.rfind("roberta.encoder.layer.", 0) != 0;
  });
  expect_load_error({weights, "32 tensor(s)", "missing", "and 24 more"}, "many missing");
  // A file with none of the model's names: the message shows what the file holds instead.
  SafeTensorsWriter w;
  std::vector<float> v(16, 1.f);
  w.add_f32("model.embed_tokens.weight", {1, 16}, v.data());
  w.add_f32("model.norm.weight", {16}, v.data());
  w.write(weights);
  expect_load_error({weights, "missing", "roberta.embeddings.word_embeddings.weight",
                     "No tensor of the model is in the file", "'model.embed_tokens.weight'",
                     "docs/checkpoint.md"},
                    "unrelated checkpoint");
}

TEST_F(CheckpointErrors, ConfigJsonMismatchingWeights) {
  Config other = good->config();
  other.d_ff = 32;
  other.save(dir + "/config.json");
  expect_error([&] { load_model(dir); },
               {weights, "roberta.encoder.layer.0.intermediate.dense.weight", "[24, 16]",
                "expected [32, 16]", "does the model configuration (config.json) match"},
               "d_ff mismatch");
  // Standard attention over a Linformer checkpoint: the projection is simply unused.
  Config std_cfg = good->config();
  std_cfg.attention = AttentionKind::standard;
  std_cfg.save(dir + "/config.json");
  LoadReport rep;
  load_model(dir, {}, &rep);
  EXPECT_EQ(rep.ignored, std::vector<std::string>{"roberta.encoder.kv_proj.weight"});
  // A config.json that is not valid: the path and the field.
  write_text(dir + "/config.json", "{\"d_model\": \"big\"}");
  expect_error([&] { load_model(dir); }, {dir + "/config.json", "d_model", "integer"},
               "bad config.json");
}

TEST_F(CheckpointErrors, MissingFolderOrWeights) {
  expect_error([&] { load_model(dir + "/nope"); }, {dir + "/nope", "does not exist"},
               "missing folder");
  expect_error([&] { load_model(weights); }, {weights, "not a folder"}, "file as folder");
  fs::remove(weights);
  expect_error([&] { load_model(dir); }, {dir, "no model.safetensors"}, "missing weights");
  expect_error([&] { load_weights(*target, weights); }, {weights, "cannot open"},
               "load_weights on a missing file");
  EXPECT_EQ(snapshot(*target), before);
  // The file is a folder.
  fs::create_directories(weights);
  expect_error([&] { load_model(dir); }, {weights}, "weights is a folder");
}

// ---------------------------------------------------------------------------------------------
// Failed saves leave the previous checkpoint intact

TEST(CheckpointSave, TargetIsAFile) {
  const std::string dir = test::temp_dir("m");
  write_text(dir + "/file", "not a folder");
  Model m(standard_config());
  randomise(m, 1);
  expect_error([&] { save_model(m, dir + "/file"); }, {dir + "/file"}, "folder is a file");
  EXPECT_EQ(read_file(dir + "/file"), "not a folder");
  expect_error([&] { save_model(m, dir + "/file/sub"); }, {dir + "/file/sub"}, "parent is a file");
}

TEST(CheckpointSave, FailedWeightsWriteKeepsPreviousCheckpoint) {
  const std::string dir = test::temp_dir("m");
  Model old_model(standard_config());
  randomise(old_model, 1);
  save_model(old_model, dir);
  const std::string old_weights = read_file(dir + "/model.safetensors");
  const std::string old_config = read_file(dir + "/config.json");

  // A folder where the temporary file must go makes the write fail.
  const std::string tmp = dir + "/model.safetensors.tmp." + std::to_string(::getpid());
  fs::create_directories(tmp);
  Model new_model(linformer_configs()[1]);
  randomise(new_model, 2);
  expect_error([&] { save_model(new_model, dir); }, {dir + "/model.safetensors"},
               "blocked weights");
  fs::remove(tmp);
  EXPECT_EQ(read_file(dir + "/model.safetensors"), old_weights);
  EXPECT_EQ(read_file(dir + "/config.json"), old_config);
  auto back = load_model(dir);
  EXPECT_EQ(back->config().to_json(), old_model.config().to_json());
  expect_params_equal(old_model, *back, "after failed save");
}

TEST(CheckpointSave, FailedConfigWriteLeavesAConsistentFolder) {
  const std::string dir = test::temp_dir("m");
  Model old_model(standard_config());
  randomise(old_model, 1);
  save_model(old_model, dir);
  const std::string tmp = dir + "/config.json.tmp." + std::to_string(::getpid());
  fs::create_directories(tmp);
  Model new_model(linformer_configs()[2]);
  randomise(new_model, 2);
  expect_error([&] { save_model(new_model, dir); }, {dir + "/config.json", "model.safetensors"},
               "blocked config");
  fs::remove(tmp);
  // The weights are new and the stale config.json is gone: the folder loads as the new model.
  EXPECT_FALSE(fs::exists(dir + "/config.json"));
  auto back = load_model(dir);
  EXPECT_EQ(back->config().to_json(), new_model.config().to_json());
  expect_params_equal(new_model, *back, "after failed config write");
}

}  // namespace
}  // namespace lf
