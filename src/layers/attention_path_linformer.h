// What the Linformer kinds share, for a kind in its own file to build on: the block of
// buffers, the config keys k, sharing and projection with their tensors and projected rows
// (LinformerPath), and the kinds that apply the K/V maps on every row and then reduce N rows
// to K (ReduceKeysPath, a subclass supplying the reduction). The kinds themselves are in
// attention_path_linformer.cpp.
#pragma once
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "layers/attention_path.h"
#include "layers/attention_paths.h"

namespace lf {

// The kinds' block of one layer.
struct LinformerAct final : PathBlock {
  KVMaps kv;                                 // project_keys, max_pool: the maps on every row
  float *xpk = nullptr, *xpv = nullptr;      // project_input: projected inputs [B,K,D]
  float *emk = nullptr, *emv = nullptr;      // project_input: E m [B,K]
  float *ebmk = nullptr, *ebmv = nullptr;    // project_input: E diag(m) [B,K,N] (padding)
  float* proj_scratch = nullptr;             // project_input inference: E diag(m) columns
  float *kp = nullptr, *vp = nullptr;        // projected keys/values [B,K,D]
  // Inference: kp and vp head-major in bf16 [B,H,K,Dh], for the layers whose row blocks read
  // them so (LayerAct::kv).
  uint16_t *kp16 = nullptr, *vp16 = nullptr;
  int32_t *argk = nullptr, *argv = nullptr;  // max_pool choices [B,K,D]
  float* rows_live = nullptr;                // 1/0 per projected row [B,K]
  const float* row_mask = nullptr;  // rows_live when some row is empty, else null (all live)
};
// Backward buffers the layers share.
struct LinformerGrads final : PathBlock {
  float *dk = nullptr, *dv = nullptr;      // map-then-reduce kinds: d(keys), d(values) [R,D]
  float *dxpk = nullptr, *dxpv = nullptr;  // project_input: d(projected inputs) [B,K,D]
  float *demk = nullptr, *demv = nullptr;  // project_input: d(E m) [B,K]
  float* proj_scratch = nullptr;           // project_input: [B,K,N]
};

// Zeroes rows of x [B*N, C] at padded positions.
void zero_padded_rows(const LayerContext& c, float* x, int64_t C);
// Marks which of the projected rows formed are live (their window holds a real position) in
// A.rows_live and sets A.row_mask (see attention_path_linformer.cpp).
void mark_live_rows(const LayerContext& c, const LayerParams& lp, LinformerAct& A);
// The projection tensors of the config keys k, sharing and projection for a layer (-1: the
// model's).
std::vector<PathTensor> linformer_tensors(const Config& cfg, int64_t layer);

// What the three kinds share: the config keys, and attention against the K projected rows
// kp, vp.
class LinformerPath : public AttentionPath {
 public:
  void validate(const Config& cfg) const override;
  std::vector<PathTensor> tensors(const Config& cfg, int64_t layer) const override {
    return linformer_tensors(cfg, layer);
  }
  int64_t projected_length(const Config& cfg, int64_t layer) const override {
    return cfg.k_of(layer);
  }
  // With empty rows masked, the rows whose window starts at or past N are empty in every
  // sequence of the batch, so only the first ceil(N K / max_len) are formed.
  int64_t formed_rows(const Config& cfg, int64_t K, int64_t N) const override {
    if (!cfg.mask_empty_rows) return K;
    return std::min(K, (N * K + cfg.max_len - 1) / cfg.max_len);
  }
  int64_t key_length(int64_t, int64_t K) const override { return K; }
  KeysValues saved(const LayerContext&, const LayerAct& A) const override {
    const LinformerAct& b = block_of<LinformerAct>(A.path);
    return {b.kp, b.vp, b.row_mask};
  }
  int64_t rows_work_floats(int64_t rows, const AttnDims& d) const override {
    return attention_rows_work_floats(rows, d);
  }
  bool rows_read_bf16(ComputeType t, int64_t rows, const AttnDims& d) const override {
    return attention_rows_run_bf16(t, rows, d);
  }

 protected:
  static bool is_linformer(const Config& cfg) { return cfg.attention == AttentionKind::linformer; }
  // The projections that are a matrix E over the sequence (learned, mean pooling, or a
  // convolution written out as one): what project_input and project_keys run.
  static bool projects_with_matrix(const Config& cfg) {
    return cfg.projection == Projection::linear || cfg.projection == Projection::mean_pool ||
           cfg.projection == Projection::conv;
  }
  // Adds the configurations of `sharings` x `projections` on base to out.
  static void add_variants(const Config& base, std::initializer_list<Sharing> sharings,
                           std::initializer_list<Projection> projections,
                           std::vector<AttentionVariant>& out) {
    for (Sharing s : sharings)
      for (Projection p : projections) {
        Config c = base;
        c.attention = AttentionKind::linformer;
        c.sharing = s;
        c.projection = p;
        out.push_back({std::string(to_string(s)) + "_" + to_string(p), c});
      }
  }
  static void take_projected(Carver& c, LinformerAct& A, const Config& cfg, const PathShape& s) {
    A.kp = c.take<float>(s.B * s.K * cfg.d_model);
    A.vp = c.take<float>(s.B * s.K * cfg.d_model);
    A.rows_live = c.take<float>(s.B * s.K);
  }
  // The same for inference: and the bf16 copies when some layer reads them.
  static void take_projected_infer(Carver& c, LinformerAct& A, const Config& cfg,
                                   const PathShape& s) {
    take_projected(c, A, cfg, s);
    if (!s.kv_bf16) return;
    A.kp16 = c.take<uint16_t>(s.B * s.K * cfg.d_model);
    A.vp16 = c.take<uint16_t>(s.B * s.K * cfg.d_model);
  }
  // The projected keys and values as the layer's row blocks read them (LayerAct::kv): kp, vp,
  // or their bf16 copies, rounded here once for every row block.
  KeysValues infer_kv(const LayerContext& c, const LayerParams& lp, const LayerAct& L) const {
    const LinformerAct& A = block_of<LinformerAct>(L.path);
    if (L.kv != DataType::bf16) return saved(c, L);
    const AttnDims d = c.dims(lp);
    round_heads_bf16(A.kp16, A.kp, d.D, d);
    round_heads_bf16(A.vp16, A.vp, d.D, d);
    return {A.kp16, A.vp16, A.row_mask, KVLayout::head_major};
  }
};

// The kinds that apply the K/V maps on all N rows and then reduce the keys and values to K
// rows: kp = reduce(in Wk^T + bk), likewise vp.
class ReduceKeysPath : public LinformerPath {
 public:
  void plan_train(Carver& c, LayerAct& L, const Config& cfg, const PathShape& s) const final {
    LinformerAct& A = make_block<LinformerAct>(L.path);
    A.kv.take(c, cfg, s);
    take_projected(c, A, cfg, s);
    take_more(c, A, cfg, s);
  }
  void plan_backward(Carver& c, Layout& l, const Config& cfg, const PathShape& s) const final {
    LinformerGrads& g = make_block<LinformerGrads>(l.path);
    g.dk = c.take<float>(s.B * s.N * cfg.d_model);
    g.dv = c.take<float>(s.B * s.N * cfg.d_model);
  }
  KeysValues forward(const LayerContext& c, const LayerParams& lp, LayerAct& L,
                     const float*) const final {
    LinformerAct& A = block_of<LinformerAct>(L.path);
    A.kv.forward(c, lp, L.maps_in);
    reduce(c, lp, A);
    mark_live_rows(c, lp, A);
    return saved(c, L);
  }

  void backward(const LayerContext& c, const LayerParams& lp, LayerAct& L, const float*, float* din,
                const float* dkk, const float* dvv) const final {
    const int64_t R = c.B * c.N, D = c.cfg->d_model;
    const LinformerGrads& g = block_of<LinformerGrads>(c.lay->path);
    std::memset(g.dk, 0, R * D * sizeof(float));
    std::memset(g.dv, 0, R * D * sizeof(float));
    reduce_backward(c, lp, block_of<LinformerAct>(L.path), g.dk, g.dv, dkk, dvv);
    KVMaps::backward(c, lp, L.maps_in, din, g.dk, g.dv);
  }

  void plan_infer(Carver& c, LayerAct& L, Layout&, const Config& cfg,
                  const PathShape& s) const final {
    LinformerAct& A = make_block<LinformerAct>(L.path);
    A.kv.take(c, cfg, s);
    take_projected_infer(c, A, cfg, s);
    take_more(c, A, cfg, s);
  }
  KeysValues infer_batch(const LayerContext& c, const LayerParams& lp, LayerAct& L, const float* in,
                         const float**) const final {
    LinformerAct& A = block_of<LinformerAct>(L.path);
    A.kv.infer(c, lp, in);
    reduce(c, lp, A);
    mark_live_rows(c, lp, A);
    return infer_kv(c, lp, L);
  }

  double flops(const Config& cfg, int64_t layer, double n) const final {
    const double D = static_cast<double>(cfg.d_model), K = static_cast<double>(cfg.k_of(layer));
    return 2.0 * n * (2.0 * D * D)     // K and V maps on all rows
           + reduce_flops(cfg, K, n)   // the reduction
           + 2.0 * (2.0 * n * K * D);  // scores and weighted values
  }

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
