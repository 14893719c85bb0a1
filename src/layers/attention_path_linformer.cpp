// Linformer attention: queries attend to K projected rows instead of N. Three paths differ in
// how the projected keys kp and values vp [B,K,D] are made:
//   project_input  kp = (E diag(m) X) Wk^T + (E m) bk^T: E applied to the layer input before
//                  the K/V maps (one E per layer or per model, shared by the heads), which
//                  needs the maps on K rows instead of N
//   project_keys   kp_h = E_h (mask(X Wk^T + bk))_h: per-head E after the maps (sharing none)
//   max_pool       kp = max over windows of n/k positions of mask(X Wk^T + bk)
#include "layers/attention_path_linformer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/parallel.h"
#include "kernels/ops.h"
#include "layers/attention_path.h"
#include "layers/attention_paths.h"
#include "layers/projection.h"

namespace lf {

namespace {

using Epi = PackedLinear::Epilogue;

// Columns of E diag(m) formed at a time by the low-memory sequence projection (inference).
constexpr int64_t kProjColumns = 512;

void zero(float* p, int64_t n) { std::memset(p, 0, n * sizeof(float)); }

}  // namespace

// Zeroes rows of x [B*N, C] at padded positions.
void zero_padded_rows(const LayerContext& c, float* x, int64_t C) {
  if (!c.mask) return;
  for (int64_t r = 0; r < c.B * c.N; ++r)
    if (c.mask[r] == 0.f) std::memset(x + r * C, 0, C * sizeof(float));
}

// Projected row j summarises the window of positions [j n / K, (j+1) n / K) (n = max_len):
// the windows of the pooling and convolution projections and of the mean pooling a learned E
// starts from. A row whose window holds no real position (past a short sequence's end, or all
// padding) is left out of the softmax when the config masks empty rows (docs/model.md).
// Marks the live rows among the c.proj_rows(lp) formed in A.rows_live [B, rows] and sets
// A.row_mask to it, or to null when all of them are live (except in batch-invariant
// inference, where whether they are depends on the other sequences) or the config keeps
// empty rows.
// Without padding every formed row is live (a row is formed only if its window starts before
// N), so there is nothing to mark.
void mark_live_rows(const LayerContext& c, const LayerParams& lp, LinformerAct& A) {
  A.row_mask = nullptr;
  if (!c.cfg->mask_empty_rows || !c.mask) return;
  const int64_t n = c.cfg->max_len, N = c.N, K = lp.K, rows = c.proj_rows(lp);
  bool all = true;
  for (int64_t b = 0; b < c.B; ++b) {
    const float* m = c.mask + b * N;
    for (int64_t j = 0; j < rows; ++j) {
      const int64_t t0 = j * n / K, t1 = std::min((j + 1) * n / K, N);
      bool live = false;
      for (int64_t t = t0; t < t1 && !live; ++t) live = m[t] != 0.f;
      A.rows_live[b * rows + j] = live ? 1.f : 0.f;
      all = all && live;
    }
  }
  if (!all || c.invariant) A.row_mask = A.rows_live;
}

// The config keys k, sharing, projection, and the tensors they give: each layer's E (keys)
// and F (values), one per head (sharing none), one per layer (headwise), one for keys and
// values (kv), or one for the model (layerwise).
std::vector<PathTensor> linformer_tensors(const Config& cfg, int64_t layer) {
  const bool model_level = cfg.sharing == Sharing::layerwise;
  if ((layer < 0) != model_level) return {};
  const int64_t k = cfg.k_of(std::max<int64_t>(layer, 0));
  const int64_t heads = cfg.sharing == Sharing::none ? cfg.n_heads : 1;
  auto tensor = [&](const std::string& name, bool keys, bool values) {
    PathTensor t;
    t.name = name;
    t.heads = heads;
    t.k = k;
    t.keys = keys;
    t.values = values;
    if (cfg.projection == Projection::mean_pool || cfg.projection == Projection::max_pool)
      return t;  // fixed pooling: no parameter
    if (cfg.sharing == Sharing::none) t.shape.push_back(heads);
    if (cfg.projection == Projection::linear) {
      t.shape.push_back(k);
      t.shape.push_back(cfg.max_len);
      t.init =
          cfg.projection_init == ProjectionInit::mean_pool ? Init::proj_mean : Init::proj_normal;
    } else {  // conv: one kernel of max_len / k taps
      t.shape.push_back(cfg.max_len / k);
      t.init = Init::conv_mean;
    }
    return t;
  };
  if (model_level) return {tensor("roberta.encoder.kv_proj.weight", true, true)};
  const std::string self = "roberta.encoder.layer." + std::to_string(layer) + ".attention.self.";
  if (cfg.sharing == Sharing::kv) return {tensor(self + "kv_proj.weight", true, true)};
  return {tensor(self + "key_proj.weight", true, false),
          tensor(self + "value_proj.weight", false, true)};
}

void LinformerPath::validate(const Config& cfg) const {
  LF_CHECK(!cfg.causal,
           "config: causal attention is impossible with Linformer: the projection E mixes all "
           "n positions into each of the k projected keys, so every query would see future "
           "tokens. Use attention \"standard\" for causal models.");
  LF_CHECK(!cfg.k.empty(), "config: k must be given for linformer attention");
  LF_CHECK(cfg.k.size() == 1 || static_cast<int64_t>(cfg.k.size()) == cfg.n_layers,
           "config: k has ", cfg.k.size(),
           " values; give one value or one per layer (n_layers = ", cfg.n_layers, ")");
  for (size_t i = 0; i < cfg.k.size(); ++i) {
    LF_CHECK(cfg.k[i] > 0 && cfg.k[i] <= cfg.max_len, "config: k[", i, "] = ", cfg.k[i],
             " must be in [1, max_len = ", cfg.max_len, "]");
    if (cfg.projection != Projection::linear)
      LF_CHECK(cfg.max_len % cfg.k[i] == 0, "config: projection ", to_string(cfg.projection),
               " uses windows of max_len / k positions, so max_len (", cfg.max_len,
               ") must be divisible by k (", cfg.k[i], ")");
  }
  if (cfg.sharing == Sharing::layerwise)
    for (int64_t v : cfg.k)
      LF_CHECK(v == cfg.k[0],
               "config: layerwise sharing uses one projection for all layers, so k "
               "must be the same in every layer");
}

namespace {

// ---- project the input ----

// Adds em[r] * bias[c] to rows of out [rows, C].
void add_scaled_bias(float* out, const float* em, const float* bias, int64_t rows, int64_t C) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) out[r * C + c] += em[r] * bias[c];
}

// out = xp W^T + em b^T: db[c] += sum_r em[r] dout[r,c]; dem[r] += sum_c dout[r,c] b[c].
void scaled_bias_backward(float* db, float* dem, const float* dout, const float* em, const float* b,
                          int64_t rows, int64_t C) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = dout + r * C;
    float s = 0.f;
    for (int64_t c = 0; c < C; ++c) {
      db[c] += em[r] * g[c];
      s += g[c] * b[c];
    }
    dem[r] += s;
  }
}

class ProjectInputPath final : public LinformerPath {
 public:
  const char* name() const override { return "project_input"; }
  bool runs(const Config& cfg) const override {
    return is_linformer(cfg) && projects_with_matrix(cfg) && cfg.sharing != Sharing::none;
  }
  void variants(const Config& base, std::vector<AttentionVariant>& out) const override {
    add_variants(base, {Sharing::headwise, Sharing::kv, Sharing::layerwise},
                 {Projection::linear, Projection::mean_pool, Projection::conv}, out);
  }

  void plan_train(Carver& c, LayerAct& L, const Config& cfg, const PathShape& s) const override {
    const int64_t B = s.B, K = s.K, N = s.N, D = cfg.d_model;
    LinformerAct& A = make_block<LinformerAct>(L.path);
    A.xpk = c.take<float>(B * K * D);
    A.emk = c.take<float>(B * K);
    if (s.masked) A.ebmk = c.take<float>(B * K * N);
    if (shared(cfg)) {
      A.xpv = A.xpk, A.emv = A.emk, A.ebmv = A.ebmk;
    } else {
      A.xpv = c.take<float>(B * K * D);
      A.emv = c.take<float>(B * K);
      if (s.masked) A.ebmv = c.take<float>(B * K * N);
    }
    take_projected(c, A, cfg, s);
  }

  void plan_backward(Carver& c, Layout& l, const Config& cfg, const PathShape& s) const override {
    const int64_t RK = s.B * s.K, D = cfg.d_model;
    LinformerGrads& g = make_block<LinformerGrads>(l.path);
    g.dxpk = c.take<float>(RK * D);
    g.demk = c.take<float>(RK);
    if (!shared(cfg)) {
      g.dxpv = c.take<float>(RK * D);
      g.demv = c.take<float>(RK);
    }
    g.proj_scratch = c.take<float>(RK * s.N);
  }

  KeysValues forward(const LayerContext& c, const LayerParams& lp, LayerAct& L,
                     const float* in) const override {
    const int64_t B = c.B, K = c.proj_rows(lp), D = c.cfg->d_model;
    const SeqProjDims sd = dims(c, lp);
    LinformerAct& A = block_of<LinformerAct>(L.path);
    // The projections read the layer input in f32 (a product that runs in bf16 rounds it).
    seq_project_forward(A.xpk, A.emk, A.ebmk, c.proj->E(lp.slot_k), in, c.mask, sd, c.precision);
    if (lp.slot_v != lp.slot_k)
      seq_project_forward(A.xpv, A.emv, A.ebmv, c.proj->E(lp.slot_v), in, c.mask, sd, c.precision);
    const LinearDims kv{/*rows=*/B * K, /*in=*/D, /*out=*/D};  // K/V maps on projected rows
    linear_forward(A.kp, A.xpk, c.weight(lp.k), nullptr, kv, c.precision);
    add_scaled_bias(A.kp, A.emk, lp.k.b, B * K, D);
    linear_forward(A.vp, A.xpv, c.weight(lp.v), nullptr, kv, c.precision);
    add_scaled_bias(A.vp, A.emv, lp.v.b, B * K, D);
    mark_live_rows(c, lp, A);
    return saved(c, L);
  }

  void backward(const LayerContext& c, const LayerParams& lp, LayerAct& LA, const float* in,
                float* din, const float* dkk, const float* dvv) const override {
    const int64_t B = c.B, K = c.proj_rows(lp), D = c.cfg->d_model;
    const LinformerAct& A = block_of<LinformerAct>(LA.path);
    const LinformerGrads& L = block_of<LinformerGrads>(c.lay->path);
    const bool one = lp.slot_k == lp.slot_v;
    zero(L.dxpk, B * K * D);
    zero(L.demk, B * K);
    float* dxv = one ? L.dxpk : L.dxpv;
    float* demv = one ? L.demk : L.demv;
    if (!one) {
      zero(L.dxpv, B * K * D);
      zero(L.demv, B * K);
    }
    const LinearDims kv{/*rows=*/B * K, /*in=*/D, /*out=*/D};
    linear_backward(LinearGrads{L.dxpk, c.grad(lp.k.w), nullptr}, dkk, A.xpk, c.weight(lp.k), kv,
                    c.precision);
    linear_backward(LinearGrads{dxv, c.grad(lp.v.w), nullptr}, dvv, A.xpv, c.weight(lp.v), kv,
                    c.precision);
    scaled_bias_backward(c.grad(lp.k.b), L.demk, dkk, A.emk, lp.k.b, B * K, D);
    scaled_bias_backward(c.grad(lp.v.b), demv, dvv, A.emv, lp.v.b, B * K, D);
    Projections& P = *c.proj;
    float* grads = c.grad.grads;
    const SeqProjDims sd = dims(c, lp);
    seq_project_backward(din, P.dE(lp.slot_k, grads), L.dxpk, L.demk, A.ebmk, P.E(lp.slot_k), in,
                         c.mask, sd, L.proj_scratch, c.precision);
    P.reduce_grad(lp.slot_k, grads);
    if (!one) {
      seq_project_backward(din, P.dE(lp.slot_v, grads), L.dxpv, L.demv, A.ebmv, P.E(lp.slot_v), in,
                           c.mask, sd, L.proj_scratch, c.precision);
      P.reduce_grad(lp.slot_v, grads);
    }
  }

  void plan_infer(Carver& c, LayerAct& L, Layout&, const Config& cfg,
                  const PathShape& s) const override {
    const int64_t B = s.B, K = s.K, D = cfg.d_model;
    LinformerAct& A = make_block<LinformerAct>(L.path);
    A.xpk = c.take<float>(B * K * D);
    A.emk = c.take<float>(B * K);
    if (shared(cfg)) {
      A.xpv = A.xpk, A.emv = A.emk;
    } else {
      A.xpv = c.take<float>(B * K * D);
      A.emv = c.take<float>(B * K);
    }
    if (s.masked) A.proj_scratch = c.take<float>(K * std::min(s.N, kProjColumns));
    take_projected_infer(c, A, cfg, s);
  }

  KeysValues infer_batch(const LayerContext& c, const LayerParams& lp, LayerAct& L, const float* in,
                         const float**) const override {
    const int64_t B = c.B, K = c.proj_rows(lp), D = c.cfg->d_model;
    const SeqProjDims sd = dims(c, lp);
    LinformerAct& A = block_of<LinformerAct>(L.path);
    float* scratch = A.proj_scratch;
    seq_project_forward_lowmem(A.xpk, A.emk, c.proj->E(lp.slot_k), in, c.mask, sd, scratch,
                               kProjColumns, c.precision);
    if (lp.slot_v != lp.slot_k)
      seq_project_forward_lowmem(A.xpv, A.emv, c.proj->E(lp.slot_v), in, c.mask, sd, scratch,
                                 kProjColumns, c.precision);
    lp.k.packed.apply(A.kp, A.xpk, B * K, nullptr, Epi::store, K);  // K rows a sequence
    add_scaled_bias(A.kp, A.emk, lp.k.b, B * K, D);
    lp.v.packed.apply(A.vp, A.xpv, B * K, nullptr, Epi::store, K);
    add_scaled_bias(A.vp, A.emv, lp.v.b, B * K, D);
    mark_live_rows(c, lp, A);
    return infer_kv(c, lp, L);
  }

  double flops(const Config& cfg, int64_t layer, double n) const override {
    const double D = static_cast<double>(cfg.d_model), K = static_cast<double>(cfg.k_of(layer));
    return (shared(cfg) ? 1.0 : 2.0) * 2.0 * K * n * D  // E diag(m) X
           + 2.0 * K * (2.0 * D * D)                    // K and V maps on the k projected rows
           + 2.0 * (2.0 * n * K * D);                   // scores and weighted values
  }

 private:
  // The projection of the layer input: [B,N,D] -> [B,rows,D] with the first rows of
  // E [K, max_len].
  static SeqProjDims dims(const LayerContext& c, const LayerParams& lp) {
    const int64_t D = c.cfg->d_model;
    return SeqProjDims{
        /*B=*/c.B, /*N=*/c.N, /*K=*/c.proj_rows(lp), /*C=*/D, /*ldE=*/c.cfg->max_len,
        /*ldx=*/D, /*ldo=*/D};
  }
  // One E serves keys and values.
  static bool shared(const Config& cfg) {
    return cfg.sharing == Sharing::kv || cfg.sharing == Sharing::layerwise;
  }
};

// ---- map every row, then reduce N rows to K ----

// Per-head E after the maps (sharing none): kp_h = E_h mask(k)_h.
class ProjectKeysPath final : public ReduceKeysPath {
 public:
  const char* name() const override { return "project_keys"; }
  bool runs(const Config& cfg) const override {
    return is_linformer(cfg) && projects_with_matrix(cfg) && cfg.sharing == Sharing::none;
  }
  void variants(const Config& base, std::vector<AttentionVariant>& out) const override {
    add_variants(base, {Sharing::none},
                 {Projection::linear, Projection::mean_pool, Projection::conv}, out);
  }

 private:
  // Padded keys and values must not reach the projection: zero them, then kp_h = E_h k_h.
  void reduce(const LayerContext& c, const LayerParams& lp, LinformerAct& A) const override {
    const int64_t D = c.cfg->d_model;
    zero_padded_rows(c, A.kv.k, D);
    zero_padded_rows(c, A.kv.v, D);
    const ProjShape s{/*B=*/c.B, /*N=*/c.N, /*K=*/lp.K, /*rows=*/c.proj_rows(lp)};
    c.proj->heads_forward(lp.slot_k, A.kp, A.kv.k, s, c.precision);
    c.proj->heads_forward(lp.slot_v, A.vp, A.kv.v, s, c.precision);
  }
  void reduce_backward(const LayerContext& c, const LayerParams& lp, const LinformerAct& A,
                       float* dk, float* dv, const float* dkp, const float* dvp) const override {
    Projections& P = *c.proj;
    float* grads = c.grad.grads;
    const ProjShape s{/*B=*/c.B, /*N=*/c.N, /*K=*/lp.K, /*rows=*/c.proj_rows(lp)};
    P.heads_backward(lp.slot_k, dk, P.dE(lp.slot_k, grads), dkp, A.kv.k, s, c.precision);
    P.heads_backward(lp.slot_v, dv, P.dE(lp.slot_v, grads), dvp, A.kv.v, s, c.precision);
    P.reduce_grad(lp.slot_k, grads);
    P.reduce_grad(lp.slot_v, grads);
    zero_padded_rows(c, dk, c.cfg->d_model);
    zero_padded_rows(c, dv, c.cfg->d_model);
  }
  double reduce_flops(const Config& cfg, double K, double n) const override {
    return 2.0 * (2.0 * K * n * static_cast<double>(cfg.d_model));  // per-head E
  }
};

// Max pooling over windows of max_len / K positions (padding excluded). It has no
// parameters, whatever the sharing.
class MaxPoolPath final : public ReduceKeysPath {
 public:
  const char* name() const override { return "max_pool"; }
  bool runs(const Config& cfg) const override {
    return is_linformer(cfg) && cfg.projection == Projection::max_pool;
  }
  void variants(const Config& base, std::vector<AttentionVariant>& out) const override {
    add_variants(base, {Sharing::none, Sharing::headwise, Sharing::kv, Sharing::layerwise},
                 {Projection::max_pool}, out);
  }
  std::vector<PathTensor> tensors(const Config&, int64_t) const override { return {}; }

 private:
  // The positions max pooling chose, [B,K,D] each, for backward.
  void take_more(Carver& c, LinformerAct& A, const Config& cfg, const PathShape& s) const override {
    A.argk = c.take<int32_t>(s.B * s.K * cfg.d_model);
    A.argv = c.take<int32_t>(s.B * s.K * cfg.d_model);
  }
  void reduce(const LayerContext& c, const LayerParams& lp, LinformerAct& A) const override {
    const PoolDims d = dims(c, lp);
    max_pool_forward(A.kp, A.argk, A.kv.k, c.mask, d);
    max_pool_forward(A.vp, A.argv, A.kv.v, c.mask, d);
  }
  void reduce_backward(const LayerContext& c, const LayerParams& lp, const LinformerAct& A,
                       float* dk, float* dv, const float* dkp, const float* dvp) const override {
    const PoolDims d = dims(c, lp);
    max_pool_backward(dk, dkp, A.argk, d);
    max_pool_backward(dv, dvp, A.argv, d);
  }
  // Keys or values [B,N,D] pooled to [B,rows,D] over windows of max_len / K positions.
  static PoolDims dims(const LayerContext& c, const LayerParams& lp) {
    return PoolDims{/*B=*/c.B, /*N=*/c.N, /*K=*/c.proj_rows(lp), /*w=*/c.cfg->max_len / lp.K,
                    /*C=*/c.cfg->d_model};
  }
  double reduce_flops(const Config&, double, double) const override { return 0.0; }
};

}  // namespace

const AttentionPath& project_input_path() {
  static const ProjectInputPath p;
  return p;
}
const AttentionPath& project_keys_path() {
  static const ProjectKeysPath p;
  return p;
}
const AttentionPath& max_pool_path() {
  static const MaxPoolPath p;
  return p;
}

}  // namespace lf
