#include "train/optim.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/limits.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "io/json_read.h"
#include "kernels/vec_math.h"

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

namespace {

// Calls f(p, i0, i1) for element ranges [i0, i1) of the parameters, inside one parallel region
// whose threads split the elements of all parameters evenly (a parameter may be split between
// threads; f sees each element exactly once). f may use the thread number.
template <typename F>
void for_param_elements(const std::vector<ParamInfo>& params, const F& f) {
  std::vector<int64_t> end(params.size());  // cumulative element counts
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i)
    end[i] = total += static_cast<int64_t>(params[i].numel);
  parallel_for(0, total, 1 << 15, [&](int64_t a, int64_t b) {
    size_t i = std::upper_bound(end.begin(), end.end(), a) - end.begin();
    for (; i < params.size() && a < b; ++i) {
      const int64_t first = end[i] - static_cast<int64_t>(params[i].numel);
      const int64_t stop = std::min(b, end[i]);
      f(params[i], a - first, stop - first);
      a = stop;
    }
  });
}

}  // namespace

double grad_norm(Model& m) {
  PhaseScope ps(Phase::optimizer);
  const float* g = m.grad_data();
  std::vector<double> part(num_threads(), 0.0);
  for_param_elements(m.params(), [&](const ParamInfo& p, int64_t i0, int64_t i1) {
    const float* gp = g + p.offset;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = i0; i < i1; ++i) sq += static_cast<double>(gp[i]) * gp[i];
    part[thread_id()] += sq;
  });
  double sq = 0.0;
  for (double v : part) sq += v;
  return std::sqrt(sq);
}

float clip_scale(double norm, float max_norm) {
  return max_norm > 0.f && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.f;
}

double clip_grad_norm(Model& m, float max_norm) {
  const double norm = grad_norm(m);
  const float s = clip_scale(norm, max_norm);
  if (s != 1.f) {
    PhaseScope ps(Phase::optimizer);
    float* g = m.grad_data();
    for_param_elements(m.params(), [&](const ParamInfo& p, int64_t i0, int64_t i1) {
      float* gp = g + p.offset;
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) gp[i] *= s;
    });
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

void AdamW::step(float lr, float grad_scale) {
  PhaseScope ps(Phase::optimizer);
  ++t_;
  const float b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps;
  const float bc1 = 1.f - std::pow(b1, static_cast<float>(t_));
  const float bc2 = 1.f - std::pow(b2, static_cast<float>(t_));
  float* w = model_.param_data();
  const float* g = model_.grad_data();
  // bf16 training: the weights' bf16 copy is written in the same pass (the next forward would
  // otherwise read every weight again to round it).
  uint16_t* w16 = model_.bf16_params();
  for_param_elements(model_.params(), [&](const ParamInfo& p, int64_t i0, int64_t i1) {
    if (p.projection && o_.projection_lr_scale == 0.f) {  // frozen: weights and moments
      if (w16) vm::to_bf16_n(w16 + p.offset + i0, w + p.offset + i0, i1 - i0);  // untouched
      return;
    }
    const float wd = p.decay ? o_.weight_decay : 0.f;
    const float plr = p.projection ? lr * o_.projection_lr_scale : lr;
    float* wp = w + p.offset;
    const float* gp = g + p.offset;
    float* mp = m_.data() + p.offset;
    float* vp = v_.data() + p.offset;
    constexpr int64_t kBlock = 4096;  // the bf16 copy rounds each block while it is in cache
    for (int64_t b0 = i0; b0 < i1; b0 += kBlock) {
      const int64_t b1e = std::min(i1, b0 + kBlock);
#pragma omp simd
      for (int64_t i = b0; i < b1e; ++i) {
        const float gi = gp[i] * grad_scale;  // rounded as clip_grad_norm would store it
        mp[i] = b1 * mp[i] + (1.f - b1) * gi;
        vp[i] = b2 * vp[i] + (1.f - b2) * gi * gi;
        const float mh = mp[i] / bc1, vh = vp[i] / bc2;
        wp[i] -= plr * (mh / (std::sqrt(vh) + eps) + wd * wp[i]);
      }
      if (w16) vm::to_bf16_n(w16 + p.offset + b0, wp + b0, b1e - b0);
    }
  });
  if (w16) model_.bf16_params_written();
}

}  // namespace lf
