#include "layers/attention.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/attention_block.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "linformer/error.h"
#include "linformer/rng.h"

namespace lf {

void check_attn_dims(const AttnDims& d, const char* what) {
  LF_DCHECK(d.B > 0 && d.N > 0 && d.Lk > 0 && d.H > 0 && d.Dh > 0 && d.D == d.H * d.Dh, what,
            ": inconsistent dims B=", d.B, " N=", d.N, " Lk=", d.Lk, " D=", d.D, " H=", d.H,
            " Dh=", d.Dh);
}

namespace {

void check(const AttnDims& d, const char* what) { check_attn_dims(d, what); }

// The (batch element, head) pairs one batched product covers: elements [b0, b0 + nb), heads
// [h0, h0 + nh); their N x Lk tiles are consecutive in the block's scratch.
struct HeadBlock {
  int64_t b0 = 0, nb = 0, h0 = 0, nh = 0;
};

// Score floats one block may hold (16 MB): the whole batch for Linformer's N x k tiles, a few
// sequences or heads at a time for standard attention's N x N ones.
constexpr int64_t kBlockFloats = int64_t{4} << 20;

// Tiles per block: whole sequences (every head) while they fit, else heads of one sequence.
int64_t block_tiles(const AttnDims& d) {
  const int64_t fit = std::max<int64_t>(1, kBlockFloats / (d.N * d.Lk));
  return fit >= d.H ? std::min(d.B, fit / d.H) * d.H : fit;
}

template <typename F>
void for_each_block(const AttnDims& d, const F& f) {
  const int64_t tiles = block_tiles(d);
  if (tiles >= d.H) {
    const int64_t nb = tiles / d.H;
    for (int64_t b0 = 0; b0 < d.B; b0 += nb) f(HeadBlock{b0, std::min(nb, d.B - b0), 0, d.H});
  } else {
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t h0 = 0; h0 < d.H; h0 += tiles) f(HeadBlock{b, 1, h0, std::min(tiles, d.H - h0)});
  }
}

// Softmax of the scores of sequence b in place, rows of Lk keys (causal: row i sees keys <= i).
void softmax_tile(float* P, const AttnDims& d, int64_t b, float scale, const float* key_mask) {
  const float* km = key_mask ? key_mask + b * d.Lk : nullptr;
  if (!d.causal) {
    softmax_forward(P, P, d.N, d.Lk, scale, km);
    return;
  }
  for (int64_t i = 0; i < d.N; ++i) {
    const int64_t seen = std::min(i + 1, d.Lk);
    softmax_forward(P + i * d.Lk, P + i * d.Lk, 1, seen, scale, km);
    std::fill(P + i * d.Lk + seen, P + (i + 1) * d.Lk, 0.f);
  }
}

// Layouts of a head block's operands: queries or context [B,N,D], keys or values [B,Lk,D],
// the kept probabilities [B,H,N,Lk] and the block's own consecutive tiles.
BatchLayout rows_layout(const AttnDims& d, int64_t len) { return {len * d.D, d.Dh, d.D}; }
BatchLayout probs_layout(const AttnDims& d) { return {d.H * d.N * d.Lk, d.N * d.Lk, d.Lk}; }
BatchLayout block_layout(const AttnDims& d, const HeadBlock& k) {
  return {k.nh * d.N * d.Lk, d.N * d.Lk, d.Lk};
}

}  // namespace

int64_t attention_scratch_floats(const AttnDims& d, bool train) {
  const int64_t tile = d.N * d.Lk;
  // Inference: one tile per thread (two with dropout); training: two blocks of tiles.
  const int64_t per_thread = ((train ? 2 : 1) * tile + 15) / 16 * 16;
  const int64_t threads = per_thread * num_threads();
  return train ? std::max(threads, 2 * block_tiles(d) * tile) : threads;
}

namespace {

// A head's rows of a [B,L,D] bf16 operand starting at x, densely ([rows, Dh]) into buf:
// oneDNN runs its AMX / AVX512-BF16 kernels only on dense matrices (a head's columns, D apart,
// send it to a generic kernel 2-4x slower).
const uint16_t* gather_head(Buffer<uint16_t>& buf, const uint16_t* x, int64_t rows, int64_t Dh,
                            int64_t D) {
  uint16_t* dst = buf.grow(rows * Dh);
  vm::copy_rows(dst, Dh, x, D, rows, Dh);
  return dst;
}

// A head's rows of out (D apart) = the dense [rows, Dh] tile t, or += it with add.
template <typename T>
void place_head(T* out, const T* t, int64_t rows, int64_t Dh, int64_t D, bool add) {
  if (!add) {
    vm::copy_rows(out, D, t, Dh, rows, Dh);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out + r * D;
    const T* src = t + r * Dh;
#pragma omp simd
    for (int64_t c = 0; c < Dh; ++c) o[c] += src[c];
  }
}

// An operand [rows, D] in bf16: x16 when given, else x rounded into buf.
const uint16_t* rounded_rows(Buffer<uint16_t>& buf, const float* x, const uint16_t* x16,
                             int64_t rows, int64_t D) {
  return x16 ? x16 : round_bf16(buf.grow(rows * D), x, rows * D);
}

// Dense operands of one (sequence, head) tile: [N, Dh] or [Lk, Dh], and the dense N x Lk tile.
BatchLayout dense_layout(int64_t cols) { return {0, 0, cols}; }

// The probabilities of tile (b, h), P = softmax(scale Q K^T + mask) in f32 [N, Lk], computed
// the same way by forward and by backward's recomputation (so both see the same numbers).
// Q [N, Dh] and K [Lk, Dh] dense bf16.
void tile_probs(float* P, const uint16_t* Q, const uint16_t* K, const float* key_mask,
                const AttnDims& d, int64_t b, float scale) {
  gemm_batched(ComputeType::bf16, 1, 1, false, true, d.N, d.Lk, d.Dh, 1.f, Q, dense_layout(d.Dh), K,
               dense_layout(d.Dh), 0.f, P, dense_layout(d.Lk));
  softmax_tile(P, d, b, scale, key_mask);
}

// Per-thread buffers of the tiled path: the tile's operands gathered densely (q, k, v, and g
// the context gradient), its bf16 probabilities (then score gradients), its bf16 context and
// a dense f32 output.
struct TileBuffers {
  Buffer<uint16_t> q, k, v, g, p16, c16;
  Buffer<float> out;
};

}  // namespace

bool attention_keeps_probs(const AttnDims& d, ComputeType t) {
  const int64_t tiles = d.B * d.H, threads = num_threads();
  const bool even = tiles % threads == 0 || tiles >= 4 * threads;
  return !(t == ComputeType::bf16 && even && gemm_runs_bf16(t, d.N, d.Lk, d.Dh));
}

void attention_forward_tiles(Tensor ctx, TensorIn q, const KeysValues& kv, const AttnDims& d,
                             const AttnRun& r) {
  uint16_t* ctx16 = ctx.bf16();
  const uint16_t* q16 = q.bf16();
  const float *kk = kv.k.f32(), *vv = kv.v.f32(), *key_mask = kv.key_mask;
  const float scale = r.scale, p_drop = r.p_drop;
  const uint64_t seed = r.seed, stream = r.stream;
  float* scratch = r.scratch;
  const int64_t first_b = r.first_b;
  check(d, "attention_forward_tiles");
  LF_DCHECK(ctx16 && q16 && kk && vv && scratch, "attention_forward_tiles: null pointer");
  PhaseScope ps(Phase::attention);
  const int64_t N = d.N, Lk = d.Lk, Dh = d.Dh, D = d.D;
  thread_local Buffer<uint16_t> kb, vb;
  const uint16_t* k16 = rounded_rows(kb, kk, nullptr, d.B * Lk, D);
  const uint16_t* v16 = rounded_rows(vb, vv, nullptr, d.B * Lk, D);
  const int64_t per_thread = attention_scratch_floats(d) / num_threads();
  parallel_for(0, d.B * d.H, 1, [&](int64_t i0, int64_t i1) {
    float* P = scratch + thread_id() * per_thread;
    thread_local TileBuffers tb;
    uint16_t* P16 = tb.p16.grow(N * Lk);
    uint16_t* C16 = tb.c16.grow(N * Dh);  // the tile's context
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / d.H, h = i % d.H;
      const int64_t qo = b * N * D + h * Dh, ko = b * Lk * D + h * Dh;
      tile_probs(P, gather_head(tb.q, q16 + qo, N, Dh, D), gather_head(tb.k, k16 + ko, Lk, Dh, D),
                 key_mask, d, b, scale);
      // The probabilities that multiply V: after dropout, in bf16.
      dropout_round(P16, P, nullptr, N * Lk, p_drop, seed,
                    rng_stream(stream, (first_b + b) * d.H + h));
      // ctx = P16 V, densely in bf16, then into the head's columns.
      gemm_batched(ComputeType::bf16, 1, 1, false, false, N, Dh, Lk, 1.f, P16, dense_layout(Lk),
                   gather_head(tb.v, v16 + ko, Lk, Dh, D), dense_layout(Dh), 0.f, C16,
                   dense_layout(Dh));
      place_head(ctx16 + qo, C16, N, Dh, D, false);
    }
  });
}

namespace {

// Backward of attention_forward_tiles: each tile's probabilities recomputed on its core.
void attention_backward_tiles(const AttnGrads& g, TensorIn dctx_in, TensorIn q_in,
                              const KeysValues& kv, const AttnDims& d, const AttnRun& r) {
  float *dq = g.dq.f32(), *dkk = g.dkk, *dvv = g.dvv;
  const float *dctx = dctx_in.f32(), *q = q_in.f32(), *kk = kv.k.f32(), *vv = kv.v.f32();
  const float* key_mask = kv.key_mask;
  const uint16_t *q16 = q_in.bf16(), *dctx16 = dctx_in.bf16();
  const float scale = r.scale, p_drop = r.p_drop;
  const uint64_t seed = r.seed, stream = r.stream;
  float* scratch = r.scratch;
  const int64_t first_b = r.first_b;
  const GradInto into = g.into;
  uint16_t* dq16 = g.dq.bf16();  // the query gradient written rounded, its sums into dq_bias
  const bool rq = dq16 != nullptr;
  const int64_t N = d.N, Lk = d.Lk, Dh = d.Dh, D = d.D, tile = N * Lk;
  const bool add = into == GradInto::add;
  LF_CHECK(!rq || !add, "attention_backward: a rounded query gradient is written, not added");
  // rq: each thread's column sums of the query gradient, added to g.dq_bias in thread order
  // (the region captures the pointer: each of its threads has its own thread_local).
  const int threads = num_threads();
  thread_local Buffer<float> colsums;
  float* part = rq ? colsums.grow(threads * D) : nullptr;
  if (rq) std::fill(part, part + threads * D, 0.f);
  thread_local Buffer<uint16_t> qb, kb, vb, gb;
  q16 = rounded_rows(qb, q, q16, d.B * N, D);
  dctx16 = rounded_rows(gb, dctx, dctx16, d.B * N, D);
  const uint16_t* k16 = rounded_rows(kb, kk, nullptr, d.B * Lk, D);
  const uint16_t* v16 = rounded_rows(vb, vv, nullptr, d.B * Lk, D);
  const int64_t per_thread = attention_scratch_floats(d) / threads;
  const BatchLayout dh = dense_layout(Dh), dt = dense_layout(Lk);
  parallel_for(0, d.B * d.H, 1, [&](int64_t i0, int64_t i1) {
    float* P = scratch + thread_id() * per_thread;  // the tile's probabilities
    float* dP = P + tile;                           // their gradients
    thread_local TileBuffers tb;
    uint16_t* P16 = tb.p16.grow(tile);
    float* out = tb.out.grow(std::max(N, Lk) * Dh);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / d.H, h = i % d.H;
      const int64_t qo = b * N * D + h * Dh, ko = b * Lk * D + h * Dh;
      const uint64_t st = rng_stream(stream, (first_b + b) * d.H + h);
      const uint16_t* Q = gather_head(tb.q, q16 + qo, N, Dh, D);
      const uint16_t* K = gather_head(tb.k, k16 + ko, Lk, Dh, D);
      const uint16_t* V = gather_head(tb.v, v16 + ko, Lk, Dh, D);
      const uint16_t* G = gather_head(tb.g, dctx16 + qo, N, Dh, D);
      tile_probs(P, Q, K, key_mask, d, b, scale);
      // dP = dctx V^T; then forward's bf16 probabilities after dropout and dP through the
      // dropout, under one draw of the mask.
      gemm_batched(ComputeType::bf16, 1, 1, false, true, N, Lk, Dh, 1.f, G, dh, V, dh, 0.f, dP, dt);
      dropout_round(P16, P, dP, tile, p_drop, seed, st);
      // dV = P16^T dctx
      gemm_batched(ComputeType::bf16, 1, 1, true, false, Lk, Dh, N, 1.f, P16, dt, G, dh, 0.f, out,
                   dh);
      place_head(dvv + ko, out, Lk, Dh, D, add);
      // The score gradients, rounded.
      softmax_backward(dP, P, dP, N, Lk, scale, false);
      uint16_t* dS16 = P16;
      vm::to_bf16_n(dS16, dP, tile);
      // dQ = dS K, dK = dS^T Q
      gemm_batched(ComputeType::bf16, 1, 1, false, false, N, Dh, Lk, 1.f, dS16, dt, K, dh, 0.f, out,
                   dh);
      if (rq) {
        float* cs = part + thread_id() * D + h * Dh;
        for (int64_t r = 0; r < N; ++r)
          vm::round_and_sum_row(dq16 + qo + r * D, cs, out + r * Dh, Dh);
      } else {
        place_head(dq + qo, out, N, Dh, D, add);
      }
      gemm_batched(ComputeType::bf16, 1, 1, true, false, Lk, Dh, N, 1.f, dS16, dt, Q, dh, 0.f, out,
                   dh);
      place_head(dkk + ko, out, Lk, Dh, D, add);
    }
  });
  if (rq && g.dq_bias)
    for (int t = 0; t < threads; ++t)
      for (int64_t c = 0; c < D; ++c) g.dq_bias[c] += part[t * D + c];
}

// Training forward: scores, softmax and weighted values of a block of heads at a time, the
// products batched over the block.
void attention_forward_batched(Tensor ctx, float* probs, TensorIn q, const float* kk,
                               const float* vv, const float* key_mask, const AttnDims& d,
                               float scale, float p_drop, uint64_t seed, uint64_t stream,
                               float* scratch, ComputeType prec, int64_t first_b,
                               uint16_t* probs16) {
  const int64_t tile = d.N * d.Lk;
  for_each_block(d, [&](const HeadBlock& k) {
    const int64_t qo = k.b0 * d.N * d.D + k.h0 * d.Dh, ko = k.b0 * d.Lk * d.D + k.h0 * d.Dh;
    float* P = probs + (k.b0 * d.H + k.h0) * tile;
    gemm_batched(prec, k.nb, k.nh, false, true, d.N, d.Lk, d.Dh, 1.f, q.at(qo), rows_layout(d, d.N),
                 kk + ko, rows_layout(d, d.Lk), 0.f, P, probs_layout(d));
    const bool drop = p_drop > 0.f;
    // bf16: the tile that multiplies V rounded while it is in cache, kept for backward.
    uint16_t* P16 =
        probs16 && gemm_batched_runs_bf16(prec, k.nb, k.nh, d.N, d.Dh, d.Lk) ? probs16 : nullptr;
    parallel_for(0, k.nb * k.nh, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = k.b0 + i / k.nh, h = k.h0 + i % k.nh;
        float* Pi = probs + (b * d.H + h) * tile;
        softmax_tile(Pi, d, b, scale, key_mask);
        if (drop)
          dropout_forward(scratch + i * tile, Pi, tile, p_drop, seed,
                          rng_stream(stream, (first_b + b) * d.H + h));
        if (P16) vm::to_bf16_n(P16 + (b * d.H + h) * tile, drop ? scratch + i * tile : Pi, tile);
      }
    });
    if (P16) {
      gemm_batched(prec, k.nb, k.nh, false, false, d.N, d.Dh, d.Lk, 1.f,
                   P16 + (k.b0 * d.H + k.h0) * tile, probs_layout(d), vv + ko, rows_layout(d, d.Lk),
                   0.f, ctx.at(qo), rows_layout(d, d.N));
      return;
    }
    gemm_batched(prec, k.nb, k.nh, false, false, d.N, d.Dh, d.Lk, 1.f, drop ? scratch : P,
                 drop ? block_layout(d, k) : probs_layout(d), vv + ko, rows_layout(d, d.Lk), 0.f,
                 ctx.at(qo), rows_layout(d, d.N));
  });
}

}  // namespace

void attention_forward(Tensor ctx_out, const AttnKept& kept, TensorIn q_in, const KeysValues& kv,
                       const AttnDims& d, const AttnRun& r) {
  float *ctx = ctx_out.f32(), *probs = kept.probs;
  const float *q = q_in.f32(), *kk = kv.k.f32(), *vv = kv.v.f32(), *key_mask = kv.key_mask;
  const float scale = r.scale, p_drop = r.p_drop;
  const uint64_t seed = r.seed, stream = r.stream;
  float* scratch = r.scratch;
  const ComputeType prec = r.t;
  const int64_t first_b = r.first_b;
  check(d, "attention_forward");
  LF_DCHECK(ctx_out && q_in && kk && vv && (probs || (ctx && q)),
            "attention_forward: null context, query, key or value (inference: f32)");
  LF_DCHECK((probs || scratch) && (p_drop == 0.f || scratch),
            "attention_forward: needs probs or scratch, and scratch for dropout");
  LF_DCHECK(kv.layout == KVLayout::token_major,
            "attention_forward: keys and values must be token-major (only the streaming rows "
            "read head-major ones)");
  PhaseScope ps(Phase::attention);
  if (probs) {
    attention_forward_batched(ctx_out, probs, q_in, kk, vv, key_mask, d, scale, p_drop, seed,
                              stream, scratch, prec, first_b, kept.pv.bf16());
    return;
  }
  // Inference: one (sequence, head) at a time per thread, its scores in the thread's scratch.
  const int64_t tile = d.N * d.Lk;
  const int64_t per_thread = attention_scratch_floats(d, p_drop > 0.f) / num_threads();
  parallel_for(0, d.B * d.H, 1, [&](int64_t i0, int64_t i1) {
    float* P = scratch + thread_id() * per_thread;
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / d.H, h = bh % d.H;
      const int64_t qo = b * d.N * d.D + h * d.Dh, ko = b * d.Lk * d.D + h * d.Dh;
      gemm(prec, false, true, d.N, d.Lk, d.Dh, 1.f, q + qo, d.D, kk + ko, d.D, 0.f, P, d.Lk);
      softmax_tile(P, d, b, scale, key_mask);
      const float* Pd = P;
      if (p_drop > 0.f) {
        float* t = P + tile;
        dropout_forward(t, P, tile, p_drop, seed, rng_stream(stream, (first_b + b) * d.H + h));
        Pd = t;
      }
      gemm(prec, false, false, d.N, d.Dh, d.Lk, 1.f, Pd, d.Lk, vv + ko, d.D, 0.f, ctx + qo, d.D);
    }
  });
}

void attention_backward(const AttnGrads& g, TensorIn dctx_in, const AttnKept& kept, TensorIn q_in,
                        const KeysValues& kv, const AttnDims& d, const AttnRun& r) {
  float *dq = g.dq.f32(), *dkk = g.dkk, *dvv = g.dvv;
  const float *dctx = dctx_in.f32(), *probs = kept.probs, *kk = kv.k.f32(), *vv = kv.v.f32();
  const uint16_t *dctx16 = dctx_in.bf16(), *probs16 = kept.pv.bf16();
  const float scale = r.scale, p_drop = r.p_drop;
  const uint64_t seed = r.seed, stream = r.stream;
  float* scratch = r.scratch;
  const ComputeType prec = r.t;
  const int64_t first_b = r.first_b;
  const GradInto into = g.into;
  check(d, "attention_backward");
  LF_DCHECK(g.dq && dkk && dvv && dctx_in && q_in && kk && vv && scratch,
            "attention_backward: null pointer");
  PhaseScope ps(Phase::attention);
  if (!probs) {
    LF_CHECK(prec == ComputeType::bf16,
             "attention_backward: probabilities are recomputed only by bf16 training");
    attention_backward_tiles(g, dctx_in, q_in, kv, d, r);
    return;
  }
  LF_CHECK(dq, "attention_backward: a rounded query gradient needs the tiled path");
  const int64_t tile = d.N * d.Lk;
  const float beta = into == GradInto::add ? 1.f : 0.f;
  const bool drop = p_drop > 0.f;
  float* dP = scratch;                          // the block's probability gradients
  float* Pd = scratch + block_tiles(d) * tile;  // its dropped-out probabilities
  for_each_block(d, [&](const HeadBlock& k) {
    const int64_t qo = k.b0 * d.N * d.D + k.h0 * d.Dh, ko = k.b0 * d.Lk * d.D + k.h0 * d.Dh;
    const float* P = probs + (k.b0 * d.H + k.h0) * tile;
    const BatchLayout q_l = rows_layout(d, d.N), k_l = rows_layout(d, d.Lk);
    const BatchLayout blk = block_layout(d, k);
    auto stream_of = [&](int64_t i) {
      return rng_stream(stream, (first_b + k.b0 + i / k.nh) * d.H + k.h0 + i % k.nh);
    };
    // dctx and dP are operands of two products each: in bf16 each is rounded once. The
    // probabilities that multiplied V come rounded (and dropped out) from forward.
    const bool bf16 = gemm_batched_runs_bf16(prec, k.nb, k.nh, d.N, d.Lk, d.Dh);
    const uint16_t* P16 = bf16 && probs16 ? probs16 + (k.b0 * d.H + k.h0) * tile : nullptr;
    if (drop && !P16)
      parallel_for(0, k.nb * k.nh, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t b = k.b0 + i / k.nh, h = k.h0 + i % k.nh;
          dropout_forward(Pd + i * tile, probs + (b * d.H + h) * tile, tile, p_drop, seed,
                          stream_of(i));
        }
      });
    thread_local Buffer<uint16_t> dctx_buf, dp_buf;
    const float* dctx_b = dctx ? dctx + qo : nullptr;
    const uint16_t* dctx16_b =
        dctx16 ? dctx16 + qo
               : (bf16 ? round_batch_bf16(dctx_buf, k.nb, k.nh, d.N, d.Dh, q_l, dctx_b) : nullptr);
    const TensorIn G = dctx16_b ? TensorIn(dctx16_b) : TensorIn(dctx_b);
    gemm_batched(prec, k.nb, k.nh, false, true, d.N, d.Lk, d.Dh, 1.f, G, q_l, vv + ko, k_l, 0.f, dP,
                 blk);
    gemm_batched(prec, k.nb, k.nh, true, false, d.Lk, d.Dh, d.N, 1.f,
                 P16 ? TensorIn(P16) : TensorIn(drop ? Pd : P),
                 drop && !P16 ? blk : probs_layout(d), G, q_l, beta, dvv + ko, k_l);
    // In bf16 the score gradients are rounded tile by tile right after softmax's backward,
    // while each tile is in cache (the block is dense: tile i at i * tile, as in dP).
    uint16_t* dp16 = bf16 ? dp_buf.grow(k.nb * k.nh * tile) : nullptr;
    parallel_for(0, k.nb * k.nh, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = k.b0 + i / k.nh, h = k.h0 + i % k.nh;
        float* g = dP + i * tile;
        if (drop) dropout_forward(g, g, tile, p_drop, seed, stream_of(i));
        softmax_backward(g, probs + (b * d.H + h) * tile, g, d.N, d.Lk, scale, false);
        if (dp16) vm::to_bf16_n(dp16 + i * tile, g, tile);
      }
    });
    const TensorIn dS = dp16 ? TensorIn(dp16) : TensorIn(dP);
    gemm_batched(prec, k.nb, k.nh, false, false, d.N, d.Dh, d.Lk, 1.f, dS, blk, kk + ko, k_l, beta,
                 dq + qo, q_l);
    gemm_batched(prec, k.nb, k.nh, true, false, d.Lk, d.Dh, d.N, 1.f, dS, blk, q_in.at(qo), q_l,
                 beta, dkk + ko, k_l);
  });
}

}  // namespace lf
