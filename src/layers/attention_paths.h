// The implementations behind the registry (layers/attention_path.h); include only there.
#pragma once
#include "layers/attention_path.h"

namespace lf {

const AttentionPath& standard_path(ExactAttention exact);
const AttentionPath& project_input_path();
const AttentionPath& project_keys_path();
const AttentionPath& max_pool_path();

// The K and V maps on every row, which the standard, project_keys and max_pool kinds share:
// k = in Wk^T + bk, v = in Wv^T + bv, [R,D] each, in the kind's block.
struct KVMaps {
  float *k = nullptr, *v = nullptr;
  void take(Carver& c, const Config& cfg, const PathShape& s);
  // in: the maps' input as their products read it (LayerAct::maps_in).
  void forward(const LayerContext& c, const LayerParams& lp, TensorIn in) const;
  void infer(const LayerContext& c, const LayerParams& lp, const float* in) const;
  // The same maps written head-major ([B,H,N,Dh], KVLayout::head_major) into k and v, f32 or
  // bf16 (each head's row rounded by vm::to_bf16_n, as round_heads_bf16 rounds): each block of
  // up to kStageRows rows goes through stage [kStageRows, D] (stage_floats), then to its heads.
  static constexpr int64_t kStageRows = 512;
  static int64_t stage_floats(int64_t rows, int64_t D);
  static void infer_head_major(const LayerContext& c, const LayerParams& lp, const float* in,
                               float* stage, Tensor k, Tensor v);
  // d(in) += dk Wk + dv Wv, with the maps' parameter gradients.
  static void backward(const LayerContext& c, const LayerParams& lp, TensorIn in, float* din,
                       const float* dk, const float* dv);
};

// A kind whose keys and values are the K and V maps of every position (standard attention,
// Nystromformer): training's forward, saved and backward over its block Act's `kv`.
template <class Act>
class FullKeysPath : public AttentionPath {
 public:
  KeysValues forward(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                     const float*) const override {
    block_of<Act>(A.path).kv.forward(c, lp, A.maps_in);
    return saved(c, A);
  }
  KeysValues saved(const LayerContext& c, const LayerAct& A) const override {
    const KVMaps& kv = block_of<Act>(A.path).kv;
    return {kv.k, kv.v, c.mask};
  }
  void backward(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float*, float* din,
                const float* dkk, const float* dvv) const override {
    KVMaps::backward(c, lp, A.maps_in, din, dkk, dvv);
  }
};

}  // namespace lf
