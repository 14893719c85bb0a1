// Multi-head attention building blocks shared by standard and Linformer attention.
// Activations are [B, L, D] row-major with head h in columns [h*Dh, (h+1)*Dh).
#pragma once
#include <cstdint>

#include "kernels/ops.h"
#include "linformer/compute_type.h"

namespace lf {

struct AttnDims {
  int64_t B = 0, N = 0;  // batch, query length
  int64_t Lk = 0;        // key length: N (standard) or k (Linformer)
  int64_t D = 0, H = 0, Dh = 0;
  bool causal = false;  // query i sees keys j <= i only (standard attention)
};

// How keys and values are laid out: token_major [B,Lk,D] with head h in columns [h*Dh,
// (h+1)*Dh), or head_major [B,H,Lk,Dh], each head's keys contiguous (what streaming inference
// reads: a head's keys are then one sequential stream, not Lk rows D floats apart).
enum class KVLayout { token_major, head_major };

// Head h of batch element b in keys or values laid out so: its first row, and the distance
// between its rows.
struct HeadRows {
  const float* p = nullptr;
  int64_t ld = 0;
};
inline HeadRows head_rows(const float* x, KVLayout l, const AttnDims& d, int64_t b, int64_t h) {
  if (l == KVLayout::head_major) return {x + (b * d.H + h) * d.Lk * d.Dh, d.Dh};
  return {x + b * d.Lk * d.D + h * d.Dh, d.D};
}

// The keys and values attention runs on ([B,Lk,D] each, or head-major where a path says so:
// only the streaming rows read that) and its key mask ([B,Lk], 1 real / 0 excluded, or null).
struct KeysValues {
  const float *k = nullptr, *v = nullptr, *key_mask = nullptr;
  KVLayout layout = KVLayout::token_major;
};

// How one attention call runs: the score scale, dropout on the probabilities (p = 0: none),
// the workspace and the precision of the products. The dropout mask of (batch element b,
// head h) is stream rng_stream(stream, (first_b + b) * H + h): first_b is the global index of
// batch element 0 (a data-parallel rank's slice).
struct AttnRun {
  float scale = 1.f;
  float p_drop = 0.f;
  uint64_t seed = 0, stream = 0;
  int64_t first_b = 0;
  float* scratch = nullptr;  // attention_scratch_floats(d) floats
  ComputeType t = ComputeType::f32;
};

// What training's softmax attention keeps for backward, two buffers with two roles: the
// probabilities P [B,H,N,Lk] in f32 (softmax's backward reads them), and, in bf16 training,
// the probabilities that multiply V, after dropout, in bf16 [B,H,N,Lk] (pv: written in the
// softmax pass when that product runs in bf16, for backward's dV product; empty otherwise).
// probs null: nothing kept (inference: one head at a time per thread, its scores in the
// thread's part of scratch).
struct AttnKept {
  float* probs = nullptr;
  Tensor pv;
};

// ctx[b, :, h] = Dropout(softmax(scale * q_bh kk_bh^T + mask)) vv_bh. q, ctx [B,N,D], each f32
// or bf16 (bf16 training keeps the queries and the context in bf16 only when the maps beside
// them run in bf16; a product too small for bf16 widens them). Training (kept.probs) runs the
// products batched over blocks of heads (gemm_batched).
void attention_forward(Tensor ctx, const AttnKept& kept, TensorIn q, const KeysValues& kv,
                       const AttnDims& d, const AttnRun& r);

// The gradients attention_backward writes: accumulated into dq, dkk, dvv (written over them
// with GradInto::overwrite). dq f32, or bf16 (the tiled backward's only: kept.probs null,
// GradInto::overwrite): written rounded, its column sums added to dq_bias (the query map's
// bias gradient), as the query map's bf16 gradient products take it (linear_backward's
// pre-rounded output gradient).
struct AttnGrads {
  Tensor dq;
  float *dkk = nullptr, *dvv = nullptr;
  GradInto into = GradInto::add;
  float* dq_bias = nullptr;
};
// From the context gradient dctx [R,D] (f32, or bf16: the output map's backward wrote it in
// bf16 only) to g. kept as forward kept it; kept.probs null (bf16 training only): recomputed
// as attention_forward_tiles computed them, with kv.key_mask as forward had it. q as in
// forward.
void attention_backward(const AttnGrads& g, TensorIn dctx, const AttnKept& kept, TensorIn q,
                        const KeysValues& kv, const AttnDims& d, const AttnRun& r);

// bf16 training without kept probabilities (when !attention_keeps_probs(d, bf16)): each
// thread takes one (sequence, head) tile at a time and computes it whole on its core: scores,
// softmax, dropout and P V, the tile's N x Lk scores never leaving the core's cache for
// memory; attention_backward with probs null recomputes them the same way, then the
// gradients, tile by tile. The queries and the context in bf16.
void attention_forward_tiles(Tensor ctx, TensorIn q, const KeysValues& kv, const AttnDims& d,
                             const AttnRun& r);
// Whether training keeps attention's probabilities [B,H,N,Lk] for backward (f32, and bf16
// batches too small for a bf16 product per tile or with too few tiles to share evenly among
// the threads) or recomputes them (attention_forward_tiles).
bool attention_keeps_probs(const AttnDims& d, ComputeType t);
// Workspace of attention_forward/backward, every thread's together: for training (and for
// inference with dropout), two blocks of N x Lk tiles (the probabilities' gradients and their
// dropped-out copy) and two tiles per thread; for inference without dropout (train = false),
// one tile per thread.
int64_t attention_scratch_floats(const AttnDims& d, bool train = true);

// ---- Row-block attention (inference). q and ctx point at the rows' first element and have
// row stride D; kk, vv [B,Lk,D] and key_mask [B,Lk] (or null) are the whole batch. The rows are
// queries [i0, i1) of batch element b; every head is computed. Both run serially (call them
// from inside a parallel region, one row block per thread).

// Query rows [i0, i1) of batch element b.
struct RowBlock {
  int64_t b = 0, i0 = 0, i1 = 0;
};

// Scores of the rows against all Lk keys at once: work holds (i1 - i0) * Lk floats.
void attention_rows(float* ctx, const float* q, const float* kk, const float* vv,
                    const float* key_mask, const AttnDims& d, const RowBlock& rb, float scale,
                    float* work, ComputeType t = ComputeType::f32);
int64_t attention_rows_work_floats(int64_t rows, const AttnDims& d);

// Exact attention with the streaming (online) softmax over blocks of kStreamKeyBlock keys,
// the FlashAttention idea: the same function as attention_rows (to rounding), with
// O(rows * block) workspace whatever Lk is. Padded keys get weight 0; rows whose keys are all
// masked give 0; d.causal is honoured. kk and vv are laid out as `layout` says.
constexpr int64_t kStreamKeyBlock = 256;
constexpr int64_t kStreamQueryBlock = 256;  // as the model's inference row blocks (kInferRows)
void attention_streaming_rows(float* ctx, const float* q, const float* kk, const float* vv,
                              const float* key_mask, const AttnDims& d, const RowBlock& rb,
                              float scale, float* work, ComputeType t = ComputeType::f32,
                              KVLayout layout = KVLayout::token_major);
int64_t attention_streaming_work_floats(int64_t rows, const AttnDims& d);

// Whole-batch streaming attention (no dropout): parallel over (batch, query blocks of
// kStreamQueryBlock rows). q, ctx [B,N,D]. scratch: num_threads() *
// attention_streaming_work_floats(kStreamQueryBlock, d) floats.
void attention_streaming_forward(float* ctx, const float* q, const float* kk, const float* vv,
                                 const float* key_mask, const AttnDims& d, float scale,
                                 float* scratch, ComputeType t = ComputeType::f32,
                                 KVLayout layout = KVLayout::token_major);

// Shapes of a sequence-axis projection out_b = E diag(m_b) x_b: x [B,N,C] with row stride
// ldx, out [B,K,C] with row stride ldo, E [K, ldE] (first N columns used).
struct SeqProjDims {
  int64_t B = 0, N = 0, K = 0, C = 0;
  int64_t ldE = 0, ldx = 0, ldo = 0;
};

// out_b = E diag(m_b) x_b for every batch element; em[b*K + j] = sum_t E[j,t] m_b[t] (may be
// null). Ebm [B,K,N] receives E diag(m_b) when mask is non-null (needed by backward).
// x in f32: a product that runs in bf16 rounds it.
void seq_project_forward(float* out, float* em, float* Ebm, const float* E, const float* x,
                         const float* mask, const SeqProjDims& dims,
                         ComputeType t = ComputeType::f32);
// dx_b += (E diag(m_b))^T dout_b; dE[:, :N] += sum_b (dout_b x_b^T + dem_b 1^T) diag(m_b).
// dout [B,K,C] (stride ldo), dx like x. dE / dem / dx may be null. scratch: B*K*N floats.
// x as in seq_project_forward.
void seq_project_backward(float* dx, float* dE, const float* dout, const float* dem,
                          const float* Ebm, const float* E, const float* x, const float* mask,
                          const SeqProjDims& dims, float* scratch,
                          ComputeType t = ComputeType::f32);
// Inference form of seq_project_forward: the same out and em, without the [B,K,N] Ebm
// buffer. With a mask, E diag(m_b) is formed tchunk columns at a time in scratch
// (K * tchunk floats); fully padded column blocks are skipped.
void seq_project_forward_lowmem(float* out, float* em, const float* E, const float* x,
                                const float* mask, const SeqProjDims& dims, float* scratch,
                                int64_t tchunk, ComputeType t = ComputeType::f32);

// Max pooling of x [B,N,C] over K windows of w positions (K * w >= N) into out [B,K,C].
struct PoolDims {
  int64_t B = 0, N = 0, K = 0, w = 0, C = 0;
};

// out[b,j,c] = max over real t in [j*w, min((j+1)*w, N)) of x[b,t,c], 0 if none; arg [B,K,C]
// keeps the chosen t (or -1). mask [B,N] or null.
void max_pool_forward(float* out, int32_t* arg, const float* x, const float* mask,
                      const PoolDims& d);
// dx [B,N,C] += dout [B,K,C] routed to the positions arg chose (d as in forward).
void max_pool_backward(float* dx, const float* dout, const int32_t* arg, const PoolDims& d);

}  // namespace lf
