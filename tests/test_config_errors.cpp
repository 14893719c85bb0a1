// Bad configurations and inputs are rejected with useful messages; a configuration survives
// its JSON form.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/config.h"
#include "linformer/error.h"
#include "linformer/finetune.h"
#include "linformer/model.h"
#include "linformer/pretrain.h"
#include "test_util.h"

namespace lf {
namespace {

using test::expect_error;

TEST(Config, TinyConfigIsValid) { EXPECT_NO_THROW(test::tiny_config().validate()); }

TEST(Config, CausalLinformerRejected) {
  Config c = test::tiny_config();
  c.causal = true;
  expect_error([&] { c.validate(); }, {"causal", "future"});
  expect_error([&] { Model m(c); }, {"causal", "future"});
  c.attention = AttentionKind::standard;
  EXPECT_NO_THROW(c.validate());
}

TEST(Config, LayerwiseSharingNeedsOneK) {
  Config c = test::tiny_config();
  c.sharing = Sharing::layerwise;
  c.k = {4, 8};
  expect_error([&] { c.validate(); }, {"layerwise", "k"});
  c.sharing = Sharing::headwise;
  EXPECT_NO_THROW(c.validate());
  c.sharing = Sharing::layerwise;
  c.k = {4, 4};
  EXPECT_NO_THROW(c.validate());
}

TEST(Config, KListLength) {
  Config c = test::tiny_config();  // n_layers = 2
  c.sharing = Sharing::headwise;
  c.k = {4, 4, 4};
  expect_error([&] { c.validate(); }, {"k has 3 values", "n_layers"});
  c.k = {};
  expect_error([&] { c.validate(); }, {"k"});
  c.k = {4, 0};
  expect_error([&] { c.validate(); }, {"k[1]"});
  c.k = {4, 17};  // > max_len
  expect_error([&] { c.validate(); }, {"k[1]", "max_len"});
}

TEST(Config, PoolingNeedsDivisibleMaxLen) {
  for (Projection p : {Projection::mean_pool, Projection::max_pool, Projection::conv}) {
    Config c = test::tiny_config();  // max_len 16
    c.projection = p;
    c.k = {5};
    expect_error([&] { c.validate(); }, {to_string(p), "divisible", "16", "5"});
    c.k = {8};
    EXPECT_NO_THROW(c.validate());
  }
  Config c = test::tiny_config();
  c.projection = Projection::linear;
  c.k = {5};  // any k works for a learned E
  EXPECT_NO_THROW(c.validate());
}

TEST(Config, DModelDivisibleByHeads) {
  Config c = test::tiny_config();
  c.n_heads = 3;  // d_model 16
  expect_error([&] { c.validate(); }, {"d_model", "n_heads"});
  c.attention = AttentionKind::standard;
  expect_error([&] { Model m(c); }, {"d_model", "n_heads"});
}

TEST(Config, JsonUnknownKeyAndWrongTypes) {
  expect_error([] { Config::from_json(R"({"d_model": 16, "n_heads": 2, "dmodel": 3})"); },
               {"unknown key", "dmodel"});
  expect_error([] { Config::from_json(R"({"d_model": "16"})"); }, {"d_model", "integer"});
  expect_error([] { Config::from_json(R"({"d_model": 16.5})"); }, {"d_model", "integer"});
  expect_error([] { Config::from_json(R"({"dropout": "0.1"})"); }, {"dropout", "number"});
  expect_error([] { Config::from_json(R"({"causal": 1})"); }, {"causal"});
  expect_error([] { Config::from_json(R"({"sharing": 3})"); }, {"sharing", "string"});
  expect_error([] { Config::from_json(R"({"sharing": "rows"})"); },
               {"sharing", "rows", "layerwise"});
  expect_error([] { Config::from_json(R"({"k": [4, "x"]})"); }, {"k"});
  expect_error([] { Config::from_json(R"({"k": []})"); }, {"k"});
  expect_error([] { Config::from_json(R"([1, 2])"); }, {"object"});
  expect_error([] { Config::from_json(R"({"d_model": )"); }, {"JSON"});
  // Semantic checks also run on JSON input.
  expect_error([] { Config::from_json(R"({"causal": true})"); }, {"causal", "future"});
}

TEST(Config, JsonRoundTrip) {
  Config c;
  c.vocab_size = 321;
  c.max_len = 48;
  c.d_model = 24;
  c.n_heads = 3;
  c.d_ff = 50;
  c.n_layers = 3;
  c.type_vocab_size = 2;
  c.position_offset = 2;
  c.attention = AttentionKind::linformer;
  c.k = {12, 6, 24};
  c.sharing = Sharing::kv;
  c.projection = Projection::max_pool;
  c.norm = NormPlacement::pre;
  c.causal = false;
  c.dropout = 0.125f;
  c.attention_dropout = 0.3f;  // not exactly representable: must still round-trip
  c.layer_norm_eps = 1e-12f;
  c.init_std = 0.035f;
  c.num_classes = 5;
  c.pad_id = 7;
  c.cls_id = 3;
  c.classifier_pooling = ClassifierPooling::mean;
  const Config r = Config::from_json(c.to_json());
  EXPECT_EQ(r.vocab_size, c.vocab_size);
  EXPECT_EQ(r.max_len, c.max_len);
  EXPECT_EQ(r.d_model, c.d_model);
  EXPECT_EQ(r.n_heads, c.n_heads);
  EXPECT_EQ(r.d_ff, c.d_ff);
  EXPECT_EQ(r.n_layers, c.n_layers);
  EXPECT_EQ(r.type_vocab_size, c.type_vocab_size);
  EXPECT_EQ(r.position_offset, c.position_offset);
  EXPECT_EQ(r.attention, c.attention);
  EXPECT_EQ(r.k, c.k);
  EXPECT_EQ(r.sharing, c.sharing);
  EXPECT_EQ(r.projection, c.projection);
  EXPECT_EQ(r.norm, c.norm);
  EXPECT_EQ(r.causal, c.causal);
  EXPECT_EQ(r.dropout, c.dropout);
  EXPECT_EQ(r.attention_dropout, c.attention_dropout);
  EXPECT_EQ(r.layer_norm_eps, c.layer_norm_eps);
  EXPECT_EQ(r.init_std, c.init_std);
  EXPECT_EQ(r.num_classes, c.num_classes);
  EXPECT_EQ(r.pad_id, c.pad_id);
  EXPECT_EQ(r.cls_id, c.cls_id);
  EXPECT_EQ(r.classifier_pooling, c.classifier_pooling);
  EXPECT_EQ(r.to_json(), c.to_json());

  // A single k and the standard/causal/post settings round-trip too.
  Config s = test::tiny_config();
  s.attention = AttentionKind::standard;
  s.causal = true;
  const Config rs = Config::from_json(s.to_json());
  EXPECT_EQ(rs.k, s.k);
  EXPECT_EQ(rs.attention, AttentionKind::standard);
  EXPECT_TRUE(rs.causal);
  EXPECT_EQ(rs.norm, NormPlacement::post);
  EXPECT_EQ(rs.to_json(), s.to_json());
  // Missing keys take the defaults.
  const Config d = Config::from_json("{}");
  EXPECT_EQ(d.to_json(), Config().to_json());
}

TEST(Config, ForwardRejectsTooLongSequenceAndBadIds) {
  Config c = test::tiny_config();  // max_len 16, vocab 37
  Model m(c);
  m.init(1);
  std::vector<int32_t> ids(2 * 17, 3);
  expect_error([&] { m.forward(Batch{ids.data(), nullptr, 2, 17}, false); }, {"max_len", "17"});
  expect_error([&] { m.forward(Batch{ids.data(), nullptr, 2, 17}, true); }, {"max_len"});
  EXPECT_NO_THROW(m.forward(Batch{ids.data(), nullptr, 2, 16}, false));
  ids[5] = 37;
  expect_error(
      [&] {
        m.forward(Batch{ids.data(), nullptr, 2, 16}, false);
      },
      {"token id", "37", "vocabulary"});
  ids[5] = -1;
  expect_error([&] { m.forward(Batch{ids.data(), nullptr, 2, 16}, false); }, {"token id", "-1"});
  ids[5] = 36;
  EXPECT_NO_THROW(m.forward(Batch{ids.data(), nullptr, 2, 16}, false));
}

// train_args.json stores the precision by name, reads the "bf16": true|false of runs written
// before --precision existed, and refuses a name it does not know.
TEST(TrainArgs, PrecisionByNameAndTheOldBf16Flag) {
  PretrainOptions p;
  p.precision = ComputeType::bf16;
  const nlohmann::json j = p.to_json();
  EXPECT_EQ(j.at("precision"), "bf16");
  EXPECT_EQ(PretrainOptions::from_json(j).precision, ComputeType::bf16);
  nlohmann::json old = j;
  old.erase("precision");
  old["bf16"] = true;
  EXPECT_EQ(PretrainOptions::from_json(old).precision, ComputeType::bf16);
  old["bf16"] = false;
  EXPECT_EQ(PretrainOptions::from_json(old).precision, ComputeType::f32);
  nlohmann::json f = FinetuneOptions{}.to_json();
  EXPECT_EQ(f.at("precision"), "f32");
  f.erase("precision");
  f["bf16"] = true;
  EXPECT_EQ(FinetuneOptions::from_json(f).precision, ComputeType::bf16);
  f["precision"] = "fp16";
  test::expect_error([&] { FinetuneOptions::from_json(f); }, {"precision", "fp16", "f32", "bf16"},
                     "an unknown precision");
}

// Each configuration a kind lists is run by that kind and by no other (attention_path refuses
// one that two kinds claim), and is a valid configuration; every kind lists at least one.
TEST(AttentionKinds, EachVariantRunsOnTheKindThatListsIt) {
  const Config base = test::tiny_config();
  for (const AttentionPath* kind : attention_kinds()) {
    std::vector<AttentionVariant> mine;
    kind->variants(base, mine);
    EXPECT_FALSE(mine.empty()) << kind->name();
    for (const AttentionVariant& v : mine) {
      int claims = 0;
      for (const AttentionPath* k : attention_kinds()) claims += k->runs(v.cfg) ? 1 : 0;
      EXPECT_EQ(claims, 1) << v.name;
      EXPECT_STREQ(attention_path(v.cfg).name(), kind->name()) << v.name;
      EXPECT_NO_THROW(v.cfg.validate()) << v.name;
    }
  }
}

}  // namespace
}  // namespace lf
