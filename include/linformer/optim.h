// Optimiser settings of the training runs: AdamW with decoupled weight decay, global
// gradient-norm clipping and a linear warm-up / linear decay learning-rate schedule.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>

namespace lf {

struct OptimOptions {
  float lr = 5e-4f;  // peak learning rate
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-6f;
  float weight_decay = 0.01f;  // not applied to biases and LayerNorm parameters
  float clip_norm = 1.0f;      // global gradient-norm clipping (0: off)
  // Learning-rate multiplier of the Linformer projection parameters (E/F, conv kernels): a
  // parameter group. 0 freezes them; small values keep a pooling-shaped start (docs/model.md).
  float projection_lr_scale = 1.0f;
  int64_t warmup_steps = 0;    // linear warm-up from 0 to lr
  int64_t total_steps = 1;     // then linear decay to 0 at total_steps

  // Throws lf::Error naming the option (--lr, --beta1, ...) and its allowed range.
  void validate() const;
};

// The options as train_args.json keys (lr, beta1, beta2, eps, weight_decay, clip_norm,
// warmup_steps, projection_lr_scale) added to *j, and back (projection_lr_scale defaults to 1
// when absent, for runs written by earlier versions). total_steps is not stored: the run derives
// it.
void optim_to_json(const OptimOptions& o, nlohmann::json* j);
OptimOptions optim_from_json(const nlohmann::json& j);

// Learning rate at optimizer step `step` (0-based): warm-up then linear decay.
float lr_at(const OptimOptions& o, int64_t step);

}  // namespace lf
