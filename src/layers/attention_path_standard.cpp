// Standard (exact) attention: keys and values are the K/V maps of every position.
// Inference computes the same function three ways (ExactAttention):
//   tiled         whole-batch Q and context; one N x N score tile per thread at a time
//   materialized  whole-batch Q and context; the [B,H,N,N] probabilities held at once
//   streaming     per row block: online softmax over key blocks, O(rows x block) workspace
#include "core/parallel.h"
#include "kernels/ops.h"
#include "layers/attention_path.h"
#include "layers/attention_paths.h"

namespace lf {

namespace {

using Epi = PackedLinear::Epilogue;
using Exact = ExactAttention;

// The kind's block: the keys and values of every position.
struct StandardAct final : PathBlock {
  KVMaps kv;
  // Streaming inference: the keys and values head-major in bf16, for the layers whose row
  // blocks read them so (LayerAct::kv; in kv's storage when other layers read f32).
  uint16_t *k16 = nullptr, *v16 = nullptr;
  float* stage = nullptr;  // streaming inference: rows of K or V on their way to head-major
};

class StandardPath final : public FullKeysPath<StandardAct> {
 public:
  explicit StandardPath(Exact exact) : exact_(exact) {}
  const char* name() const override { return "standard"; }
  bool runs(const Config& cfg) const override { return cfg.attention == AttentionKind::standard; }
  const AttentionPath& inference_variant(Exact exact) const override {
    return standard_path(exact);
  }
  // "standard" is the materialized layout, the paper's baseline (as PyTorch and fairseq hold
  // it); the engine's default is default_exact_attention() (streaming where the build has its
  // own streaming kernel, else tiled).
  std::vector<InferenceWay> inference_ways() const override {
    return {{"standard", Exact::materialized},
            {"tiled", Exact::tiled},
            {"streaming", Exact::streaming}};
  }
  void variants(const Config& base, std::vector<AttentionVariant>& out) const override {
    Config c = base;
    c.attention = AttentionKind::standard;
    out.push_back({"standard", c});
  }
  int64_t key_length(int64_t N, int64_t) const override { return N; }

  void plan_train(Carver& c, LayerAct& A, const Config& cfg, const PathShape& s) const override {
    make_block<StandardAct>(A.path).kv.take(c, cfg, s);
  }

  void plan_infer(Carver& c, LayerAct& A, Layout& l, const Config& cfg,
                  const PathShape& s) const override {
    const int64_t R = s.B * s.N, D = cfg.d_model;
    StandardAct& act = make_block<StandardAct>(A.path);
    if (exact_ == Exact::streaming) {
      if (s.kv_f32) act.kv.take(c, cfg, s);
      if (s.kv_bf16) {
        act.k16 = s.kv_f32 ? reinterpret_cast<uint16_t*>(act.kv.k) : c.take<uint16_t>(R * D);
        act.v16 = s.kv_f32 ? reinterpret_cast<uint16_t*>(act.kv.v) : c.take<uint16_t>(R * D);
      }
      act.stage = c.take<float>(KVMaps::stage_floats(R, D));
      return;
    }
    act.kv.take(c, cfg, s);
    A.q = c.take<float>(R * D);
    A.ctx = c.take<float>(R * D);
    if (exact_ == Exact::materialized) {
      A.probs = c.take<float>(s.B * cfg.n_heads * s.N * s.N);
    } else {
      const AttnDims d{/*B=*/s.B,         /*N=*/s.N,          /*Lk=*/s.N, /*D=*/D,
                       /*H=*/cfg.n_heads, /*Dh=*/cfg.d_head()};
      l.scratch = c.take<float>(attention_scratch_floats(d, false));
    }
  }
  int64_t rows_work_floats(int64_t rows, const AttnDims& d) const override {
    return exact_ == Exact::streaming ? attention_streaming_work_floats(rows, d) : 0;
  }

  KeysValues infer_batch(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in,
                         const float** ctx_all) const override {
    const int64_t R = c.B * c.N;
    const StandardAct& act = block_of<StandardAct>(A.path);
    if (exact_ == Exact::streaming) {
      // Head-major keys and values: the rows of every query block read each head's keys
      // again, as one sequential stream rather than N rows D floats apart; in bf16, rounded
      // once here rather than by every query block.
      const bool h = A.kv == DataType::bf16;
      const KeysValues kv{h ? TensorIn(act.k16) : TensorIn(act.kv.k),
                          h ? TensorIn(act.v16) : TensorIn(act.kv.v), c.mask, KVLayout::head_major};
      KVMaps::infer_head_major(c, lp, in, act.stage, h ? Tensor(act.k16) : Tensor(act.kv.k),
                               h ? Tensor(act.v16) : Tensor(act.kv.v));
      return kv;
    }
    // The textbook algorithm: full N x N score matrices, one per thread at a time (tiled) or
    // all of the batch at once (materialized, into A.probs).
    act.kv.infer(c, lp, in);
    const KeysValues kv = saved(c, A);
    lp.q.packed.apply(A.q, in, R, lp.q.b, Epi::store, c.N);
    AttnRun r;
    r.scale = c.scale();
    r.scratch = c.lay->scratch;
    r.t = c.precision;
    attention_forward(A.ctx, AttnKept{A.probs, {}}, A.q, kv, c.dims(lp), r);
    *ctx_all = A.ctx.f32();
    return kv;
  }
  bool rows_read_bf16(ComputeType t, int64_t rows, const AttnDims& d) const override {
    return exact_ == Exact::streaming && attention_streaming_runs_bf16(t, rows, d);
  }
  void infer_rows(float* ctx, const float* q, const KeysValues& kv, const AttnDims& d,
                  const RowBlock& rb, float scale, float* work, ComputeType t) const override {
    attention_streaming_rows(ctx, q, kv, d, rb, scale, work, t);
  }

  double flops(const Config& cfg, int64_t, double n) const override {
    const double D = static_cast<double>(cfg.d_model);
    return 2.0 * n * (2.0 * D * D)     // K and V maps
           + 2.0 * (2.0 * n * n * D);  // scores and weighted values, all heads
  }

 private:
  Exact exact_;
};

}  // namespace

const AttentionPath& standard_path(ExactAttention exact) {
  static const StandardPath tiled(Exact::tiled), streaming(Exact::streaming),
      materialized(Exact::materialized);
  switch (exact) {
    case Exact::streaming:
      return streaming;
    case Exact::materialized:
      return materialized;
    case Exact::tiled:
      break;
  }
  return tiled;
}

}  // namespace lf
