#include "train/optim.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/limits.h"
#include "core/parallel.h"
#include "io/json_read.h"

namespace lf {

void OptimOptions::validate() const {
  check_positive("--lr", lr);
  check_below("--beta1", beta1, 0.f, 1.f);
  check_below("--beta2", beta2, 0.f, 1.f);
  check_positive("--eps", eps);
  check_range("--weight-decay", weight_decay, 0.f, 1e6f);
  check_range("--clip-norm", clip_norm, 0.f, 1e30f);
  check_range("--warmup-steps", warmup_steps, int64_t{0}, limits::kMaxSteps);
  check_range("--projection-lr-scale", projection_lr_scale, 0.f, 1000.f);
}

// train_args.json keys: the field names (total_steps is not stored: the run derives it).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OptimOptions, lr, beta1, beta2, eps, weight_decay, clip_norm,
                                   warmup_steps, projection_lr_scale)

void optim_to_json(const OptimOptions& o, nlohmann::json* j) { j->update(nlohmann::json(o)); }

OptimOptions optim_from_json(const nlohmann::json& j) {
  return with_defaults(j, {{"projection_lr_scale", 1.0f}}).get<OptimOptions>();
}

float lr_at(const OptimOptions& o, int64_t step) {
  if (o.warmup_steps > 0 && step < o.warmup_steps)
    return o.lr * static_cast<float>(step + 1) / static_cast<float>(o.warmup_steps);
  const int64_t decay = std::max<int64_t>(1, o.total_steps - o.warmup_steps);
  const float frac = static_cast<float>(step - o.warmup_steps) / static_cast<float>(decay);
  return o.lr * std::max(0.f, 1.f - frac);
}

double clip_grad_norm(Model& m, float max_norm) {
  double sq = 0.0;
  const float* g = m.grad_data();
  for (const ParamInfo& p : m.params())
    for (size_t i = 0; i < p.numel; ++i) sq += static_cast<double>(g[p.offset + i]) * g[p.offset + i];
  const double norm = std::sqrt(sq);
  if (max_norm > 0.f && norm > max_norm) {
    const float s = static_cast<float>(max_norm / (norm + 1e-6));
    float* gw = m.grad_data();
    for (const ParamInfo& p : m.params())
      for (size_t i = 0; i < p.numel; ++i) gw[p.offset + i] *= s;
  }
  return norm;
}

AdamW::AdamW(Model& m, const OptimOptions& o) : model_(m), o_(o) {
  const ParamInfo& last = m.params().back();
  const size_t n = last.offset + last.numel;
  m_.resize(n);
  v_.resize(n);
  m_.zero();
  v_.zero();
}

void AdamW::step(float lr) {
  ++t_;
  const float b1 = o_.beta1, b2 = o_.beta2;
  const float bc1 = 1.f - std::pow(b1, static_cast<float>(t_));
  const float bc2 = 1.f - std::pow(b2, static_cast<float>(t_));
  float* w = model_.param_data();
  const float* g = model_.grad_data();
  for (const ParamInfo& p : model_.params()) {
    const float wd = p.decay ? o_.weight_decay : 0.f;
    const float plr = p.projection ? lr * o_.projection_lr_scale : lr;
    if (p.projection && o_.projection_lr_scale == 0.f)
      continue;  // frozen: weights and moments untouched
    float* wp = w + p.offset;
    const float* gp = g + p.offset;
    float* mp = m_.data() + p.offset;
    float* vp = v_.data() + p.offset;
    parallel_for(0, static_cast<int64_t>(p.numel), 1 << 14, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        mp[i] = b1 * mp[i] + (1.f - b1) * gp[i];
        vp[i] = b2 * vp[i] + (1.f - b2) * gp[i] * gp[i];
        const float mh = mp[i] / bc1, vh = vp[i] / bc2;
        wp[i] -= plr * (mh / (std::sqrt(vh) + o_.eps) + wd * wp[i]);
      }
    });
  }
}

}  // namespace lf
