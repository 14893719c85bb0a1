// AdamW and gradient clipping over the model's flat parameter and gradient buffers (the
// options and the schedule are public: linformer/optim.h).
#pragma once
#include <cstdint>
#include <string>

#include "core/buffer.h"
#include "linformer/model.h"
#include "linformer/optim.h"

namespace lf {

// The global L2 norm of the model's gradients.
double grad_norm(Model& m);
// The factor that clips gradients of global norm `norm` to max_norm: 1 when the norm is
// within it or max_norm is 0.
float clip_scale(double norm, float max_norm);
// Scales gradients so their global L2 norm is at most max_norm; returns the norm before.
// (Training passes clip_scale to AdamW::step instead, saving a pass over the gradients.)
double clip_grad_norm(Model& m, float max_norm);

class AdamW {
 public:
  AdamW(Model& m, const OptimOptions& o);
  // One update with learning rate lr, using the model's current gradients times grad_scale
  // (clip_scale: the same update as clipping the gradients first, without writing them).
  void step(float lr, float grad_scale = 1.f);
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
