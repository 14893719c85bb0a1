// Linformer's sequence-axis projections E (keys) and F (values) as the engine holds them.
// A slot is one projection matrix: `heads` blocks (1 when shared by the heads) of [k, max_len].
// Learned (linear) E lives in the parameter buffer; mean pooling and convolution are written
// out as a matrix in `eff` (mean_pool: fixed; conv: rebuilt from the kernels every forward),
// so every projection kind runs through the same products.
#pragma once
#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "linformer/compute_type.h"
#include "linformer/config.h"
#include "linformer/params.h"

namespace lf {

struct ProjectionSlot {
  int64_t heads = 1, k = 0, window = 0;  // window = max_len / k (pooling and conv)
  const ParamInfo* param = nullptr;      // null for parameter-free pooling
  Buffer<float> eff, deff;               // materialised E [heads, k, max_len] and its gradient
};

// A per-head projection of B sequences of N positions (d_model features) with the slot's
// E [K, max_len] per head, of which the first `rows` rows are formed (rows <= K).
struct ProjShape {
  int64_t B = 0, N = 0, K = 0, rows = 0;
};

class Projections {
 public:
  Projections(const Config& cfg, const float* params) : cfg_(cfg), params_(params) {}

  // Adds a slot for the parameter `param` (may be null) and returns its index.
  int add(const ParamInfo* param, int64_t heads, int64_t k);
  const ProjectionSlot& slot(int i) const { return slots_[i]; }

  // E of a slot [heads, k, max_len], and where its gradient goes (null for fixed mean pooling).
  // grads: the flat gradient buffer laid out like the parameters.
  const float* E(int i) const;
  float* dE(int i, float* grads);
  // Rebuilds convolution matrices from their kernels (no-op for other kinds).
  void refresh();
  // Folds a convolution matrix gradient into its kernel gradient, then clears it.
  void reduce_grad(int i, float* grads);
  // Bytes of the materialised matrices and their gradients.
  size_t bytes() const;

  // Per-head projection (sharing none): kp_bh = E_h[:rows, :N] x_bh for every batch element b
  // and head h. x [B,N,D], kp [B,rows,D].
  void heads_forward(int i, float* kp, const float* x, const ProjShape& s, ComputeType t) const;
  // dx_bh += E_h^T dkp_bh; dE_h += sum_b dkp_bh x_bh^T (dE may be null).
  void heads_backward(int i, float* dx, float* dE, const float* dkp, const float* x,
                      const ProjShape& s, ComputeType t) const;

 private:
  void check(int i, const ProjShape& s, const char* what) const;  // LF_DCHECK at entry

  const Config& cfg_;
  const float* params_;
  std::vector<ProjectionSlot> slots_;
};

}  // namespace lf
