// One encoder layer (attention sub-layer + feed-forward sub-layer, post- or pre-norm) in its
// training form (forward keeping activations, backward) and its inference form (row blocks).
// The attention path (layers/attention_path.h) supplies the keys and values; everything else
// is the same for every path. Activations are row-major [R = B*N, D] unless noted.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "layers/attention.h"
#include "linformer/config.h"

namespace lf {

class AttentionPath;
class Projections;
struct PathBlock;

// Dropout sites, used to derive independent random streams.
enum Site : uint64_t { kEmb = 1, kAttnProbs, kAttnOut, kFfnOut, kClsIn, kClsHidden };

struct Linear {
  float *w = nullptr, *b = nullptr;  // w [out, in], b [out]
  PackedLinear packed;               // inference copy of w in the compute type (when packed)
  // Training: w packed (in the training precision) for the forward product and for the input
  // gradient, re-packed into the same storage after every weight change.
  PackedLinear train_fwd, train_bwd;
};
struct Norm {
  float *w = nullptr, *b = nullptr;
};

struct LayerParams {
  Linear q, k, v, ao, inter, out;
  Norm ln_attn, ln_out;
  int slot_k = -1, slot_v = -1;  // Linformer projection slots (equal when K and V share one)
  int64_t K = 0;                 // projected length
};

// Activations of one layer. In inference all layers share one set. A product operand is one
// Tensor in the dtype the planner chose for it (model/planner.cpp): bf16 when every product
// that reads it runs in bf16 (bf16 training, large enough products), else f32. Where an
// activation is needed in both forms (f32 for a residual or a LayerNorm, bf16 for products),
// the bf16 form is a second buffer with its own role, written in the same pass as the f32 one.
struct LayerAct {
  float* ln1 = nullptr;  // pre-norm: LN_attn(x) [R,D]
  // The input of the query, key and value maps (x, or ln1 pre-norm) as their products read it
  // [R,D]: that f32 buffer itself, or, when the maps run in bf16, a bf16 copy written by the
  // LayerNorm before them (the previous layer's output LayerNorm post-norm; the model rounds
  // the first layer's). The f32 input stays the residual's and the sequence projections'.
  Tensor maps_in;
  Tensor q;                         // [R,D]: f32, or bf16 when the query map runs in bf16
  std::shared_ptr<PathBlock> path;  // the attention kind's own buffers (attention_path.h)
  float* probs = nullptr;           // [B,H,N,Lk] (training; materialized inference)
  // bf16 training: the probabilities that multiply V, after dropout, in bf16 [B,H,N,Lk]
  // (AttnKept::pv).
  Tensor probs_v;
  Tensor ctx;          // [R,D]: f32, or bf16 when the output map runs in bf16 (as q)
  float* a = nullptr;  // x + attention branch [R,D]
  float *mean1 = nullptr, *rstd1 = nullptr, *mean2 = nullptr, *rstd2 = nullptr;  // [R]
  float* ffn_in = nullptr;                                                       // [R,D]
  // The FFN's input as its first product reads it: ffn_in itself, or a bf16 copy written by
  // the LayerNorm before it when the FFN's products run in bf16.
  Tensor ffn_x;
  Tensor h, g;         // pre/post GELU [R,F]: f32, or bf16 when the FFN's products run in bf16
  float* f = nullptr;  // post-norm: ffn_in + FFN branch [R,D]
  // Inference: the dtype the layer's attention row blocks read its keys and values in (or
  // their projections): bf16 when every row block's products run in bf16
  // (AttentionPath::rows_read_bf16), made so once by infer_batch; else f32.
  DataType kv = DataType::f32;
};

// Where every activation lives for one (B, N, train) shape: carved from the arena by the
// activation planner (model/planner.h).
struct Layout {
  std::vector<LayerAct> acts;
  std::vector<float*> xs;  // layer inputs x[0..L]
  float *emb = nullptr, *emb_mean = nullptr, *emb_rstd = nullptr;
  float* hid = nullptr;  // hidden states [R,D]
  float *fin_mean = nullptr, *fin_rstd = nullptr;
  float* scratch = nullptr;  // per-thread attention tiles
  float* tmp = nullptr;      // [R,D]
  // Backward buffers.
  float *dhid = nullptr, *dres = nullptr, *d1 = nullptr, *d2 = nullptr, *dq = nullptr,
        *dkk = nullptr, *dvv = nullptr;
  Tensor dctx;                      // [R,D]: f32, or bf16 when the output map runs in bf16
  Tensor dG;                        // the FFN's hidden gradient [R,F]: f32, or bf16 as h and g
  std::shared_ptr<PathBlock> path;  // the attention kind's backward buffers
  // bf16 products only (empty otherwise), each a gradient rounded by the pass that makes it,
  // with its column sums added to the bias gradient of the map that reads it (RoundedGrad):
  // the FFN's output gradient [R,D] (post-norm only: from the output LayerNorm's backward), and
  // the output map's [R,D] (post-norm: from the attention LayerNorm's backward), whose buffer
  // then takes the query gradient rounded by tiled attention (attend_backward).
  Tensor ffn_dy, ao_dy;
  // Inference: per-thread row-block workspace (see layer_forward_infer).
  float* work = nullptr;
  int64_t work_floats = 0;  // per thread
  int64_t chunk = 0;        // query rows per block
};

// Maps a parameter pointer to its gradient (the two flat buffers share one layout).
struct GradMap {
  const float* params = nullptr;
  float* grads = nullptr;
  float* operator()(const float* p) const { return grads + (p - params); }
};

// The weights' forms a training step's products use, made once per step (after each weight
// change): the encoder's linear maps packed for their products (train_fwd/train_bwd, in the
// training precision), and the parameter buffer as unpacked products read it (`plain`: in
// bf16 training rounded to bfloat16 as a whole, Model::bf16_params; in f32 training params
// itself). Maps a parameter pointer to the same element of `plain` (outside training, where
// `plain` is empty: to the parameter itself).
struct TrainWeights {
  const float* params = nullptr;
  TensorIn plain;
  bool packed = false;  // the linear maps' train_fwd/train_bwd hold the current weights
  TensorIn operator()(const float* p) const { return plain ? plain.at(p - params) : TensorIn(p); }
  // A linear map's weight in every form there is.
  TrainWeight operator()(const Linear& l) const {
    return packed ? TrainWeight{(*this)(l.w), &l.train_fwd, &l.train_bwd} : TrainWeight();
  }
};

// What every layer of one forward or backward pass sees.
struct LayerContext {
  const Config* cfg = nullptr;
  const AttentionPath* path = nullptr;
  Projections* proj = nullptr;
  Layout* lay = nullptr;  // shared buffers of the pass
  int64_t B = 0, N = 0;
  const float* mask = nullptr;  // [B,N] or null (no padding)
  bool train = false;
  uint64_t seed = 0;  // dropout
  // Global index of batch element 0 (a data-parallel rank's slice of the global batch): the
  // dropout masks are those of the global batch, element (first + b, t, c) of a [R, D]
  // activation being mask element ((first + b) * N + t) * D + c.
  int64_t first = 0;
  GradMap grad;  // training only
  // Precision of the products on unpacked operands: every product of training, and the
  // attention products and sequence projections of inference (the linear maps of inference
  // use the packed weights in their own compute type).
  ComputeType precision = ComputeType::f32;
  TrainWeights wt;  // training: the weights' packed forms (and bf16 copies in bf16)
  // Batch-invariant inference (Model::set_batch_invariant): the mask is never null, row
  // blocks have a fixed size and use every thread, and Linformer passes its live-row mask
  // even when every row is live, so that a sequence's arithmetic is the same in any batch.
  bool invariant = false;

  AttnDims dims(const LayerParams& lp) const;
  // The projected rows this batch forms of the layer's K (AttentionPath::formed_rows).
  int64_t proj_rows(const LayerParams& lp) const;
  float scale() const;  // 1 / sqrt(d_head)
  // How layer `layer`'s attention runs: its scale, dropout p_drop with the layer's stream, the
  // pass's scratch and precision.
  AttnRun attn_run(int64_t layer, float p_drop) const;
  // A linear map's weight with its training forms.
  Weight weight(const Linear& l) const { return Weight(l.w, wt(l)); }
  int64_t first_elem() const { return first * N * cfg->d_model; }  // of [R, D] dropout masks
  // Shape checks at layer entry (LF_DCHECK): a complete context, 0 < N <= max_len, the layer's
  // projected length, the input; `what` names the caller in the message.
  void check(const LayerParams& lp, const float* x_in, const char* what) const;
};

// Training (or train-layout) forward of layer l: x_out from x_in, activations kept in A.
// Post-norm, A.maps_in holds x_in in its form on entry, and next_maps_in (the next layer's
// maps_in, or empty) receives x_out in its form from the output LayerNorm's pass.
void layer_forward(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                   const float* x_in, float* x_out, Tensor next_maps_in);
// Backward of layer l: c.lay->dres holds d(x_out) on entry and d(x_in) on exit.
void layer_backward(const LayerContext& c, const LayerParams& lp, LayerAct& A, int64_t l,
                    const float* x_in);
// Inference forward (no dropout, no kept activations), in row blocks on per-thread workspace.
void layer_forward_infer(const LayerContext& c, const LayerParams& lp, LayerAct& A,
                         const float* x_in, float* x_out);

}  // namespace lf
