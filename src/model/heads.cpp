// The two heads on the encoder's hidden states, forward and backward:
//   MLM: logits = LN(GELU(h Wd^T + bd)) Word^T + b (the output map is tied to the word
//        embeddings); evaluated only on the labelled rows.
//   classification: logits = Drop(tanh(Drop(c) Wd^T + bd)) Wo^T + bo, where c is the first
//        token's state h_0 or the mean of the states over the real tokens (classifier_pooling).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "linformer/rng.h"
#include "model/model_impl.h"

namespace lf {

// ---- MLM head ----
// Runs the head on `rows` (flat indices into [B*N]); returns logits [M, V] in head_arena,
// with intermediates for backward.
Model::Impl::MlmCache Model::Impl::mlm_forward(const std::vector<int64_t>& rows,
                                               float* logits_out) {
  const int64_t D = cfg.d_model, V = cfg.vocab_size, M = static_cast<int64_t>(rows.size());
  MlmCache c;
  c.M = M;
  auto lay = [&](Arena* ar) {
    Carver cv{ar};
    for (float** p : {&c.xin, &c.t1, &c.t2, &c.t3}) *p = cv.take<float>(M * D);  // [M, D]
    for (float** p : {&c.mean, &c.rstd}) *p = cv.take<float>(M);                 // [M]
    c.logits = logits_out ? logits_out : cv.take<float>(M * V);
    return cv.bytes;
  };
  head_arena.reset();
  head_arena.reserve(lay(nullptr));
  head_arena.reset();
  lay(&head_arena);
  for (int64_t i = 0; i < M; ++i) std::memcpy(c.xin + i * D, hid + rows[i] * D, D * sizeof(float));
  const TrainWeights wt = mlm_train_weights();
  // Batch-invariant inference: both products in fixed row tiles (PackedLinear::apply_tiled)
  // that restart at each run of rows from one sequence, so that a row's place in its tile
  // depends on its own sequence only.
  const bool fixed = batch_invariant();
  std::vector<int64_t> starts;  // where each sequence's run of rows starts, then M
  if (fixed) {
    for (int64_t i = 0; i < M; ++i)
      if (i == 0 || rows[i] / N != rows[i - 1] / N) starts.push_back(i);
    starts.push_back(M);
  }
  bool equal = true;
  for (size_t r = 1; r + 1 < starts.size(); ++r)
    equal = equal && starts[r + 1] - starts[r] == starts[1];
  const auto tiled = [&](const PackedLinear& p, float* y, const float* x, const float* b) {
    if (M == 0) return;
    if (equal) {  // e.g. every row of every sequence: one call, a segment per sequence
      p.apply_tiled(y, x, M, b, PackedLinear::Epilogue::store, kInvariantRows, starts[1]);
      return;
    }
    const int64_t out = p.out_features();
    for (size_t r = 0; r + 1 < starts.size(); ++r)
      p.apply_tiled(y + starts[r] * out, x + starts[r] * D, starts[r + 1] - starts[r], b,
                    PackedLinear::Epilogue::store, kInvariantRows);
  };
  if (fixed)
    tiled(lm_dense.train_fwd, c.t1, c.xin, lm_dense.b);
  else
    linear_forward(c.t1, c.xin, Weight(lm_dense.w, wt(lm_dense)), lm_dense.b,
                   LinearDims{/*rows=*/M, /*in=*/D, /*out=*/D}, train_compute);
  gelu_forward(c.t2, c.t1, M * D);
  layernorm_forward(c.t3, c.mean, c.rstd, c.t2, lm_ln.w, lm_ln.b, M, D, cfg.layer_norm_eps);
  if (fixed)
    tiled(word_fwd, c.logits, c.t3, lm_bias);
  else
    linear_forward(c.logits, c.t3, Weight(word, TrainWeight{wt(word), &word_fwd, nullptr}), lm_bias,
                   LinearDims{/*rows=*/M, /*in=*/D, /*out=*/V}, train_compute);
  return c;
}

double Model::Impl::mlm_loss(const int32_t* labels, bool grad, float weight, int64_t* count,
                             int64_t denominator, MlmDistill* distill) {
  LF_CHECK(B > 0, "mlm_loss: call forward() first");
  LF_CHECK(!grad || have_grad_batch, "mlm_loss: gradients need forward(batch, train = true)");
  std::vector<int64_t> rows;
  std::vector<int32_t> targets;
  for (int64_t r = 0; r < B * N; ++r) {
    if (labels[r] == -100) continue;
    LF_CHECK(labels[r] >= 0 && labels[r] < cfg.vocab_size, "mlm_loss: label ", labels[r],
             " at position ", r, " is outside the vocabulary");
    rows.push_back(r);
    targets.push_back(labels[r]);
  }
  if (count) *count = static_cast<int64_t>(rows.size());
  if (rows.empty()) return 0.0;
  MlmCache c = mlm_forward(rows, nullptr);
  const int64_t D = cfg.d_model, V = cfg.vocab_size, M = c.M;
  LF_CHECK(denominator >= 0, "mlm_loss: negative denominator ", denominator);
  const float gscale = weight / static_cast<float>(denominator > 0 ? denominator : M);
  // Distillation: the soft term's gradient T * (softmax(s / T) - softmax(t / T)) per row, kept
  // in mlm_soft while cross_entropy overwrites the logits with the hard term's gradient.
  const bool kd = distill && distill->alpha > 0.f;
  if (distill) {
    LF_CHECK(distill->teacher_logits, "mlm_loss: distillation needs the teacher's logits");
    LF_CHECK(distill->alpha >= 0.f && distill->alpha <= 1.f,
             "mlm_loss: distillation weight alpha must be in [0, 1], got ", distill->alpha);
    LF_CHECK(distill->temperature > 0.f, "mlm_loss: distillation temperature must be > 0, got ",
             distill->temperature);
    distill->soft_loss = 0;
  }
  float* soft_grad = nullptr;
  if (kd) {
    soft_grad = mlm_soft.grow(M * V);
    const float inv_t = 1.f / distill->temperature;
    const float* teacher = distill->teacher_logits;
    double kl_sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : kl_sum)
    for (int64_t i = 0; i < M; ++i) {
      const float* s = c.logits + i * V;
      const float* t = teacher + i * V;
      float* g = soft_grad + i * V;
      float ms = s[0], mt = t[0];
      for (int64_t v = 1; v < V; ++v) ms = std::max(ms, s[v]), mt = std::max(mt, t[v]);
      double zs = 0, zt = 0;
      for (int64_t v = 0; v < V; ++v) {
        zs += std::exp((s[v] - ms) * inv_t);
        zt += std::exp((t[v] - mt) * inv_t);
      }
      const double ls = std::log(zs), lt = std::log(zt);
      double kl = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double lq = (s[v] - ms) * inv_t - ls;  // log softmax(s / T)
        const double lp = (t[v] - mt) * inv_t - lt;  // log softmax(t / T)
        const double p = std::exp(lp);
        kl += p * (lp - lq);
        g[v] = static_cast<float>(std::exp(lq) - p);
      }
      kl_sum += kl;
    }
    distill->soft_loss = kl_sum;
  }
  const float hard = kd ? 1.f - distill->alpha : 1.f;
  const double loss = cross_entropy(grad ? c.logits : nullptr, c.logits, targets.data(), M, V,
                                    gscale * hard, nullptr);
  if (!grad) return loss;
  float* dlogits = c.logits;
  if (kd) {
    const float k = gscale * distill->alpha * distill->temperature;
    for (int64_t i = 0; i < M * V; ++i) dlogits[i] += k * soft_grad[i];
  }
  // Each gradient below is written over its buffer by the first backward that produces it.
  float* d3 = mlm_grad.grow(3 * M * D);
  float* d2_ = d3 + M * D;
  float* dx = d2_ + M * D;
  linear_backward(LinearGrads{d3, grad_of(word), grad_of(lm_bias), GradInto::overwrite}, dlogits,
                  c.t3, Weight(word, TrainWeight{mlm_train_weights()(word)}),
                  LinearDims{/*rows=*/M, /*in=*/D, /*out=*/V}, train_compute);
  layernorm_backward(d2_, grad_of(lm_ln.w), grad_of(lm_ln.b), d3, c.t2, lm_ln.w, c.mean, c.rstd, M,
                     D, GradInto::overwrite);
  gelu_backward_inplace(d2_, c.t1, M, D);  // d2_ becomes the gradient of GELU's input
  linear_backward(LinearGrads{dx, grad_of(lm_dense.w), grad_of(lm_dense.b), GradInto::overwrite},
                  d2_, c.xin, Weight(lm_dense.w, mlm_train_weights()(lm_dense)),
                  LinearDims{/*rows=*/M, /*in=*/D, /*out=*/D}, train_compute);
  for (int64_t i = 0; i < M; ++i) {
    float* dst = dhid + rows[i] * D;
    const float* src = dx + i * D;
    for (int64_t j = 0; j < D; ++j) dst[j] += src[j];
  }
  head_arena.check_guards();
  return loss;
}

// Classification head on the pooled state: tanh(dense) then out_proj, dropout before each.
double Model::Impl::cls_forward_backward(const int32_t* labels, bool grad, float weight,
                                         float* logits_out) {
  LF_CHECK(B > 0, "classification: call forward() first");
  LF_CHECK(!grad || have_grad_batch, "cls_loss: gradients need forward(batch, train = true)");
  const int64_t D = cfg.d_model, C = cfg.num_classes;
  const float p = train ? cfg.dropout : 0.f;
  Buffer<float> buf(3 * B * D + B * C);
  float* c0 = buf.data();      // pooled states after dropout
  float* t = c0 + B * D;       // tanh(dense)
  float* td = t + B * D;       // after dropout
  float* logits = td + B * D;  // [B, C]
  // Mean pooling: scale[b] = 1 / (real tokens of sequence b); the mask is null without padding.
  const bool mean = cfg.classifier_pooling == ClassifierPooling::mean;
  std::vector<float> scale(B, 1.f);
  auto real = [&](int64_t b, int64_t t) { return !mask || mask[b * N + t] != 0.f; };
  for (int64_t b = 0; b < B; ++b) {
    float* cb = c0 + b * D;
    const float* hb = hid + b * N * D;
    if (!mean) {
      std::memcpy(cb, hb, D * sizeof(float));
      continue;
    }
    std::memset(cb, 0, D * sizeof(float));
    int64_t count = 0;
    for (int64_t t = 0; t < N; ++t) {
      if (!real(b, t)) continue;
      ++count;
      for (int64_t j = 0; j < D; ++j) cb[j] += hb[t * D + j];
    }
    LF_CHECK(count > 0, "classification: sequence ", b, " has no real token to pool");
    scale[b] = 1.f / static_cast<float>(count);
    for (int64_t j = 0; j < D; ++j) cb[j] *= scale[b];
  }
  const int64_t f0 = first * D;  // dropout mask index of c0[0] (Batch::first)
  dropout_forward(c0, c0, B * D, p, seed, rng_stream(kClsIn), f0);
  const LinearDims dense{/*rows=*/B, /*in=*/D, /*out=*/D}, out{/*rows=*/B, /*in=*/D, /*out=*/C};
  // Batch-invariant inference: both maps in f32, a row at a time through one primitive (in a
  // tile of several rows a row's bits can depend on its place: PackedLinear::apply_tiled).
  const bool fixed = batch_invariant();
  if (fixed) ensure_cls_packed();
  const auto map = [&](float* y, const float* x, const Linear& l, const LinearDims& d) {
    if (fixed)
      l.packed.apply_tiled(y, x, B, l.b, PackedLinear::Epilogue::store, 1);
    else
      linear_forward(y, x, l.w, l.b, d, train_compute);
  };
  map(t, c0, cls_dense, dense);
  tanh_forward(t, t, B * D);
  dropout_forward(td, t, B * D, p, seed, rng_stream(kClsHidden), f0);
  map(logits, td, cls_out, out);
  if (logits_out) std::memcpy(logits_out, logits, B * C * sizeof(float));
  if (!labels) return 0.0;
  for (int64_t b = 0; b < B; ++b)
    LF_CHECK(labels[b] >= 0 && labels[b] < C, "cls_loss: label ", labels[b], " of example ", b,
             " is outside [0, ", C, ")");
  const double loss = cross_entropy(grad ? logits : nullptr, logits, labels, B, C,
                                    weight / static_cast<float>(B), nullptr);
  if (!grad) return loss;
  // Each gradient is written over its buffer by the first backward that produces it (tanh's
  // backward only adds, so its buffer is zeroed).
  Buffer<float> g(3 * B * D);
  float* dtd = g.data();
  float* dt = dtd + B * D;
  float* dc = dt + B * D;
  linear_backward(LinearGrads{dtd, grad_of(cls_out.w), grad_of(cls_out.b), GradInto::overwrite},
                  logits, td, cls_out.w, out, train_compute);
  dropout_backward(dt, dtd, B * D, p, seed, rng_stream(kClsHidden), f0, GradInto::overwrite);
  std::memset(dtd, 0, B * D * sizeof(float));
  tanh_backward(dtd, t, dt, B * D);
  linear_backward(LinearGrads{dc, grad_of(cls_dense.w), grad_of(cls_dense.b), GradInto::overwrite},
                  dtd, c0, cls_dense.w, dense, train_compute);
  dropout_backward(dt, dc, B * D, p, seed, rng_stream(kClsIn), f0, GradInto::overwrite);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < (mean ? N : 1); ++t) {
      if (mean && !real(b, t)) continue;
      float* dst = dhid + (b * N + t) * D;
      for (int64_t j = 0; j < D; ++j) dst[j] += scale[b] * dt[b * D + j];
    }
  return loss;
}

}  // namespace lf
