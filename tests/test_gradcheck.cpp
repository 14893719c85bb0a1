// Every backward function against central finite differences (method and helpers:
// gradcheck_util.h; the whole model: test_gradcheck_model.cpp).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gradcheck_util.h"
#include "kernels/ops.h"
#include "layers/attention.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

using namespace gradcheck;

// ---------------------------------------------------------------------------------------------
// Kernels

TEST(GradCheck, Linear) {
  const int64_t rows = 5, in = 7, out = 6;
  const LinearDims d{/*rows=*/rows, /*in=*/in, /*out=*/out};
  auto x = test::random_vec(rows * in, 1), W = test::random_vec(out * in, 2),
       b = test::random_vec(out, 3), r = test::random_vec(rows * out, 4);
  std::vector<float> y(rows * out);
  auto loss = [&] {
    linear_forward(y.data(), x.data(), W.data(), b.data(), d);
    return weighted_sum(y.data(), r);
  };
  auto dx = zeros(x.size()), dW = zeros(W.size()), db = zeros(b.size());
  loss();
  linear_backward(dx.data(), dW.data(), db.data(), r.data(), x.data(), W.data(), d);
  check_grad("linear.dinp", x.data(), x.size(), dx.data(), loss);
  check_grad("linear.dW", W.data(), W.size(), dW.data(), loss);
  check_grad("linear.db", b.data(), b.size(), db.data(), loss);
}

TEST(GradCheck, LayerNorm) {
  const int64_t rows = 4, C = 9;
  auto x = test::random_vec(rows * C, 5), w = test::random_vec(C, 6), b = test::random_vec(C, 7),
       r = test::random_vec(rows * C, 8);
  for (int64_t i = 0; i < C; ++i) x[i] = 3.f + 0.5f * x[i];  // offset row, smaller spread
  std::vector<float> y(rows * C), mean(rows), rstd(rows);
  auto loss = [&] {
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C,
                      1e-5f);
    return weighted_sum(y.data(), r);
  };
  auto dx = zeros(x.size()), dw = zeros(C), db = zeros(C);
  loss();
  layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), rows, C);
  check_grad("layernorm.dinp", x.data(), x.size(), dx.data(), loss);
  check_grad("layernorm.dw", w.data(), C, dw.data(), loss);
  check_grad("layernorm.db", b.data(), C, db.data(), loss);
}

// An elementwise activation: forward(y, x, n) and backward(dx, from, dy, n), where `from` is
// the input x or, when backward_takes_output, the output y.
void activation_gradcheck(const char* name, uint64_t seed,
                          void (*forward)(float*, const float*, int64_t),
                          void (*backward)(float*, const float*, const float*, int64_t),
                          bool backward_takes_output) {
  const int64_t n = 60;
  auto x = test::random_vec(n, seed, 1.5f), r = test::random_vec(n, seed + 1);
  std::vector<float> y(n);
  auto loss = [&] {
    forward(y.data(), x.data(), n);
    return weighted_sum(y.data(), r);
  };
  loss();
  auto dx = zeros(n);
  backward(dx.data(), backward_takes_output ? y.data() : x.data(), r.data(), n);
  check_grad(name, x.data(), n, dx.data(), loss);
}

TEST(GradCheck, Gelu) {
  auto fwd = [](float* y, const float* x, int64_t n) { gelu_forward(y, x, n); };
  activation_gradcheck("gelu", 9, fwd, gelu_backward, false);
}

TEST(GradCheck, Tanh) { activation_gradcheck("tanh", 11, tanh_forward, tanh_backward, true); }

TEST(GradCheck, SoftmaxWithMask) {
  const int64_t rows = 4, cols = 7;
  const float scale = 0.6f;
  auto x = test::random_vec(rows * cols, 13, 2.f), r = test::random_vec(rows * cols, 14);
  std::vector<float> y(rows * cols);
  for (int with_mask = 0; with_mask < 3; ++with_mask) {
    std::vector<float> mask(cols, 1.f);
    if (with_mask == 1) mask[1] = mask[4] = 0.f;
    if (with_mask == 2) std::fill(mask.begin(), mask.end(), 0.f);  // fully masked: all zero
    const float* km = with_mask ? mask.data() : nullptr;
    auto loss = [&] {
      softmax_forward(y.data(), x.data(), rows, cols, scale, km);
      return weighted_sum(y.data(), r);
    };
    loss();
    auto dx = zeros(x.size());
    softmax_backward(dx.data(), y.data(), r.data(), rows, cols, scale, true);
    check_grad("softmax mask=" + std::to_string(with_mask), x.data(), x.size(), dx.data(), loss);
    loss();  // y again at the unperturbed x
    // accumulate = false overwrites, also in place over dout.
    std::vector<float> dx2(x.size(), 123.f), din = r;
    softmax_backward(dx2.data(), y.data(), r.data(), rows, cols, scale, false);
    softmax_backward(din.data(), y.data(), din.data(), rows, cols, scale, false);
    for (size_t i = 0; i < dx.size(); ++i) {
      EXPECT_EQ(dx2[i], dx[i]) << "overwrite mode at " << i;
      EXPECT_EQ(din[i], dx[i]) << "in-place overwrite mode at " << i;
    }
  }
}

TEST(GradCheck, DropoutFixedMask) {
  const int64_t n = 64;
  const float p = 0.4f;
  auto x = test::random_vec(n, 15), r = test::random_vec(n, 16);
  std::vector<float> y(n);
  auto loss = [&] {
    dropout_forward(y.data(), x.data(), n, p, 77, 3);
    return weighted_sum(y.data(), r);
  };
  auto dx = zeros(n);
  dropout_backward(dx.data(), r.data(), n, p, 77, 3);
  int dropped = 0;
  for (float v : dx) dropped += v == 0.f;
  EXPECT_GT(dropped, 5);  // the mask is not trivial at this size
  EXPECT_LT(dropped, n - 5);
  check_grad("dropout", x.data(), n, dx.data(), loss);
}

TEST(GradCheck, Embedding) {
  const int64_t B = 2, N = 4, C = 3, V = 6, off = 2, P = N + off + 2;
  const EmbedDims d{/*B=*/B, /*N=*/N, /*C=*/C, /*pos_offset=*/off};
  auto word = test::random_vec(V * C, 17), pos = test::random_vec(P * C, 18),
       type = test::random_vec(2 * C, 19), r = test::random_vec(B * N * C, 20);
  const std::vector<int32_t> ids = {1, 4, 4, 0, 5, 1, 1, 2};  // repeats accumulate
  std::vector<float> y(B * N * C);
  auto loss = [&] {
    embedding_forward(y.data(), ids.data(), word.data(), pos.data(), type.data(), d);
    return weighted_sum(y.data(), r);
  };
  auto dword = zeros(word.size()), dpos = zeros(pos.size()), dtype = zeros(type.size());
  embedding_backward(dword.data(), dpos.data(), dtype.data(), r.data(), ids.data(), d);
  check_grad("embedding.word", word.data(), word.size(), dword.data(), loss);
  check_grad("embedding.pos", pos.data(), pos.size(), dpos.data(), loss);
  check_grad("embedding.type", type.data(), type.size(), dtype.data(), loss);
}

TEST(GradCheck, CrossEntropy) {
  const int64_t rows = 6, V = 7;
  const float gs = 0.45f;
  auto x = test::random_vec(rows * V, 21, 2.f);
  const std::vector<int32_t> t = {3, -100, 0, 6, -1, 2};
  // The written gradient is that of grad_scale * (summed loss).
  auto loss = [&] {
    return gs * cross_entropy(nullptr, x.data(), t.data(), rows, V, 1.f, nullptr);
  };
  std::vector<float> d(x.size());
  cross_entropy(d.data(), x.data(), t.data(), rows, V, gs, nullptr);
  check_grad("cross_entropy", x.data(), x.size(), d.data(), loss);
}

// ---------------------------------------------------------------------------------------------
// Attention

struct AttnCase {
  std::string name;
  int64_t B, N, Lk, D, H;
  bool mask, causal;
  float p_drop;
};

void attention_gradcheck(const AttnCase& c) {
  const AttnDims d{/*B=*/c.B,        /*N=*/c.N,          /*Lk=*/c.Lk, /*D=*/c.D, /*H=*/c.H,
                   /*Dh=*/c.D / c.H, /*causal=*/c.causal};
  const float scale = 1.f / std::sqrt(float(d.Dh));
  auto q = test::random_vec(c.B * c.N * c.D, 31), kk = test::random_vec(c.B * c.Lk * c.D, 32),
       vv = test::random_vec(c.B * c.Lk * c.D, 33), r = test::random_vec(c.B * c.N * c.D, 34);
  std::vector<float> mask;
  if (c.mask) {
    mask.assign(c.B * c.Lk, 1.f);
    // Batch 0 keeps all keys; batch 1 loses its last two and key 1.
    mask[c.Lk + 1] = mask[2 * c.Lk - 1] = mask[2 * c.Lk - 2] = 0.f;
    if (c.causal) mask[c.Lk] = 0.f;  // batch 1 query 0 then sees no key at all
  }
  const float* km = c.mask ? mask.data() : nullptr;
  std::vector<float> ctx(q.size()), probs(c.B * c.H * c.N * c.Lk);
  std::vector<float> scratch(attention_scratch_floats(d));
  const uint64_t seed = 1234, stream = 56;
  auto loss = [&] {
    attention_forward(ctx.data(), probs.data(), q.data(), kk.data(), vv.data(), km, d, scale,
                      c.p_drop, seed, stream, scratch.data());
    return weighted_sum(ctx.data(), r);
  };
  loss();
  // Inference mode (probs = null) computes the same context.
  std::vector<float> ctx2(ctx.size());
  attention_forward(ctx2.data(), nullptr, q.data(), kk.data(), vv.data(), km, d, scale, c.p_drop,
                    seed, stream, scratch.data());
  EXPECT_LT(test::rel_error(ctx2.data(), ctx.data(), ctx.size()), 1e-6);
  auto dq = zeros(q.size()), dk = zeros(kk.size()), dv = zeros(vv.size());
  attention_backward(dq.data(), dk.data(), dv.data(), r.data(), probs.data(), q.data(), kk.data(),
                     vv.data(), d, scale, c.p_drop, seed, stream, scratch.data());
  check_grad(c.name + ".dq", q.data(), q.size(), dq.data(), loss);
  check_grad(c.name + ".dk", kk.data(), kk.size(), dk.data(), loss);
  check_grad(c.name + ".dv", vv.data(), vv.size(), dv.data(), loss);
}

TEST(GradCheck, AttentionPlain) {
  attention_gradcheck({"plain", 2, 5, 5, 6, 2, false, false, 0.f});
}
TEST(GradCheck, AttentionKeyMask) {
  attention_gradcheck({"mask", 2, 5, 5, 6, 2, true, false, 0.f});
}
TEST(GradCheck, AttentionCausal) {
  attention_gradcheck({"causal", 2, 5, 5, 6, 2, false, true, 0.f});
}
TEST(GradCheck, AttentionCausalWithMask) {
  attention_gradcheck({"causal_mask", 2, 5, 5, 6, 2, true, true, 0.f});
}
TEST(GradCheck, AttentionDropoutOnProbabilities) {
  attention_gradcheck({"dropout", 2, 5, 5, 6, 2, true, false, 0.3f});
}
TEST(GradCheck, AttentionProjectedKeys) {  // Linformer shape: Lk != N
  attention_gradcheck({"projected", 2, 6, 3, 6, 3, false, false, 0.f});
  attention_gradcheck({"projected_dropout", 2, 6, 3, 6, 3, false, false, 0.25f});
}

// ---------------------------------------------------------------------------------------------
// Sequence projection and max pooling

void seq_project_gradcheck(bool with_mask, bool with_em) {
  const int64_t B = 2, N = 5, K = 3, C = 4, ldE = 7, ldx = 6, ldo = 5;
  const SeqProjDims sd{/*B=*/B,     /*N=*/N,     /*K=*/K,    /*C=*/C,
                       /*ldE=*/ldE, /*ldx=*/ldx, /*ldo=*/ldo};
  auto E = test::random_vec(K * ldE, 41), x = test::random_vec(B * N * ldx, 42),
       r = test::random_vec(B * K * ldo, 43), r2 = test::random_vec(B * K, 44);
  for (int64_t b = 0; b < B; ++b)  // the ldo padding columns are not outputs
    for (int64_t j = 0; j < K; ++j)
      for (int64_t c = C; c < ldo; ++c) r[(b * K + j) * ldo + c] = 0.f;
  std::vector<float> mask = {1, 1, 1, 1, 1, 1, 0, 1, 1, 0};
  const float* m = with_mask ? mask.data() : nullptr;
  std::vector<float> out(B * K * ldo), em(B * K), Ebm(B * K * N);
  auto loss = [&] {
    seq_project_forward(out.data(), with_em ? em.data() : nullptr, Ebm.data(), E.data(), x.data(),
                        m, sd);
    double s = weighted_sum(out.data(), r);
    if (with_em) s += weighted_sum(em.data(), r2);
    return s;
  };
  loss();
  // em = E[:, :N] m_b, checked against a loop.
  if (with_em)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < K; ++j) {
        double s = 0;
        for (int64_t t = 0; t < N; ++t) s += E[j * ldE + t] * (m ? m[b * N + t] : 1.f);
        EXPECT_NEAR(em[b * K + j], s, 1e-5);
      }
  auto dx = zeros(x.size()), dE = zeros(E.size());
  std::vector<float> scratch(B * K * N);
  seq_project_backward(dx.data(), dE.data(), r.data(), with_em ? r2.data() : nullptr, Ebm.data(),
                       E.data(), x.data(), m, sd, scratch.data());
  const std::string tag =
      std::string("seq_project mask=") + (with_mask ? "1" : "0") + " em=" + (with_em ? "1" : "0");
  // All entries, including the unused columns t >= N of E and the ldx padding of x (gradient 0).
  check_grad(tag + ".dx", x.data(), x.size(), dx.data(), loss);
  check_grad(tag + ".dE", E.data(), E.size(), dE.data(), loss);
  // dE only (dx null) gives the same dE.
  auto dE2 = zeros(E.size());
  seq_project_backward(nullptr, dE2.data(), r.data(), with_em ? r2.data() : nullptr, Ebm.data(),
                       E.data(), x.data(), m, sd, scratch.data());
  EXPECT_LT(test::rel_error(dE2.data(), dE.data(), dE.size()), 1e-6);
}

TEST(GradCheck, SeqProjectNoMask) { seq_project_gradcheck(false, false); }
TEST(GradCheck, SeqProjectNoMaskWithEm) { seq_project_gradcheck(false, true); }
TEST(GradCheck, SeqProjectMask) { seq_project_gradcheck(true, false); }
TEST(GradCheck, SeqProjectMaskWithEm) { seq_project_gradcheck(true, true); }

TEST(GradCheck, MaxPool) {
  // N = 7 positions in windows of w = 3 (K = 3: the last window holds one position).
  // Batch 1 has positions 3..5 padded, so its window 1 is empty (output 0, no gradient).
  const int64_t B = 2, N = 7, K = 3, w = 3, C = 4;
  const PoolDims d{/*B=*/B, /*N=*/N, /*K=*/K, /*w=*/w, /*C=*/C};
  // Within a window (3 consecutive t) the values (7t + 3c + 5b) mod 11 are distinct, so
  // entries of one window and channel are >= 0.1 apart and a step h = 1e-2 never changes an
  // argmax (max pooling is then locally linear and the central difference is exact up to
  // rounding). A random offset per (b, window, channel) keeps the data irregular.
  std::vector<float> x(B * N * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < N; ++t)
      for (int64_t c = 0; c < C; ++c)
        x[(b * N + t) * C + c] = 0.1f * static_cast<float>((7 * t + 3 * c + 5 * b) % 11) +
                                 rng_normal(51, b * K + t / w, c);
  std::vector<float> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1};
  auto r = test::random_vec(B * K * C, 52);
  std::vector<float> out(B * K * C);
  std::vector<int32_t> arg(B * K * C);
  auto loss = [&] {
    max_pool_forward(out.data(), arg.data(), x.data(), mask.data(), d);
    return weighted_sum(out.data(), r);
  };
  loss();
  // Forward against a loop.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < K; ++j)
      for (int64_t c = 0; c < C; ++c) {
        float best = 0.f;
        int32_t at = -1;
        for (int64_t t = j * w; t < std::min((j + 1) * w, N); ++t)
          if (mask[b * N + t] != 0.f && (at < 0 || x[(b * N + t) * C + c] > best))
            best = x[(b * N + t) * C + c], at = static_cast<int32_t>(t);
        EXPECT_EQ(out[(b * K + j) * C + c], best) << b << "," << j << "," << c;
        EXPECT_EQ(arg[(b * K + j) * C + c], at);
      }
  auto dx = zeros(x.size());
  max_pool_backward(dx.data(), r.data(), arg.data(), d);
  check_grad("max_pool", x.data(), x.size(), dx.data(), loss);
}

// ---------------------------------------------------------------------------------------------
// Backward functions ACCUMULATE into their outputs: starting from a non-zero buffer c gives
// c + (the gradient computed from zero).

void expect_accumulated(const std::string& what, const std::vector<float>& from_zero,
                        const std::vector<float>& from_c, float c) {
  ASSERT_EQ(from_zero.size(), from_c.size());
  bool nonzero = false;
  for (size_t i = 0; i < from_zero.size(); ++i) {
    nonzero = nonzero || from_zero[i] != 0.f;
    ASSERT_NEAR(from_c[i], from_zero[i] + c, 1e-5 * (1 + std::abs(from_zero[i])))
        << what << " does not accumulate at " << i;
  }
  EXPECT_TRUE(nonzero) << what << ": gradient is identically zero, test is vacuous";
}

// A LayerNorm over 3 rows of 6 with random input, weights and output gradient, and the
// forward pass's saved statistics: what a backward check needs.
struct LayerNormCase {
  static constexpr int64_t rows = 3, C = 6;
  std::vector<float> x = test::random_vec(rows * C, 4), w = test::random_vec(C, 5),
                     b = test::random_vec(C, 6), g = test::random_vec(rows * C, 7);
  std::vector<float> y = std::vector<float>(rows * C), mean = std::vector<float>(rows),
                     rstd = std::vector<float>(rows);
  LayerNormCase() {
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C,
                      1e-5f);
  }
  void backward(float* dx, float* dw, float* db, GradInto into = GradInto::add) const {
    layernorm_backward(dx, dw, db, g.data(), x.data(), w.data(), mean.data(), rstd.data(), rows,
                       C, into);
  }
};

TEST(GradCheck, BackwardAccumulates) {
  const float c = 0.375f;
  auto two = [&](size_t n) { return std::make_pair(zeros(n), std::vector<float>(n, c)); };
  {  // linear
    const int64_t rows = 3, in = 4, out = 5;
    const LinearDims d{/*rows=*/rows, /*in=*/in, /*out=*/out};
    auto x = test::random_vec(rows * in, 1), W = test::random_vec(out * in, 2),
         g = test::random_vec(rows * out, 3);
    auto [dx0, dx1] = two(x.size());
    auto [dW0, dW1] = two(W.size());
    auto [db0, db1] = two(out);
    linear_backward(dx0.data(), dW0.data(), db0.data(), g.data(), x.data(), W.data(), d);
    linear_backward(dx1.data(), dW1.data(), db1.data(), g.data(), x.data(), W.data(), d);
    expect_accumulated("linear.dinp", dx0, dx1, c);
    expect_accumulated("linear.dW", dW0, dW1, c);
    expect_accumulated("linear.db", db0, db1, c);
  }
  {  // layernorm
    const LayerNormCase ln;
    auto [dx0, dx1] = two(ln.x.size());
    auto [dw0, dw1] = two(ln.C);
    auto [db0, db1] = two(ln.C);
    ln.backward(dx0.data(), dw0.data(), db0.data());
    ln.backward(dx1.data(), dw1.data(), db1.data());
    expect_accumulated("layernorm.dinp", dx0, dx1, c);
    expect_accumulated("layernorm.dw", dw0, dw1, c);
    expect_accumulated("layernorm.db", db0, db1, c);
  }
  {  // gelu, tanh, softmax (accumulate = true), dropout
    const int64_t n = 24;
    auto x = test::random_vec(n, 8), g = test::random_vec(n, 9);
    std::vector<float> y(n);
    auto [a0, a1] = two(n);
    gelu_backward(a0.data(), x.data(), g.data(), n);
    gelu_backward(a1.data(), x.data(), g.data(), n);
    expect_accumulated("gelu", a0, a1, c);
    tanh_forward(y.data(), x.data(), n);
    auto [t0, t1] = two(n);
    tanh_backward(t0.data(), y.data(), g.data(), n);
    tanh_backward(t1.data(), y.data(), g.data(), n);
    expect_accumulated("tanh", t0, t1, c);
    softmax_forward(y.data(), x.data(), 4, 6, 0.5f, nullptr);
    auto [s0, s1] = two(n);
    softmax_backward(s0.data(), y.data(), g.data(), 4, 6, 0.5f, true);
    softmax_backward(s1.data(), y.data(), g.data(), 4, 6, 0.5f, true);
    expect_accumulated("softmax", s0, s1, c);
    auto [d0, d1] = two(n);
    dropout_backward(d0.data(), g.data(), n, 0.3f, 1, 2);
    dropout_backward(d1.data(), g.data(), n, 0.3f, 1, 2);
    expect_accumulated("dropout", d0, d1, c);
    auto [e0, e1] = two(n);  // p = 0 path
    dropout_backward(e0.data(), g.data(), n, 0.f, 1, 2);
    dropout_backward(e1.data(), g.data(), n, 0.f, 1, 2);
    expect_accumulated("dropout p=0", e0, e1, c);
  }
  {  // embedding
    const int64_t B = 2, N = 3, C = 4, V = 5;
    const std::vector<int32_t> ids = {0, 1, 4, 4, 1, 2};
    auto g = test::random_vec(B * N * C, 10);
    auto [w0, w1] = two(V * C);
    auto [p0, p1] = two((N + 1) * C);
    auto [y0, y1] = two(C);
    const EmbedDims d{/*B=*/B, /*N=*/N, /*C=*/C, /*pos_offset=*/1};
    embedding_backward(w0.data(), p0.data(), y0.data(), g.data(), ids.data(), d);
    embedding_backward(w1.data(), p1.data(), y1.data(), g.data(), ids.data(), d);
    // Rows never used stay at c: compare everything anyway (their zero-start value is 0).
    for (size_t i = 0; i < w0.size(); ++i) EXPECT_NEAR(w1[i], w0[i] + c, 1e-5);
    for (size_t i = 0; i < p0.size(); ++i) EXPECT_NEAR(p1[i], p0[i] + c, 1e-5);
    expect_accumulated("embedding.type", y0, y1, c);
  }
  {  // attention
    const AttnDims d{/*B=*/2, /*N=*/4,  /*Lk=*/4,        /*D=*/6,
                     /*H=*/2, /*Dh=*/3, /*causal=*/false};
    auto q = test::random_vec(48, 11), k = test::random_vec(48, 12), v = test::random_vec(48, 13),
         g = test::random_vec(48, 14);
    std::vector<float> ctx(48), probs(2 * 2 * 4 * 4);
    std::vector<float> scratch(attention_scratch_floats(d));
    attention_forward(ctx.data(), probs.data(), q.data(), k.data(), v.data(), nullptr, d, 0.5f,
                      0.2f, 3, 4, scratch.data());
    auto [q0, q1] = two(48);
    auto [k0, k1] = two(48);
    auto [v0, v1] = two(48);
    attention_backward(q0.data(), k0.data(), v0.data(), g.data(), probs.data(), q.data(), k.data(),
                       v.data(), d, 0.5f, 0.2f, 3, 4, scratch.data());
    attention_backward(q1.data(), k1.data(), v1.data(), g.data(), probs.data(), q.data(), k.data(),
                       v.data(), d, 0.5f, 0.2f, 3, 4, scratch.data());
    expect_accumulated("attention.dq", q0, q1, c);
    expect_accumulated("attention.dk", k0, k1, c);
    expect_accumulated("attention.dv", v0, v1, c);
  }
  for (int with_mask = 0; with_mask < 2; ++with_mask) {  // seq_project
    const int64_t B = 2, N = 4, K = 2, C = 3;
    auto E = test::random_vec(K * N, 15), x = test::random_vec(B * N * C, 16),
         g = test::random_vec(B * K * C, 17), gem = test::random_vec(B * K, 18);
    std::vector<float> mask = {1, 1, 1, 1, 1, 0, 1, 0};
    const float* m = with_mask ? mask.data() : nullptr;
    std::vector<float> out(B * K * C), em(B * K), Ebm(B * K * N), scratch(B * K * N);
    const SeqProjDims sd{/*B=*/B, /*N=*/N, /*K=*/K, /*C=*/C, /*ldE=*/N, /*ldx=*/C, /*ldo=*/C};
    seq_project_forward(out.data(), em.data(), Ebm.data(), E.data(), x.data(), m, sd);
    auto [x0, x1] = two(x.size());
    auto [E0, E1] = two(E.size());
    seq_project_backward(x0.data(), E0.data(), g.data(), gem.data(), Ebm.data(), E.data(), x.data(),
                         m, sd, scratch.data());
    seq_project_backward(x1.data(), E1.data(), g.data(), gem.data(), Ebm.data(), E.data(), x.data(),
                         m, sd, scratch.data());
    expect_accumulated("seq_project.dx", x0, x1, c);
    expect_accumulated("seq_project.dE", E0, E1, c);
  }
  {  // max_pool
    const int64_t B = 1, N = 4, K = 2, C = 3;
    auto x = test::random_vec(N * C, 19), g = test::random_vec(K * C, 20);
    std::vector<float> out(K * C);
    std::vector<int32_t> arg(K * C);
    const PoolDims d{/*B=*/B, /*N=*/N, /*K=*/K, /*w=*/2, /*C=*/C};
    max_pool_forward(out.data(), arg.data(), x.data(), nullptr, d);
    auto [x0, x1] = two(x.size());
    max_pool_backward(x0.data(), g.data(), arg.data(), d);
    max_pool_backward(x1.data(), g.data(), arg.data(), d);
    for (size_t i = 0; i < x0.size(); ++i) EXPECT_NEAR(x1[i], x0[i] + c, 1e-6);
  }
}

}  // namespace
// GradInto::overwrite: the gradient written over a buffer of NaNs (whatever it held is
// ignored) equals the one added into zeros, bit for bit.
TEST(GradCheck, OverwriteEqualsAddingIntoZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto expect_same = [](const std::string& what, const std::vector<float>& added,
                        const std::vector<float>& written) {
    ASSERT_EQ(added.size(), written.size());
    bool nonzero = false;
    for (size_t i = 0; i < added.size(); ++i) {
      nonzero = nonzero || added[i] != 0.f;
      ASSERT_EQ(added[i], written[i]) << what << " at " << i;
    }
    EXPECT_TRUE(nonzero) << what << ": gradient is identically zero, test is vacuous";
  };
  {  // linear (the input gradient; dW and db still accumulate)
    const int64_t rows = 3, in = 4, out = 5;
    const LinearDims d{/*rows=*/rows, /*in=*/in, /*out=*/out};
    auto x = test::random_vec(rows * in, 1), W = test::random_vec(out * in, 2),
         g = test::random_vec(rows * out, 3);
    std::vector<float> dx0 = zeros(x.size()), dx1(x.size(), nan);
    linear_backward(dx0.data(), nullptr, nullptr, g.data(), x.data(), W.data(), d);
    linear_backward(dx1.data(), nullptr, nullptr, g.data(), x.data(), W.data(), d,
                    ComputeType::f32, nullptr, nullptr, GradInto::overwrite);
    expect_same("linear.dinp", dx0, dx1);
  }
  {  // layernorm
    const LayerNormCase ln;
    std::vector<float> dx0 = zeros(ln.x.size()), dx1(ln.x.size(), nan), dw = zeros(ln.C),
                       db = zeros(ln.C);
    ln.backward(dx0.data(), dw.data(), db.data());
    ln.backward(dx1.data(), dw.data(), db.data(), GradInto::overwrite);
    expect_same("layernorm.dinp", dx0, dx1);
  }
  for (float p : {0.f, 0.3f}) {  // dropout, with and without dropping
    const int64_t n = 40;
    auto g = test::random_vec(n, 8);
    std::vector<float> d0 = zeros(n), d1(n, nan);
    dropout_backward(d0.data(), g.data(), n, p, 5, 6);
    dropout_backward(d1.data(), g.data(), n, p, 5, 6, 0, GradInto::overwrite);
    expect_same("dropout p=" + std::to_string(p), d0, d1);
  }
  for (int64_t Lk : {4, 2}) {  // attention, standard and projected keys, with dropout
    const AttnDims d{/*B=*/2, /*N=*/4,  /*Lk=*/Lk,       /*D=*/6,
                     /*H=*/2, /*Dh=*/3, /*causal=*/false};
    auto q = test::random_vec(48, 11), k = test::random_vec(2 * Lk * 6, 12),
         v = test::random_vec(2 * Lk * 6, 13), g = test::random_vec(48, 14);
    std::vector<float> ctx(48), probs(2 * 2 * 4 * Lk);
    std::vector<float> scratch(attention_scratch_floats(d));
    attention_forward(ctx.data(), probs.data(), q.data(), k.data(), v.data(), nullptr, d, 0.5f,
                      0.2f, 3, 4, scratch.data());
    std::vector<float> q0 = zeros(48), k0 = zeros(k.size()), v0 = zeros(v.size());
    std::vector<float> q1(48, nan), k1(k.size(), nan), v1(v.size(), nan);
    attention_backward(q0.data(), k0.data(), v0.data(), g.data(), probs.data(), q.data(), k.data(),
                       v.data(), d, 0.5f, 0.2f, 3, 4, scratch.data());
    attention_backward(q1.data(), k1.data(), v1.data(), g.data(), probs.data(), q.data(), k.data(),
                       v.data(), d, 0.5f, 0.2f, 3, 4, scratch.data(), ComputeType::f32, 0,
                       GradInto::overwrite);
    expect_same("attention.dq", q0, q1);
    expect_same("attention.dk", k0, k1);
    expect_same("attention.dv", v0, v1);
  }
}

}  // namespace lf
