// How a layer turns its input into the keys and values its attention sees, and everything that
// depends on that choice: buffers, training forward and backward, row-block inference, FLOPs.
// One implementation per path; attention_path() is the one table from a configuration to it,
// so the model, the activation planner and the benchmark never switch over kinds.
//
//   standard       full n x n attention (inference: tiled, streaming or materialized)
//   project_input  Linformer with one E per layer (or per model): E diag(m) X, then K/V maps
//   project_keys   Linformer with per-head E (sharing none): K/V maps, then E_h per head
//   max_pool       Linformer max pooling of K and V over windows of n/k positions
//
// Shapes: R = B*N rows; K = the layer's projected length; Lk = key_length(N, K).
#pragma once
#include <cstdint>

#include "core/buffer.h"
#include "layers/encoder_layer.h"
#include "linformer/params.h"

namespace lf {

// Buffer-plan sizes. For inference one set of buffers serves every layer: K is the largest k.
struct PathShape {
  int64_t B = 0, N = 0, K = 0;
  bool masked = false;  // the batch has padding
};

// The keys and values attention runs on ([B,Lk,D] each) and its key mask ([B,Lk] or null).
struct KeysValues {
  const float *k = nullptr, *v = nullptr, *key_mask = nullptr;
};

class AttentionPath {
 public:
  virtual ~AttentionPath() = default;
  virtual const char* name() const = 0;
  // Keys each query attends to: N for exact attention, K for Linformer.
  virtual int64_t key_length(int64_t N, int64_t K) const = 0;

  // ---- training ----
  // Carves this path's activations of one layer into A (Q, the probabilities and the common
  // buffers are the layer's).
  virtual void plan_train(Carver& c, LayerAct& A, const Config& cfg, const PathShape& s) const = 0;
  // Keys and values from the attention input `in` [R,D], kept in A for backward.
  virtual KeysValues forward(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                             const float* in) const = 0;
  // The keys and values forward() returned (for backward).
  virtual KeysValues saved(const LayerContext& c, const LayerAct& A) const = 0;
  // From the gradients of the keys and values dkk, dvv [B,Lk,D] into d(in) (accumulated)
  // and the parameter gradients of the K/V maps and projections.
  virtual void backward(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in,
                        float* din, const float* dkk, const float* dvv) const = 0;

  // ---- inference ----
  // Carves the whole-batch buffers every layer reuses into A and l (scratch).
  virtual void plan_infer(Carver& c, LayerAct& A, Layout& l, const Config& cfg,
                          const PathShape& s) const = 0;
  // Per-thread attention workspace of one block of `rows` query rows.
  virtual int64_t rows_work_floats(int64_t rows, const AttnDims& d) const = 0;
  // Whole-batch step before the row blocks: keys and values. A path that computes the whole
  // context at once stores it in *ctx_all (else leaves it null).
  virtual KeysValues infer_batch(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                                 const float* in, const float** ctx_all) const = 0;
  // Context rows rb (queries [i0, i1) of batch element b) from their queries q (row stride D).
  virtual void infer_rows(float* ctx, const float* q, const KeysValues& kv, const AttnDims& d,
                          const RowBlock& rb, float scale, float* work, ComputeType t) const {
    attention_rows(ctx, q, kv.k, kv.v, kv.key_mask, d, rb, scale, work, t);
  }

  // Matrix-product FLOPs (2 per multiply-add) of layer `layer` for one sequence of length n:
  // the K/V maps, the sequence projections, and the attention products (scores and weighted
  // values).
  virtual double flops(const Config& cfg, int64_t layer, double n) const = 0;
};

// The path of a configuration; `exact` picks the inference variant of standard attention.
const AttentionPath& attention_path(const Config& cfg,
                                    ExactAttention exact = ExactAttention::tiled);

}  // namespace lf
