// The one table from a configuration to its attention path. Adding a path: implement
// AttentionPath in its own file, declare its getter in attention_paths.h, choose it here.
#include "layers/attention_path.h"

#include "kernels/ops.h"
#include "layers/attention_paths.h"

namespace lf {

const AttentionPath& attention_path(const Config& cfg, ExactAttention exact) {
  if (!cfg.is_linformer()) return standard_path(exact);
  if (cfg.projection == Projection::max_pool) return max_pool_path();
  if (cfg.sharing == Sharing::none) return project_keys_path();
  return project_input_path();
}

void take_kv(Carver& c, LayerAct& A, const Config& cfg, const PathShape& s) {
  A.k = c.take<float>(s.B * s.N * cfg.d_model);
  A.v = c.take<float>(s.B * s.N * cfg.d_model);
}

void kv_maps_forward(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in,
                     const uint16_t* in16) {
  const int64_t R = c.B * c.N, D = c.cfg->d_model;
  const LinearDims kv{/*rows=*/R, /*in=*/D, /*out=*/D};
  linear_forward(A.k, in, lp.k.w, lp.k.b, kv, c.precision, c.wt(lp.k), in16);
  linear_forward(A.v, in, lp.v.w, lp.v.b, kv, c.precision, c.wt(lp.v), in16);
}

void kv_maps_infer(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in) {
  using Epi = PackedLinear::Epilogue;
  const int64_t R = c.B * c.N;
  lp.k.packed.apply(A.k, in, R, lp.k.b, Epi::store);
  lp.v.packed.apply(A.v, in, R, lp.v.b, Epi::store);
}

void kv_maps_backward(const LayerContext& c, const LayerParams& lp, const float* in,
                      const uint16_t* in16, float* din, const float* dk, const float* dv) {
  const int64_t R = c.B * c.N, D = c.cfg->d_model;
  const LinearDims kv{/*rows=*/R, /*in=*/D, /*out=*/D};
  linear_backward(din, c.grad(lp.k.w), c.grad(lp.k.b), dk, in, lp.k.w, kv, c.precision, c.wt(lp.k),
                  in16);
  linear_backward(din, c.grad(lp.v.w), c.grad(lp.v.b), dv, in, lp.v.w, kv, c.precision, c.wt(lp.v),
                  in16);
}

}  // namespace lf
