// AdamW and gradient clipping over the model's flat parameter and gradient buffers (the
// options and the schedule are public: linformer/optim.h).
#pragma once
#include <cstdint>
#include <string>

#include "core/buffer.h"
#include "linformer/model.h"
#include "linformer/optim.h"

namespace lf {

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
