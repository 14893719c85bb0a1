// The implementations behind the registry (layers/attention_path.h); include only there.
#pragma once
#include <initializer_list>

#include "layers/attention_path.h"

namespace lf {

const AttentionPath& standard_path(ExactAttention exact);
const AttentionPath& project_input_path();
const AttentionPath& project_keys_path();
const AttentionPath& max_pool_path();
const AttentionPath& stride_path();

// The K and V maps on every row, which the standard, project_keys and max_pool kinds share:
// k = in Wk^T + bk, v = in Wv^T + bv, [R,D] each, in the kind's block.
struct KVMaps {
  float *k = nullptr, *v = nullptr;
  void take(Carver& c, const Config& cfg, const PathShape& s);
  // in16: in rounded to bfloat16 (bf16 training) or null.
  void forward(const LayerContext& c, const LayerParams& lp, const float* in,
               const uint16_t* in16) const;
  void infer(const LayerContext& c, const LayerParams& lp, const float* in) const;
  // d(in) += dk Wk + dv Wv, with the maps' parameter gradients.
  static void backward(const LayerContext& c, const LayerParams& lp, const float* in,
                       const uint16_t* in16, float* din, const float* dk, const float* dv);
};

// ---- what the Linformer kinds share (attention_path_linformer.cpp) ----

// The Linformer kinds' block of one layer.
struct LinformerAct final : PathBlock {
  KVMaps kv;                                 // project_keys, max_pool: the maps on every row
  float *xpk = nullptr, *xpv = nullptr;      // project_input: projected inputs [B,K,D]
  float *emk = nullptr, *emv = nullptr;      // project_input: E m [B,K]
  float *ebmk = nullptr, *ebmv = nullptr;    // project_input: E diag(m) [B,K,N] (padding)
  float* proj_scratch = nullptr;             // project_input inference: E diag(m) columns
  float *kp = nullptr, *vp = nullptr;        // projected keys/values [B,K,D]
  int32_t *argk = nullptr, *argv = nullptr;  // max_pool choices [B,K,D]
  float* rows_live = nullptr;                // 1/0 per projected row [B,K]
  const float* row_mask = nullptr;  // rows_live when some row is empty, else null (all live)
};

// What the Linformer kinds share: the config keys k, sharing, projection (and their tensors
// E, F), and attention against the K projected rows kp, vp.
class LinformerPath : public AttentionPath {
 public:
  void validate(const Config& cfg) const override;
  std::vector<PathTensor> tensors(const Config& cfg, int64_t layer) const override;
  int64_t projected_length(const Config& cfg, int64_t layer) const override;
  int64_t formed_rows(const Config& cfg, int64_t K, int64_t N) const override;
  int64_t key_length(int64_t, int64_t K) const override { return K; }
  KeysValues saved(const LayerContext&, const LayerAct& A) const override;
  int64_t rows_work_floats(int64_t rows, const AttnDims& d) const override;

 protected:
  static bool is_linformer(const Config& cfg);
  // Adds the configurations of `sharings` x `projections` on base to out.
  static void add_variants(const Config& base, std::initializer_list<Sharing> sharings,
                           std::initializer_list<Projection> projections,
                           std::vector<AttentionVariant>& out);
  static void take_projected(Carver& c, LinformerAct& A, const Config& cfg, const PathShape& s);
};

// The kinds that apply the K/V maps on all N rows and then reduce the keys and values to K
// rows: kp = reduce(in Wk^T + bk), likewise vp. A subclass supplies the reduction; the rows
// whose window holds no real position are marked after it (docs/model.md).
class ReduceKeysPath : public LinformerPath {
 public:
  void plan_train(Carver& c, LayerAct& L, const Config& cfg, const PathShape& s) const final;
  void plan_backward(Carver& c, Layout& l, const Config& cfg, const PathShape& s) const final;
  KeysValues forward(const LayerContext& c, const LayerParams& lp, LayerAct& L,
                     const float* in) const final;
  void backward(const LayerContext& c, const LayerParams& lp, LayerAct& L, const float* in,
                float* din, const float* dkk, const float* dvv) const final;
  void plan_infer(Carver& c, LayerAct& L, Layout&, const Config& cfg,
                  const PathShape& s) const final;
  KeysValues infer_batch(const LayerContext& c, const LayerParams& lp, LayerAct& L, const float* in,
                         const float**) const final;
  double flops(const Config& cfg, int64_t layer, double n) const final;

 protected:
  // Buffers of the reduction beyond the maps and the projected rows.
  virtual void take_more(Carver&, LinformerAct&, const Config&, const PathShape&) const {}
  // A.kp, A.vp [B,K,D] from A.kv [B,N,D].
  virtual void reduce(const LayerContext& c, const LayerParams& lp, LinformerAct& A) const = 0;
  // dk, dv [B,N,D] (zeroed) from dkp, dvp [B,K,D], with the reduction's parameter gradients.
  virtual void reduce_backward(const LayerContext& c, const LayerParams& lp, const LinformerAct& A,
                               float* dk, float* dv, const float* dkp, const float* dvp) const = 0;
  virtual double reduce_flops(const Config& cfg, double K, double n) const = 0;
};

}  // namespace lf
