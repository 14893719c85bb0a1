// Training form of the encoder layer: forward keeping activations, and backward.
//   post-norm: a = x + Drop(Attn(x));      y = LN_out(LN_attn(a) + Drop(FFN(LN_attn(a))))
//   pre-norm:  a = x + Drop(Attn(LN_attn(x)));  y = a + Drop(FFN(LN_out(a)))
#include "layers/encoder_layer.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/ops.h"
#include "layers/attention_path.h"
#include "layers/feed_forward.h"
#include "linformer/rng.h"

namespace lf {

namespace {

// out = a + b over n elements (the residual sums).
void residual_add(float* out, const float* a, const float* b, int64_t n) {
  PhaseScope ps(Phase::elementwise);
  parallel_for(0, n, 1 << 14, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
  });
}

// d(input of a dropout) from d(its output): in buf, or dout itself when nothing was dropped.
const float* dropout_grad(float* buf, const float* dout, int64_t n, float p, uint64_t seed,
                          uint64_t stream, int64_t first) {
  if (p <= 0.f) return dout;
  dropout_backward(buf, dout, n, p, seed, stream, first, GradInto::overwrite);
  return buf;
}

// Backward of the attention branch: from d(attention output before dropout) `dao` [R,D] into
// d(attention input) `din` (added to it, or written over it with GradInto::overwrite). dao
// may alias din: it is read in full (by the output map's backward) before din is written.
// dao null: L.dao16 already holds it rounded, its column sums added to the output map's bias
// gradient (bf16 output-map products only).
void attention_branch_backward(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                               const float* in, float* din, const float* dao, GradInto into) {
  const Config& cfg = *c.cfg;
  Layout& L = *c.lay;
  const int64_t R = c.B * c.N, D = cfg.d_model;
  const LinearDims map{/*rows=*/R, /*in=*/D, /*out=*/D};  // the query and output maps
  if (L.dctx16) {  // bf16 training: d(ctx) written in bf16 only, as attention's products read it
    linear_backward_bf16_input(L.dctx16, c.grad(lp.ao.w), c.grad(lp.ao.b), dao, A.ctx16, map,
                               c.wt(lp.ao), L.dao16);
  } else {
    LF_DCHECK(dao, "attention_branch_backward: a pre-rounded gradient needs bf16 products");
    linear_backward(LinearGrads{L.dctx, c.grad(lp.ao.w), c.grad(lp.ao.b), GradInto::overwrite}, dao,
                    ActIn(A.ctx, A.ctx16), c.weight(lp.ao), map, c.precision);
  }
  const KeysValues kv = c.path->saved(c, A);
  const ActIn dq = c.path->attend_backward(c, lp, A, l, kv);
  linear_backward(LinearGrads{din, c.grad(lp.q.w), c.grad(lp.q.b), into}, dq, ActIn(in, A.in16),
                  c.weight(lp.q), map, c.precision);
  c.path->backward(c, lp, A, in, din, L.dkk, L.dvv);
}

FfnActs ffn_acts(const LayerAct& A) { return {A.h, A.g, A.h16, A.g16}; }
FfnScratch ffn_scratch(const Layout& L) { return {L.dG, L.dG16, L.dy16}; }

}  // namespace

const uint16_t* LayerContext::round16(uint16_t* buf, const float* x, int64_t rows,
                                      int64_t cols) const {
  return buf ? round_bf16(buf, x, rows * cols) : nullptr;
}

AttnDims LayerContext::dims(const LayerParams& lp) const {
  return AttnDims{/*B=*/B,
                  /*N=*/N,
                  /*Lk=*/path->key_length(N, proj_rows(lp)),
                  /*D=*/cfg->d_model,
                  /*H=*/cfg->n_heads,
                  /*Dh=*/cfg->d_head(),
                  /*causal=*/cfg->causal};
}

int64_t LayerContext::proj_rows(const LayerParams& lp) const {
  return path->formed_rows(*cfg, lp.K, N);
}

void LayerContext::check(const LayerParams& lp, const float* x_in, const char* what) const {
  LF_DCHECK(cfg && path && proj && lay && x_in, what, ": incomplete layer context");
  LF_DCHECK(B > 0 && N > 0 && N <= cfg->max_len, what, ": batch B=", B, " N=", N, " (max_len ",
            cfg->max_len, ")");
  LF_DCHECK(lp.K == 0 || (lp.K > 0 && lp.K <= cfg->max_len), what, ": projected length K=", lp.K);
  LF_DCHECK(!train || grad.grads, what, ": training without a gradient buffer");
}

float LayerContext::scale() const { return 1.f / std::sqrt(static_cast<float>(cfg->d_head())); }

AttnRun LayerContext::attn_run(int64_t layer, float p_drop) const {
  AttnRun r;
  r.scale = scale();
  r.p_drop = p_drop;
  r.seed = seed;
  r.stream = rng_stream(kAttnProbs, layer);
  r.first_b = first;
  r.scratch = lay->scratch;
  r.t = precision;
  return r;
}

void layer_forward(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l, ActIn in,
                   Act out) {
  const float* x_in = in.f;
  const uint16_t* x_in16 = in.h;
  float* x_out = out.f;
  c.check(lp, x_in, "layer_forward");
  LF_DCHECK(x_out, "layer_forward: null output");
  const Config& cfg = *c.cfg;
  Layout& L = *c.lay;
  const int64_t R = c.B * c.N, D = cfg.d_model;
  const float eps = cfg.layer_norm_eps;
  const float p = c.train ? cfg.dropout : 0.f;
  const float pa = c.train ? cfg.attention_dropout : 0.f;
  const bool pre = cfg.norm == NormPlacement::pre;

  // The LayerNorms write the bf16 copies of their outputs that bf16 products read (A.in16,
  // A.ffn_in16, the next layer's in16 as x_out16) in the same pass.
  const float* attn_in = x_in;
  const uint16_t* in16 = nullptr;
  if (pre) {
    layernorm_forward(Act(A.ln1, A.in16), A.mean1, A.rstd1, x_in, lp.ln_attn.w, lp.ln_attn.b, R, D,
                      eps);
    attn_in = A.ln1;
    in16 = A.in16;
  } else {
    in16 = x_in16 ? x_in16 : c.round16(A.in16, x_in, R, D);
  }
  const LinearDims map{/*rows=*/R, /*in=*/D, /*out=*/D};  // the query and output maps
  if (A.q16) {  // bf16 training: the queries written in bf16 only, as the products read them
    LF_DCHECK(in16 && c.wt(lp.q).forward, "layer_forward: bf16 queries without bf16 operands");
    c.wt(lp.q).forward->apply_bf16(A.q16, in16, R, lp.q.b);
  } else {
    linear_forward(A.q, ActIn(attn_in, in16), c.weight(lp.q), lp.q.b, map, c.precision);
  }
  const KeysValues kv = c.path->forward(c, lp, A, attn_in);
  c.path->attend(c, lp, A, l, kv, pa);
  linear_forward(L.tmp, ActIn(A.ctx, A.ctx ? c.round16(A.ctx16, A.ctx, R, D) : A.ctx16),
                 c.weight(lp.ao), lp.ao.b, map, c.precision);
  dropout_forward(L.tmp, L.tmp, R * D, p, c.seed, rng_stream(kAttnOut, l), c.first_elem());
  // a = x + attention branch, and the LayerNorm before the FFN, in one pass.
  const float* ffn_base;
  if (!pre) {
    add_layernorm_forward(A.a, Act(A.ffn_in, A.ffn_in16), A.mean1, A.rstd1, x_in, L.tmp,
                          lp.ln_attn.w, lp.ln_attn.b, R, D, eps);
    ffn_base = A.ffn_in;
  } else {
    add_layernorm_forward(A.a, Act(A.ffn_in, A.ffn_in16), A.mean2, A.rstd2, x_in, L.tmp,
                          lp.ln_out.w, lp.ln_out.b, R, D, eps);
    ffn_base = A.a;
  }
  const FeedForward ffn{lp.inter, lp.out, D, cfg.d_ff, c.precision, c.wt};
  ffn.forward(L.tmp, A.ffn_in, A.ffn_in16, R, ffn_acts(A));
  dropout_forward(L.tmp, L.tmp, R * D, p, c.seed, rng_stream(kFfnOut, l), c.first_elem());
  if (!pre) {
    add_layernorm_forward(A.f, out, A.mean2, A.rstd2, ffn_base, L.tmp, lp.ln_out.w, lp.ln_out.b, R,
                          D, eps);
  } else {
    residual_add(x_out, ffn_base, L.tmp, R * D);
  }
}

void layer_backward(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                    const float* x_in) {
  c.check(lp, x_in, "layer_backward");
  LF_DCHECK(c.grad.grads && c.lay->dres, "layer_backward: no gradient buffers");
  const Config& cfg = *c.cfg;
  Layout& L = *c.lay;
  const int64_t R = c.B * c.N, D = cfg.d_model;
  const float p = cfg.dropout;
  const uint64_t s_attn = rng_stream(kAttnOut, l), s_ffn = rng_stream(kFfnOut, l);
  const int64_t f0 = c.first_elem();
  const FeedForward ffn{lp.inter, lp.out, D, cfg.d_ff, c.precision, c.wt};
  const GradMap& g = c.grad;
  if (cfg.norm == NormPlacement::post) {
    // bf16 products: each LayerNorm's backward also writes the gradient the next map's
    // products read (after the branch's dropout), rounded, with that map's bias gradient.
    const RoundedGrad ffn_out{L.dy16, g(lp.out.b), p, c.seed, s_ffn, f0};
    const RoundedGrad attn_out{L.dao16, g(lp.ao.b), p, c.seed, s_attn, f0};
    layernorm_backward(L.d1, g(lp.ln_out.w), g(lp.ln_out.b), L.dres, A.f, lp.ln_out.w, A.mean2,
                       A.rstd2, R, D, GradInto::overwrite, L.dy16 ? &ffn_out : nullptr);  // d f
    // d ffn_in = d f (the residual path) + the FFN's input gradient, added onto d1 in place
    // (the FFN reads its output gradient, dy16, or else d1 itself without dropout, before
    // writing).
    ffn.backward(L.d1, L.dy16 ? nullptr : dropout_grad(L.tmp, L.d1, R * D, p, c.seed, s_ffn, f0),
                 A.ffn_in, A.ffn_in16, R, ffn_acts(A), ffn_scratch(L), g, GradInto::add);
    layernorm_backward(L.dres, g(lp.ln_attn.w), g(lp.ln_attn.b), L.d1, A.a, lp.ln_attn.w, A.mean1,
                       A.rstd1, R, D, GradInto::overwrite, L.dao16 ? &attn_out : nullptr);  // d a
    attention_branch_backward(
        c, lp, A, l, x_in, L.dres,
        L.dao16 ? nullptr : dropout_grad(L.tmp, L.dres, R * D, p, c.seed, s_attn, f0),
        GradInto::add);
  } else {
    ffn.backward(L.d2, dropout_grad(L.tmp, L.dres, R * D, p, c.seed, s_ffn, f0), A.ffn_in,
                 A.ffn_in16, R, ffn_acts(A), ffn_scratch(L), g, GradInto::overwrite);
    layernorm_backward(L.dres, g(lp.ln_out.w), g(lp.ln_out.b), L.d2, A.a, lp.ln_out.w, A.mean2,
                       A.rstd2, R, D);
    attention_branch_backward(c, lp, A, l, A.ln1, L.d2,
                              dropout_grad(L.tmp, L.dres, R * D, p, c.seed, s_attn, f0),
                              GradInto::overwrite);
    layernorm_backward(L.dres, g(lp.ln_attn.w), g(lp.ln_attn.b), L.d2, x_in, lp.ln_attn.w, A.mean1,
                       A.rstd1, R, D);
  }
}

}  // namespace lf
