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
// dao f32, or bf16 (L.ao_dy, rounded with the output map's bias gradient summed: post-norm
// bf16 output-map products). in: the attention input in f32 (x, or ln1 pre-norm).
void attention_branch_backward(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                               const float* in, float* din, TensorIn dao, GradInto into) {
  const Config& cfg = *c.cfg;
  Layout& L = *c.lay;
  const int64_t R = c.B * c.N, D = cfg.d_model;
  const LinearDims map{/*rows=*/R, /*in=*/D, /*out=*/D};  // the query and output maps
  // d(ctx) in the dtype attention's products read it (L.dctx: bf16 when the maps run in bf16).
  linear_backward(LinearGrads{L.dctx, c.grad(lp.ao.w), c.grad(lp.ao.b), GradInto::overwrite}, dao,
                  A.ctx, c.weight(lp.ao), map, c.precision);
  const KeysValues kv = c.path->saved(c, A);
  const TensorIn dq = c.path->attend_backward(c, lp, A, l, kv);
  linear_backward(LinearGrads{din, c.grad(lp.q.w), c.grad(lp.q.b), into}, dq, A.maps_in,
                  c.weight(lp.q), map, c.precision);
  c.path->backward(c, lp, A, in, din, L.dkk, L.dvv);
}

FfnActs ffn_acts(const LayerAct& A) { return {A.h, A.g}; }

}  // namespace

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

void layer_forward(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                   const float* x_in, float* x_out, Tensor next_maps_in) {
  c.check(lp, x_in, "layer_forward");
  LF_DCHECK(x_out && A.maps_in, "layer_forward: null output or maps input");
  const Config& cfg = *c.cfg;
  Layout& L = *c.lay;
  const int64_t R = c.B * c.N, D = cfg.d_model;
  const float eps = cfg.layer_norm_eps;
  const float p = c.train ? cfg.dropout : 0.f;
  const float pa = c.train ? cfg.attention_dropout : 0.f;
  const bool pre = cfg.norm == NormPlacement::pre;

  // The LayerNorms write the operands the next products read (A.maps_in, A.ffn_x, the next
  // layer's maps_in) in the same pass, where those are bf16 buffers of their own.
  const float* attn_in = x_in;
  if (pre) {
    layernorm_forward(A.ln1, A.mean1, A.rstd1, x_in, lp.ln_attn.w, lp.ln_attn.b, R, D, eps,
                      A.maps_in);
    attn_in = A.ln1;
  }
  const LinearDims map{/*rows=*/R, /*in=*/D, /*out=*/D};  // the query and output maps
  linear_forward(A.q, A.maps_in, c.weight(lp.q), lp.q.b, map, c.precision);
  const KeysValues kv = c.path->forward(c, lp, A, attn_in);
  c.path->attend(c, lp, A, l, kv, pa);
  linear_forward(L.tmp, A.ctx, c.weight(lp.ao), lp.ao.b, map, c.precision);
  dropout_forward(L.tmp, L.tmp, R * D, p, c.seed, rng_stream(kAttnOut, l), c.first_elem());
  // a = x + attention branch, and the LayerNorm before the FFN, in one pass.
  const float* ffn_base;
  if (!pre) {
    add_layernorm_forward(A.a, A.ffn_in, A.mean1, A.rstd1, x_in, L.tmp, lp.ln_attn.w, lp.ln_attn.b,
                          R, D, eps, A.ffn_x);
    ffn_base = A.ffn_in;
  } else {
    add_layernorm_forward(A.a, A.ffn_in, A.mean2, A.rstd2, x_in, L.tmp, lp.ln_out.w, lp.ln_out.b, R,
                          D, eps, A.ffn_x);
    ffn_base = A.a;
  }
  const FeedForward ffn{lp.inter, lp.out, D, cfg.d_ff, c.precision, c.wt};
  ffn.forward(L.tmp, A.ffn_x, R, ffn_acts(A));
  dropout_forward(L.tmp, L.tmp, R * D, p, c.seed, rng_stream(kFfnOut, l), c.first_elem());
  if (!pre) {
    add_layernorm_forward(A.f, x_out, A.mean2, A.rstd2, ffn_base, L.tmp, lp.ln_out.w, lp.ln_out.b,
                          R, D, eps, next_maps_in);
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
    const RoundedGrad ffn_out{L.ffn_dy.bf16(), g(lp.out.b), p, c.seed, s_ffn, f0};
    const RoundedGrad attn_out{L.ao_dy.bf16(), g(lp.ao.b), p, c.seed, s_attn, f0};
    layernorm_backward(L.d1, g(lp.ln_out.w), g(lp.ln_out.b), L.dres, A.f, lp.ln_out.w, A.mean2,
                       A.rstd2, R, D, GradInto::overwrite, L.ffn_dy ? &ffn_out : nullptr);  // d f
    // d ffn_in = d f (the residual path) + the FFN's input gradient, added onto d1 in place
    // (the FFN reads its output gradient, ffn_dy, or else d1 itself without dropout, before
    // writing).
    ffn.backward(L.d1,
                 L.ffn_dy ? TensorIn(L.ffn_dy)
                          : TensorIn(dropout_grad(L.tmp, L.d1, R * D, p, c.seed, s_ffn, f0)),
                 A.ffn_x, R, ffn_acts(A), L.dG, g, GradInto::add);
    layernorm_backward(L.dres, g(lp.ln_attn.w), g(lp.ln_attn.b), L.d1, A.a, lp.ln_attn.w, A.mean1,
                       A.rstd1, R, D, GradInto::overwrite, L.ao_dy ? &attn_out : nullptr);  // d a
    attention_branch_backward(
        c, lp, A, l, x_in, L.dres,
        L.ao_dy ? TensorIn(L.ao_dy)
                : TensorIn(dropout_grad(L.tmp, L.dres, R * D, p, c.seed, s_attn, f0)),
        GradInto::add);
  } else {
    ffn.backward(L.d2, dropout_grad(L.tmp, L.dres, R * D, p, c.seed, s_ffn, f0), A.ffn_x, R,
                 ffn_acts(A), L.dG, g, GradInto::overwrite);
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
