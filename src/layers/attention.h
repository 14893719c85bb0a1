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

// ctx[b, :, h] = Dropout(softmax(scale * q_bh kk_bh^T + mask)) vv_bh.
// q [B,N,D]; kk, vv [B,Lk,D]; key_mask [B,Lk] (1 real / 0 excluded) or null.
// probs [B,H,N,Lk] keeps the softmax output for backward (training: the products run batched
// over blocks of heads, gemm_batched), or null (inference: one head at a time per thread, its
// scores in the thread's part of scratch). scratch: attention_scratch_floats(d) floats.
// The dropout mask of (batch element b, head h) is stream rng_stream(stream, (first_b + b) * H
// + h): first_b is the global index of batch element 0 (a data-parallel rank's slice).
void attention_forward(float* ctx, float* probs, const float* q, const float* kk, const float* vv,
                       const float* key_mask, const AttnDims& d, float scale, float p_drop,
                       uint64_t seed, uint64_t stream, float* scratch,
                       ComputeType t = ComputeType::f32, int64_t first_b = 0,
                       uint16_t* probs16 = nullptr, const uint16_t* q16 = nullptr,
                       uint16_t* ctx16 = nullptr);
// ctx16 (training, with probs; or null): the context [R,D] written in bf16 instead of ctx,
// which may then be null (bf16 training keeps it so, as the output map reads it).
// Accumulates into dq, dkk, dvv (writes over them with GradInto::overwrite).
// probs null (backward only): recomputed as attention_forward_tiles computed them, with
// key_mask [B,Lk] (or null) as forward had it; bf16 only.
// probs16 (bf16 training, with probs; or null): [B,H,N,Lk] bf16, the probabilities that
// multiply V (after dropout), written by forward in its softmax pass when the products run in
// bf16, and read by backward's dV product instead of rounding (and dropping out) probs again.
// q16 (both, training; or null): the queries [R,D] in bf16, as the query map wrote them; q may
// then be null (the products read q16; one that runs in f32 widens it). dctx16 (backward, or
// null): the context gradient [R,D] in bf16 only, as the output map's backward wrote it; dctx
// may then be null, likewise.
void attention_backward(float* dq, float* dkk, float* dvv, const float* dctx, const float* probs,
                        const float* q, const float* kk, const float* vv, const AttnDims& d,
                        float scale, float p_drop, uint64_t seed, uint64_t stream, float* scratch,
                        ComputeType t = ComputeType::f32, int64_t first_b = 0,
                        GradInto into = GradInto::add, const uint16_t* probs16 = nullptr,
                        const uint16_t* q16 = nullptr, const uint16_t* dctx16 = nullptr,
                        const float* key_mask = nullptr,
                        const struct RoundedQueryGrad* rounded_dq = nullptr);
// The tiled backward's query gradient (probs null, GradInto::overwrite) written rounded to bf16
// into dq16 [R,D] instead of dq, its column sums added to db (the query map's bias gradient),
// as the query map's bf16 gradient products take it (linear_backward's pre_rounded).
struct RoundedQueryGrad {
  uint16_t* dq16 = nullptr;
  float* db = nullptr;
};

// bf16 training without kept probabilities (when !attention_keeps_probs(d, bf16)): each
// thread takes one (sequence, head) tile at a time and computes it whole on its core: scores,
// softmax, dropout and P V, the tile's N x Lk scores never leaving the core's cache for
// memory; attention_backward with probs null recomputes them the same way, then the
// gradients, tile by tile. The same arguments as attention_forward in bf16 training (the
// queries and the context in bf16 only).
void attention_forward_tiles(uint16_t* ctx16, const uint16_t* q16, const float* kk, const float* vv,
                             const float* key_mask, const AttnDims& d, float scale, float p_drop,
                             uint64_t seed, uint64_t stream, float* scratch, int64_t first_b);
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
// masked give 0; d.causal is honoured.
constexpr int64_t kStreamKeyBlock = 256;
constexpr int64_t kStreamQueryBlock = 128;
void attention_streaming_rows(float* ctx, const float* q, const float* kk, const float* vv,
                              const float* key_mask, const AttnDims& d, const RowBlock& rb,
                              float scale, float* work, ComputeType t = ComputeType::f32);
int64_t attention_streaming_work_floats(int64_t rows, const AttnDims& d);

// Whole-batch streaming attention (no dropout): parallel over (batch, query blocks of
// kStreamQueryBlock rows). q, ctx [B,N,D]. scratch: num_threads() *
// attention_streaming_work_floats(kStreamQueryBlock, d) floats.
void attention_streaming_forward(float* ctx, const float* q, const float* kk, const float* vv,
                                 const float* key_mask, const AttnDims& d, float scale,
                                 float* scratch, ComputeType t = ComputeType::f32);

// Shapes of a sequence-axis projection out_b = E diag(m_b) x_b: x [B,N,C] with row stride
// ldx, out [B,K,C] with row stride ldo, E [K, ldE] (first N columns used).
struct SeqProjDims {
  int64_t B = 0, N = 0, K = 0, C = 0;
  int64_t ldE = 0, ldx = 0, ldo = 0;
};

// out_b = E diag(m_b) x_b for every batch element; em[b*K + j] = sum_t E[j,t] m_b[t] (may be
// null). Ebm [B,K,N] receives E diag(m_b) when mask is non-null (needed by backward).
// x16 (or null): x already rounded to bfloat16, same layout, read instead of rounding x
// again when the product runs in bf16 (training keeps the layer input so).
void seq_project_forward(float* out, float* em, float* Ebm, const float* E, const float* x,
                         const float* mask, const SeqProjDims& dims,
                         ComputeType t = ComputeType::f32, const uint16_t* x16 = nullptr);
// dx_b += (E diag(m_b))^T dout_b; dE[:, :N] += sum_b (dout_b x_b^T + dem_b 1^T) diag(m_b).
// dout [B,K,C] (stride ldo), dx like x. dE / dem / dx may be null. scratch: B*K*N floats.
// x16 as in seq_project_forward.
void seq_project_backward(float* dx, float* dE, const float* dout, const float* dem,
                          const float* Ebm, const float* E, const float* x, const float* mask,
                          const SeqProjDims& dims, float* scratch, ComputeType t = ComputeType::f32,
                          const uint16_t* x16 = nullptr);
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
