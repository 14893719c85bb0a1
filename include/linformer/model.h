// The Linformer / Transformer encoder with MLM and classification heads.
// Parameters and their gradients live in two flat buffers laid out by one name table
// (the checkpoint tensor names); activations live in an arena sized for the largest batch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "linformer/compute_type.h"
#include "linformer/config.h"
#include "linformer/params.h"

namespace lf {

// A batch of token ids. mask[b*N+t] is 1 for real tokens and 0 for padding (null: all real).
struct Batch {
  const int32_t* ids = nullptr;  // [B, N]
  const float* mask = nullptr;   // [B, N] or null
  int64_t B = 0, N = 0;
  // Index of the first sequence in the global batch it is a slice of (data-parallel training:
  // rank r of R holds sequences [first, first + B) of a batch of R x B). Dropout masks are
  // drawn by global position, so the slices of all ranks see the masks of the whole batch.
  int64_t first = 0;
};

// Sees the activations of a forward pass while it runs (an optional argument of
// Model::forward), for analysis tools such as `linformer spectrum`. The pointers are valid only
// during the call; without an observer the pass does no extra work.
struct ForwardObserver {
  virtual ~ForwardObserver() = default;
  // After layer `layer` has run: its input x [rows = B*N, D] and the input its self-attention
  // saw, attn_in [rows, D] (post-norm: x itself; pre-norm: LN_attn(x)). Training and inference
  // forwards both report every layer.
  virtual void layer_input(int64_t layer, const float* x, const float* attn_in, int64_t rows,
                           int64_t D) = 0;
};

// Told by Model::backward() when parameter gradients are complete, so that a data-parallel
// trainer can start reducing them while the rest of backward runs. Called with
// layer = n_layers once the parameters after the last encoder layer (final LayerNorm, heads)
// have their gradients of this backward pass, with layer = l after encoder layer l (its
// parameters are contiguous in the flat gradient buffer: ParamInfo::offset), and with
// layer = -1 at the end, for those before layer 0 (embeddings, a layerwise-shared
// projection). "Complete" means: nothing later in this pass adds to them.
struct BackwardObserver {
  virtual ~BackwardObserver() = default;
  virtual void grads_ready(int64_t layer) = 0;
};

// Knowledge distillation into the MLM head (Model::mlm_loss).
struct MlmDistill {
  const float* teacher_logits = nullptr;  // [labelled rows, V], in the order of the rows
  float alpha = 0.5f;                     // weight of the soft term, in [0, 1]
  float temperature = 2.f;                // > 0
  double soft_loss = 0;                   // out: the summed KL term (before alpha and T^2)
};

class Model {
 public:
  explicit Model(const Config& cfg);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Config& config() const;
  const std::vector<ParamInfo>& params() const;
  size_t num_params() const;
  // Mutable access to parameters counts as changing them (see weights_changed()).
  float* param_data();
  float* grad_data();
  const ParamInfo* find(const std::string& name) const;  // null if absent
  float* param(const std::string& name);                 // throws if absent
  float* grad(const std::string& name);

  // Fills every parameter from (seed, name, index): independent of thread count.
  void init(uint64_t seed);
  // Initialises only the parameters whose names are listed (others unchanged).
  void init_some(uint64_t seed, const std::vector<std::string>& names);
  void zero_grad();

  // Encoder forward. With train = true, activations are kept for backward() and dropout
  // (if configured) uses masks drawn from dropout_seed. An observer, if given, sees every
  // layer's input.
  void forward(const Batch& batch, bool train, uint64_t dropout_seed = 0,
               ForwardObserver* observer = nullptr);
  const float* hidden() const;  // [B, N, D], valid after forward()

  // MLM head. labels [B*N] (-100 = ignore). Returns the summed loss and the count of labelled
  // positions; if grad, backpropagates weight * (mean loss) into head gradients and the
  // hidden-state gradient (call backward() afterwards). Only labelled rows are computed.
  // denominator > 0 replaces the count in that mean (data-parallel training: the labelled
  // positions of the global batch, so that the ranks' gradients add up to its mean).
  // distill (optional): a teacher's logits on the same labelled rows, for knowledge
  // distillation (Hinton et al. 2015; DistilBERT): the gradient is that of
  //   (1 - alpha) * CE(labels) + alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T))
  // while the returned loss stays the cross-entropy with the labels (so perplexity keeps its
  // meaning); the summed KL term is stored in distill->soft_loss.
  double mlm_loss(const int32_t* labels, bool grad, float weight, int64_t* count,
                  int64_t denominator = 0, MlmDistill* distill = nullptr);
  // Logits [rows.size() or B*N, V] for the given flat rows (all rows when rows is empty).
  void mlm_logits(float* out, const std::vector<int64_t>& rows = {});

  // Classification head on the first token's state, or on the mean of the real tokens' states
  // (Config::classifier_pooling). labels [B]. Returns summed loss over the batch.
  double cls_loss(const int32_t* labels, bool grad, float weight);
  void cls_logits(float* out);  // [B, num_classes]

  // Encoder backward from the accumulated hidden-state gradient into parameter gradients.
  void backward();
  // Sees the gradients complete during backward() (null: none). Not owned.
  void set_backward_observer(BackwardObserver* observer);

  // Bytes the engine holds for activations and scratch at its largest shape so far
  // (including the per-thread bf16 input copies of bf16 inference).
  size_t activation_bytes() const;

  // Softmax attention probabilities of a layer, [B, H, N, Lk] (Lk = attention_keys(layer)),
  // before attention dropout; valid after forward(batch, train = true) with f32 products
  // (bf16 training keeps them only for shapes too small to run attention tile by tile).
  const float* attention_probs(int64_t layer) const;
  // Keys each query of the last forward attended to in a layer: N for standard attention; for
  // Linformer k, or fewer when the batch is shorter than max_len and empty projected rows are
  // masked (those past the end are not formed; docs/model.md, "Short sequences").
  int64_t attention_keys(int64_t layer) const;
  // Bytes of activations and scratch forward() would need for a batch of shape (B, N)
  // (padded: an attention mask with padding is given), computed without allocating: the
  // dry run used to size batches to a memory budget. Independent of the current state.
  size_t forward_bytes(int64_t B, int64_t N, bool train, bool padded = false) const;
  // Bytes of parameter storage, plus gradient storage once it exists (it is allocated on
  // the first training forward or gradient access; inference never allocates it), plus the
  // projection matrices Linformer writes out for mean pooling and convolution. The packed
  // inference weights are not included: see packed_weight_bytes().
  size_t param_bytes() const;
  // Bytes the packed inference weights take for the current compute type once packed (0 for
  // f32, which uses the parameters in place): for sizing ahead of the first forward.
  size_t packed_weight_bytes() const;

  // Precision of inference (train = false) products; training is unaffected. bf16 rounds the
  // encoder's linear-map weights to bfloat16 once, packed for oneDNN, and their inputs per
  // call; products accumulate in f32. With bf16 or int8, attention's products and the
  // sequence projection take bfloat16 operands where the CPU has AVX512-BF16 (else they
  // follow set_train_compute_type); softmax, LayerNorm and the rest stay f32 (compute_type.h).
  // Outputs then differ from f32 by about 1e-2 relative. The packed copy is rebuilt on the
  // first inference forward after the parameters change: init, param(), param_data(), a
  // training forward, or weights_changed(). Call weights_changed() after writing parameters
  // through a pointer kept from earlier.
  void set_compute_type(ComputeType t);
  ComputeType compute_type() const;
  void weights_changed();
  // Encoder layers (0-based) whose linear maps stay f32 in inference whatever the compute type
  // (int8 or bf16 elsewhere): the layers a model's accuracy is most sensitive to
  // (docs/int8.md). Throws lf::Error for a layer the model does not have; {} clears.
  void set_float_layers(const std::vector<int64_t>& layers);
  std::vector<int64_t> float_layers() const;

  // Precision of the products computed on the f32 parameters in place: every product of
  // training (forward, backward, heads) and, in inference, the heads and, unless
  // set_compute_type() chose bf16 or int8 on an AVX512-BF16 CPU, the attention products and
  // sequence projections (its linear maps follow set_compute_type()). f32 by default;
  // `pretrain --bf16` sets bf16: inputs of large products rounded to bfloat16, f32
  // accumulation, f32 master weights and gradients. In either precision a training forward
  // packs the encoder's linear maps (and the MLM head's) for its products at its first call
  // after the parameters change, as inference does: call weights_changed() after writing
  // parameters through a pointer kept from earlier.
  void set_train_compute_type(ComputeType t);
  ComputeType train_compute_type() const;
  // bf16 training: the parameters' bfloat16 copy (same layout as param_data()), for an
  // optimiser that writes it in the same pass as the parameters (AdamW); null when training
  // is not bf16. After writing every element (round to nearest even), call
  // bf16_params_written(): the next training forward then packs the weights for its products
  // without rounding the parameters again. Any later change of the parameters makes the copy
  // stale again (as for the packed copies above).
  uint16_t* bf16_params();
  void bf16_params_written();

  // How inference computes standard attention (linformer/params.h).
  using ExactAttention = lf::ExactAttention;
  void set_exact_attention(ExactAttention how);
  ExactAttention exact_attention() const;

  // Batch-invariant inference (off by default). With it on, an f32 inference forward
  // (train = false) gives every sequence of the batch bitwise the same hidden states (and so
  // the same pooled embeddings, classifier logits and MLM logits) as it gets alone, padded to
  // the same length: a sequence's outputs are a function of its token ids, its mask, the
  // batch's padded length N and the OpenMP thread count only, not of the batch size, its
  // place in the batch or the other sequences. Not covered: the same sequence padded to
  // another N, or run with another thread count, may differ in the last bits.
  // How: every linear map runs in fixed tiles of rows through one single-threaded oneDNN
  // primitive per map and shape, the layer's row blocks have a fixed size, every per-sequence
  // product runs in the same threading context for one sequence as for many, and the
  // padding mask is always passed (all ones when absent). It costs inference speed
  // (docs/design.md, "Batch invariance"). Training is unaffected; bf16 inference runs the same
  // way but is not checked for the guarantee. Off, results are those it has always given.
  void set_batch_invariant(bool on);
  bool batch_invariant() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lf
