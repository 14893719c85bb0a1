// Inference form of the encoder layer (no dropout, nothing kept), laid out by the planner's
// inference plan. Whole-batch steps first (the attention path's keys and values, or their
// projections), then blocks of query rows, one per thread at a time, each running Q,
// attention, the output map, residual + LayerNorm and the FFN with single-threaded products
// on per-thread workspace: the [R,F] FFN activation never exists.
#include <algorithm>

#include "core/check.h"
#include "core/parallel.h"
#include "kernels/ops.h"
#include "layers/attention_path.h"
#include "layers/encoder_layer.h"
#include "layers/feed_forward.h"

namespace lf {

void layer_forward_infer(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                         const float* x_in, float* x_out) {
  using Epi = PackedLinear::Epilogue;
  const Config& cfg = *c.cfg;
  c.check(lp, x_in, "layer_forward_infer");
  LF_DCHECK(x_out && c.lay->work && c.lay->chunk > 0,
            "layer_forward_infer: no output, or no "
            "row-block workspace (chunk=",
            c.lay->chunk, ")");
  const Layout& L = *c.lay;
  const int64_t R = c.B * c.N, N = c.N, D = cfg.d_model, F = cfg.d_ff;
  const float eps = cfg.layer_norm_eps;
  const bool pre = cfg.norm == NormPlacement::pre;
  const float scale = c.scale();
  const AttnDims d = c.dims(lp);
  const float* attn_in = x_in;
  if (pre) {
    layernorm_forward(A.ln1, nullptr, nullptr, x_in, lp.ln_attn.w, lp.ln_attn.b, R, D, eps);
    attn_in = A.ln1;
  }
  const float* ctx_all = nullptr;
  const KeysValues kv = c.path->infer_batch(c, lp, A, attn_in, &ctx_all);
  const FeedForward ffn{lp.inter, lp.out, D, F, c.precision};
  const int64_t ch = L.chunk, nc = (N + ch - 1) / ch;
  // Row blocks are handed out dynamically: the blocks cost the same, but a core shared with
  // another process must not hold back the whole layer. Batch-invariant inference uses every
  // thread even for one block, so that the blocks' products always run in a parallel region.
  const int64_t items = c.B * nc;
  const int nt =
      c.invariant ? num_threads() : static_cast<int>(std::min<int64_t>(num_threads(), items));
#pragma omp parallel num_threads(nt) if (nt > 1 && !omp_in_parallel())
  {
    float* w = L.work + omp_get_thread_num() * L.work_floats;
    float* wq = w;              // [ch, D] queries
    float* wc = wq + ch * D;    // [ch, D] attention context
    float* wa = wc + ch * D;    // [ch, D] x + attention branch
    float* wy = wa + ch * D;    // [ch, D] FFN input
    float* wh = wy + ch * D;    // [ch, F] FFN hidden
    float* watt = wh + ch * F;  // attention scores
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
        c.path->infer_rows(wc, wq, kv, d, RowBlock{/*b=*/b, /*i0=*/i0, /*i1=*/i0 + rows}, scale,
                           watt, c.precision);
        ctx = wc;
      }
      // a = x + (ctx Wo^T + bo): residual and bias folded into the GEMM's C.
      for (int64_t r = 0; r < rows; ++r) {
        float* ar = wa + r * D;
        const float* xr = xc + r * D;
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) ar[j] = xr[j] + lp.ao.b[j];
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
      float* xo = x_out + g * D;
      ffn.infer_rows(xo, base, wh, wy, rows);
      if (!pre) layernorm_forward(xo, nullptr, nullptr, xo, lp.ln_out.w, lp.ln_out.b, rows, D, eps);
    }
  }
}

}  // namespace lf
