// Row-block attention (inference, attention.h): a block of query rows against every key, with
// all scores at once (attention_rows) or streaming over key blocks (attention_streaming_rows),
// and the bf16 copies of keys and values that their products read as they are.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "core/buffer.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/attention_block.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "layers/attention.h"

namespace lf {

namespace {

std::atomic<bool> g_round_once{true};

void check(const AttnDims& d, const RowBlock& rb, const KeysValues& kv, const char* what) {
  check_attn_dims(d, what);
  LF_DCHECK(rb.b >= 0 && rb.b < d.B && rb.i0 >= 0 && rb.i0 < rb.i1 && rb.i1 <= d.N, what,
            ": row block b=", rb.b, " [", rb.i0, ", ", rb.i1, ") outside B=", d.B, " N=", d.N);
  LF_DCHECK(kv.k && kv.v && kv.k.dtype == kv.v.dtype, what,
            ": keys and values missing or in two dtypes");
  LF_DCHECK(
      kv.k.is(DataType::f32) || (kv.k.is(DataType::bf16) && kv.layout == KVLayout::head_major),
      what, ": keys and values must be f32, or bf16 head-major");
}

}  // namespace

int64_t attention_rows_work_floats(int64_t rows, const AttnDims& d) {
  return (rows * d.Lk + 15) / 16 * 16;
}

bool attention_rows_run_bf16(ComputeType t, int64_t rows, const AttnDims& d) {
  return gemm_runs_bf16(t, rows, d.Lk, d.Dh);  // both products: rows x Lk x Dh
}

void attention_rows(float* ctx, const float* q, const KeysValues& kv, const AttnDims& d,
                    const RowBlock& rb, float scale, float* work, ComputeType prec) {
  check(d, rb, kv, "attention_rows");
  LF_DCHECK(ctx && q && work, "attention_rows: null pointer");
  const int64_t b = rb.b, i0 = rb.i0;
  const int64_t rows = rb.i1 - i0, Lk = d.Lk;
  const float* km = kv.key_mask ? kv.key_mask + b * Lk : nullptr;
  for (int64_t h = 0; h < d.H; ++h) {
    const HeadRows kh = head_rows(kv.k, kv.layout, d, b, h),
                   vh = head_rows(kv.v, kv.layout, d, b, h);
    gemm(prec, false, true, rows, Lk, d.Dh, 1.f, q + h * d.Dh, d.D, kh.p, kh.ld, 0.f, work, Lk);
    if (d.causal) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t seen = std::min(i0 + r + 1, Lk);
        softmax_forward(work + r * Lk, work + r * Lk, 1, seen, scale, km);
        std::fill(work + r * Lk + seen, work + (r + 1) * Lk, 0.f);
      }
    } else {
      softmax_forward(work, work, rows, Lk, scale, km);
    }
    gemm(prec, false, false, rows, d.Dh, Lk, 1.f, work, Lk, vh.p, vh.ld, 0.f, ctx + h * d.Dh, d.D);
  }
}

int64_t attention_streaming_work_floats(int64_t rows, const AttnDims& d) {
  const int64_t own = attn_block::work_floats(rows, d.Dh, kStreamKeyBlock);
  return (std::max(rows * kStreamKeyBlock + 2 * rows, own) + 15) / 16 * 16;
}

bool attention_streaming_runs_bf16(ComputeType t, int64_t rows, const AttnDims& d) {
  return gemm_runs_bf16(t, rows, kStreamKeyBlock, d.Dh) &&
         attn_block::available(attn_block::Operands::bf16) && d.Dh % 32 == 0;
}

void set_keys_rounded_once(bool on) { g_round_once.store(on, std::memory_order_relaxed); }
bool keys_rounded_once() { return g_round_once.load(std::memory_order_relaxed); }

void round_heads_bf16(uint16_t* dst, const float* src, int64_t ld, const AttnDims& d) {
  parallel_for(0, d.B * d.H, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / d.H, h = i % d.H;
      to_bf16(dst + i * d.Lk * d.Dh, src + b * d.Lk * ld + h * d.Dh, d.Lk, d.Dh, ld);
    }
  });
}

void attention_streaming_rows(float* ctx, const float* q, const KeysValues& kv, const AttnDims& d,
                              const RowBlock& rb, float scale, float* work, ComputeType prec) {
  check(d, rb, kv, "attention_streaming_rows");
  LF_DCHECK(ctx && q && work, "attention_streaming_rows: null pointer");
  const int64_t b = rb.b, i0 = rb.i0, i1 = rb.i1;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t rows = i1 - i0, Lk = d.Lk, kb = kStreamKeyBlock, Dh = d.Dh, D = d.D;
  float* S = work;              // [rows, kb] scores, then weights
  float* m = work + rows * kb;  // running max of scale * score, per row
  float* l = m + rows;          // running sum of weights, per row
  const float* km = kv.key_mask ? kv.key_mask + b * Lk : nullptr;
  // The engine's own kernel where it has one for the products' operands
  // (kernels/attention_block.h): bf16 keys and values (rounded once by their owner) only in
  // bf16; else gemm per key block, below.
  const auto ops =
      gemm_runs_bf16(prec, rows, kb, Dh) ? attn_block::Operands::bf16 : attn_block::Operands::f32;
  const bool kv16 = kv.k.is(DataType::bf16);
  if (attn_block::available(ops) && (!kv16 || ops == attn_block::Operands::bf16)) {
    // bf16 products on f32 keys and values: the queries rounded here, as the kernel rounds an
    // f32 query (bf16_round), so that it runs on bf16 operands and rounds the keys and values
    // of each key block itself.
    thread_local Buffer<uint16_t> q16;
    const bool round_q = ops == attn_block::Operands::bf16 && !kv16;
    uint16_t* qh = round_q ? q16.grow(rows * Dh) : nullptr;
    for (int64_t h = 0; h < d.H; ++h) {
      if (round_q)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < Dh; ++c) qh[r * Dh + c] = vm::bf16_round(q[r * D + h * Dh + c]);
      const HeadRows k = head_rows(kv.k, kv.layout, d, b, h),
                     v = head_rows(kv.v, kv.layout, d, b, h);
      const attn_block::HeadIn in{round_q ? TensorIn(qh) : TensorIn(q + h * Dh), k.p, v.p,
                                  round_q ? Dh : D, k.ld};
      attn_block::attend_head(ctx + h * Dh, D, in, km, rows, Lk, Dh, kb, d.causal ? i0 : -1, scale,
                              work);
    }
    return;
  }
  // Keys a row may see: all, or j <= i when causal.
  const int64_t key_end = d.causal ? std::min(Lk, i1) : Lk;
  for (int64_t h = 0; h < d.H; ++h) {
    float* O = ctx + h * Dh;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(O + r * D, O + r * D + Dh, 0.f);
      m[r] = kNegInf;
      l[r] = 0.f;
    }
    const HeadRows kh = head_rows(kv.k, kv.layout, d, b, h),
                   vh = head_rows(kv.v, kv.layout, d, b, h);
    for (int64_t j0 = 0; j0 < key_end; j0 += kb) {
      const int64_t cols = std::min(kb, key_end - j0);
      const float* mj = km ? km + j0 : nullptr;
      if (mj) {
        bool any = false;
        for (int64_t j = 0; j < cols && !any; ++j) any = mj[j] != 0.f;
        if (!any) continue;  // a fully padded key block contributes nothing
      }
      gemm(prec, false, true, rows, cols, Dh, 1.f, q + h * Dh, D, kh.p.at(j0 * kh.ld), kh.ld, 0.f,
           S, kb);
      for (int64_t r = 0; r < rows; ++r) {
        float* s = S + r * kb;
        // Columns this row may see in the block (causal: keys up to its own position).
        const int64_t lim = d.causal ? std::max<int64_t>(0, std::min(cols, i0 + r + 1 - j0)) : cols;
        const float bm = vm::masked_scaled_max(s, mj, lim, scale);
        if (bm == kNegInf) {  // nothing visible in this block: zero weights, state unchanged
          for (int64_t j = 0; j < lim; ++j)  // (but a NaN score poisons the row, as it should)
            if ((!mj || mj[j] != 0.f) && std::isnan(s[j])) l[r] = s[j];
          std::fill(s, s + cols, 0.f);
          continue;
        }
        const float mnew = std::max(m[r], bm);
        const float sum = vm::exp_shifted_sum(s, s, mj, lim, scale, mnew);
        std::fill(s + lim, s + cols, 0.f);
        if (mnew > m[r]) {
          const float alpha = vm::exp_scalar(m[r] - mnew);  // 0 on the first visible block
          float* o = O + r * D;
          if (l[r] != 0.f) {
#pragma omp simd
            for (int64_t c = 0; c < Dh; ++c) o[c] *= alpha;
          }
          l[r] *= alpha;
          m[r] = mnew;
        }
        l[r] += sum;
      }
      gemm(prec, false, false, rows, Dh, cols, 1.f, S, kb, vh.p.at(j0 * vh.ld), vh.ld, 1.f, O, D);
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* o = O + r * D;
      const float inv = l[r] > 0.f ? 1.f / l[r] : std::isnan(l[r]) ? l[r] : 0.f;  // NaN stays
#pragma omp simd
      for (int64_t c = 0; c < Dh; ++c) o[c] *= inv;
    }
  }
}

void attention_streaming_forward(float* ctx, const float* q, const KeysValues& kv,
                                 const AttnDims& d, float scale, float* scratch, ComputeType prec) {
  check_attn_dims(d, "attention_streaming_forward");
  LF_DCHECK(ctx && q && kv.k && kv.v && scratch, "attention_streaming_forward: null pointer");
  PhaseScope ps(Phase::attention);
  const int64_t qb = kStreamQueryBlock;
  const int64_t nb = (d.N + qb - 1) / qb;
  const int64_t per_thread = attention_streaming_work_floats(qb, d);
  parallel_for(0, d.B * nb, 1, [&](int64_t t0, int64_t t1) {
    float* w = scratch + thread_id() * per_thread;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / nb, i0 = (t % nb) * qb, i1 = std::min(d.N, i0 + qb);
      const int64_t off = (b * d.N + i0) * d.D;
      attention_streaming_rows(ctx + off, q + off, kv, d, RowBlock{/*b=*/b, /*i0=*/i0, /*i1=*/i1},
                               scale, w, prec);
    }
  });
}

}  // namespace lf
