// Encoder forward/backward. See docs/model.md for the function computed.
#include "linformer/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "core/buffer.h"
#include "core/limits.h"
#include "core/parallel.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/packed_linear.h"
#include "layers/attention.h"
#include "linformer/error.h"
#include "linformer/rng.h"

namespace lf {

namespace {

// Stable 64-bit hash of a parameter name (FNV-1a): names key the init random streams.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Dropout sites, used to derive independent random streams.
enum Site : uint64_t { kEmb = 1, kAttnProbs, kAttnOut, kFfnOut, kClsIn, kClsHidden };

// How a layer evaluates its attention.
enum class Path {
  standard,       // full n x n attention
  project_input,  // Linformer, one E per layer applied to the layer input (linear-kind E)
  project_keys,   // Linformer, per-head E applied to K and V after the linear maps
  max_pool        // Linformer, max pooling of K and V
};

struct Linear {
  float *w = nullptr, *b = nullptr;
  PackedLinear packed;  // inference copy of w in the compute type (when packed)
};
struct Norm {
  float *w = nullptr, *b = nullptr;
};

// A projection matrix as used by the engine: `heads` (1 when shared by heads) blocks of
// [k, max_len]. `param` points at learned E values (linear), or E is materialised in `eff`
// (mean_pool: fixed; conv: rebuilt from the kernel every forward).
struct Slot {
  int64_t heads = 1, k = 0, window = 0;
  const ParamInfo* param = nullptr;
  Buffer<float> eff, deff;  // materialised E and its gradient (mean_pool / conv)
};

struct LayerParams {
  Linear q, k, v, ao, inter, out;
  Norm ln_attn, ln_out;
  int slot_k = -1, slot_v = -1;
  int64_t K = 0;  // projected length
  Path path = Path::standard;
};

// Activations of one layer. In inference all layers share one set.
struct LayerAct {
  float *ln1 = nullptr;                      // pre-norm: LN_attn(x) [R,D]
  float *q = nullptr, *k = nullptr, *v = nullptr;  // [R,D]
  float *xpk = nullptr, *xpv = nullptr;      // projected inputs [B,K,D]
  float *emk = nullptr, *emv = nullptr;      // E m [B,K]
  float *ebmk = nullptr, *ebmv = nullptr;    // E diag(m) [B,K,N]
  float *kp = nullptr, *vp = nullptr;        // projected keys/values [B,K,D]
  int32_t *argk = nullptr, *argv = nullptr;  // max-pool choices [B,K,D]
  float* probs = nullptr;                    // [B,H,N,Lk] (training only)
  float* ctx = nullptr;                      // [R,D]
  float* a = nullptr;                        // x + attention branch [R,D]
  float *mean1 = nullptr, *rstd1 = nullptr, *mean2 = nullptr, *rstd2 = nullptr;  // [R]
  float* ffn_in = nullptr;                   // [R,D]
  float *h = nullptr, *g = nullptr;          // pre/post GELU [R,F]
  float* f = nullptr;                        // post-norm: ffn_in + FFN branch [R,D]
};

// Where every activation lives for one (B, N, train) shape: carved from the arena.
struct Layout {
  std::vector<LayerAct> acts;
  std::vector<float*> xs;  // layer inputs x[0..L]
  float *emb = nullptr, *emb_mean = nullptr, *emb_rstd = nullptr;
  float* hid = nullptr;  // hidden states [R,D]
  float *fin_mean = nullptr, *fin_rstd = nullptr;
  float* scratch = nullptr;  // per-thread attention tiles
  float* tmp = nullptr;      // [R,D]
  // Backward buffers.
  float *dhid = nullptr, *dres = nullptr, *d1 = nullptr, *d2 = nullptr, *dctx = nullptr,
        *dq = nullptr, *dK = nullptr, *dV = nullptr, *dkk = nullptr, *dvv = nullptr,
        *dxpk = nullptr, *dxpv = nullptr, *demk = nullptr, *demv = nullptr, *dG = nullptr,
        *dH = nullptr, *proj_scratch = nullptr;
  // Inference: per-thread row-block workspace (see layer_forward_infer).
  float* work = nullptr;
  int64_t work_floats = 0;  // per thread
  int64_t chunk = 0;        // query rows per block
};

// Inference processes each layer in blocks of at most this many rows of one sequence.
constexpr int64_t kInferRows = 256;
// Columns of E diag(m) formed at a time by the low-memory sequence projection.
constexpr int64_t kProjColumns = 512;

}  // namespace

struct Model::Impl : Layout {
  Config cfg;
  std::vector<ParamInfo> table;
  std::unordered_map<std::string, size_t> index;
  Buffer<float> params, grads;
  std::vector<Slot> slots;
  std::vector<LayerParams> layers;
  Norm emb_ln, final_ln, lm_ln;
  Linear lm_dense, cls_dense, cls_out;
  float *word = nullptr, *pos = nullptr, *type = nullptr, *lm_bias = nullptr;

  // Current batch.
  int64_t B = 0, N = 0;
  bool train = false;
  uint64_t seed = 0;
  const int32_t* ids = nullptr;
  const float* mask = nullptr;
  Buffer<int32_t> ids_copy;
  Buffer<float> mask_copy;

  // Activation arena (its layout is the Layout base).
  Arena arena;
  bool have_grad_batch = false;
  // Inference option: how standard attention is computed (Model::set_exact_attention).
  Model::ExactAttention exact = Model::ExactAttention::tiled;
  // Inference option: precision of the encoder's linear maps (Model::set_compute_type). Their
  // weights are packed on the first inference forward after any parameter change.
  ComputeType compute = ComputeType::f32;
  bool packed_current = false;
  size_t input_copies = 0;  // input_copy_bytes() of the inference forwards so far

  // Head workspace.
  Arena head_arena;

  // The gradient buffer, allocated (zeroed) on first use.
  float* gbase() {
    if (grads.size() != params.size()) {
      grads.resize(params.size());
      grads.zero();
    }
    return grads.data();
  }
  float* grad_of(const float* p) { return gbase() + (p - params.data()); }

  float* P(const std::string& name) {
    auto it = index.find(name);
    LF_CHECK(it != index.end(), "model: no parameter named '", name, "'");
    return params.data() + table[it->second].offset;
  }
  const ParamInfo* info(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &table[it->second];
  }
  Linear lin(const std::string& prefix) {
    Linear l;
    l.w = P(prefix + ".weight");
    l.b = P(prefix + ".bias");
    return l;
  }
  Norm norm(const std::string& prefix) { return {P(prefix + ".weight"), P(prefix + ".bias")}; }

  explicit Impl(const Config& c) : cfg(c) {
    table = param_table(cfg);
    size_t total = 0;
    for (size_t i = 0; i < table.size(); ++i) {
      index[table[i].name] = i;
      total = std::max(total, table[i].offset + (table[i].numel + 15) / 16 * 16);
    }
    require_memory(4.0 * static_cast<double>(total),
                   "model: " + std::to_string(total) + " parameters (4 bytes each)");
    params.resize(total);
    params.zero();
    // Gradients are allocated on first use (ensure_grads): inference never needs them.
    word = P("roberta.embeddings.word_embeddings.weight");
    pos = P("roberta.embeddings.position_embeddings.weight");
    type = P("roberta.embeddings.token_type_embeddings.weight");
    emb_ln = norm("roberta.embeddings.LayerNorm");
    if (cfg.norm == NormPlacement::pre) final_ln = norm("roberta.encoder.final_layer_norm");
    lm_dense = lin("lm_head.dense");
    lm_ln = norm("lm_head.layer_norm");
    lm_bias = P("lm_head.bias");
    cls_dense = lin("classifier.dense");
    cls_out = lin("classifier.out_proj");
    build_layers();
  }

  int add_slot(const std::string& name, int64_t heads, int64_t k) {
    Slot s;
    s.heads = heads;
    s.k = k;
    s.window = cfg.max_len / k;
    s.param = info(name);
    if (cfg.projection == Projection::mean_pool || cfg.projection == Projection::conv) {
      s.eff.resize(heads * k * cfg.max_len);
      s.eff.zero();
      if (cfg.projection == Projection::conv) {
        s.deff.resize(heads * k * cfg.max_len);
        s.deff.zero();
      }
      if (cfg.projection == Projection::mean_pool)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t j = 0; j < k; ++j)
            for (int64_t u = 0; u < s.window; ++u)
              s.eff[(h * k + j) * cfg.max_len + j * s.window + u] = 1.f / s.window;
    }
    slots.push_back(std::move(s));
    return static_cast<int>(slots.size() - 1);
  }

  void build_layers() {
    int shared_slot = -1;
    if (cfg.is_linformer() && cfg.sharing == Sharing::layerwise)
      shared_slot = add_slot("roberta.encoder.kv_proj.weight", 1, cfg.k_of(0));
    for (int64_t l = 0; l < cfg.n_layers; ++l) {
      const std::string p = "roberta.encoder.layer." + std::to_string(l) + ".";
      LayerParams L;
      L.q = lin(p + "attention.self.query");
      L.k = lin(p + "attention.self.key");
      L.v = lin(p + "attention.self.value");
      L.ao = lin(p + "attention.output.dense");
      L.ln_attn = norm(p + "attention.output.LayerNorm");
      L.inter = lin(p + "intermediate.dense");
      L.out = lin(p + "output.dense");
      L.ln_out = norm(p + "output.LayerNorm");
      if (cfg.is_linformer()) {
        L.K = cfg.k_of(l);
        switch (cfg.sharing) {
          case Sharing::none:
            L.slot_k = add_slot(p + "attention.self.key_proj.weight", cfg.n_heads, L.K);
            L.slot_v = add_slot(p + "attention.self.value_proj.weight", cfg.n_heads, L.K);
            break;
          case Sharing::headwise:
            L.slot_k = add_slot(p + "attention.self.key_proj.weight", 1, L.K);
            L.slot_v = add_slot(p + "attention.self.value_proj.weight", 1, L.K);
            break;
          case Sharing::kv:
            L.slot_k = L.slot_v = add_slot(p + "attention.self.kv_proj.weight", 1, L.K);
            break;
          case Sharing::layerwise:
            L.slot_k = L.slot_v = shared_slot;
            break;
        }
        if (cfg.projection == Projection::max_pool)
          L.path = Path::max_pool;
        else if (cfg.sharing == Sharing::none)
          L.path = Path::project_keys;
        else
          L.path = Path::project_input;
      }
      layers.push_back(std::move(L));
    }
  }

  // The E matrix of a slot (learned values, or the materialised one).
  const float* slot_E(const Slot& s) const {
    if (cfg.projection == Projection::linear) return params.data() + s.param->offset;
    return s.eff.data();
  }
  // Where the gradient of E goes (null for fixed mean pooling).
  float* slot_dE(Slot& s) {
    if (cfg.projection == Projection::linear) return gbase() + s.param->offset;
    if (cfg.projection == Projection::conv) return s.deff.data();
    return nullptr;
  }
  // Rebuilds convolution matrices from their kernels.
  void refresh_conv_slots() {
    if (cfg.projection != Projection::conv) return;
    for (Slot& s : slots) {
      const float* c = params.data() + s.param->offset;
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t j = 0; j < s.k; ++j)
          for (int64_t u = 0; u < s.window; ++u)
            s.eff[(h * s.k + j) * cfg.max_len + j * s.window + u] = c[h * s.window + u];
    }
  }
  // Folds a convolution matrix gradient into its kernel gradient, then clears it.
  void reduce_conv_grad(Slot& s) {
    if (cfg.projection != Projection::conv) return;
    float* dc = gbase() + s.param->offset;
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t j = 0; j < s.k; ++j)
        for (int64_t u = 0; u < s.window; ++u) {
          float& e = s.deff[(h * s.k + j) * cfg.max_len + j * s.window + u];
          dc[h * s.window + u] += e;
        }
    s.deff.zero();
  }

  // f(linear, out, in) for the encoder's linear maps with their weight shapes [out, in]; the
  // layer list may be const or not.
  template <typename Layers, typename F>
  static void for_each_encoder_linear(Layers& ls, const Config& cfg, F f) {
    const int64_t D = cfg.d_model, Fd = cfg.d_ff;
    for (auto& lp : ls) {
      for (auto* l : {&lp.q, &lp.k, &lp.v, &lp.ao}) f(*l, D, D);
      f(lp.inter, Fd, D);
      f(lp.out, D, Fd);
    }
  }
  // Packs the weights for the compute type if they changed since the last packing.
  void ensure_packed() {
    if (packed_current) return;
    for_each_encoder_linear(layers, cfg, [&](Linear& l, int64_t out, int64_t in) {
      l.packed.pack(l.w, out, in, compute);
    });
    packed_current = true;
  }
  // Parameters may have changed: drop the packed copies (repacked when next needed).
  void weights_changed() {
    if (!packed_current) return;
    for_each_encoder_linear(layers, cfg,
                            [](Linear& l, int64_t, int64_t) { l.packed = PackedLinear(); });
    packed_current = false;
  }
  // Bytes of the packed weights: held now, or (before packing) what packing will take.
  size_t packed_bytes() const {
    size_t b = 0;
    for_each_encoder_linear(layers, cfg, [&](const Linear& l, int64_t out, int64_t in) {
      b += packed_current ? l.packed.bytes() : PackedLinear::packed_bytes(out, in, compute);
    });
    return b;
  }

  using Epi = PackedLinear::Epilogue;

  // Query rows per inference block for a batch of shape (B, N): kInferRows, halved while
  // there would be fewer than two blocks per thread.
  static int64_t infer_chunk(int64_t B, int64_t N) {
    int64_t c = std::min<int64_t>(kInferRows, N);
    const int64_t want = 2 * num_threads();
    while (c > 32 && B * ((N + c - 1) / c) < want) c = (c + 1) / 2;
    return std::max<int64_t>(c, 1);
  }

  // Lays out every activation for (B, N, train, masked) into `out`; with a null arena only
  // counts bytes (out then holds null pointers). Returns the bytes needed.
  size_t carve(Arena* ar, Layout& out, int64_t B, int64_t N, bool train, bool masked) const {
    if (!train) return carve_infer(ar, out, B, N, masked);
    Carver c{ar};
    Layout Lo;
    const int64_t R = B * N, D = cfg.d_model, F = cfg.d_ff, H = cfg.n_heads, L = cfg.n_layers;
    int64_t maxK = 0;
    for (auto& l : layers) maxK = std::max(maxK, l.K);
    const int64_t RK = B * maxK;
    const bool pre = cfg.norm == NormPlacement::pre;
    Lo.acts.assign(L, LayerAct{});
    int64_t max_tile = 0;
    for (int64_t s = 0; s < L; ++s) {
      LayerAct& A = Lo.acts[s];
      const LayerParams& lp = layers[s];
      const int64_t K = lp.K;
      auto need = [&](Path p) { return lp.path == p; };
      if (pre) A.ln1 = c.take<float>(R * D);
      A.q = c.take<float>(R * D);
      if (need(Path::standard) || need(Path::project_keys) || need(Path::max_pool)) {
        A.k = c.take<float>(R * D);
        A.v = c.take<float>(R * D);
      }
      if (need(Path::project_input)) {
        const bool shared = cfg.sharing == Sharing::kv || cfg.sharing == Sharing::layerwise;
        A.xpk = c.take<float>(B * K * D);
        A.emk = c.take<float>(B * K);
        if (masked) A.ebmk = c.take<float>(B * K * N);
        if (shared) {
          A.xpv = A.xpk, A.emv = A.emk, A.ebmv = A.ebmk;
        } else {
          A.xpv = c.take<float>(B * K * D);
          A.emv = c.take<float>(B * K);
          if (masked) A.ebmv = c.take<float>(B * K * N);
        }
      }
      if (cfg.is_linformer()) {
        A.kp = c.take<float>(B * K * D);
        A.vp = c.take<float>(B * K * D);
      }
      if (need(Path::max_pool)) {
        A.argk = c.take<int32_t>(B * K * D);
        A.argv = c.take<int32_t>(B * K * D);
      }
      const int64_t Lk = cfg.is_linformer() ? K : N;
      max_tile = std::max(max_tile, Lk);
      A.probs = c.take<float>(B * H * N * Lk);
      A.ctx = c.take<float>(R * D);
      A.a = c.take<float>(R * D);
      A.mean1 = c.take<float>(R);
      A.rstd1 = c.take<float>(R);
      A.mean2 = c.take<float>(R);
      A.rstd2 = c.take<float>(R);
      A.ffn_in = c.take<float>(R * D);
      A.h = c.take<float>(R * F);
      A.g = c.take<float>(R * F);
      if (!pre) A.f = c.take<float>(R * D);
    }
    Lo.xs.assign(L + 1, nullptr);
    for (int64_t l = 0; l <= L; ++l) Lo.xs[l] = c.take<float>(R * D);
    Lo.emb = c.take<float>(R * D);
    Lo.emb_mean = c.take<float>(R);
    Lo.emb_rstd = c.take<float>(R);
    Lo.hid = pre ? c.take<float>(R * D) : Lo.xs[L];
    Lo.fin_mean = c.take<float>(R);
    Lo.fin_rstd = c.take<float>(R);
    Lo.tmp = c.take<float>(R * D);
    AttnDims d{B, N, max_tile, D, H, cfg.d_head()};
    Lo.scratch = c.take<float>(attention_scratch_floats(d) * num_threads());
    const int64_t RKD = std::max(R, RK) * D;
    Lo.dhid = c.take<float>(R * D);
    Lo.dres = c.take<float>(R * D);
    Lo.d1 = c.take<float>(R * D);
    Lo.d2 = c.take<float>(R * D);
    Lo.dctx = c.take<float>(R * D);
    Lo.dq = c.take<float>(R * D);
    Lo.dK = c.take<float>(R * D);
    Lo.dV = c.take<float>(R * D);
    Lo.dkk = c.take<float>(RKD);
    Lo.dvv = c.take<float>(RKD);
    Lo.dxpk = c.take<float>(RK * D);
    Lo.dxpv = c.take<float>(RK * D);
    Lo.demk = c.take<float>(RK);
    Lo.demv = c.take<float>(RK);
    Lo.dG = c.take<float>(R * F);
    Lo.dH = c.take<float>(R * F);
    Lo.proj_scratch = c.take<float>(maxK * N);
    out = std::move(Lo);
    return c.bytes;
  }

  // Inference layout. Layers run one after another on two [R,D] buffers; within a layer only
  // what every query needs is whole-batch (keys and values, or their projections; for plain
  // standard attention also Q and the context), and the rest (Q, attention, output map,
  // LayerNorms, FFN) runs in blocks of `chunk` rows with per-thread workspace. Memory per
  // token: Linformer (shared E) 2 D floats, streaming 4 D, standard 6 D plus one N x N score
  // tile per thread (tiled) or H N floats (materialized); the [R,F] FFN activation never
  // exists, nor, except for materialized standard attention, the [B,H,N,Lk] probabilities.
  size_t carve_infer(Arena* ar, Layout& out, int64_t B, int64_t N, bool masked) const {
    Carver c{ar};
    Layout Lo;
    const int64_t R = B * N, D = cfg.d_model, F = cfg.d_ff, H = cfg.n_heads, L = cfg.n_layers;
    const int64_t T = num_threads();
    int64_t maxK = 0;
    for (auto& l : layers) maxK = std::max(maxK, l.K);
    const bool pre = cfg.norm == NormPlacement::pre;
    const Path path = layers.empty() ? Path::standard : layers[0].path;
    const bool stream = exact == Model::ExactAttention::streaming && path == Path::standard;
    Lo.acts.assign(L, LayerAct{});
    LayerAct& A = Lo.acts[0];
    if (pre) A.ln1 = c.take<float>(R * D);
    switch (path) {
      case Path::standard:
        A.k = c.take<float>(R * D);
        A.v = c.take<float>(R * D);
        if (!stream) {
          A.q = c.take<float>(R * D);
          A.ctx = c.take<float>(R * D);
          if (exact == Model::ExactAttention::materialized) {
            A.probs = c.take<float>(B * H * N * N);
          } else {
            AttnDims d{B, N, N, D, H, cfg.d_head()};
            Lo.scratch = c.take<float>(attention_scratch_floats(d, false) * T);
          }
        }
        break;
      case Path::project_input: {
        const bool shared = cfg.sharing == Sharing::kv || cfg.sharing == Sharing::layerwise;
        A.xpk = c.take<float>(B * maxK * D);
        A.emk = c.take<float>(B * maxK);
        if (shared) {
          A.xpv = A.xpk, A.emv = A.emk;
        } else {
          A.xpv = c.take<float>(B * maxK * D);
          A.emv = c.take<float>(B * maxK);
        }
        if (masked) Lo.proj_scratch = c.take<float>(maxK * std::min(N, kProjColumns));
        break;
      }
      case Path::project_keys:
        A.k = c.take<float>(R * D);
        A.v = c.take<float>(R * D);
        break;
      case Path::max_pool:
        A.k = c.take<float>(R * D);
        A.v = c.take<float>(R * D);
        A.argk = c.take<int32_t>(B * maxK * D);
        A.argv = c.take<int32_t>(B * maxK * D);
        break;
    }
    if (cfg.is_linformer()) {
      A.kp = c.take<float>(B * maxK * D);
      A.vp = c.take<float>(B * maxK * D);
    }
    for (int64_t s = 1; s < L; ++s) Lo.acts[s] = A;
    float* x0 = c.take<float>(R * D);
    float* x1 = c.take<float>(R * D);
    Lo.xs.assign(L + 1, nullptr);
    for (int64_t l = 0; l <= L; ++l) Lo.xs[l] = (l % 2) ? x1 : x0;
    Lo.emb = x0;              // embeddings are normalised in place
    Lo.hid = Lo.xs[L];        // pre-norm: the final LayerNorm runs in place
    // Per-thread row-block workspace: q, ctx, attention-output/residual, FFN input [c,D];
    // FFN hidden [c,F]; attention scores.
    const int64_t ch = infer_chunk(B, N);
    AttnDims d{B, N, cfg.is_linformer() ? maxK : N, D, H, cfg.d_head()};
    int64_t att = 0;
    if (cfg.is_linformer()) att = attention_rows_work_floats(ch, d);
    else if (stream) att = attention_streaming_work_floats(ch, d);
    const int64_t wf = (4 * ch * D + ch * F + att + 15) / 16 * 16;
    Lo.work = c.take<float>(wf * T);
    Lo.work_floats = wf;
    Lo.chunk = ch;
    out = std::move(Lo);
    return c.bytes;
  }

  // Bytes of activations and scratch forward() needs for this shape (no allocation).
  size_t forward_bytes(int64_t B, int64_t N, bool train, bool masked) const {
    Layout tmp_layout;
    return carve(nullptr, tmp_layout, B, N, train, masked) + (train ? 0 : input_copy_bytes());
  }
  // Per-thread bf16 copies of product inputs the packed linear maps hold (upper bound).
  size_t input_copy_bytes() const {
    return num_threads() *
           PackedLinear::scratch_bytes(std::max(cfg.d_model, cfg.d_ff), compute);
  }

  void forward(const Batch& batch, bool is_train, uint64_t dropout_seed) {
    LF_CHECK(batch.B > 0 && batch.N > 0, "forward: empty batch (B=", batch.B, ", N=", batch.N, ")");
    LF_CHECK(batch.N <= cfg.max_len, "forward: sequence length ", batch.N,
             " exceeds the model's max_len ", cfg.max_len);
    LF_CHECK(batch.ids, "forward: no input ids");
    check_forward_shape(cfg, batch.B, batch.N);
    const int64_t R = batch.B * batch.N;
    for (int64_t i = 0; i < R; ++i)
      LF_CHECK(batch.ids[i] >= 0 && batch.ids[i] < cfg.vocab_size, "forward: token id ",
               batch.ids[i], " at position ", i, " is outside the vocabulary [0, ",
               cfg.vocab_size, ")");
    B = batch.B;
    N = batch.N;
    train = is_train;
    seed = dropout_seed;
    // Keep our own copies: backward() runs after the caller's buffers may be gone.
    ids_copy.resize(R);
    std::memcpy(ids_copy.data(), batch.ids, R * sizeof(int32_t));
    ids = ids_copy.data();
    mask = nullptr;
    if (batch.mask) {
      bool all_real = true;
      for (int64_t i = 0; i < R; ++i) {
        LF_CHECK(batch.mask[i] == 0.f || batch.mask[i] == 1.f,
                 "forward: attention_mask must hold 0 or 1, found ", batch.mask[i]);
        all_real = all_real && batch.mask[i] == 1.f;
      }
      if (!all_real) {
        mask_copy.resize(R);
        std::memcpy(mask_copy.data(), batch.mask, R * sizeof(float));
        mask = mask_copy.data();
      }
    }
    {
      Layout lay;
      const size_t need = carve(nullptr, lay, B, N, train, mask != nullptr);
      arena.reset();
      arena.reserve(need);
      arena.reset();
      carve(&arena, lay, B, N, train, mask != nullptr);
      static_cast<Layout&>(*this) = std::move(lay);
    }
    have_grad_batch = train;
    if (train) {
      weights_changed();  // a training step follows: packed copies would go stale
      gbase();
      std::memset(dhid, 0, R * cfg.d_model * sizeof(float));
    } else {
      ensure_packed();
      input_copies = std::max(input_copies, input_copy_bytes());
    }
    refresh_conv_slots();

    const int64_t D = cfg.d_model;
    const float p = train ? cfg.dropout : 0.f;
    embedding_forward(emb, ids, word, pos, type, B, N, D, cfg.position_offset);
    layernorm_forward(xs[0], emb_mean, emb_rstd, emb, emb_ln.w, emb_ln.b, R, D,
                      cfg.layer_norm_eps);
    dropout_forward(xs[0], xs[0], R * D, p, seed, rng_stream(kEmb));
    for (int64_t l = 0; l < cfg.n_layers; ++l) {
      if (train)
        layer_forward(l, xs[l], xs[l + 1]);
      else
        layer_forward_infer(l, xs[l], xs[l + 1]);
    }
    if (cfg.norm == NormPlacement::pre)
      layernorm_forward(hid, fin_mean, fin_rstd, xs[cfg.n_layers], final_ln.w, final_ln.b, R, D,
                        cfg.layer_norm_eps);
  }

  AttnDims dims(const LayerParams& lp) const {
    return AttnDims{B,           N,           cfg.is_linformer() ? lp.K : N, cfg.d_model,
                    cfg.n_heads, cfg.d_head(), cfg.causal};
  }

  // Adds em[r] * bias[c] to rows of out [rows, C].
  static void add_scaled_bias(float* out, const float* em, const float* bias, int64_t rows,
                              int64_t C) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < C; ++c) out[r * C + c] += em[r] * bias[c];
  }

  // Zeroes rows of x [B*N, C] at padded positions.
  void zero_padded_rows(float* x, int64_t C) const {
    if (!mask) return;
    for (int64_t r = 0; r < B * N; ++r)
      if (mask[r] == 0.f) std::memset(x + r * C, 0, C * sizeof(float));
  }

  // kp_bh = E_h[:, :N] x_bh for every batch element and head (x [B,N,D], kp [B,K,D]).
  void project_heads_forward(float* kp, const float* x, const Slot& s, int64_t K) {
    const int64_t D = cfg.d_model, H = cfg.n_heads, Dh = cfg.d_head();
    const float* E = slot_E(s);
    parallel_for(0, B * H, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t bh = i0; bh < i1; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        const float* Eh = E + (s.heads > 1 ? h * K * cfg.max_len : 0);
        gemm(false, false, K, Dh, N, 1.f, Eh, cfg.max_len, x + b * N * D + h * Dh, D, 0.f,
             kp + b * K * D + h * Dh, D);
      }
    });
  }
  void project_heads_backward(float* dx, float* dE, const float* dkp, const float* x,
                              const Slot& s, int64_t K) {
    const int64_t D = cfg.d_model, H = cfg.n_heads, Dh = cfg.d_head();
    const float* E = slot_E(s);
    // Parallel over heads; batch elements in sequence, since they share dE_h.
    parallel_for(0, H, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t eo = s.heads > 1 ? h * K * cfg.max_len : 0;
        for (int64_t b = 0; b < B; ++b) {
          const float* g = dkp + b * K * D + h * Dh;
          gemm(true, false, N, Dh, K, 1.f, E + eo, cfg.max_len, g, D, 1.f, dx + b * N * D + h * Dh,
               D);
          if (dE)
            gemm(false, true, K, N, Dh, 1.f, g, D, x + b * N * D + h * Dh, D, 1.f, dE + eo,
                 cfg.max_len);
        }
      }
    });
  }

  void layer_forward(int64_t l, const float* x_in, float* x_out) {
    const LayerParams& lp = layers[l];
    LayerAct& A = acts[l];
    const int64_t R = B * N, D = cfg.d_model, F = cfg.d_ff;
    const float eps = cfg.layer_norm_eps;
    const float p = train ? cfg.dropout : 0.f;
    const float pa = train ? cfg.attention_dropout : 0.f;
    const bool pre = cfg.norm == NormPlacement::pre;

    const float* attn_in = x_in;
    if (pre) {
      layernorm_forward(A.ln1, A.mean1, A.rstd1, x_in, lp.ln_attn.w, lp.ln_attn.b, R, D, eps);
      attn_in = A.ln1;
    }
    linear_forward(A.q, attn_in, lp.q.w, lp.q.b, R, D, D);
    const float *kk = nullptr, *vv = nullptr, *key_mask = nullptr;
    const int64_t K = lp.K;
    switch (lp.path) {
      case Path::standard:
        linear_forward(A.k, attn_in, lp.k.w, lp.k.b, R, D, D);
        linear_forward(A.v, attn_in, lp.v.w, lp.v.b, R, D, D);
        kk = A.k, vv = A.v, key_mask = mask;
        break;
      case Path::project_input: {
        const Slot& sk = slots[lp.slot_k];
        seq_project_forward(A.xpk, D, A.emk, A.ebmk, slot_E(sk), cfg.max_len, attn_in, D, mask, B,
                            N, K, D);
        if (lp.slot_v != lp.slot_k)
          seq_project_forward(A.xpv, D, A.emv, A.ebmv, slot_E(slots[lp.slot_v]), cfg.max_len,
                              attn_in, D, mask, B, N, K, D);
        linear_forward(A.kp, A.xpk, lp.k.w, nullptr, B * K, D, D);
        add_scaled_bias(A.kp, A.emk, lp.k.b, B * K, D);
        linear_forward(A.vp, A.xpv, lp.v.w, nullptr, B * K, D, D);
        add_scaled_bias(A.vp, A.emv, lp.v.b, B * K, D);
        kk = A.kp, vv = A.vp;
        break;
      }
      case Path::project_keys:
        linear_forward(A.k, attn_in, lp.k.w, lp.k.b, R, D, D);
        linear_forward(A.v, attn_in, lp.v.w, lp.v.b, R, D, D);
        zero_padded_rows(A.k, D);
        zero_padded_rows(A.v, D);
        project_heads_forward(A.kp, A.k, slots[lp.slot_k], K);
        project_heads_forward(A.vp, A.v, slots[lp.slot_v], K);
        kk = A.kp, vv = A.vp;
        break;
      case Path::max_pool: {
        const int64_t w = cfg.max_len / K;
        linear_forward(A.k, attn_in, lp.k.w, lp.k.b, R, D, D);
        linear_forward(A.v, attn_in, lp.v.w, lp.v.b, R, D, D);
        max_pool_forward(A.kp, A.argk, A.k, mask, B, N, K, w, D);
        max_pool_forward(A.vp, A.argv, A.v, mask, B, N, K, w, D);
        kk = A.kp, vv = A.vp;
        break;
      }
    }
    const AttnDims d = dims(lp);
    const float scale = 1.f / std::sqrt(static_cast<float>(cfg.d_head()));
    attention_forward(A.ctx, train ? A.probs : nullptr, A.q, kk, vv, key_mask, d, scale, pa, seed,
                      rng_stream(kAttnProbs, l), scratch);
    linear_forward(tmp, A.ctx, lp.ao.w, lp.ao.b, R, D, D);
    dropout_forward(tmp, tmp, R * D, p, seed, rng_stream(kAttnOut, l));
    for (int64_t i = 0; i < R * D; ++i) A.a[i] = x_in[i] + tmp[i];
    const float* ffn_base;
    if (!pre) {
      layernorm_forward(A.ffn_in, A.mean1, A.rstd1, A.a, lp.ln_attn.w, lp.ln_attn.b, R, D, eps);
      ffn_base = A.ffn_in;
    } else {
      layernorm_forward(A.ffn_in, A.mean2, A.rstd2, A.a, lp.ln_out.w, lp.ln_out.b, R, D, eps);
      ffn_base = A.a;
    }
    linear_forward(A.h, A.ffn_in, lp.inter.w, lp.inter.b, R, D, F);
    gelu_forward(A.g, A.h, R * F);
    linear_forward(tmp, A.g, lp.out.w, lp.out.b, R, F, D);
    dropout_forward(tmp, tmp, R * D, p, seed, rng_stream(kFfnOut, l));
    if (!pre) {
      for (int64_t i = 0; i < R * D; ++i) A.f[i] = ffn_base[i] + tmp[i];
      layernorm_forward(x_out, A.mean2, A.rstd2, A.f, lp.ln_out.w, lp.ln_out.b, R, D, eps);
    } else {
      for (int64_t i = 0; i < R * D; ++i) x_out[i] = ffn_base[i] + tmp[i];
    }
  }

  // Inference layer (train = false): the function of layer_forward without dropout, laid out
  // by carve_infer. Whole-batch steps first (keys/values or their projections), then blocks
  // of query rows, one per thread at a time, each running Q, attention, the output map,
  // residual + LayerNorm and the FFN with single-threaded GEMMs on per-thread workspace.
  void layer_forward_infer(int64_t l, const float* x_in, float* x_out) {
    const LayerParams& lp = layers[l];
    LayerAct& A = acts[l];
    const int64_t R = B * N, D = cfg.d_model, F = cfg.d_ff;
    const float eps = cfg.layer_norm_eps;
    const bool pre = cfg.norm == NormPlacement::pre;
    const float scale = 1.f / std::sqrt(static_cast<float>(cfg.d_head()));
    const AttnDims d = dims(lp);
    const float* attn_in = x_in;
    if (pre) {
      layernorm_forward(A.ln1, nullptr, nullptr, x_in, lp.ln_attn.w, lp.ln_attn.b, R, D, eps);
      attn_in = A.ln1;
    }
    const float *kk = nullptr, *vv = nullptr, *key_mask = nullptr, *ctx_all = nullptr;
    const int64_t K = lp.K;
    switch (lp.path) {
      case Path::standard:
        lp.k.packed.apply(A.k, attn_in, R, lp.k.b, Epi::store);
        lp.v.packed.apply(A.v, attn_in, R, lp.v.b, Epi::store);
        kk = A.k, vv = A.v, key_mask = mask;
        if (exact != Model::ExactAttention::streaming) {
          // The textbook algorithm: full N x N score matrices, one per thread at a time
          // (tiled) or all of the batch at once (materialized, into A.probs).
          lp.q.packed.apply(A.q, attn_in, R, lp.q.b, Epi::store);
          attention_forward(A.ctx, A.probs, A.q, kk, vv, key_mask, d, scale, 0.f, 0, 0, scratch);
          ctx_all = A.ctx;
        }
        break;
      case Path::project_input: {
        const Slot& sk = slots[lp.slot_k];
        seq_project_forward_lowmem(A.xpk, D, A.emk, slot_E(sk), cfg.max_len, attn_in, D, mask, B,
                                   N, K, D, proj_scratch, kProjColumns);
        if (lp.slot_v != lp.slot_k)
          seq_project_forward_lowmem(A.xpv, D, A.emv, slot_E(slots[lp.slot_v]), cfg.max_len,
                                     attn_in, D, mask, B, N, K, D, proj_scratch, kProjColumns);
        lp.k.packed.apply(A.kp, A.xpk, B * K, nullptr, Epi::store);
        add_scaled_bias(A.kp, A.emk, lp.k.b, B * K, D);
        lp.v.packed.apply(A.vp, A.xpv, B * K, nullptr, Epi::store);
        add_scaled_bias(A.vp, A.emv, lp.v.b, B * K, D);
        kk = A.kp, vv = A.vp;
        break;
      }
      case Path::project_keys:
        lp.k.packed.apply(A.k, attn_in, R, lp.k.b, Epi::store);
        lp.v.packed.apply(A.v, attn_in, R, lp.v.b, Epi::store);
        zero_padded_rows(A.k, D);
        zero_padded_rows(A.v, D);
        project_heads_forward(A.kp, A.k, slots[lp.slot_k], K);
        project_heads_forward(A.vp, A.v, slots[lp.slot_v], K);
        kk = A.kp, vv = A.vp;
        break;
      case Path::max_pool: {
        const int64_t w = cfg.max_len / K;
        lp.k.packed.apply(A.k, attn_in, R, lp.k.b, Epi::store);
        lp.v.packed.apply(A.v, attn_in, R, lp.v.b, Epi::store);
        max_pool_forward(A.kp, A.argk, A.k, mask, B, N, K, w, D);
        max_pool_forward(A.vp, A.argv, A.v, mask, B, N, K, w, D);
        kk = A.kp, vv = A.vp;
        break;
      }
    }
    const int64_t ch = chunk, nc = (N + ch - 1) / ch;
    const bool stream = lp.path == Path::standard && exact == Model::ExactAttention::streaming;
    // Row blocks are handed out dynamically: the blocks cost the same, but a core shared with
    // another process must not hold back the whole layer.
    const int64_t items = B * nc;
    const int nt = static_cast<int>(std::min<int64_t>(num_threads(), items));
#pragma omp parallel num_threads(nt) if (nt > 1 && !omp_in_parallel())
    {
      float* w = work + omp_get_thread_num() * work_floats;
      float* wq = w;               // [ch, D] queries
      float* wc = wq + ch * D;     // [ch, D] attention context
      float* wa = wc + ch * D;     // [ch, D] x + attention branch
      float* wy = wa + ch * D;     // [ch, D] FFN input
      float* wh = wy + ch * D;     // [ch, F] FFN hidden
      float* watt = wh + ch * F;   // attention scores
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < items; ++t) {
        const int64_t b = t / nc, i0 = (t % nc) * ch, rows = std::min(ch, N - i0);
        const int64_t g = b * N + i0;  // first global row
        const float* xc = x_in + g * D;
        const float* ctx = nullptr;
        if (ctx_all) {
          ctx = ctx_all + g * D;
        } else {
          lp.q.packed.apply(wq, attn_in + g * D, rows, lp.q.b, Epi::store);
          if (stream)
            attention_streaming_rows(wc, wq, kk, vv, key_mask, d, b, i0, i0 + rows, scale, watt);
          else
            attention_rows(wc, wq, kk, vv, key_mask, d, b, i0, i0 + rows, scale, watt);
          ctx = wc;
        }
        // a = x + (ctx Wo^T + bo): residual and bias folded into the GEMM's C.
        for (int64_t r = 0; r < rows; ++r) {
          float* ar = wa + r * D;
          const float* xr = xc + r * D;
#pragma omp simd
          for (int64_t c = 0; c < D; ++c) ar[c] = xr[c] + lp.ao.b[c];
        }
        lp.ao.packed.apply(wa, ctx, rows, nullptr, Epi::accumulate);
        const float* base;
        if (!pre) {
          layernorm_forward(wy, nullptr, nullptr, wa, lp.ln_attn.w, lp.ln_attn.b, rows, D, eps);
          base = wy;
        } else {
          layernorm_forward(wy, nullptr, nullptr, wa, lp.ln_out.w, lp.ln_out.b, rows, D, eps);
          base = wa;
        }
        lp.inter.packed.apply(wh, wy, rows, lp.inter.b, Epi::gelu);
        float* xo = x_out + g * D;
        for (int64_t r = 0; r < rows; ++r) {
          float* o = xo + r * D;
          const float* br = base + r * D;
#pragma omp simd
          for (int64_t c = 0; c < D; ++c) o[c] = br[c] + lp.out.b[c];
        }
        lp.out.packed.apply(xo, wh, rows, nullptr, Epi::accumulate);
        if (!pre)
          layernorm_forward(xo, nullptr, nullptr, xo, lp.ln_out.w, lp.ln_out.b, rows, D, eps);
      }
    }
  }

  static void zero(float* p, int64_t n) { std::memset(p, 0, n * sizeof(float)); }

  // Backward of the attention branch: from d(attention output before dropout) `dao`
  // into d(attention input) `dattn_in` (accumulated).
  void attention_branch_backward(int64_t l, const float* attn_in, float* dattn_in,
                                 const float* dao) {
    const LayerParams& lp = layers[l];
    LayerAct& A = acts[l];
    const int64_t R = B * N, D = cfg.d_model, K = lp.K;
    zero(dctx, R * D);
    linear_backward(dctx, grad_of(lp.ao.w), grad_of(lp.ao.b), dao, A.ctx, lp.ao.w, R, D, D);
    const AttnDims d = dims(lp);
    const int64_t kv_rows = cfg.is_linformer() ? B * K : R;
    zero(dq, R * D);
    zero(dkk, kv_rows * D);
    zero(dvv, kv_rows * D);
    const float* kk = cfg.is_linformer() ? A.kp : A.k;
    const float* vv = cfg.is_linformer() ? A.vp : A.v;
    const float scale = 1.f / std::sqrt(static_cast<float>(cfg.d_head()));
    attention_backward(dq, dkk, dvv, dctx, A.probs, A.q, kk, vv, d, scale,
                       cfg.attention_dropout, seed, rng_stream(kAttnProbs, l), scratch);
    linear_backward(dattn_in, grad_of(lp.q.w), grad_of(lp.q.b), dq, attn_in, lp.q.w, R, D, D);
    switch (lp.path) {
      case Path::standard:
        linear_backward(dattn_in, grad_of(lp.k.w), grad_of(lp.k.b), dkk, attn_in, lp.k.w, R, D, D);
        linear_backward(dattn_in, grad_of(lp.v.w), grad_of(lp.v.b), dvv, attn_in, lp.v.w, R, D, D);
        break;
      case Path::project_input: {
        const bool shared = lp.slot_k == lp.slot_v;
        zero(dxpk, B * K * D);
        zero(demk, B * K);
        float* dxv = shared ? dxpk : dxpv;
        float* demv_ = shared ? demk : demv;
        if (!shared) {
          zero(dxpv, B * K * D);
          zero(demv, B * K);
        }
        linear_backward(dxpk, grad_of(lp.k.w), nullptr, dkk, A.xpk, lp.k.w, B * K, D, D);
        linear_backward(dxv, grad_of(lp.v.w), nullptr, dvv, A.xpv, lp.v.w, B * K, D, D);
        scaled_bias_backward(grad_of(lp.k.b), demk, dkk, A.emk, lp.k.b, B * K, D);
        scaled_bias_backward(grad_of(lp.v.b), demv_, dvv, A.emv, lp.v.b, B * K, D);
        Slot& sk = slots[lp.slot_k];
        seq_project_backward(dattn_in, D, slot_dE(sk), dxpk, D, demk, A.ebmk, slot_E(sk),
                             cfg.max_len, attn_in, mask, B, N, K, D, proj_scratch);
        reduce_conv_grad(sk);
        if (!shared) {
          Slot& sv = slots[lp.slot_v];
          seq_project_backward(dattn_in, D, slot_dE(sv), dxpv, D, demv, A.ebmv, slot_E(sv),
                               cfg.max_len, attn_in, mask, B, N, K, D, proj_scratch);
          reduce_conv_grad(sv);
        }
        break;
      }
      case Path::project_keys: {
        zero(dK, R * D);
        zero(dV, R * D);
        Slot& sk = slots[lp.slot_k];
        Slot& sv = slots[lp.slot_v];
        project_heads_backward(dK, slot_dE(sk), dkk, A.k, sk, K);
        project_heads_backward(dV, slot_dE(sv), dvv, A.v, sv, K);
        reduce_conv_grad(sk);
        reduce_conv_grad(sv);
        zero_padded_rows(dK, D);
        zero_padded_rows(dV, D);
        linear_backward(dattn_in, grad_of(lp.k.w), grad_of(lp.k.b), dK, attn_in, lp.k.w, R, D, D);
        linear_backward(dattn_in, grad_of(lp.v.w), grad_of(lp.v.b), dV, attn_in, lp.v.w, R, D, D);
        break;
      }
      case Path::max_pool:
        zero(dK, R * D);
        zero(dV, R * D);
        max_pool_backward(dK, dkk, A.argk, B, N, K, D);
        max_pool_backward(dV, dvv, A.argv, B, N, K, D);
        linear_backward(dattn_in, grad_of(lp.k.w), grad_of(lp.k.b), dK, attn_in, lp.k.w, R, D, D);
        linear_backward(dattn_in, grad_of(lp.v.w), grad_of(lp.v.b), dV, attn_in, lp.v.w, R, D, D);
        break;
    }
  }

  // out = xp W^T + em b^T: db[c] += sum_r em[r] dout[r,c]; dem[r] += sum_c dout[r,c] b[c].
  static void scaled_bias_backward(float* db, float* dem, const float* dout, const float* em,
                                   const float* b, int64_t rows, int64_t C) {
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

  // dres holds d(x_out) on entry and d(x_in) on exit.
  void layer_backward(int64_t l) {
    const LayerParams& lp = layers[l];
    LayerAct& A = acts[l];
    const float* x_in = xs[l];
    const int64_t R = B * N, D = cfg.d_model;
    const float p = cfg.dropout;
    const uint64_t s_attn = rng_stream(kAttnOut, l), s_ffn = rng_stream(kFfnOut, l);
    if (cfg.norm == NormPlacement::post) {
      zero(d1, R * D);  // d f
      layernorm_backward(d1, grad_of(lp.ln_out.w), grad_of(lp.ln_out.b), dres, A.f, lp.ln_out.w,
                         A.mean2, A.rstd2, R, D);
      std::memcpy(d2, d1, R * D * sizeof(float));  // d ffn_in (residual part)
      zero(tmp, R * D);
      dropout_backward(tmp, d1, R * D, p, seed, s_ffn);
      ffn_backward(lp, A, tmp, d2);
      zero(dres, R * D);  // d a
      layernorm_backward(dres, grad_of(lp.ln_attn.w), grad_of(lp.ln_attn.b), d2, A.a,
                         lp.ln_attn.w, A.mean1, A.rstd1, R, D);
      zero(tmp, R * D);
      dropout_backward(tmp, dres, R * D, p, seed, s_attn);
      attention_branch_backward(l, x_in, dres, tmp);
    } else {
      zero(tmp, R * D);
      dropout_backward(tmp, dres, R * D, p, seed, s_ffn);
      zero(d2, R * D);
      ffn_backward(lp, A, tmp, d2);
      layernorm_backward(dres, grad_of(lp.ln_out.w), grad_of(lp.ln_out.b), d2, A.a, lp.ln_out.w,
                         A.mean2, A.rstd2, R, D);
      zero(tmp, R * D);
      dropout_backward(tmp, dres, R * D, p, seed, s_attn);
      zero(d2, R * D);
      attention_branch_backward(l, A.ln1, d2, tmp);
      layernorm_backward(dres, grad_of(lp.ln_attn.w), grad_of(lp.ln_attn.b), d2, x_in,
                         lp.ln_attn.w, A.mean1, A.rstd1, R, D);
    }
  }

  // From d(FFN output before dropout) `dfo` into d(ffn_in), accumulated in `dffn_in`.
  void ffn_backward(const LayerParams& lp, LayerAct& A, const float* dfo, float* dffn_in) {
    const int64_t R = B * N, D = cfg.d_model, F = cfg.d_ff;
    zero(dG, R * F);
    linear_backward(dG, grad_of(lp.out.w), grad_of(lp.out.b), dfo, A.g, lp.out.w, R, F, D);
    zero(dH, R * F);
    gelu_backward(dH, A.h, dG, R * F);
    linear_backward(dffn_in, grad_of(lp.inter.w), grad_of(lp.inter.b), dH, A.ffn_in, lp.inter.w,
                    R, D, F);
  }

  void backward() {
    LF_CHECK(have_grad_batch, "backward: call forward(batch, train = true) first");
    const int64_t R = B * N, D = cfg.d_model;
    if (cfg.norm == NormPlacement::pre) {
      zero(dres, R * D);
      layernorm_backward(dres, grad_of(final_ln.w), grad_of(final_ln.b), dhid, xs[cfg.n_layers],
                         final_ln.w, fin_mean, fin_rstd, R, D);
    } else {
      std::memcpy(dres, dhid, R * D * sizeof(float));
    }
    for (int64_t l = cfg.n_layers - 1; l >= 0; --l) layer_backward(l);
    zero(tmp, R * D);
    dropout_backward(tmp, dres, R * D, cfg.dropout, seed, rng_stream(kEmb));
    zero(d1, R * D);
    layernorm_backward(d1, grad_of(emb_ln.w), grad_of(emb_ln.b), tmp, emb, emb_ln.w, emb_mean,
                       emb_rstd, R, D);
    embedding_backward(grad_of(word), grad_of(pos), grad_of(type), d1, ids, B, N, D,
                       cfg.position_offset);
    have_grad_batch = false;
  }

  // ---- MLM head ----
  // Runs the head on `rows` (flat indices into [B*N]); returns logits [M, V] in head_arena,
  // with intermediates for backward.
  struct MlmCache {
    int64_t M = 0;
    float *xin = nullptr, *t1 = nullptr, *t2 = nullptr, *t3 = nullptr, *mean = nullptr,
          *rstd = nullptr, *logits = nullptr;
  };
  MlmCache mlm_forward(const std::vector<int64_t>& rows, float* logits_out) {
    const int64_t D = cfg.d_model, V = cfg.vocab_size, M = static_cast<int64_t>(rows.size());
    MlmCache c;
    c.M = M;
    auto lay = [&](Arena* ar) {
      Carver cv{ar};
      c.xin = cv.take<float>(M * D);
      c.t1 = cv.take<float>(M * D);
      c.t2 = cv.take<float>(M * D);
      c.t3 = cv.take<float>(M * D);
      c.mean = cv.take<float>(M);
      c.rstd = cv.take<float>(M);
      c.logits = logits_out ? logits_out : cv.take<float>(M * V);
      return cv.bytes;
    };
    head_arena.reset();
    head_arena.reserve(lay(nullptr));
    head_arena.reset();
    lay(&head_arena);
    for (int64_t i = 0; i < M; ++i)
      std::memcpy(c.xin + i * D, hid + rows[i] * D, D * sizeof(float));
    linear_forward(c.t1, c.xin, lm_dense.w, lm_dense.b, M, D, D);
    gelu_forward(c.t2, c.t1, M * D);
    layernorm_forward(c.t3, c.mean, c.rstd, c.t2, lm_ln.w, lm_ln.b, M, D, cfg.layer_norm_eps);
    linear_forward(c.logits, c.t3, word, lm_bias, M, D, V);
    return c;
  }

  double mlm_loss(const int32_t* labels, bool grad, float weight, int64_t* count) {
    LF_CHECK(B > 0, "mlm_loss: call forward() first");
    LF_CHECK(!grad || have_grad_batch, "mlm_loss: gradients need forward(batch, train = true)");
    std::vector<int64_t> rows;
    std::vector<int32_t> targets;
    for (int64_t r = 0; r < B * N; ++r) {
      if (labels[r] == -100) continue;
      LF_CHECK(labels[r] >= 0 && labels[r] < cfg.vocab_size, "mlm_loss: label ", labels[r],
               " at position ", r, " is outside the vocabulary");
      rows.push_back(r);
      targets.push_back(labels[r]);
    }
    if (count) *count = static_cast<int64_t>(rows.size());
    if (rows.empty()) return 0.0;
    MlmCache c = mlm_forward(rows, nullptr);
    const int64_t D = cfg.d_model, V = cfg.vocab_size, M = c.M;
    const float gscale = weight / static_cast<float>(M);
    const double loss =
        cross_entropy(grad ? c.logits : nullptr, c.logits, targets.data(), M, V, gscale, nullptr);
    if (!grad) return loss;
    float* dlogits = c.logits;
    Buffer<float> dt(3 * M * D);
    dt.zero();
    float* d3 = dt.data();
    float* d2_ = d3 + M * D;
    float* dx = d2_ + M * D;
    linear_backward(d3, grad_of(word), grad_of(lm_bias), dlogits, c.t3, word, M, D, V);
    layernorm_backward(d2_, grad_of(lm_ln.w), grad_of(lm_ln.b), d3, c.t2, lm_ln.w, c.mean, c.rstd,
                       M, D);
    std::memset(d3, 0, M * D * sizeof(float));
    gelu_backward(d3, c.t1, d2_, M * D);
    linear_backward(dx, grad_of(lm_dense.w), grad_of(lm_dense.b), d3, c.xin, lm_dense.w, M, D, D);
    for (int64_t i = 0; i < M; ++i) {
      float* dst = dhid + rows[i] * D;
      const float* src = dx + i * D;
      for (int64_t j = 0; j < D; ++j) dst[j] += src[j];
    }
    return loss;
  }

  // ---- classification head ----
  double cls_forward_backward(const int32_t* labels, bool grad, float weight, float* logits_out) {
    LF_CHECK(B > 0, "classification: call forward() first");
    LF_CHECK(!grad || have_grad_batch,
             "cls_loss: gradients need forward(batch, train = true)");
    const int64_t D = cfg.d_model, C = cfg.num_classes;
    const float p = train ? cfg.dropout : 0.f;
    Buffer<float> buf(3 * B * D + B * C);
    float* c0 = buf.data();      // first-token states after dropout
    float* t = c0 + B * D;       // tanh(dense)
    float* td = t + B * D;       // after dropout
    float* logits = td + B * D;  // [B, C]
    for (int64_t b = 0; b < B; ++b) std::memcpy(c0 + b * D, hid + b * N * D, D * sizeof(float));
    dropout_forward(c0, c0, B * D, p, seed, rng_stream(kClsIn));
    linear_forward(t, c0, cls_dense.w, cls_dense.b, B, D, D);
    tanh_forward(t, t, B * D);
    dropout_forward(td, t, B * D, p, seed, rng_stream(kClsHidden));
    linear_forward(logits, td, cls_out.w, cls_out.b, B, D, C);
    if (logits_out) std::memcpy(logits_out, logits, B * C * sizeof(float));
    if (!labels) return 0.0;
    for (int64_t b = 0; b < B; ++b)
      LF_CHECK(labels[b] >= 0 && labels[b] < C, "cls_loss: label ", labels[b], " of example ", b,
               " is outside [0, ", C, ")");
    const double loss = cross_entropy(grad ? logits : nullptr, logits, labels, B, C,
                                      weight / static_cast<float>(B), nullptr);
    if (!grad) return loss;
    Buffer<float> g(3 * B * D);
    g.zero();
    float* dtd = g.data();
    float* dt = dtd + B * D;
    float* dc = dt + B * D;
    linear_backward(dtd, grad_of(cls_out.w), grad_of(cls_out.b), logits, td, cls_out.w, B, D, C);
    dropout_backward(dt, dtd, B * D, p, seed, rng_stream(kClsHidden));
    std::memset(dtd, 0, B * D * sizeof(float));
    tanh_backward(dtd, t, dt, B * D);
    linear_backward(dc, grad_of(cls_dense.w), grad_of(cls_dense.b), dtd, c0, cls_dense.w, B, D, D);
    std::memset(dt, 0, B * D * sizeof(float));
    dropout_backward(dt, dc, B * D, p, seed, rng_stream(kClsIn));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < D; ++j) dhid[b * N * D + j] += dt[b * D + j];
    return loss;
  }

  void init_param(const ParamInfo& p, uint64_t s) {
    float* w = params.data() + p.offset;
    const uint64_t stream = name_hash(p.name);
    // Values are functions of (seed, name, index), so filling in parallel changes nothing.
    auto fill_normal = [&](float std) {
      parallel_for(0, static_cast<int64_t>(p.numel), 1 << 16, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          w[i] = std * rng_normal(s, stream, static_cast<uint64_t>(i));
      });
    };
    switch (p.init) {
      case Init::normal:
        fill_normal(cfg.init_std);
        break;
      case Init::proj_normal:
        fill_normal(1.f / std::sqrt(static_cast<float>(cfg.max_len)));
        break;
      case Init::conv_mean: {
        const size_t win = static_cast<size_t>(p.shape.back());
        for (size_t i = 0; i < p.numel; ++i) w[i] = 1.f / static_cast<float>(win);
        break;
      }
      case Init::zeros:
        std::fill(w, w + p.numel, 0.f);
        break;
      case Init::ones:
        std::fill(w, w + p.numel, 1.f);
        break;
    }
  }
};

Model::Model(const Config& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
Model::~Model() = default;
const Config& Model::config() const { return impl_->cfg; }
const std::vector<ParamInfo>& Model::params() const { return impl_->table; }
size_t Model::num_params() const {
  size_t n = 0;
  for (auto& p : impl_->table) n += p.numel;
  return n;
}
float* Model::param_data() {
  impl_->weights_changed();
  return impl_->params.data();
}
float* Model::grad_data() { return impl_->gbase(); }
const ParamInfo* Model::find(const std::string& name) const { return impl_->info(name); }
float* Model::param(const std::string& name) {
  impl_->weights_changed();
  return impl_->P(name);
}
void Model::weights_changed() { impl_->weights_changed(); }
float* Model::grad(const std::string& name) { return impl_->grad_of(impl_->P(name)); }
void Model::init(uint64_t seed) {
  impl_->weights_changed();
  for (auto& p : impl_->table) impl_->init_param(p, seed);
}
void Model::init_some(uint64_t seed, const std::vector<std::string>& names) {
  impl_->weights_changed();
  for (auto& n : names) {
    const ParamInfo* p = impl_->info(n);
    LF_CHECK(p, "init: no parameter named '", n, "'");
    impl_->init_param(*p, seed);
  }
}
void Model::zero_grad() {
  impl_->gbase();
  impl_->grads.zero();
}
void Model::forward(const Batch& batch, bool train, uint64_t dropout_seed) {
  impl_->forward(batch, train, dropout_seed);
}
const float* Model::hidden() const { return impl_->hid; }
const float* Model::attention_probs(int64_t layer) const {
  LF_CHECK(layer >= 0 && layer < impl_->cfg.n_layers, "attention_probs: layer ", layer,
           " out of range");
  LF_CHECK(impl_->train && impl_->acts.size() > static_cast<size_t>(layer) &&
               impl_->acts[layer].probs,
           "attention_probs: run forward(batch, train = true) first");
  return impl_->acts[layer].probs;
}
double Model::mlm_loss(const int32_t* labels, bool grad, float weight, int64_t* count) {
  return impl_->mlm_loss(labels, grad, weight, count);
}
void Model::mlm_logits(float* out, const std::vector<int64_t>& rows) {
  LF_CHECK(impl_->B > 0, "mlm_logits: call forward() first");
  if (rows.empty()) {
    std::vector<int64_t> all(impl_->B * impl_->N);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    impl_->mlm_forward(all, out);
  } else {
    impl_->mlm_forward(rows, out);
  }
}
double Model::cls_loss(const int32_t* labels, bool grad, float weight) {
  return impl_->cls_forward_backward(labels, grad, weight, nullptr);
}
void Model::cls_logits(float* out) { impl_->cls_forward_backward(nullptr, false, 0.f, out); }
void Model::backward() { impl_->backward(); }
size_t Model::activation_bytes() const {
  return impl_->arena.capacity() + impl_->head_arena.capacity() + impl_->input_copies;
}
size_t Model::forward_bytes(int64_t B, int64_t N, bool train, bool padded) const {
  return impl_->forward_bytes(B, N, train, padded);
}
size_t Model::param_bytes() const {
  const Impl& m = *impl_;
  size_t b = (m.params.size() + m.grads.size()) * sizeof(float);
  for (const auto& s : m.slots) b += (s.eff.size() + s.deff.size()) * sizeof(float);
  return b;
}
size_t Model::packed_weight_bytes() const { return impl_->packed_bytes(); }
void Model::set_compute_type(ComputeType t) {
  if (t == impl_->compute) return;
  impl_->weights_changed();
  impl_->compute = t;
}
ComputeType Model::compute_type() const { return impl_->compute; }
void Model::set_exact_attention(ExactAttention how) { impl_->exact = how; }
Model::ExactAttention Model::exact_attention() const { return impl_->exact; }

}  // namespace lf
