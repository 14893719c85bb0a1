// The learned projection's options: the mean-pooling initialisation (checked against the
// fixed mean_pool projection, which the engine computes by another path) and the projection
// learning-rate group of AdamW (checked against the update of the other parameters).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/checkpoint.h"
#include "linformer/config.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/optim.h"
#include "linformer/pretrain.h"
#include "linformer/rng.h"
#include "test_util.h"
#include "train/optim.h"

namespace lf {
namespace {

Config linformer_config(Sharing sharing) {
  Config c = test::tiny_config();
  c.max_len = 32;
  c.k = {8};
  c.sharing = sharing;
  return c;
}

std::vector<int32_t> random_ids(int64_t count, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(count);
  for (int64_t i = 0; i < count; ++i)
    ids[i] = static_cast<int32_t>(5 + rng_bits(seed, 1, i) % (vocab - 5));
  return ids;
}

// With no noise, a learned E that starts as the mean-pooling matrix computes exactly the fixed
// mean_pool projection, for full-length and shorter sequences and every sharing mode.
TEST(ProjectionInit, MeanPoolStartEqualsFixedMeanPooling) {
  for (Sharing sh : {Sharing::none, Sharing::headwise, Sharing::kv, Sharing::layerwise}) {
    Config learned = linformer_config(sh);
    learned.projection_init = ProjectionInit::mean_pool;
    learned.projection_init_noise = 0.f;
    Config fixed = linformer_config(sh);
    fixed.projection = Projection::mean_pool;
    Model a(learned), b(fixed);
    a.init(11);
    b.init(11);                   // every tensor b has, a has under the same name: the same values
    for (int64_t N : {32, 24}) {  // 24: E's first N columns, the last window partly cut
      const int64_t B = 2, D = learned.d_model;
      const std::vector<int32_t> ids = random_ids(B * N, learned.vocab_size, N);
      a.forward(Batch{ids.data(), nullptr, B, N}, false);
      const std::vector<float> ha(a.hidden(), a.hidden() + B * N * D);
      b.forward(Batch{ids.data(), nullptr, B, N}, false);
      EXPECT_LT(test::rel_error(ha.data(), b.hidden(), ha.size()), 1e-5)
          << "sharing " << to_string(sh) << ", N = " << N;
    }
  }
}

// The noise has the configured spread around the pooling matrix (k does not divide n here:
// windows of 5 or 6 positions).
TEST(ProjectionInit, MeanPoolNoiseAndUnevenWindows) {
  Config c = linformer_config(Sharing::kv);
  c.max_len = 256;
  c.k = {45};
  c.projection_init = ProjectionInit::mean_pool;
  c.projection_init_noise = 0.5f;
  Model m(c);
  m.init(3);
  const ParamInfo* e = m.find("roberta.encoder.layer.0.attention.self.kv_proj.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->projection);
  const float* w = m.param(e->name);
  double sq = 0;
  for (int64_t j = 0; j < 45; ++j) {
    const int64_t t0 = j * 256 / 45, t1 = (j + 1) * 256 / 45;
    double row_sum = 0;
    for (int64_t t = 0; t < 256; ++t) {
      const double pool = (t >= t0 && t < t1) ? 1.0 / (t1 - t0) : 0.0;
      sq += (w[j * 256 + t] - pool) * (w[j * 256 + t] - pool);
      row_sum += w[j * 256 + t];
    }
    EXPECT_NEAR(row_sum, 1.0, 6 * 0.5 / 16 * 16) << "row " << j;  // 256 noise terms of sd 1/32
  }
  const double sd = std::sqrt(sq / (45 * 256));
  EXPECT_NEAR(sd, 0.5 / 16, 0.05 * 0.5 / 16);  // 11520 samples: ~0.7% standard error
}

TEST(ProjectionInit, ConfigKeysAndValidation) {
  Config c = linformer_config(Sharing::kv);
  EXPECT_EQ(c.projection_init, ProjectionInit::mean_pool);  // the default (docs/model.md)
  c.projection_init_noise = 0.25f;
  const Config r = Config::from_json(c.to_json());
  EXPECT_EQ(r.projection_init, ProjectionInit::mean_pool);
  EXPECT_EQ(r.projection_init_noise, 0.25f);
  // Written explicitly, so that a config means the same initialisation in every version.
  EXPECT_NE(c.to_json().find("\"projection_init\": \"mean_pool\""), std::string::npos);
  c.projection_init = ProjectionInit::normal;
  EXPECT_EQ(Config::from_json(c.to_json()).projection_init, ProjectionInit::normal);
  EXPECT_EQ(c.to_json().find("projection_init_noise"), std::string::npos);  // normal: no noise
  // A config without the key (written before mean_pool was the default) reads as mean_pool.
  nlohmann::json j = nlohmann::json::parse(c.to_json());
  j.erase("projection_init");
  EXPECT_EQ(Config::from_json(j.dump()).projection_init, ProjectionInit::mean_pool);
  // Fixed projections and standard attention have no E to initialise: not written, and valid.
  Config fixed = c;
  fixed.projection = Projection::conv;
  EXPECT_NO_THROW(fixed.validate());
  EXPECT_EQ(fixed.to_json().find("projection_init"), std::string::npos);
  Config bad = c;
  bad.projection_init_noise = -1.f;
  EXPECT_ERROR_MENTIONS(bad.validate(), "projection_init_noise must be in [0, 100]");
  bad.projection_init_noise = std::nanf("");
  EXPECT_ERROR_MENTIONS(bad.validate(), "projection_init_noise");
  EXPECT_ERROR_MENTIONS(Config::from_json(R"({"projection_init": "eye"})"),
                        "expected one of: normal, mean_pool");
}

// AdamW moves projection parameters by projection_lr_scale times the update it would make at
// scale 1, leaves every other parameter's update unchanged, and freezes them at 0.
TEST(ProjectionInit, AdamWProjectionLearningRateGroup) {
  const Config c = linformer_config(Sharing::headwise);
  auto step_with = [&](float scale, std::vector<float>* moment) {
    Model m(c);
    m.init(5);
    const size_t n = m.params().back().offset + m.params().back().numel;
    const std::vector<float> g = test::random_vec(n, 9, 0.1f);
    std::copy(g.begin(), g.end(), m.grad_data());
    OptimOptions o;
    o.weight_decay = 0.1f;
    o.projection_lr_scale = scale;
    AdamW adam(m, o);
    const std::vector<float> w0(m.param_data(), m.param_data() + n);
    adam.step(1e-2f);
    std::vector<float> delta(n);
    for (size_t i = 0; i < n; ++i) delta[i] = m.param_data()[i] - w0[i];
    if (moment) moment->assign(adam.m_data(), adam.m_data() + n);
    return std::make_pair(delta, m.params());
  };
  const auto [d1, params] = step_with(1.f, nullptr);
  const auto [dh, unused1] = step_with(0.5f, nullptr);
  std::vector<float> m0;
  const auto [d0, unused2] = step_with(0.f, &m0);
  int projections = 0;
  for (const ParamInfo& p : params) {
    projections += p.projection;
    for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
      if (p.projection) {
        ASSERT_NE(d1[i], 0.f) << p.name;
        // |delta| ~ 1e-2 on weights of size < 1: rounding w + delta costs up to ~6e-8.
        EXPECT_NEAR(dh[i], 0.5f * d1[i], 1e-6f * std::fabs(d1[i]) + 2e-7f) << p.name;
        EXPECT_EQ(d0[i], 0.f) << p.name;
        EXPECT_EQ(m0[i], 0.f) << p.name;
      } else {
        EXPECT_EQ(dh[i], d1[i]) << p.name;
        EXPECT_EQ(d0[i], d1[i]) << p.name;
      }
    }
  }
  EXPECT_EQ(projections, 2 * c.n_layers);  // key_proj and value_proj per layer
  // train_args.json of earlier versions has no projection_lr_scale: it means 1.
  nlohmann::json j;
  OptimOptions o;
  o.projection_lr_scale = 0.25f;
  optim_to_json(o, &j);
  EXPECT_EQ(optim_from_json(j).projection_lr_scale, 0.25f);
  j.erase("projection_lr_scale");
  EXPECT_EQ(optim_from_json(j).projection_lr_scale, 1.f);
}

// End to end: pretraining with --set overrides and a frozen projection keeps E exactly the
// mean-pooling matrix while the other weights train, and resume reads both from the run.
TEST(ProjectionInit, PretrainWithOverridesAndFrozenProjection) {
  namespace fs = std::filesystem;
  const std::string d = test::temp_dir("pre");
  {
    std::ofstream out(d + "/corpus.txt");
    for (int i = 0; i < 300; ++i)
      out << "the " << (i % 7 ? "river" : "house") << " and a small garden near the road " << i % 13
          << "\n";
  }
  Config c = linformer_config(Sharing::kv);
  c.save(d + "/config.json");
  PretrainOptions o;
  o.train = {d + "/corpus.txt"};
  o.config = d + "/config.json";
  o.sets = {"projection_init=mean_pool", "projection_init_noise=0"};
  o.out = d + "/run";
  o.vocab_size = 60;
  o.steps = 4;
  o.batch_size = 2;
  o.eval_every = 4;
  o.checkpoint_every = 2;
  o.optim.projection_lr_scale = 0.f;
  o.quiet = true;
  pretrain(o, false);
  const Config saved = Config::load(d + "/run/config.json");
  EXPECT_EQ(saved.projection_init, ProjectionInit::mean_pool);
  EXPECT_EQ(saved.projection_init_noise, 0.f);
  std::unique_ptr<Model> m = load_model(d + "/run/model");
  std::unique_ptr<Model> fresh = std::make_unique<Model>(saved);
  fresh->init(0);
  for (const ParamInfo& p : m->params()) {
    const float* a = m->param(p.name);
    const float* b = fresh->param(p.name);
    bool same = true;
    for (size_t i = 0; i < p.numel; ++i) same = same && a[i] == b[i];
    if (p.projection) {
      EXPECT_TRUE(same) << p.name << " moved although frozen";
    } else if (p.name.find("word_embeddings") != std::string::npos) {
      EXPECT_FALSE(same) << p.name << " did not train";
    }
  }
  const nlohmann::json args = nlohmann::json::parse(read_file(d + "/run/train_args.json"));
  EXPECT_EQ(args.at("sets").size(), 2u);
  EXPECT_EQ(args.at("projection_lr_scale"), 0.0);
}

}  // namespace
}  // namespace lf
