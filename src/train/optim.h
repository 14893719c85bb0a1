// AdamW with decoupled weight decay, the learning-rate schedule, and gradient clipping,
// over the model's flat parameter and gradient buffers.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/buffer.h"
#include "linformer/model.h"

namespace lf {

struct OptimOptions {
  float lr = 5e-4f;           // peak learning rate
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-6f;
  float weight_decay = 0.01f;  // not applied to biases and LayerNorm parameters
  float clip_norm = 1.0f;      // global gradient-norm clipping (0: off)
  int64_t warmup_steps = 0;    // linear warm-up from 0 to lr
  int64_t total_steps = 1;     // then linear decay to 0 at total_steps
};

// The options as train_args.json keys (lr, beta1, beta2, eps, weight_decay, clip_norm,
// warmup_steps) added to *j, and back. total_steps is not stored: the run derives it.
void optim_to_json(const OptimOptions& o, nlohmann::json* j);
OptimOptions optim_from_json(const nlohmann::json& j);

// Learning rate at optimizer step `step` (0-based): warm-up then linear decay.
float lr_at(const OptimOptions& o, int64_t step);

// Scales gradients so their global L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm(Model& m, float max_norm);

class AdamW {
 public:
  AdamW(Model& m, const OptimOptions& o);
  // One update with learning rate lr, using the model's current gradients.
  void step(float lr);
  int64_t steps_done() const { return t_; }
  void set_steps_done(int64_t t) { t_ = t; }
  float* m_data() { return m_.data(); }
  float* v_data() { return v_.data(); }
  const OptimOptions& options() const { return o_; }

 private:
  Model& model_;
  OptimOptions o_;
  Buffer<float> m_, v_;
  int64_t t_ = 0;
};

}  // namespace lf
