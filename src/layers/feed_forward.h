// The position-wise feed-forward sub-layer: y = GELU(x W1^T + b1) W2^T + b2, with
// W1 [F, D] (intermediate.dense) and W2 [D, F] (output.dense); rows of x and y are [D].
#pragma once
#include <cstdint>

#include "layers/encoder_layer.h"

namespace lf {

struct FeedForward {
  const Linear& inter;  // W1, b1
  const Linear& out;    // W2, b2
  int64_t D = 0, F = 0;
  ComputeType t = ComputeType::f32;  // precision of the training products
  Bf16Map w16 = {};                  // and the weights' bf16 copies (bf16 training)

  // Training: y [R,D] from x [R,D]; keeps h = x W1^T + b1 and g = GELU(h) [R,F] for backward.
  // bf16 training: x16 is x rounded to bfloat16, and g is rounded into g16 (null: neither);
  // g may then be null, when the products on it run in bf16 (gemm_runs_bf16(t, R, D, F)).
  void forward(float* y, float* h, float* g, const float* x, int64_t R,
               const uint16_t* x16 = nullptr, uint16_t* g16 = nullptr) const;
  // dx += d(x) from dy [R,D] (dx = d(x) with GradInto::overwrite); parameter gradients
  // through grad. dG: [R,F] scratch. x16, g16: forward's roundings (or null). dG16: [R,F]
  // bf16 scratch (or null): when the first map's gradient products run in bf16, GELU's
  // backward writes its result there only, rounded, with the bias gradient summed in the
  // same pass.
  void backward(float* dx, float* dG, const float* dy, const float* x, const float* h,
                const float* g, int64_t R, const GradMap& grad, const uint16_t* x16 = nullptr,
                const uint16_t* g16 = nullptr, GradInto into = GradInto::add,
                uint16_t* dG16 = nullptr) const;
  // Inference on one row block with the packed weights: y = base + FFN(x), fused into the
  // products. hidden: [rows,F] workspace. y may alias base.
  void infer_rows(float* y, const float* base, float* hidden, const float* x, int64_t rows) const;
};

}  // namespace lf
