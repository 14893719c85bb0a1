// The position-wise feed-forward sub-layer: y = GELU(x W1^T + b1) W2^T + b2, with
// W1 [F, D] (intermediate.dense) and W2 [D, F] (output.dense); rows of x and y are [D].
#pragma once
#include <cstdint>

#include "layers/encoder_layer.h"

namespace lf {

// The activations training keeps for backward, [R,F] each: h = x W1^T + b1 and g = GELU(h).
// f32, or, in bf16 training when every FFN product runs in bf16 (all four share one size, so
// gemm_runs_bf16(t, R, D, F) decides for all), bf16 only: the products then write and read
// bf16 as PyTorch's autocast does, and GELU reads and writes half the bytes.
struct FfnActs {
  Tensor h, g;
};

struct FeedForward {
  const Linear& inter;  // W1, b1
  const Linear& out;    // W2, b2
  int64_t D = 0, F = 0;
  ComputeType t = ComputeType::f32;  // precision of the training products
  TrainWeights wt = {};              // and the weights' forms for training's products

  // Training: y [R,D] from x [R,D] (in the dtype of the first product: bf16 with bf16
  // activations), keeping a.
  void forward(float* y, TensorIn x, int64_t R, const FfnActs& a) const;
  // dx += d(x) from dy [R,D] (dx = d(x) with GradInto::overwrite); parameter gradients
  // through grad. x, a: as in forward. dG [R,F]: scratch for the hidden gradient, in a's
  // dtype. dy f32, or bf16 (with bf16 activations: already rounded, its column sums added to
  // out's bias gradient, layernorm_backward's RoundedGrad); an f32 dy may alias dx: it is
  // read in full before dx is written.
  void backward(float* dx, TensorIn dy, TensorIn x, int64_t R, const FfnActs& a, Tensor dG,
                const GradMap& grad, GradInto into = GradInto::add) const;
  // Inference on one row block with the packed weights: y = base + FFN(x), fused into the
  // products. hidden: [rows,F] workspace. y may alias base.
  void infer_rows(float* y, const float* base, float* hidden, const float* x, int64_t rows) const;
  // Rows the int8 form of infer_rows runs through both products at a time.
  static constexpr int64_t kFusedRows = 64;
};

}  // namespace lf
