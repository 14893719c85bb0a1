// The state behind the Model façade (linformer/model.h), shared by the model's source files:
//   model.cpp    parameter binding, packing lifecycle, encoder forward/backward, façade
//   planner.cpp  the activation planner (training and inference buffer plans)
//   heads.cpp    the MLM and classification heads
//   init.cpp     parameter initialisation
// The layer itself lives in layers/ (encoder_layer.h, attention_path.h).
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "layers/attention_path.h"
#include "layers/encoder_layer.h"
#include "layers/projection.h"
#include "linformer/error.h"
#include "linformer/model.h"

namespace lf {

struct Model::Impl : Layout {
  Config cfg;
  std::vector<ParamInfo> table;
  std::unordered_map<std::string, size_t> index;
  Buffer<float> params, grads;
  std::unique_ptr<Projections> proj;
  std::vector<LayerParams> layers;
  Norm emb_ln, final_ln, lm_ln;
  Linear lm_dense, cls_dense, cls_out;
  float *word = nullptr, *pos = nullptr, *type = nullptr, *lm_bias = nullptr;

  // Current batch.
  int64_t B = 0, N = 0;
  bool train = false;
  uint64_t seed = 0;
  int64_t first = 0;  // Batch::first
  const int32_t* ids = nullptr;
  const float* mask = nullptr;
  Buffer<int32_t> ids_copy;
  Buffer<float> mask_copy;

  // Activation arena (its layout is the Layout base).
  Arena arena;
  bool have_grad_batch = false;
  // Inference option: how standard attention is computed (Model::set_exact_attention).
  Model::ExactAttention exact = default_exact_attention();
  // Inference option: batch invariance (Model::set_batch_invariant). It applies to a pass
  // when `batch_invariant()` (inference only).
  bool invariant = false;
  bool batch_invariant() const { return invariant && !train; }
  // Rows of the fixed tiles of every linear map, and of the layers' row blocks, in
  // batch-invariant inference, for a padded length N and `threads` threads: N split into
  // equal tiles of about 256 rows (128 or 64 while one sequence would give fewer tiles than
  // threads), rounded up to a multiple of 8. Tiles start at each sequence's first row, so a
  // sequence pays at most 7 padding rows per tile (a 24-token sentence is one 24-row tile,
  // N 300 two of 152), and fewer, larger tiles save each product call's dispatch. A function of
  // N and the thread count only, so a sequence gets the same bits in any batch of the same
  // padded length. The MLM head keeps kInvariantRows; the classifier runs a row at a time.
  static constexpr int64_t kInvariantRows = 64;
  static int64_t invariant_rows(int64_t N, int threads);
  // The classification head's maps packed in f32 for batch-invariant inference
  // (Linear::packed of cls_dense and cls_out), made on first use after the weights change.
  bool cls_packed_current = false;
  void ensure_cls_packed();
  // Inference option: precision of the encoder's linear maps (Model::set_compute_type). Their
  // weights are packed on the first inference forward after any parameter change.
  ComputeType compute = ComputeType::f32;
  // Inference option: encoder layers whose linear maps stay f32 whatever `compute` is
  // (Model::set_float_layers); empty or all false: none.
  std::vector<bool> float_layers;
  ComputeType layer_compute(int64_t layer) const {
    const auto l = static_cast<size_t>(layer);
    return l < float_layers.size() && float_layers[l] ? ComputeType::f32 : compute;
  }
  bool packed_current = false;
  // Precision of the products on unpacked operands (Model::set_train_compute_type).
  ComputeType train_compute = ComputeType::f32;
  // Inference: the precision of a layer's products between activations (attention, Linformer's
  // sequence projection): bf16 when the CPU multiplies bf16 natively (AVX512-BF16, the
  // attention kernel's bf16 operands) and its linear maps are bf16, or int8 on a CPU where
  // bf16 products are the faster ones (AMX, AMD Zen 4/5: about 1.6x the f32 rate); else
  // train_compute's (f32 attention for int8 on an Intel CPU without AMX, where bf16 runs at
  // half the f32 rate).
  ComputeType infer_products(int64_t layer) const;
  size_t input_copies = 0;  // input_copy_bytes() of the inference forwards so far

  // Head workspace; the MLM head's gradients (grows only: no fresh pages each step).
  Arena head_arena;
  Buffer<float> mlm_grad;
  Buffer<float> mlm_soft;  // distillation: softmax(s / T) - softmax(t / T), [M, V]
  BackwardObserver* backward_observer = nullptr;

  explicit Impl(const Config& c);

  // The gradient buffer, allocated (zeroed) on first use.
  float* gbase() {
    if (grads.size() != params.size()) {
      grads.resize(params.size());
      grads.zero();
    }
    return grads.data();
  }
  float* grad_of(const float* p) { return gbase() + (p - params.data()); }
  GradMap grad_map() { return {params.data(), gbase()}; }
  // Training: the encoder's linear maps packed for their products (Linear::train_fwd/bwd), and
  // in bf16 the parameters rounded to bfloat16 in one buffer of the same layout, made at the
  // first training forward after the weights changed (once per step).
  Buffer<uint16_t> params16;
  bool params16_current = false;
  bool train_packs_current = false;  // Linear::train_fwd/bwd made from the current weights
  TrainWeights train_weights();
  // The MLM head's weights packed likewise, when the head runs (not while finetuning a
  // classifier): its dense map, and the tied output map Word^T in word_fwd.
  PackedLinear word_fwd;
  bool head_packs_current = false;
  TrainWeights mlm_train_weights();
  // Whether training on R rows runs the FFN's products in bf16 and keeps its activations in
  // bf16 only (FfnActs).
  bool ffn_bf16_only(int64_t R) const {
    return gemm_runs_bf16(train_compute, R, cfg.d_model, cfg.d_ff);
  }
  // Whether training on R rows runs the query and output maps' products in bf16: the planner
  // then plans the maps' input, the queries, the context and its gradient in bf16 (LayerAct,
  // Layout); an attention product too small for bf16 widens them.
  bool queries_bf16_only(int64_t R) const {
    return gemm_runs_bf16(train_compute, R, cfg.d_model, cfg.d_model);
  }

  float* P(const std::string& name) {
    auto it = index.find(name);
    LF_CHECK(it != index.end(), "model: no parameter named '", name, "'");
    return params.data() + table[it->second].offset;
  }
  const ParamInfo* info(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &table[it->second];
  }

  // The attention path of training (train = true) or of inference with the current options.
  const AttentionPath& path(bool for_train) const {
    return attention_path(cfg, for_train ? Model::ExactAttention::tiled : exact);
  }
  // What the layers of the current pass see.
  LayerContext layer_context();

  // Packing lifecycle of the inference weights (model.cpp).
  // N: the padded length of the pass (sets the row tiles of batch-invariant inference).
  void ensure_packed(int64_t N);
  void weights_changed();
  void drop_packed();  // the inference copies of the weights (Linear::packed)
  size_t packed_bytes() const;
  // Per-thread bf16 copies of product inputs the packed linear maps hold (upper bound).
  size_t input_copy_bytes() const;

  // Activation planner (planner.cpp): lays out every activation for (B, N, train, masked)
  // into `out`; with a null arena only counts bytes. Returns the bytes needed.
  size_t carve(Arena* ar, Layout& out, int64_t B, int64_t N, bool train, bool masked) const;
  size_t carve_train(Arena* ar, Layout& out, int64_t B, int64_t N, bool masked) const;
  size_t carve_infer(Arena* ar, Layout& out, int64_t B, int64_t N, bool masked) const;
  size_t forward_bytes(int64_t B, int64_t N, bool train, bool masked) const {
    Layout tmp_layout;
    // (batch-invariant inference always passes a mask)
    return carve(nullptr, tmp_layout, B, N, train, masked || (invariant && !train)) +
           (train ? 0 : input_copy_bytes());
  }

  void forward(const Batch& batch, bool is_train, uint64_t dropout_seed, ForwardObserver* observer);
  void backward();

  // Heads (heads.cpp).
  struct MlmCache {
    int64_t M = 0;
    float *xin = nullptr, *t1 = nullptr, *t2 = nullptr, *t3 = nullptr, *mean = nullptr,
          *rstd = nullptr, *logits = nullptr;
  };
  MlmCache mlm_forward(const std::vector<int64_t>& rows, float* logits_out);
  double mlm_loss(const int32_t* labels, bool grad, float weight, int64_t* count,
                  int64_t denominator, MlmDistill* distill = nullptr);
  double cls_forward_backward(const int32_t* labels, bool grad, float weight, float* logits_out);

  // Initialisation (init.cpp).
  void init_param(const ParamInfo& p, uint64_t s);

 private:
  void check_batch(const Batch& batch) const;
};

}  // namespace lf
