// The implementations behind attention_path() (layers/attention_path.h); include only there.
#pragma once
#include "layers/attention_path.h"

namespace lf {

const AttentionPath& standard_path(ExactAttention exact);
const AttentionPath& project_input_path();
const AttentionPath& project_keys_path();
const AttentionPath& max_pool_path();

// The K and V maps on every row, which the standard, project_keys and max_pool paths share:
// k = in Wk^T + bk, v = in Wv^T + bv, [R,D] each. in16: in rounded to bfloat16 (bf16
// training) or null.
void take_kv(Carver& c, LayerAct& A, const Config& cfg, const PathShape& s);
void kv_maps_forward(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in,
                     const uint16_t* in16);
void kv_maps_infer(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in);
// d(in) += dk Wk + dv Wv, with the maps' parameter gradients.
void kv_maps_backward(const LayerContext& c, const LayerParams& lp, const float* in,
                      const uint16_t* in16, float* din, const float* dk, const float* dv);

}  // namespace lf
