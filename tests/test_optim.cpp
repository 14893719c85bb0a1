// The optimiser against hand-computed expectations: the learning-rate schedule, AdamW with
// its decay groups (against a hand-written AdamW in double) and gradient clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "linformer/model.h"
#include "test_util.h"
#include "train/optim.h"

namespace lf {
namespace {

// ---------------------------------------------------------------------------------------------
// Schedule
// ---------------------------------------------------------------------------------------------

TEST(Schedule, WarmupThenLinearDecay) {
  OptimOptions o;
  o.lr = 1e-3f;
  o.warmup_steps = 4;
  o.total_steps = 20;
  // Warm-up: lr * (step + 1) / 4.
  EXPECT_FLOAT_EQ(lr_at(o, 0), 2.5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 1), 5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 3), 1e-3f);  // end of warm-up: the peak
  // Decay: lr * (1 - (step - 4) / 16), reaching 0 at step 20.
  EXPECT_FLOAT_EQ(lr_at(o, 4), 1e-3f);
  EXPECT_FLOAT_EQ(lr_at(o, 12), 5e-4f);  // middle of the decay
  EXPECT_FLOAT_EQ(lr_at(o, 16), 2.5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 19), 6.25e-5f);  // the last step
  EXPECT_EQ(lr_at(o, 20), 0.f);
  EXPECT_EQ(lr_at(o, 25), 0.f);  // never negative
  // Monotone up, then monotone down.
  for (int64_t s = 1; s < 4; ++s) EXPECT_GT(lr_at(o, s), lr_at(o, s - 1));
  for (int64_t s = 5; s <= 20; ++s) EXPECT_LT(lr_at(o, s), lr_at(o, s - 1));

  // No warm-up: decay from the peak at step 0.
  o.warmup_steps = 0;
  o.total_steps = 10;
  EXPECT_FLOAT_EQ(lr_at(o, 0), 1e-3f);
  EXPECT_FLOAT_EQ(lr_at(o, 5), 5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 9), 1e-4f);
}

// ---------------------------------------------------------------------------------------------
// AdamW and clipping
// ---------------------------------------------------------------------------------------------

bool is_no_decay_name(const std::string& n) {
  return (n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0) ||
         n.find("LayerNorm.") != std::string::npos || n.find("layer_norm.") != std::string::npos;
}

// PyTorch's AdamW, in double: w -= lr*wd*w; m, v moments; bias-corrected step.
struct HandAdamW {
  double lr_wd, b1, b2, eps;
  std::vector<double> w, m, v;
  int t = 0;
  void step(const std::vector<float>& g, const std::vector<bool>& decay, double lr) {
    ++t;
    for (size_t i = 0; i < w.size(); ++i) {
      if (decay[i]) w[i] -= lr * lr_wd * w[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * double(g[i]) * g[i];
      const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
      w[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
};

TEST(AdamW, TwoStepsMatchHandWrittenAdamWWithDecayGroups) {
  Config cfg = test::tiny_config();
  Model model(cfg);
  model.init(4);
  const auto& params = model.params();
  // Decay flags: on for weights/embeddings/projections, off for biases and LayerNorm.
  int with = 0, without = 0;
  for (const ParamInfo& p : params) {
    EXPECT_EQ(p.decay, !is_no_decay_name(p.name)) << p.name;
    (p.decay ? with : without)++;
  }
  ASSERT_GT(with, 0);
  ASSERT_GT(without, 0);
  // Nonzero biases so that a wrongly applied decay on them would show.
  for (const ParamInfo& p : params)
    for (size_t i = 0; i < p.numel; ++i) model.param_data()[p.offset + i] += 0.3f * rng_normal(8, p.offset, i);

  OptimOptions o;
  o.lr = 1e-2f;
  o.beta1 = 0.9f;
  o.beta2 = 0.98f;
  o.eps = 1e-6f;
  o.weight_decay = 0.1f;  // large, so that decay on a wrong tensor is far above rounding
  AdamW adam(model, o);
  HandAdamW hand{0.1, 0.9, 0.98, 1e-6, {}, {}, {}};
  std::vector<bool> decay;
  for (const ParamInfo& p : params)
    for (size_t i = 0; i < p.numel; ++i) {
      hand.w.push_back(model.param_data()[p.offset + i]);
      decay.push_back(p.decay);
    }
  hand.m.assign(hand.w.size(), 0);
  hand.v.assign(hand.w.size(), 0);
  std::vector<double> gmax(hand.w.size(), 0);  // largest |gradient| so far, per element

  const float lrs[2] = {1e-2f, 4e-3f};
  for (int step = 0; step < 2; ++step) {
    model.zero_grad();
    std::vector<float> g;
    for (size_t k = 0; k < params.size(); ++k) {
      const ParamInfo& p = params[k];
      for (size_t i = 0; i < p.numel; ++i) {
        // Mixed scales, and one tensor with zero gradient (decay only).
        float x = (k % 3 == 0 ? 1e-3f : 0.5f) * rng_normal(100 + step, p.offset, i);
        if (p.name == "classifier.out_proj.weight") x = 0.f;
        model.grad_data()[p.offset + i] = x;
        g.push_back(x);
      }
    }
    adam.step(lrs[step]);
    hand.step(g, decay, lrs[step]);
    for (size_t j = 0; j < g.size(); ++j) gmax[j] = std::max(gmax[j], double(std::abs(g[j])));
    EXPECT_EQ(adam.steps_done(), step + 1);
    size_t j = 0;
    double worst = 0;
    for (const ParamInfo& p : params)
      for (size_t i = 0; i < p.numel; ++i, ++j) {
        const double ours = model.param_data()[p.offset + i];
        // float32 arithmetic on weights up to ~1.5: a few ulp.
        const double tol = 1e-6 * std::max(1.0, std::abs(hand.w[j]));
        worst = std::max(worst, std::abs(ours - hand.w[j]));
        ASSERT_NEAR(ours, hand.w[j], tol) << p.name << "[" << i << "] after step " << step + 1;
        // Moments: float32 (1 - beta) and sums of terms of either sign, so the bound is
        // relative to the gradients that went in, not to the (possibly cancelled) moment.
        ASSERT_NEAR(adam.m_data()[p.offset + i], hand.m[j], 1e-6 * gmax[j] + 1e-15)
            << p.name << "[" << i << "] m after step " << step + 1;
        ASSERT_NEAR(adam.v_data()[p.offset + i], hand.v[j], 1e-6 * gmax[j] * gmax[j] + 1e-20)
            << p.name << "[" << i << "] v after step " << step + 1;
      }
    std::printf("AdamW step %d: max |w - hand| = %.3g\n", step + 1, worst);
  }
}

TEST(AdamW, ClipGradNormScalesToMaxAndReturnsPreClipNorm) {
  Model model(test::tiny_config());
  model.init(1);
  auto fill = [&](uint64_t seed) {
    model.zero_grad();
    for (const ParamInfo& p : model.params())
      for (size_t i = 0; i < p.numel; ++i)
        model.grad_data()[p.offset + i] = rng_normal(seed, p.offset, i);
  };
  auto grads = [&] {
    std::vector<float> g;
    for (const ParamInfo& p : model.params())
      g.insert(g.end(), model.grad_data() + p.offset, model.grad_data() + p.offset + p.numel);
    return g;
  };
  fill(3);
  const std::vector<float> g0 = grads();
  double sq = 0;
  for (float x : g0) sq += double(x) * x;
  const double norm = std::sqrt(sq);
  ASSERT_GT(norm, 10.0);

  // Above the limit: scaled down to max_norm, direction kept.
  const float max_norm = static_cast<float>(norm / 4);
  EXPECT_NEAR(clip_grad_norm(model, max_norm), norm, 1e-6 * norm);
  const std::vector<float> g1 = grads();
  double sq1 = 0;
  for (float x : g1) sq1 += double(x) * x;
  EXPECT_NEAR(std::sqrt(sq1), max_norm, 1e-5 * max_norm);
  for (size_t i = 0; i < g0.size(); ++i) ASSERT_NEAR(g1[i], g0[i] * 0.25f, 1e-5f * std::abs(g0[i]) + 1e-7f);

  // Below the limit, or clipping off: unchanged, norm still returned.
  fill(3);
  EXPECT_NEAR(clip_grad_norm(model, static_cast<float>(2 * norm)), norm, 1e-6 * norm);
  EXPECT_EQ(grads(), g0);
  EXPECT_NEAR(clip_grad_norm(model, 0.f), norm, 1e-6 * norm);
  EXPECT_EQ(grads(), g0);
}

// Clipping inside AdamW's pass (training's form: AdamW::step(lr, clip_scale(grad_norm))) gives
// bitwise the weights and moments of clipping the gradients first and then stepping, over
// three steps with the clip active (norm above the limit) and one with it inactive.
TEST(AdamW, ClipScaleEqualsClippingFirst) {
  Config c = test::tiny_config();
  Model a(c), b(c);
  a.init(7);
  b.init(7);
  OptimOptions o;
  o.weight_decay = 0.01f;
  AdamW oa(a, o), ob(b, o);
  const size_t n = a.params().back().offset + a.params().back().numel;
  for (int step = 0; step < 4; ++step) {
    const float scale = step == 3 ? 0.01f : 3.f;  // the last step's norm is below the limit
    for (Model* m : {&a, &b})
      for (size_t i = 0; i < n; ++i) m->grad_data()[i] = scale * rng_normal(11, step, i);
    const float max_norm = 1.f;
    const double na = clip_grad_norm(a, max_norm);
    oa.step(1e-2f);
    const double nb = grad_norm(b);
    EXPECT_EQ(na, nb);
    EXPECT_EQ(clip_scale(nb, max_norm) == 1.f, step == 3);
    ob.step(1e-2f, clip_scale(nb, max_norm));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(a.param_data()[i], b.param_data()[i]) << "step " << step << " element " << i;
      ASSERT_EQ(oa.m_data()[i], ob.m_data()[i]) << i;
      ASSERT_EQ(oa.v_data()[i], ob.v_data()[i]) << i;
    }
  }
}

}  // namespace
}  // namespace lf
