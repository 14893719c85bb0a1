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

// Shape check at a kernel's entry (LF_DCHECK: debug and LINFORMER_CHECKS builds).
void check_attn_dims(const AttnDims& d, const char* what);

// How keys and values are laid out: token_major [B,Lk,D] with head h in columns [h*Dh,
// (h+1)*Dh), or head_major [B,H,Lk,Dh], each head's keys contiguous (what streaming inference
// reads: a head's keys are then one sequential stream, not Lk rows D floats apart).
enum class KVLayout { token_major, head_major };

// Head h of batch element b in keys or values laid out so: its first row, and the distance
// between its rows.
struct HeadRows {
  TensorIn p;
  int64_t ld = 0;
};
inline HeadRows head_rows(TensorIn x, KVLayout l, const AttnDims& d, int64_t b, int64_t h) {
  if (l == KVLayout::head_major) return {x.at((b * d.H + h) * d.Lk * d.Dh), d.Dh};
  return {x.at(b * d.Lk * d.D + h * d.Dh), d.D};
}

// The keys and values attention runs on ([B,Lk,D] each, or head-major where a path says so:
// only the row-block functions read that) and its key mask ([B,Lk], 1 real / 0 excluded, or
// null). Each f32, or, for the row-block functions only, bf16 and head-major (each head's rows
// dense, as a bf16 product operand is): rounded once by the path that makes them when every
// product reading them runs in bf16 (the inference plan's choice, LayerAct::kv).
struct KeysValues {
  TensorIn k, v;
  const float* key_mask = nullptr;
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
// row stride D; kv (the keys and values in either layout, and key_mask [B,Lk] or null) is the
// whole batch. The rows are queries [i0, i1) of batch element b; every head is computed. Both
// run serially (call them from inside a parallel region, one row block per thread).
// Their products run in precision t as gemm() runs its own: in bf16 when t's products between
// activations are bf16 and the product is large enough (gemm_runs_bf16: decided per product,
// so a short last row or key block may run in f32), an f32 operand of a bf16 product rounded,
// a bf16 one of an f32 product widened. So keys and values are given in bf16 only when every
// product reading them runs in bf16: rounded once, not once per row block. (The queries stay
// f32: each row block's are read by one product per head, and rounded there, once.)

// Query rows [i0, i1) of batch element b.
struct RowBlock {
  int64_t b = 0, i0 = 0, i1 = 0;
};

// Scores of the rows against all Lk keys at once: work holds (i1 - i0) * Lk floats.
void attention_rows(float* ctx, const float* q, const KeysValues& kv, const AttnDims& d,
                    const RowBlock& rb, float scale, float* work, ComputeType t = ComputeType::f32);
// Whether attention_rows of `rows` query rows runs its products in bf16.
bool attention_rows_run_bf16(ComputeType t, int64_t rows, const AttnDims& d);
int64_t attention_rows_work_floats(int64_t rows, const AttnDims& d);

// Exact attention with the streaming (online) softmax over blocks of kStreamKeyBlock keys,
// the FlashAttention idea: the same function as attention_rows (to rounding), with
// O(rows * block) workspace whatever Lk is. Padded keys get weight 0; rows whose keys are all
// masked give 0; d.causal is honoured. Where the engine's own kernel runs (attn_block) it runs
// the whole call in one precision, bf16 when attention_streaming_runs_bf16 says so; the gemm
// path decides per key block.
constexpr int64_t kStreamKeyBlock = 256;
constexpr int64_t kStreamQueryBlock = 256;  // as the model's inference row blocks (kInferRows)
void attention_streaming_rows(float* ctx, const float* q, const KeysValues& kv, const AttnDims& d,
                              const RowBlock& rb, float scale, float* work,
                              ComputeType t = ComputeType::f32);
int64_t attention_streaming_work_floats(int64_t rows, const AttnDims& d);
// Whether every product of attention_streaming_rows of `rows` query rows runs in bf16 on the
// engine's own kernel, reading keys and values rounded as a bf16 head-major copy made with
// round_heads_bf16 holds them (its values are rounded in hardware, which flushes denormals:
// the same only when Dh is a multiple of 32, to_bf16_n's vector width).
bool attention_streaming_runs_bf16(ComputeType t, int64_t rows, const AttnDims& d);
// Whether inference plans give keys and values the bf16 dtype their row blocks read (on unless
// set off): off, they stay f32 and every row block rounds them again, as the tests compare.
void set_keys_rounded_once(bool on);
bool keys_rounded_once();
// Rows [B*Lk, D] of keys or values (rows ld apart) rounded per head row (vm::to_bf16_n over
// each head's Dh columns, as a bf16 product rounds an f32 operand of the row functions) into
// head-major bf16 [B,H,Lk,Dh]. Parallel over the rows outside a parallel region.
void round_heads_bf16(uint16_t* dst, const float* src, int64_t ld, const AttnDims& d);

// Whole-batch streaming attention (no dropout): parallel over (batch, query blocks of
// kStreamQueryBlock rows). q, ctx [B,N,D]. scratch: num_threads() *
// attention_streaming_work_floats(kStreamQueryBlock, d) floats.
void attention_streaming_forward(float* ctx, const float* q, const KeysValues& kv,
                                 const AttnDims& d, float scale, float* scratch,
                                 ComputeType t = ComputeType::f32);

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
