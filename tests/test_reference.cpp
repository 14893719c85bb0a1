// The engine against an independent PyTorch implementation (tests/reference/torch_reference.py)
// on the same weights: outputs, losses and every parameter gradient, for a padded batch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "linformer/checkpoint.h"
#include "linformer/model.h"
#include "linformer/safetensors.h"
#include "test_util.h"

namespace lf {
namespace {

class Reference : public ::testing::TestWithParam<test::NamedConfig> {};

// Random, non-trivial weights: every tensor (LayerNorm and biases too) gets noise.
using test::randomise;

TEST_P(Reference, OutputsAndGradientsMatchPyTorch) {
  const test::NamedConfig& rc = GetParam();
  const std::string dir = test::temp_dir(rc.name);
  Model model(rc.cfg);
  randomise(model, 11);
  save_model(model, dir + "/model");

  // Batch of 3 sequences of length 12 (< max_len 16), two of them padded.
  const int64_t B = 3, N = 12, V = rc.cfg.vocab_size, D = rc.cfg.d_model;
  const int64_t lens[B] = {12, 7, 10};
  std::vector<int64_t> ids(B * N), mask(B * N), labels(B * N, -100), cls = {2, 0, 1};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < N; ++t) {
      const int64_t i = b * N + t;
      const bool real = t < lens[b];
      mask[i] = real;
      ids[i] = real ? static_cast<int64_t>(rng_bits(5, 1, i) % V) : rc.cfg.pad_id;
      if (real && (t % 3 == 1)) labels[i] = static_cast<int64_t>(rng_bits(5, 2, i) % V);
    }
  SafeTensorsWriter in;
  in.add_i64("input_ids", {B, N}, ids.data());
  in.add_i64("attention_mask", {B, N}, mask.data());
  in.add_i64("mlm_labels", {B, N}, labels.data());
  in.add_i64("class_labels", {B}, cls.data());
  in.write(dir + "/in.safetensors");

  const std::string cmd = std::string("/usr/bin/python3 ") + LF_SOURCE_DIR +
                          "/tests/reference/torch_reference.py --model " + dir + "/model --input " +
                          dir + "/in.safetensors --out " + dir + "/ref.safetensors 2> " + dir +
                          "/ref.log";
  const int rc_py = std::system(cmd.c_str());
  ASSERT_EQ(rc_py, 0) << "PyTorch reference failed: " << cmd;
  SafeTensorsReader ref(dir + "/ref.safetensors");

  std::vector<int32_t> ids32(ids.begin(), ids.end()), lab32(labels.begin(), labels.end()),
      cls32(cls.begin(), cls.end());
  std::vector<float> maskf(mask.begin(), mask.end());
  model.zero_grad();
  model.forward(Batch{ids32.data(), maskf.data(), B, N}, true);

  // Hidden states and logits at real positions (padded rows are not defined outputs).
  std::vector<float> hid_ref = ref.read_f32("hidden_states");
  std::vector<float> logits(B * N * V);
  model.mlm_logits(logits.data());
  std::vector<float> logits_ref = ref.read_f32("mlm_logits");
  std::vector<float> h, hr, lg, lgr;
  for (int64_t r = 0; r < B * N; ++r) {
    if (!mask[r]) continue;
    h.insert(h.end(), model.hidden() + r * D, model.hidden() + (r + 1) * D);
    hr.insert(hr.end(), hid_ref.begin() + r * D, hid_ref.begin() + (r + 1) * D);
    lg.insert(lg.end(), logits.begin() + r * V, logits.begin() + (r + 1) * V);
    lgr.insert(lgr.end(), logits_ref.begin() + r * V, logits_ref.begin() + (r + 1) * V);
  }
  EXPECT_LT(test::rel_error(h.data(), hr.data(), h.size()), 1e-4) << "hidden_states";
  EXPECT_LT(test::rel_error(lg.data(), lgr.data(), lg.size()), 1e-4) << "mlm_logits";
  std::vector<float> cl(B * rc.cfg.num_classes);
  model.cls_logits(cl.data());
  std::vector<float> cl_ref = ref.read_f32("class_logits");
  EXPECT_LT(test::rel_error(cl.data(), cl_ref.data(), cl.size()), 1e-4) << "class_logits";

  int64_t count = 0;
  const double mlm = model.mlm_loss(lab32.data(), true, 1.f, &count) / count;
  const double cl_loss = model.cls_loss(cls32.data(), true, 1.f) / B;
  model.backward();
  EXPECT_NEAR(mlm, ref.read_f32("mlm_loss")[0], 1e-4 * std::abs(mlm));
  EXPECT_NEAR(cl_loss, ref.read_f32("class_loss")[0], 1e-4 * std::abs(cl_loss));

  // Gradients: relative error per tensor. Some gradients are zero in exact arithmetic (the
  // key bias of standard attention: softmax ignores a constant added to every score; unused
  // position rows), so the denominator has a floor of 1% of the typical tensor gradient norm.
  double sum_sq = 0;
  for (const ParamInfo& p : model.params()) {
    std::vector<float> g = ref.read_f32("grad." + p.name);
    double n2 = 0;
    for (float x : g) n2 += double(x) * x;
    sum_sq += n2;
  }
  const double floor = 0.01 * std::sqrt(sum_sq / model.params().size());
  for (const ParamInfo& p : model.params()) {
    std::vector<float> g = ref.read_f32("grad." + p.name);
    const float* ours = model.grad_data() + p.offset;
    double num = 0, den = 0;
    for (size_t i = 0; i < p.numel; ++i) {
      num += (double(ours[i]) - g[i]) * (double(ours[i]) - g[i]);
      den += double(g[i]) * g[i];
    }
    EXPECT_LT(std::sqrt(num) / std::max(std::sqrt(den), floor), 1e-4) << "grad." << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllAttention, Reference,
                         ::testing::ValuesIn(test::attention_matrix(test::tiny_config())),
                         [](const auto& info) { return info.param.name; });

// The head on the mean of the real tokens' states (classifier_pooling = mean); the batch's
// padded sequences make a mean over all N positions fail.
std::vector<test::NamedConfig> mean_pooling_configs() {
  std::vector<test::NamedConfig> v;
  for (AttentionKind kind : {AttentionKind::standard, AttentionKind::linformer}) {
    Config c = test::tiny_config();
    c.attention = kind;
    c.classifier_pooling = ClassifierPooling::mean;
    v.push_back({std::string(to_string(kind)) + "_mean_head", c});
  }
  return v;
}
INSTANTIATE_TEST_SUITE_P(MeanHead, Reference, ::testing::ValuesIn(mean_pooling_configs()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace lf
