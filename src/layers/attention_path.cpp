// The registry of attention kinds. Adding a kind: implement AttentionPath in its own file,
// declare its getter in attention_paths.h, list it in attention_kinds() (see docs/design.md).
#include "layers/attention_path.h"

#include <algorithm>

#include "core/check.h"
#include "core/parallel.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "layers/attention_path_nystrom.h"
#include "layers/attention_paths.h"

namespace lf {

const std::vector<const AttentionPath*>& attention_kinds() {
  static const std::vector<const AttentionPath*> kinds{&standard_path(ExactAttention::tiled),
                                                       &max_pool_path(), &project_keys_path(),
                                                       &project_input_path(), &nystrom_path()};
  return kinds;
}

const AttentionPath& attention_path(const Config& cfg, ExactAttention exact) {
  const AttentionPath* found = nullptr;
  for (const AttentionPath* p : attention_kinds()) {
    if (!p->runs(cfg)) continue;
    LF_CHECK(!found, "config: attention kinds ", found ? found->name() : "", " and ", p->name(),
             " both claim this configuration (each must run only its own)");
    found = p;
  }
  LF_CHECK(found, "config: no attention kind runs attention ", to_string(cfg.attention),
           " with projection ", to_string(cfg.projection), " and sharing ", to_string(cfg.sharing));
  return found->inference_variant(exact);
}

std::vector<AttentionVariant> attention_variants(const Config& base) {
  std::vector<AttentionVariant> v;
  for (const AttentionPath* p : attention_kinds()) p->variants(base, v);
  return v;
}

// ---- Softmax attention: the default attention of a kind ----

void AttentionPath::plan_attention(Carver& c, LayerAct& A, const Config& cfg,
                                   const PathShape& s) const {
  // The probabilities are kept for backward unless bf16 attention runs tile by tile
  // (attention_forward_tiles), backward recomputing them; its dims as layer_forward's.
  const AttnDims ad{/*B=*/s.B,
                    /*N=*/s.N,
                    /*Lk=*/key_length(s.N, formed_rows(cfg, s.K, s.N)),
                    /*D=*/cfg.d_model,
                    /*H=*/cfg.n_heads,
                    /*Dh=*/cfg.d_head(),
                    /*causal=*/cfg.causal};
  if (s.q_bf16_only && !attention_keeps_probs(ad, s.t)) return;
  const int64_t n = s.B * cfg.n_heads * s.N * key_length(s.N, s.K);
  A.probs = c.take<float>(n);
  if (s.t == ComputeType::bf16) A.probs_v = c.take<uint16_t>(n);
}

void AttentionPath::attend(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                           const KeysValues& kv, float p_drop) const {
  // The context in the dtype the planner chose (bf16 when the output map reads it so); without
  // kept probabilities (the planner's choice), tile by tile, backward recomputing them.
  if (c.train && !A.probs) {
    LF_DCHECK(A.q.is(DataType::bf16) && A.ctx.is(DataType::bf16),
              "attend: tiled attention needs bf16 queries and context");
    attention_forward_tiles(A.ctx, A.q, kv, c.dims(lp), c.attn_run(l, p_drop));
    return;
  }
  const AttnKept kept = c.train ? AttnKept{A.probs, A.probs_v} : AttnKept{};
  attention_forward(A.ctx, kept, A.q, kv, c.dims(lp), c.attn_run(l, p_drop));
}

TensorIn AttentionPath::attend_backward(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                                        int64_t l, const KeysValues& kv) const {
  Layout& L = *c.lay;
  const int64_t R = c.B * c.N, D = c.cfg->d_model;
  const LinearDims map{/*rows=*/R, /*in=*/D, /*out=*/D};  // the query map
  // Tiled bf16 attention writes the query gradient rounded, with the query bias gradient, into
  // L.ao_dy (free once the output map's products have read it), as the query map's products
  // take it.
  const bool dq_rounded = !A.probs && L.ao_dy && linear_backward_runs_bf16(c.precision, map);
  const Tensor dq = dq_rounded ? L.ao_dy : Tensor(L.dq);
  attention_backward(
      AttnGrads{dq, L.dkk, L.dvv, GradInto::overwrite, dq_rounded ? c.grad(lp.q.b) : nullptr},
      L.dctx, AttnKept{A.probs, A.probs_v}, A.q, kv, c.dims(lp),
      c.attn_run(l, c.cfg->attention_dropout));
  return dq;
}

// ---- The K and V maps ----

void KVMaps::take(Carver& c, const Config& cfg, const PathShape& s) {
  k = c.take<float>(s.B * s.N * cfg.d_model);
  v = c.take<float>(s.B * s.N * cfg.d_model);
}

void KVMaps::forward(const LayerContext& c, const LayerParams& lp, TensorIn in) const {
  const int64_t R = c.B * c.N, D = c.cfg->d_model;
  const LinearDims kv{/*rows=*/R, /*in=*/D, /*out=*/D};
  linear_forward(k, in, c.weight(lp.k), lp.k.b, kv, c.precision);
  linear_forward(v, in, c.weight(lp.v), lp.v.b, kv, c.precision);
}

void KVMaps::infer(const LayerContext& c, const LayerParams& lp, const float* in) const {
  using Epi = PackedLinear::Epilogue;
  const int64_t R = c.B * c.N;
  lp.k.packed.apply(k, in, R, lp.k.b, Epi::store, c.N);
  lp.v.packed.apply(v, in, R, lp.v.b, Epi::store, c.N);
}

int64_t KVMaps::stage_floats(int64_t rows, int64_t D) { return std::min(rows, kStageRows) * D; }

void KVMaps::infer_head_major(const LayerContext& c, const LayerParams& lp, const float* in,
                              float* stage, Tensor k, Tensor v) {
  using Epi = PackedLinear::Epilogue;
  const int64_t R = c.B * c.N, N = c.N, D = c.cfg->d_model, H = c.cfg->n_heads, Dh = D / H;
  // With a fixed row tile (batch invariance) a staged call holds one sequence's rows, so that
  // a row's place in its tile depends on its position only.
  const auto one = [&](Tensor out, const PackedLinear& map, const float* bias) {
    const int64_t seg = map.row_tile() > 0 ? N : R;
    for (int64_t r0 = 0; r0 < R;) {
      const int64_t r1 = std::min({R, r0 + kStageRows, (r0 / seg + 1) * seg});
      map.apply(stage, in + r0 * D, r1 - r0, bias, Epi::store);
      // Each head's columns of the staged rows to that head's rows, batch element by element.
      parallel_for(0, H, 1, [&](int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t g = r0; g < r1;) {
            const int64_t b = g / N, pos = g % N, rows = std::min(r1, (b + 1) * N) - g;
            const Tensor dst = out.at(((b * H + h) * N + pos) * Dh);
            const float* src = stage + (g - r0) * D + h * Dh;
            if (dst.bf16())
              to_bf16(dst.bf16(), src, rows, Dh, D);
            else
              vm::copy_rows(dst.f32(), Dh, src, D, rows, Dh);
            g += rows;
          }
      });
      r0 = r1;
    }
  };
  one(k, lp.k.packed, lp.k.b);
  one(v, lp.v.packed, lp.v.b);
}

void KVMaps::backward(const LayerContext& c, const LayerParams& lp, TensorIn in, float* din,
                      const float* dk, const float* dv) {
  const int64_t R = c.B * c.N, D = c.cfg->d_model;
  const LinearDims kv{/*rows=*/R, /*in=*/D, /*out=*/D};
  linear_backward(LinearGrads{din, c.grad(lp.k.w), c.grad(lp.k.b)}, dk, in, c.weight(lp.k), kv,
                  c.precision);
  linear_backward(LinearGrads{din, c.grad(lp.v.w), c.grad(lp.v.b)}, dv, in, c.weight(lp.v), kv,
                  c.precision);
}

}  // namespace lf
