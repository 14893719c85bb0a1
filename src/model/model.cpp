// The Model façade and the encoder pass around its layers: parameter binding, the packing
// lifecycle of the inference weights, embeddings, the layer loop and backward.
// See docs/model.md for the function computed and model/model_impl.h for the other parts.
#include "linformer/model.h"

#include <algorithm>
#include <cstring>

#include "core/buffer.h"
#include "core/limits.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/attention_block.h"
#include "kernels/ops.h"
#include "layers/attention.h"
#include "linformer/cpu.h"
#include "linformer/error.h"
#include "linformer/rng.h"
#include "model/model_impl.h"

namespace lf {

namespace {

// Refuses (lf::Error) a forward pass of B sequences of N tokens whose activation sizes could
// not even be counted in 64 bits; afterwards the engine's own byte count cannot wrap.
void check_forward_shape(const Config& c, int64_t B, int64_t N) {
  // Generous bounds of the largest products the engine forms (floats per layer of the
  // widest activations, the attention scores, the head's logits), in double: they cannot wrap.
  int64_t lk = N;
  const AttentionPath& kind = attention_path(c);
  for (int64_t l = 0; l < c.n_layers; ++l) lk = std::max(lk, kind.projected_length(c, l));
  const double rows = static_cast<double>(B) * static_cast<double>(N);
  const double widest = static_cast<double>(
      std::max({c.d_model, c.d_ff, c.vocab_size, c.num_classes, c.n_heads * lk}));
  const double bound = 64.0 * rows * widest * static_cast<double>(c.n_layers + 2);
  LF_CHECK(B > 0 && N > 0 && bound < 0x1p62, "forward: a batch of ", B, " sequences of ", N,
           " tokens is too large for this model (about ", bound, " bytes of activations)");
}

// f(linear, out, in) for the encoder's linear maps with their weight shapes [out, in]; the
// layer list may be const or not. f(linear, out_features, in_features, layer index).
template <typename Layers, typename F>
void for_each_encoder_linear(Layers& ls, const Config& cfg, F f) {
  const int64_t D = cfg.d_model, Fd = cfg.d_ff;
  int64_t layer = 0;
  for (auto& lp : ls) {
    for (auto* l : {&lp.q, &lp.k, &lp.v, &lp.ao}) f(*l, D, D, layer);
    f(lp.inter, Fd, D, layer);
    f(lp.out, D, Fd, layer);
    ++layer;
  }
}

void zero(float* p, int64_t n) { std::memset(p, 0, n * sizeof(float)); }

// Training: W [out, in] packed for x W^T and for dY W in the training precision, into the
// storage of the last step.
void pack_for_training(Linear& l, int64_t out, int64_t in, ComputeType t) {
  l.train_fwd.pack(l.w, out, in, t);
  l.train_bwd.pack_transposed(l.w, out, in, t);
}

}  // namespace

Model::Impl::Impl(const Config& c) : cfg(c) {
  table = param_table(cfg);
  size_t total = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    index[table[i].name] = i;
    total = std::max(total, table[i].padded_end());
  }
  require_memory(4.0 * static_cast<double>(total),
                 "model: " + std::to_string(total) + " parameters (4 bytes each)");
  params.resize(total);
  params.zero();
  // Gradients are allocated on first use (gbase): inference never needs them.
  auto lin = [&](const std::string& prefix) {
    Linear l;
    l.w = P(prefix + ".weight");
    l.b = P(prefix + ".bias");
    return l;
  };
  auto norm = [&](const std::string& prefix) {
    return Norm{P(prefix + ".weight"), P(prefix + ".bias")};
  };
  word = P("roberta.embeddings.word_embeddings.weight");
  pos = P("roberta.embeddings.position_embeddings.weight");
  type = P("roberta.embeddings.token_type_embeddings.weight");
  emb_ln = norm("roberta.embeddings.LayerNorm");
  if (cfg.norm == NormPlacement::pre) final_ln = norm("roberta.encoder.final_layer_norm");
  lm_dense = lin("lm_head.dense");
  lm_ln = norm("lm_head.layer_norm");
  lm_bias = P("lm_head.bias");
  cls_dense = lin("classifier.dense");
  cls_out = lin("classifier.out_proj");
  proj = std::make_unique<Projections>(cfg, params.data());
  // The attention kind's tensors fill projection slots: a layer's own, else the model's.
  const AttentionPath& kind = attention_path(cfg);
  auto bind_slots = [&](LayerParams& L, const std::vector<PathTensor>& ts) {
    for (const PathTensor& t : ts) {
      const int slot = proj->add(info(t.name), t.heads, t.k);
      if (t.keys) L.slot_k = slot;
      if (t.values) L.slot_v = slot;
    }
  };
  LayerParams model_slots;
  bind_slots(model_slots, kind.tensors(cfg, -1));
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const std::string p = "roberta.encoder.layer." + std::to_string(l) + ".";
    LayerParams L;
    L.q = lin(p + "attention.self.query");
    L.k = lin(p + "attention.self.key");
    L.v = lin(p + "attention.self.value");
    L.ao = lin(p + "attention.output.dense");
    L.ln_attn = norm(p + "attention.output.LayerNorm");
    L.inter = lin(p + "intermediate.dense");
    L.out = lin(p + "output.dense");
    L.ln_out = norm(p + "output.LayerNorm");
    L.K = kind.projected_length(cfg, l);
    L.slot_k = model_slots.slot_k;
    L.slot_v = model_slots.slot_v;
    bind_slots(L, kind.tensors(cfg, l));
    layers.push_back(std::move(L));
  }
}

// Packs the weights for the compute type if they changed since the last packing, and sets
// their row tiles: fixed for the padded length N in batch-invariant inference, none otherwise.
void Model::Impl::ensure_packed(int64_t N) {
  const int64_t tile = invariant ? invariant_rows(N, num_threads()) : 0;
  for_each_encoder_linear(layers, cfg, [&](Linear& l, int64_t out, int64_t in, int64_t layer) {
    if (!packed_current) l.packed.pack(l.w, out, in, layer_compute(layer));
    l.packed.set_row_tile(tile);
  });
  packed_current = true;
}

void Model::Impl::ensure_cls_packed() {
  if (cls_packed_current) return;
  cls_dense.packed.pack(cls_dense.w, cfg.d_model, cfg.d_model, ComputeType::f32);
  cls_out.packed.pack(cls_out.w, cfg.num_classes, cfg.d_model, ComputeType::f32);
  cls_packed_current = true;
}

// Parameters may have changed: drop the packed copies (repacked when next needed).
void Model::Impl::weights_changed() {
  params16_current = false;
  train_packs_current = false;
  drop_packed();
  if (cls_packed_current) {
    cls_dense.packed = PackedLinear();
    cls_out.packed = PackedLinear();
    cls_packed_current = false;
  }
}

void Model::Impl::drop_packed() {
  if (!packed_current) return;
  for_each_encoder_linear(layers, cfg,
                          [](Linear& l, int64_t, int64_t, int64_t) { l.packed = PackedLinear(); });
  packed_current = false;
}

// Bytes of the packed weights: held now, or (before packing) what packing will take.
size_t Model::Impl::packed_bytes() const {
  size_t b = 0;
  for_each_encoder_linear(
      layers, cfg, [&](const Linear& l, int64_t out, int64_t in, int64_t layer) {
        b += packed_current ? l.packed.bytes()
                            : PackedLinear::packed_bytes(out, in, layer_compute(layer));
      });
  return b;
}

size_t Model::Impl::input_copy_bytes() const {
  return num_threads() * PackedLinear::scratch_bytes(std::max(cfg.d_model, cfg.d_ff), compute);
}

TrainWeights Model::Impl::train_weights() {
  const bool bf16 = train_compute == ComputeType::bf16;
  if (bf16 && !params16_current) {  // unless the optimiser wrote the copy (bf16_params_written)
    params16.resize(params.size());
    round_bf16(params16.data(), params.data(), static_cast<int64_t>(params.size()));
    params16_current = true;
  }
  if (!train_packs_current) {
    // The weights of the linear maps packed for their products, into last step's storage.
    PhaseScope ps(Phase::matmul);  // weight conversion for the products, as the rounding is
    for_each_encoder_linear(layers, cfg, [&](Linear& l, int64_t out, int64_t in, int64_t) {
      pack_for_training(l, out, in, train_compute);
    });
    train_packs_current = true;
    head_packs_current = false;
  }
  return {params.data(), bf16 ? TensorIn(params16.data()) : TensorIn(params.data()),
          /*packed=*/true};
}

TrainWeights Model::Impl::mlm_train_weights() {
  const TrainWeights m = train_weights();
  if (!head_packs_current) {
    PhaseScope ps(Phase::matmul);
    pack_for_training(lm_dense, cfg.d_model, cfg.d_model, train_compute);
    word_fwd.pack(word, cfg.vocab_size, cfg.d_model, train_compute);
    head_packs_current = true;
  }
  return m;
}

ComputeType Model::Impl::infer_products(int64_t layer) const {
  const ComputeType maps = layer_compute(layer);
  if (maps == ComputeType::f32 || !attn_block::has_bf16()) return train_compute;
  // bf16 maps: the precision asked for. int8 maps: bf16 operands only where bf16 products are
  // the faster ones (the rule of --precision auto), so that int8 is never slower than f32.
  static const bool bf16_faster = auto_precision().precision == ComputeType::bf16;
  return maps == ComputeType::bf16 || bf16_faster ? ComputeType::bf16 : train_compute;
}

LayerContext Model::Impl::layer_context() {
  LayerContext c;
  c.cfg = &cfg;
  c.path = &path(train);
  c.proj = proj.get();
  c.lay = this;
  c.B = B;
  c.N = N;
  c.mask = mask;
  c.train = train;
  c.seed = seed;
  c.first = first;
  if (train) c.grad = grad_map();
  c.precision = train_compute;
  if (train) c.wt = train_weights();
  c.invariant = batch_invariant();
  return c;
}

void Model::Impl::check_batch(const Batch& batch) const {
  LF_CHECK(batch.B > 0 && batch.N > 0, "forward: empty batch (B=", batch.B, ", N=", batch.N, ")");
  LF_CHECK(batch.N <= cfg.max_len, "forward: sequence length ", batch.N,
           " exceeds the model's max_len ", cfg.max_len);
  LF_CHECK(batch.ids, "forward: no input ids");
  check_forward_shape(cfg, batch.B, batch.N);
  const int64_t R = batch.B * batch.N;
  for (int64_t i = 0; i < R; ++i)
    LF_CHECK(batch.ids[i] >= 0 && batch.ids[i] < cfg.vocab_size, "forward: token id ", batch.ids[i],
             " at position ", i, " is outside the vocabulary [0, ", cfg.vocab_size, ")");
}

void Model::Impl::forward(const Batch& batch, bool is_train, uint64_t dropout_seed,
                          ForwardObserver* observer) {
  check_batch(batch);
  const int64_t R = batch.B * batch.N;
  B = batch.B;
  N = batch.N;
  train = is_train;
  seed = dropout_seed;
  LF_CHECK(batch.first >= 0, "forward: negative batch offset ", batch.first);
  first = batch.first;
  // Keep our own copies: backward() runs after the caller's buffers may be gone.
  ids_copy.resize(R);
  std::memcpy(ids_copy.data(), batch.ids, R * sizeof(int32_t));
  ids = ids_copy.data();
  mask = nullptr;
  bool all_real = true;
  if (batch.mask) {
    for (int64_t i = 0; i < R; ++i) {
      LF_CHECK(batch.mask[i] == 0.f || batch.mask[i] == 1.f,
               "forward: attention_mask must hold 0 or 1, found ", batch.mask[i]);
      all_real = all_real && batch.mask[i] == 1.f;
    }
  }
  // Without padding the mask is dropped (null: the unmasked paths), except in batch-invariant
  // inference: there every sequence takes the masked paths (all ones), as it does in a batch
  // where another sequence has padding.
  if ((batch.mask && !all_real) || batch_invariant()) {
    mask_copy.resize(R);
    if (batch.mask)
      std::memcpy(mask_copy.data(), batch.mask, R * sizeof(float));
    else
      std::fill(mask_copy.data(), mask_copy.data() + R, 1.f);
    mask = mask_copy.data();
  }
  {
    Layout lay;
    const size_t need = carve(nullptr, lay, B, N, train, mask != nullptr);
    arena.reset();
    arena.reserve(need);
    arena.reset();
    carve(&arena, lay, B, N, train, mask != nullptr);
    static_cast<Layout&>(*this) = std::move(lay);
  }
  have_grad_batch = train;
  if (train) {
    // A training step follows: the inference copies would go stale. (The bf16 training copies
    // follow every change of the weights through weights_changed().)
    drop_packed();
    gbase();
    zero(dhid, R * cfg.d_model);
  } else {
    ensure_packed(N);
    input_copies = std::max(input_copies, input_copy_bytes());
  }
  proj->refresh();

  const int64_t D = cfg.d_model;
  const float p = train ? cfg.dropout : 0.f;
  const EmbedDims ed{/*B=*/B, /*N=*/N, /*C=*/D, /*pos_offset=*/cfg.position_offset};
  embedding_forward(emb, ids, word, pos, type, ed);
  layernorm_forward(xs[0], emb_mean, emb_rstd, emb, emb_ln.w, emb_ln.b, R, D, cfg.layer_norm_eps);
  dropout_forward(xs[0], xs[0], R * D, p, seed, rng_stream(kEmb), first * N * D);
  LayerContext c = layer_context();
  const bool post = cfg.norm == NormPlacement::post;
  // Batch-invariant inference: loops over the batch's sequences and heads use every thread
  // even for one sequence, so that their products run as they do for many.
  const FullTeam team(c.invariant);
  // Post-norm training: the first layer's maps read its input in their planned form (the
  // other layers' comes from the output LayerNorm before them).
  if (train && post && acts[0].maps_in.is(DataType::bf16))
    round_bf16(acts[0].maps_in.bf16(), xs[0], R * D);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    if (train) {  // post-norm: layer l's output LayerNorm writes layer l + 1's maps input
      layer_forward(c, layers[l], acts[l], l, xs[l], xs[l + 1],
                    post && l + 1 < cfg.n_layers ? acts[l + 1].maps_in : Tensor());
    } else {
      c.precision = infer_products(l);
      layer_forward_infer(c, layers[l], acts[l], xs[l], xs[l + 1]);
    }
    // Both plans still hold x[l] (inference alternates two buffers) and LN_attn(x[l]).
    if (observer)
      observer->layer_input(l, xs[l], cfg.norm == NormPlacement::pre ? acts[l].ln1 : xs[l], R, D);
  }
  if (cfg.norm == NormPlacement::pre)
    layernorm_forward(hid, fin_mean, fin_rstd, xs[cfg.n_layers], final_ln.w, final_ln.b, R, D,
                      cfg.layer_norm_eps);
  arena.check_guards();
}

void Model::Impl::backward() {
  LF_CHECK(have_grad_batch, "backward: call forward(batch, train = true) first");
  const int64_t R = B * N, D = cfg.d_model;
  if (cfg.norm == NormPlacement::pre)
    layernorm_backward(dres, grad_of(final_ln.w), grad_of(final_ln.b), dhid, xs[cfg.n_layers],
                       final_ln.w, fin_mean, fin_rstd, R, D, GradInto::overwrite);
  // (post-norm: dres is dhid itself, the planner's alias)
  BackwardObserver* obs = backward_observer;
  if (obs) obs->grads_ready(cfg.n_layers);
  const LayerContext c = layer_context();
  for (int64_t l = cfg.n_layers - 1; l >= 0; --l) {
    layer_backward(c, layers[l], acts[l], l, xs[l]);
    if (obs) obs->grads_ready(l);
  }
  const float* demb = dres;  // d(embedding LayerNorm's output): after its dropout, if any
  if (cfg.dropout > 0.f) {
    dropout_backward(tmp, dres, R * D, cfg.dropout, seed, rng_stream(kEmb), first * N * D,
                     GradInto::overwrite);
    demb = tmp;
  }
  layernorm_backward(d1, grad_of(emb_ln.w), grad_of(emb_ln.b), demb, emb, emb_ln.w, emb_mean,
                     emb_rstd, R, D, GradInto::overwrite);
  const EmbedDims ed{/*B=*/B, /*N=*/N, /*C=*/D, /*pos_offset=*/cfg.position_offset};
  embedding_backward(grad_of(word), grad_of(pos), grad_of(type), d1, ids, ed);
  have_grad_batch = false;
  arena.check_guards();
  if (obs) obs->grads_ready(-1);
}

Model::Model(const Config& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
Model::~Model() = default;
const Config& Model::config() const { return impl_->cfg; }
const std::vector<ParamInfo>& Model::params() const { return impl_->table; }
size_t Model::num_params() const {
  size_t n = 0;
  for (auto& p : impl_->table) n += p.numel;
  return n;
}
float* Model::param_data() {
  impl_->weights_changed();
  return impl_->params.data();
}
float* Model::grad_data() { return impl_->gbase(); }
const ParamInfo* Model::find(const std::string& name) const { return impl_->info(name); }
float* Model::param(const std::string& name) {
  impl_->weights_changed();
  return impl_->P(name);
}
void Model::weights_changed() { impl_->weights_changed(); }
uint16_t* Model::bf16_params() {
  if (impl_->train_compute != ComputeType::bf16) return nullptr;
  impl_->params16.resize(impl_->params.size());
  return impl_->params16.data();
}
void Model::bf16_params_written() {
  LF_CHECK(
      impl_->train_compute == ComputeType::bf16 && impl_->params16.size() == impl_->params.size(),
      "bf16_params_written: no bf16 copy (bf16 training only, after bf16_params())");
  impl_->params16_current = true;
}
float* Model::grad(const std::string& name) { return impl_->grad_of(impl_->P(name)); }
void Model::init(uint64_t seed) {
  impl_->weights_changed();
  for (auto& p : impl_->table) impl_->init_param(p, seed);
}
void Model::init_some(uint64_t seed, const std::vector<std::string>& names) {
  impl_->weights_changed();
  for (auto& n : names) {
    const ParamInfo* p = impl_->info(n);
    LF_CHECK(p, "init: no parameter named '", n, "'");
    impl_->init_param(*p, seed);
  }
}
void Model::zero_grad() {
  PhaseScope ps(Phase::optimizer);
  float* g = impl_->gbase();
  // In parallel: one thread's memset reaches about half of the memory bandwidth here, and the
  // gradients are as large as the weights (60 MB for a RoBERTa-base-sized layer).
  parallel_for(0, static_cast<int64_t>(impl_->grads.size()), 1 << 16, [&](int64_t a, int64_t b) {
    std::memset(g + a, 0, static_cast<size_t>(b - a) * sizeof(float));
  });
}
void Model::forward(const Batch& batch, bool train, uint64_t dropout_seed,
                    ForwardObserver* observer) {
  impl_->forward(batch, train, dropout_seed, observer);
}
const float* Model::hidden() const { return impl_->hid; }
const float* Model::attention_probs(int64_t layer) const {
  LF_CHECK(layer >= 0 && layer < impl_->cfg.n_layers, "attention_probs: layer ", layer,
           " out of range");
  LF_CHECK(impl_->train && impl_->acts.size() > static_cast<size_t>(layer),
           "attention_probs: run forward(batch, train = true) first");
  const AttentionPath& kind = impl_->path(true);
  LF_CHECK(kind.has_softmax_probs(), "attention_probs: attention '", kind.name(),
           "' has no softmax probabilities P to hand out (its attention weights are not one "
           "softmax)");
  LF_CHECK(impl_->acts[layer].probs,
           "attention_probs: this bf16 training forward recomputes the probabilities in "
           "backward instead of keeping them; run it with f32 products");
  return impl_->acts[layer].probs;
}
int64_t Model::attention_keys(int64_t layer) const {
  const Config& cfg = impl_->cfg;
  LF_CHECK(layer >= 0 && layer < cfg.n_layers, "attention_keys: layer ", layer, " out of range");
  LF_CHECK(impl_->N > 0, "attention_keys: run forward first");
  return attention_path(cfg).key_count(cfg, layer, impl_->N);
}
double Model::mlm_loss(const int32_t* labels, bool grad, float weight, int64_t* count,
                       int64_t denominator, MlmDistill* distill) {
  return impl_->mlm_loss(labels, grad, weight, count, denominator, distill);
}
void Model::mlm_logits(float* out, const std::vector<int64_t>& rows) {
  LF_CHECK(impl_->B > 0, "mlm_logits: call forward() first");
  if (rows.empty()) {
    std::vector<int64_t> all(impl_->B * impl_->N);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    impl_->mlm_forward(all, out);
  } else {
    impl_->mlm_forward(rows, out);
  }
}
double Model::cls_loss(const int32_t* labels, bool grad, float weight) {
  return impl_->cls_forward_backward(labels, grad, weight, nullptr);
}
void Model::cls_logits(float* out) { impl_->cls_forward_backward(nullptr, false, 0.f, out); }
void Model::backward() { impl_->backward(); }
void Model::set_backward_observer(BackwardObserver* observer) {
  impl_->backward_observer = observer;
}
size_t Model::activation_bytes() const {
  return impl_->arena.capacity() + impl_->head_arena.capacity() +
         impl_->mlm_grad.size() * sizeof(float) + impl_->input_copies;
}
size_t Model::forward_bytes(int64_t B, int64_t N, bool train, bool padded) const {
  return impl_->forward_bytes(B, N, train, padded);
}
size_t Model::param_bytes() const {
  const Impl& m = *impl_;
  return (m.params.size() + m.grads.size()) * sizeof(float) + m.proj->bytes();
}
size_t Model::packed_weight_bytes() const { return impl_->packed_bytes(); }
namespace {
// Refuses a precision the model's attention kind does not run, naming both.
void require_kind_runs(const AttentionPath& kind, ComputeType t, bool train) {
  LF_CHECK(kind.runs_precision(t, train), "attention '", kind.name(), "' ",
           train ? "trains" : "runs", " in f32 only; precision ", compute_type_name(t),
           " is not available for it (docs/design.md, \"Attention kinds\")");
}
}  // namespace

void Model::set_compute_type(ComputeType t) {
  if (t == impl_->compute) return;
  require_compute_type(t);
  require_kind_runs(impl_->path(false), t, false);
  impl_->weights_changed();
  impl_->compute = t;
}
ComputeType Model::compute_type() const { return impl_->compute; }
void Model::set_float_layers(const std::vector<int64_t>& layers) {
  std::vector<bool> keep(static_cast<size_t>(impl_->cfg.n_layers), false);
  for (int64_t l : layers) {
    if (l < 0 || l >= impl_->cfg.n_layers)
      fail("float layers: layer ", l, " does not exist (the model has ", impl_->cfg.n_layers,
           " layers, 0 to ", impl_->cfg.n_layers - 1, ")");
    keep[static_cast<size_t>(l)] = true;
  }
  if (keep == impl_->float_layers) return;
  impl_->weights_changed();
  impl_->float_layers = std::move(keep);
}
std::vector<int64_t> Model::float_layers() const {
  std::vector<int64_t> v;
  for (size_t l = 0; l < impl_->float_layers.size(); ++l)
    if (impl_->float_layers[l]) v.push_back(static_cast<int64_t>(l));
  return v;
}
void Model::set_train_compute_type(ComputeType t) {
  if (t == impl_->train_compute) return;
  require_trains(t);
  require_compute_type(t);
  require_kind_runs(impl_->path(true), t, true);
  impl_->train_compute = t;
  impl_->train_packs_current = false;  // the packed weights are in the training precision
  impl_->head_packs_current = false;
}
ComputeType Model::train_compute_type() const { return impl_->train_compute; }
ExactAttention default_exact_attention() {
  return attn_block::available() ? ExactAttention::streaming : ExactAttention::tiled;
}

void Model::set_exact_attention(ExactAttention how) { impl_->exact = how; }
void Model::set_batch_invariant(bool on) { impl_->invariant = on; }
bool Model::batch_invariant() const { return impl_->invariant; }
Model::ExactAttention Model::exact_attention() const { return impl_->exact; }

}  // namespace lf
