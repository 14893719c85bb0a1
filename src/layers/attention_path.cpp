// The registry of attention kinds. Adding a kind: implement AttentionPath in its own file,
// declare its getter in attention_paths.h, list it in attention_kinds() (see docs/design.md).
#include "layers/attention_path.h"

#include "core/check.h"
#include "kernels/ops.h"
#include "layers/attention_paths.h"

namespace lf {

const std::vector<const AttentionPath*>& attention_kinds() {
  static const std::vector<const AttentionPath*> kinds{&standard_path(ExactAttention::tiled),
                                                       &max_pool_path(), &project_keys_path(),
                                                       &project_input_path()};
  return kinds;
}

const AttentionPath& attention_path(const Config& cfg, ExactAttention exact) {
  for (const AttentionPath* p : attention_kinds())
    if (p->runs(cfg)) return p->inference_variant(exact);
  LF_CHECK(false, "config: no attention kind runs this configuration");
  return standard_path(exact);  // not reached
}

std::vector<AttentionVariant> attention_variants(const Config& base) {
  std::vector<AttentionVariant> v;
  for (const AttentionPath* p : attention_kinds()) p->variants(base, v);
  return v;
}

void KVMaps::take(Carver& c, const Config& cfg, const PathShape& s) {
  k = c.take<float>(s.B * s.N * cfg.d_model);
  v = c.take<float>(s.B * s.N * cfg.d_model);
}

void KVMaps::forward(const LayerContext& c, const LayerParams& lp, const float* in,
                     const uint16_t* in16) const {
  const int64_t R = c.B * c.N, D = c.cfg->d_model;
  const LinearDims kv{/*rows=*/R, /*in=*/D, /*out=*/D};
  linear_forward(k, in, lp.k.w, lp.k.b, kv, c.precision, c.wt(lp.k), in16);
  linear_forward(v, in, lp.v.w, lp.v.b, kv, c.precision, c.wt(lp.v), in16);
}

void KVMaps::infer(const LayerContext& c, const LayerParams& lp, const float* in) const {
  using Epi = PackedLinear::Epilogue;
  const int64_t R = c.B * c.N;
  lp.k.packed.apply(k, in, R, lp.k.b, Epi::store);
  lp.v.packed.apply(v, in, R, lp.v.b, Epi::store);
}

void KVMaps::backward(const LayerContext& c, const LayerParams& lp, const float* in,
                      const uint16_t* in16, float* din, const float* dk, const float* dv) {
  const int64_t R = c.B * c.N, D = c.cfg->d_model;
  const LinearDims kv{/*rows=*/R, /*in=*/D, /*out=*/D};
  linear_backward(din, c.grad(lp.k.w), c.grad(lp.k.b), dk, in, lp.k.w, kv, c.precision, c.wt(lp.k),
                  in16);
  linear_backward(din, c.grad(lp.v.w), c.grad(lp.v.b), dv, in, lp.v.w, kv, c.precision, c.wt(lp.v),
                  in16);
}

}  // namespace lf
