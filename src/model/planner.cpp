// The activation planner: where every activation of a forward (and backward) pass lives, for
// one batch shape. One function per plan both sizes and lays out (see Carver in buffer.h);
// the attention path carves its own buffers inside each plan.
#include <algorithm>

#include "core/parallel.h"
#include "model/model_impl.h"

namespace lf {

namespace {

// Inference processes each layer in blocks of at most this many rows of one sequence.
constexpr int64_t kInferRows = 256;

// Query rows per inference block for a batch of shape (B, N): kInferRows, halved while
// there would be fewer than two blocks per thread. (Batch-invariant inference uses
// invariant_rows(N, threads) whatever B is.)
int64_t infer_chunk(int64_t B, int64_t N) {
  int64_t c = std::min<int64_t>(kInferRows, N);
  const int64_t want = 2 * num_threads();
  while (c > 32 && B * ((N + c - 1) / c) < want) c = (c + 1) / 2;
  return std::max<int64_t>(c, 1);
}

// A buffer of n elements in the one dtype its products read: bf16 when every product reading it
// runs in bf16, else f32.
Tensor take_operand(Carver& c, bool bf16, int64_t n) {
  return bf16 ? Tensor(c.take<uint16_t>(n)) : Tensor(c.take<float>(n));
}

int64_t max_k(const std::vector<LayerParams>& layers) {
  int64_t k = 0;
  for (auto& l : layers) k = std::max(k, l.K);
  return k;
}

}  // namespace

int64_t Model::Impl::invariant_rows(int64_t N, int threads) {
  int64_t target = 4 * kInvariantRows;  // 256, 128 or 64: a tile per thread for one sequence
  while (target > kInvariantRows && (N + target - 1) / target < threads) target /= 2;
  const int64_t tiles = std::max<int64_t>(1, (N + target - 1) / target);
  return std::max<int64_t>(8, ((N + tiles - 1) / tiles + 7) / 8 * 8);
}

size_t Model::Impl::carve(Arena* ar, Layout& out, int64_t B, int64_t N, bool train,
                          bool masked) const {
  return train ? carve_train(ar, out, B, N, masked) : carve_infer(ar, out, B, N, masked);
}

// Training plan: every layer keeps its activations for backward; backward buffers are shared.
size_t Model::Impl::carve_train(Arena* ar, Layout& out, int64_t B, int64_t N, bool masked) const {
  Carver c{ar};
  Layout Lo;
  const int64_t R = B * N, D = cfg.d_model, F = cfg.d_ff, H = cfg.n_heads, L = cfg.n_layers;
  const int64_t maxK = max_k(layers), RK = B * maxK;
  const bool pre = cfg.norm == NormPlacement::pre;
  const AttentionPath& ap = path(true);
  Lo.acts.assign(L, LayerAct{});
  int64_t max_tile = 0;
  for (int64_t s = 0; s < L; ++s) {
    LayerAct& A = Lo.acts[s];
    const int64_t K = layers[s].K;
    // One dtype per buffer: bf16 where every product reading it runs in bf16.
    const bool maps16 = queries_bf16_only(R), ffn16 = ffn_bf16_only(R);
    if (pre) A.ln1 = c.take<float>(R * D);
    A.q = take_operand(c, maps16, R * D);
    PathShape ps{B, N, K, masked};
    ps.t = train_compute;
    ps.q_bf16_only = maps16;
    ap.plan_train(c, A, cfg, ps);
    ap.plan_attention(c, A, cfg, ps);  // the softmax probabilities, or the kind's own
    max_tile = std::max(max_tile, ap.key_length(N, K));
    if (!maps16) A.ctx = c.take<float>(R * D);  // else in bf16 (below, where it was)
    A.a = c.take<float>(R * D);
    A.mean1 = c.take<float>(R);
    A.rstd1 = c.take<float>(R);
    A.mean2 = c.take<float>(R);
    A.rstd2 = c.take<float>(R);
    A.ffn_in = c.take<float>(R * D);
    A.h = take_operand(c, ffn16, R * F);
    A.g = take_operand(c, ffn16, R * F);
    if (!pre) A.f = c.take<float>(R * D);
    // The maps' input and the FFN's input as their products read them: bf16 buffers of their
    // own, or the f32 buffers themselves (set below, once the layer inputs are carved).
    if (maps16) A.maps_in = c.take<uint16_t>(R * D);
    if (maps16) A.ctx = c.take<uint16_t>(R * D);
    A.ffn_x = ffn16 ? take_operand(c, true, R * D) : Tensor(A.ffn_in);
  }
  Lo.xs.assign(L + 1, nullptr);
  for (int64_t l = 0; l <= L; ++l) Lo.xs[l] = c.take<float>(R * D);
  for (int64_t l = 0; l < L; ++l)
    if (!Lo.acts[l].maps_in) Lo.acts[l].maps_in = pre ? Lo.acts[l].ln1 : Lo.xs[l];
  Lo.emb = c.take<float>(R * D);
  Lo.emb_mean = c.take<float>(R);
  Lo.emb_rstd = c.take<float>(R);
  Lo.hid = pre ? c.take<float>(R * D) : Lo.xs[L];
  Lo.fin_mean = c.take<float>(R);
  Lo.fin_rstd = c.take<float>(R);
  Lo.tmp = c.take<float>(R * D);
  const AttnDims d{/*B=*/B, /*N=*/N, /*Lk=*/max_tile, /*D=*/D, /*H=*/H, /*Dh=*/cfg.d_head()};
  Lo.scratch = c.take<float>(attention_scratch_floats(d));
  const int64_t RKD = std::max(R, RK) * D;
  Lo.dhid = c.take<float>(R * D);
  // Post-norm: the layers' running gradient starts as the heads' gradient of the last layer's
  // output, in place (pre-norm: the final LayerNorm's backward writes it).
  Lo.dres = pre ? c.take<float>(R * D) : Lo.dhid;
  Lo.d1 = c.take<float>(R * D);
  Lo.d2 = c.take<float>(R * D);
  Lo.dctx = take_operand(c, queries_bf16_only(R), R * D);  // the output map's (same shape)
  if (queries_bf16_only(R)) Lo.ao_dy = c.take<uint16_t>(R * D);
  Lo.dq = c.take<float>(R * D);
  Lo.dkk = c.take<float>(RKD);
  Lo.dvv = c.take<float>(RKD);
  ap.plan_backward(c, Lo, cfg, PathShape{B, N, maxK, masked});
  Lo.dG = take_operand(c, ffn_bf16_only(R), R * F);
  // Post-norm only: the output LayerNorm's backward writes it (pre-norm, the FFN's backward
  // rounds its f32 output gradient itself).
  if (ffn_bf16_only(R) && !pre) Lo.ffn_dy = c.take<uint16_t>(R * D);
  out = std::move(Lo);
  return c.bytes;
}

// Inference plan. Layers run one after another on two [R,D] buffers; within a layer only what
// every query needs is whole-batch (the attention path's buffers: keys and values, or their
// projections; for tiled/materialized standard attention also Q and the context), and the
// rest (Q, attention, output map, LayerNorms, FFN) runs in blocks of `chunk` rows with
// per-thread workspace. Memory per token: Linformer (shared E) 2 D floats, streaming 4 D,
// standard 6 D plus one N x N score tile per thread (tiled) or H N floats (materialized);
// the [R,F] FFN activation never exists, nor, except for materialized standard attention,
// the [B,H,N,Lk] probabilities.
size_t Model::Impl::carve_infer(Arena* ar, Layout& out, int64_t B, int64_t N, bool masked) const {
  Carver c{ar};
  Layout Lo;
  const int64_t R = B * N, D = cfg.d_model, F = cfg.d_ff, H = cfg.n_heads, L = cfg.n_layers;
  const int64_t maxK = max_k(layers);
  const bool pre = cfg.norm == NormPlacement::pre;
  const AttentionPath& ap = path(false);
  // Query rows per block (the last block of a sequence may be shorter).
  const int64_t ch = invariant ? invariant_rows(N, num_threads()) : infer_chunk(B, N);
  const int64_t last = N - (N - 1) / ch * ch;
  // Per layer, the dtype its row blocks read keys and values in: bf16 when every block's
  // products run in bf16 (then rounded once where they are made), else f32.
  std::vector<DataType> kv(L, DataType::f32);
  PathShape ps{B, N, maxK, masked};
  ps.kv_f32 = false;
  for (int64_t l = 0; l < L; ++l) {
    const AttnDims dl{/*B=*/B,
                      /*N=*/N,
                      /*Lk=*/ap.key_length(N, ap.formed_rows(cfg, layers[l].K, N)),
                      /*D=*/D,
                      /*H=*/H,
                      /*Dh=*/cfg.d_head(),
                      /*causal=*/cfg.causal};
    const ComputeType t = infer_products(l);
    if (keys_rounded_once() && ap.rows_read_bf16(t, ch, dl) && ap.rows_read_bf16(t, last, dl))
      kv[l] = DataType::bf16;
    (kv[l] == DataType::bf16 ? ps.kv_bf16 : ps.kv_f32) = true;
  }
  Lo.acts.assign(L, LayerAct{});
  LayerAct& A = Lo.acts[0];
  if (pre) A.ln1 = c.take<float>(R * D);
  ap.plan_infer(c, A, Lo, cfg, ps);
  for (int64_t s = 1; s < L; ++s) Lo.acts[s] = A;
  for (int64_t s = 0; s < L; ++s) Lo.acts[s].kv = kv[s];
  float* x0 = c.take<float>(R * D);
  float* x1 = c.take<float>(R * D);
  Lo.xs.assign(L + 1, nullptr);
  for (int64_t l = 0; l <= L; ++l) Lo.xs[l] = (l % 2) ? x1 : x0;
  Lo.emb = x0;        // embeddings are normalised in place
  Lo.hid = Lo.xs[L];  // pre-norm: the final LayerNorm runs in place
  // Per-thread row-block workspace: q, ctx, attention-output/residual, FFN input [c,D];
  // FFN hidden [c,F]; attention scores.
  const AttnDims d{/*B=*/B,
                   /*N=*/N,
                   /*Lk=*/ap.key_length(N, maxK),
                   /*D=*/D,
                   /*H=*/H,
                   /*Dh=*/cfg.d_head()};
  const int64_t att = ap.rows_work_floats(ch, d);
  const int64_t wf = (4 * ch * D + ch * F + att + 15) / 16 * 16;
  Lo.work = c.take<float>(wf * num_threads());
  Lo.work_floats = wf;
  Lo.chunk = ch;
  out = std::move(Lo);
  return c.bytes;
}

}  // namespace lf
