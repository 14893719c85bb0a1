// An attention kind: how a layer turns its input into the keys and values its attention sees,
// and everything that depends on that choice: which configurations it runs and their checks,
// the tensors it adds to the model (names, shapes, start), how many keys a query sees, its
// own activation buffers, training forward and backward, row-block inference, FLOPs.
// A kind also owns the attention itself (attend / attend_backward, its activations in the
// training plan, the precisions it runs, whether it has a softmax P to hand out); softmax
// attention is the default, which standard attention and Linformer share.
// One implementation per kind; attention_kinds() is the registry, attention_path() picks a
// configuration's entry, so the model, the planner, the limits, the benchmark, spectrum and
// the tests never switch over kinds.
//
//   standard       full n x n attention (inference: tiled, streaming or materialized)
//   project_input  Linformer with one E per layer (or per model): E diag(m) X, then K/V maps
//   project_keys   Linformer with per-head E (sharing none): K/V maps, then E_h per head
//   max_pool       Linformer max pooling of K and V over windows of n/k positions
//   nystrom        Nystromformer: landmarks, three softmax kernels, iterative pseudo-inverse
//
// Shapes: R = B*N rows; K = the layer's projected length; Lk = key_length(N, K).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "layers/encoder_layer.h"
#include "linformer/params.h"

namespace lf {

// Buffer-plan sizes. For inference one set of buffers serves every layer: K is the largest k.
struct PathShape {
  int64_t B = 0, N = 0, K = 0;
  bool masked = false;  // the batch has padding
  // Training plans: the precision of the products, and whether the layer keeps its queries in
  // bf16 only (A.q and A.ctx planned in bf16).
  ComputeType t = ComputeType::f32;
  bool q_bf16_only = false;
  // Inference plans: whether some layer's row blocks read their keys and values in f32, and
  // whether some read them in bf16 (rows_read_bf16; LayerAct::kv says which, layer by layer).
  bool kv_f32 = true, kv_bf16 = false;
};

// A tensor a kind adds to the model beyond the layers' linear maps (Linformer's projections E
// and F): its checkpoint name, the projection slot it fills (`heads` blocks of [k, max_len])
// and which of keys and values read it. A parameter-free one (mean or max pooling) has no
// shape: it is a slot only, not in the parameter table.
struct PathTensor {
  std::string name;
  std::vector<int64_t> shape;  // empty: no parameter
  Init init = Init::normal;
  int64_t heads = 1, k = 0;
  bool keys = true, values = true;
};

// One configuration of a kind, for the tests' and tools' lists: a short name and the config
// keys it sets on a base.
struct AttentionVariant {
  std::string name;
  Config cfg;
};

// One way inference computes a kind, for the tools that compare them (`linformer bench`): its
// name (empty: the config's attention name) and the ExactAttention that selects it.
struct InferenceWay {
  const char* name;
  ExactAttention exact;
};

// A kind's own activations of one layer (LayerAct::path) and backward buffers shared by the
// layers (Layout::path): each kind defines its block type, creates it in its plans with
// make_block and reads it back with block_of.
struct PathBlock {
  virtual ~PathBlock() = default;
};
template <class T>
T& make_block(std::shared_ptr<PathBlock>& slot) {
  auto b = std::make_shared<T>();
  T& r = *b;
  slot = std::move(b);
  return r;
}
template <class T>
T& block_of(const std::shared_ptr<PathBlock>& slot) {
  return *static_cast<T*>(slot.get());
}

class AttentionPath {
 public:
  virtual ~AttentionPath() = default;
  virtual const char* name() const = 0;

  // ---- configuration ----
  // Whether this kind runs `cfg` (attention_path() takes the first entry that does).
  virtual bool runs(const Config& cfg) const = 0;
  // The entry that runs inference with exact attention `exact` (standard attention has one per
  // ExactAttention; other kinds ignore it).
  virtual const AttentionPath& inference_variant(ExactAttention) const { return *this; }
  // Every way inference computes this kind (one, unnamed, unless ExactAttention matters).
  virtual std::vector<InferenceWay> inference_ways() const {
    return {{"", ExactAttention::tiled}};
  }
  // Refuses (lf::Error, naming the key) what this kind cannot run; Config::validate calls it.
  virtual void validate(const Config&) const {}
  // Its configurations on `base` (appended to out), for the tests and tools that cover every
  // kind.
  virtual void variants(const Config& base, std::vector<AttentionVariant>& out) const = 0;
  // The tensors it adds for layer `layer`, or with layer = -1 for the model (shared by every
  // layer that has none of its own), in the parameter table's order.
  virtual std::vector<PathTensor> tensors(const Config&, int64_t /*layer*/) const { return {}; }
  // The projected length K of a layer (0: none).
  virtual int64_t projected_length(const Config&, int64_t /*layer*/) const { return 0; }
  // Of a layer's K, the rows a batch of length N forms (Linformer with empty rows masked
  // forms only those whose window starts before N: the same result, less work).
  virtual int64_t formed_rows(const Config&, int64_t K, int64_t /*N*/) const { return K; }
  // Keys each query attends to: N for exact attention, K for Linformer.
  virtual int64_t key_length(int64_t N, int64_t K) const = 0;
  // Keys each query of layer `layer` attends to in a batch of length N.
  int64_t key_count(const Config& cfg, int64_t layer, int64_t N) const {
    return key_length(N, formed_rows(cfg, projected_length(cfg, layer), N));
  }

  // ---- training ----
  // Carves this kind's activations of one layer into A.path (Q, the probabilities and the
  // common buffers are the layer's).
  virtual void plan_train(Carver& c, LayerAct& A, const Config& cfg, const PathShape& s) const = 0;
  // Carves the backward buffers the layers share into l.path (s.K: the largest K).
  virtual void plan_backward(Carver&, Layout&, const Config&, const PathShape&) const {}
  // Keys and values from the attention input `in` [R,D], kept in A for backward.
  virtual KeysValues forward(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                             const float* in) const = 0;
  // The keys and values forward() returned (for backward).
  virtual KeysValues saved(const LayerContext& c, const LayerAct& A) const = 0;
  // From the gradients of the keys and values dkk, dvv [B,Lk,D] into d(in) (accumulated)
  // and the parameter gradients of the K/V maps and projections.
  virtual void backward(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in,
                        float* din, const float* dkk, const float* dvv) const = 0;

  // ---- the attention itself (default: softmax attention, in attention_path.cpp) ----
  // Carves the attention's activations of one layer kept for backward into A (softmax: the
  // probabilities P [B,H,N,Lk], and their bf16 copy, unless bf16 tiles recompute them).
  // Called after plan_train, whose block (A.path) it may extend.
  virtual void plan_attention(Carver& c, LayerAct& A, const Config& cfg, const PathShape& s) const;
  // The context A.ctx from the queries A.q and kv (each in its planned dtype), kept for
  // backward; p_drop: dropout on the attention weights (layer l's stream).
  virtual void attend(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                      const KeysValues& kv, float p_drop) const;
  // From d(ctx) (c.lay->dctx, in its planned dtype) into c.lay->dq, dkk, dvv (written over).
  // Returns the query gradient the query map's backward reads: dq, or (bf16 tiles) the
  // rounded copy in c.lay->ao_dy, its bias gradient already added.
  virtual TensorIn attend_backward(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                                   int64_t l, const KeysValues& kv) const;
  // Whether the attention weights are a softmax P [B,H,N,Lk] (Model::attention_probs and the
  // spectrum analysis read it); a kind without one says no and they refuse it, naming it.
  virtual bool has_softmax_probs() const { return true; }
  // Whether a model of this kind runs in precision t, in training or in inference; the model
  // refuses the others, naming the kind. (A kind whose attention is f32 only can still infer
  // in bf16 or int8: the linear maps take the precision, its attention stays f32.)
  virtual bool runs_precision(ComputeType, bool /*train*/) const { return true; }

  // ---- inference ----
  // Carves the whole-batch buffers every layer reuses into A (A.path, and the layer's q, ctx
  // and probs where the kind computes the whole context) and l (scratch).
  virtual void plan_infer(Carver& c, LayerAct& A, Layout& l, const Config& cfg,
                          const PathShape& s) const = 0;
  // Per-thread attention workspace of one block of `rows` query rows.
  virtual int64_t rows_work_floats(int64_t rows, const AttnDims& d) const = 0;
  // Whole-batch step before the row blocks: keys and values, in the dtype A.kv (the plan's).
  // A path that computes the whole context at once stores it in *ctx_all (else leaves it null).
  virtual KeysValues infer_batch(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                                 const float* in, const float** ctx_all) const = 0;
  // Whether the products of a block of `rows` query rows (infer_rows) run in bf16 in precision
  // t, reading keys and values in bf16 as infer_batch rounds them once (the plan gives a layer
  // bf16 keys and values, LayerAct::kv, when every row block's do). No for a kind without row
  // blocks or whose keys and values stay f32.
  virtual bool rows_read_bf16(ComputeType, int64_t /*rows*/, const AttnDims&) const {
    return false;
  }
  // Context rows rb (queries [i0, i1) of batch element b) from their queries q (row stride D)
  // and kv as infer_batch returned it (in the layer's LayerAct::kv dtype); t: the products'
  // precision, for f32 keys and values (gemm's rule, attention.h).
  virtual void infer_rows(float* ctx, const float* q, const KeysValues& kv, const AttnDims& d,
                          const RowBlock& rb, float scale, float* work, ComputeType t) const {
    attention_rows(ctx, q, kv, d, rb, scale, work, t);
  }

  // Matrix-product FLOPs (2 per multiply-add) of layer `layer` for one sequence of length n:
  // the K/V maps, the sequence projections, and the attention products (scores and weighted
  // values).
  virtual double flops(const Config& cfg, int64_t layer, double n) const = 0;
};

// The registry: every kind, in the order attention_path() tries them.
const std::vector<const AttentionPath*>& attention_kinds();
// The kind of a configuration; `exact` picks the inference variant of standard attention.
const AttentionPath& attention_path(const Config& cfg,
                                    ExactAttention exact = ExactAttention::tiled);
// Every kind's variants on `base`, in registry order.
std::vector<AttentionVariant> attention_variants(const Config& base);

}  // namespace lf
