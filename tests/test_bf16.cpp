// Mixed precision: bf16 attention's kept and tiled paths against each other, and a training
// step in bf16 against the same step in f32 (the bf16 kernels against double references are
// op harness cases, tests/ops).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "layers/attention.h"
#include "linformer/model.h"
#include "test_util.h"
#include "train/optim.h"

namespace lf {
namespace {

// A model wide enough for its products to take the bf16 path.
Config bf16_config() {
  Config c = test::tiny_config();
  c.d_model = 64;
  c.d_ff = 128;
  c.max_len = 64;
  c.k = {16};
  return c;
}

// A model asked for a precision this CPU has no matmul for refuses it at once, naming the
// missing feature, and keeps running in the precision it had; where bf16 runs, it is taken.
TEST(PrecisionSupport, MissingBf16IsRefusedWithTheReason) {
  EXPECT_TRUE(compute_type_supported(ComputeType::f32));
  Model m(test::tiny_config());
  for (bool train : {false, true}) {
    auto set = [&] {
      if (train)
        m.set_train_compute_type(ComputeType::bf16);
      else
        m.set_compute_type(ComputeType::bf16);
    };
    const ComputeType now = train ? m.train_compute_type() : m.compute_type();
    if (compute_type_supported(ComputeType::bf16)) {
      EXPECT_NO_THROW(set());
      EXPECT_EQ(train ? m.train_compute_type() : m.compute_type(), ComputeType::bf16);
      continue;
    }
    try {
      set();
      ADD_FAILURE() << "bf16 accepted on a CPU without a bf16 matmul";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bf16 needs AVX-512"), std::string::npos) << e.what();
    }
    EXPECT_EQ(train ? m.train_compute_type() : m.compute_type(), now);
  }
}

uint16_t rne(float f) {  // f32 -> bf16, round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float widen(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::vector<uint16_t> to16(const std::vector<float>& v) {
  std::vector<uint16_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = rne(v[i]);
  return r;
}

// bf16 attention keeps the probabilities that multiply V (after dropout) in bf16 from forward
// for backward's dV product: with and without that copy, forward and backward agree bitwise
// (the same values rounded the same way), with and without dropout, in a shape large enough
// for the attention products to run in bf16; the copy holds the dropped-out probabilities.
TEST(Bf16Attention, KeptProbabilityCopyChangesNothing) {
  LF_REQUIRE_BF16();
  const AttnDims d{/*B=*/2, /*N=*/128, /*Lk=*/64, /*D=*/128, /*H=*/4, /*Dh=*/32};
  ASSERT_TRUE(gemm_batched_runs_bf16(ComputeType::bf16, d.B, d.H, d.N, d.Dh, d.Lk));
  const auto q = test::random_vec(d.B * d.N * d.D, 61), k = test::random_vec(d.B * d.Lk * d.D, 62),
             v = test::random_vec(d.B * d.Lk * d.D, 63),
             dctx = test::random_vec(d.B * d.N * d.D, 64);
  const int64_t np = d.B * d.H * d.N * d.Lk;
  for (float p : {0.f, 0.25f}) {
    std::vector<float> ctx[2], dq[2], dk[2], dv[2];
    std::vector<uint16_t> p16(np, 0);
    for (int with : {0, 1}) {
      std::vector<float> probs(np), scratch(attention_scratch_floats(d));
      ctx[with].assign(d.B * d.N * d.D, 0.f);
      dq[with].assign(d.B * d.N * d.D, 0.f);
      dk[with].assign(d.B * d.Lk * d.D, 0.f);
      dv[with].assign(d.B * d.Lk * d.D, 0.f);
      uint16_t* c16 = with ? p16.data() : nullptr;
      const AttnRun r{0.25f, p, 7, 3, 0, scratch.data(), ComputeType::bf16};
      const KeysValues kv{k.data(), v.data(), nullptr};
      attention_forward(ctx[with].data(), AttnKept{probs.data(), c16}, q.data(), kv, d, r);
      attention_backward(
          AttnGrads{dq[with].data(), dk[with].data(), dv[with].data(), GradInto::overwrite},
          dctx.data(), AttnKept{probs.data(), c16}, q.data(), kv, d, r);
      if (!with) continue;
      // The copy is the probabilities rounded, zero exactly where dropout dropped them.
      int64_t zeros = 0;
      for (int64_t i = 0; i < np; ++i) {
        if (p16[i] == 0)
          ++zeros;
        else
          ASSERT_LE(std::abs(widen(p16[i]) - probs[i] / (1.f - p)), probs[i] / 64) << i;
      }
      if (p > 0.f)
        EXPECT_NEAR(double(zeros) / np, p, 0.02);
      else
        EXPECT_EQ(zeros, 0);
    }
    EXPECT_EQ(ctx[0], ctx[1]) << "dropout " << p;
    EXPECT_EQ(dq[0], dq[1]) << "dropout " << p;
    EXPECT_EQ(dk[0], dk[1]) << "dropout " << p;
    EXPECT_EQ(dv[0], dv[1]) << "dropout " << p;
  }
}

// Relative distance ||a - b|| / ||b||.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// bf16 training's tiled attention (one tile per thread, probabilities recomputed by backward)
// against the kept-probabilities path in bf16, which rounds the same operands at the same
// points (so the two differ only by the products' accumulation order), and against f32 on
// the same bf16-valued inputs: Linformer-shaped tiles with padded keys, and standard causal
// ones, with and without dropout; the gradients are added into with GradInto::add.
TEST(Bf16Attention, TiledPathMatchesKeptProbabilities) {
  LF_REQUIRE_BF16();
  struct Case {
    AttnDims d;
    bool masked;
  };
  const Case cases[] = {
      {{/*B=*/2, /*N=*/256, /*Lk=*/64, /*D=*/64, /*H=*/2, /*Dh=*/32}, true},
      {{/*B=*/2, /*N=*/128, /*Lk=*/128, /*D=*/64, /*H=*/2, /*Dh=*/32, /*causal=*/true}, false},
  };
  for (const Case& cs : cases) {
    const AttnDims& d = cs.d;
    ASSERT_FALSE(attention_keeps_probs(d, ComputeType::bf16)) << "shape too small to tile";
    ASSERT_TRUE(attention_keeps_probs(d, ComputeType::f32));
    // bf16-valued inputs, so that every path multiplies the same numbers.
    auto bf = [](std::vector<float> v) {
      for (float& x : v) x = widen(rne(x));
      return v;
    };
    const auto q = bf(test::random_vec(d.B * d.N * d.D, 71)),
               k = bf(test::random_vec(d.B * d.Lk * d.D, 72)),
               v = bf(test::random_vec(d.B * d.Lk * d.D, 73)),
               dctx = bf(test::random_vec(d.B * d.N * d.D, 74));
    const auto q16 = to16(q), dctx16 = to16(dctx);
    std::vector<float> mask(d.B * d.Lk, 1.f);
    if (cs.masked)
      for (int64_t j = d.Lk - 9; j < d.Lk; ++j) mask[d.Lk + j] = 0.f;  // element 1's padding
    const float* km = cs.masked ? mask.data() : nullptr;
    const int64_t nq = d.B * d.N * d.D, nk = d.B * d.Lk * d.D, np = d.B * d.H * d.N * d.Lk;
    const auto start = test::random_vec(nq, 75);  // the gradients are added onto these
    const auto kstart = test::random_vec(nk, 76);
    for (float p : {0.f, 0.2f}) {
      struct Out {
        std::vector<float> ctx, dq, dk, dv;
      };
      auto run_kept = [&](ComputeType t) {
        Out o{std::vector<float>(nq), start, kstart, kstart};
        std::vector<float> probs(np), scratch(attention_scratch_floats(d));
        std::vector<uint16_t> p16(t == ComputeType::bf16 ? np : 0);
        uint16_t* pp = p16.empty() ? nullptr : p16.data();
        const AttnRun r{0.3f, p, 5, 9, 0, scratch.data(), t};
        const KeysValues kv{k.data(), v.data(), km};
        attention_forward(o.ctx.data(), AttnKept{probs.data(), pp}, q.data(), kv, d, r);
        attention_backward(AttnGrads{o.dq.data(), o.dk.data(), o.dv.data()}, dctx.data(),
                           AttnKept{probs.data(), pp}, q.data(), kv, d, r);
        return o;
      };
      Out tiled{std::vector<float>(nq), start, kstart, kstart};
      {
        std::vector<float> scratch(attention_scratch_floats(d));
        std::vector<uint16_t> ctx16(nq);
        const AttnRun r{0.3f, p, 5, 9, 0, scratch.data(), ComputeType::bf16};
        const KeysValues kv{k.data(), v.data(), km};
        attention_forward_tiles(ctx16.data(), q16.data(), kv, d, r);
        for (int64_t i = 0; i < nq; ++i) tiled.ctx[i] = widen(ctx16[i]);
        attention_backward(AttnGrads{tiled.dq.data(), tiled.dk.data(), tiled.dv.data()},
                           dctx16.data(), AttnKept{}, q16.data(), kv, d, r);
      }
      const Out kept = run_kept(ComputeType::bf16), f32 = run_kept(ComputeType::f32);
      auto kept_ctx = kept.ctx;  // the tiled path writes the context in bf16
      for (float& x : kept_ctx) x = widen(rne(x));
      const std::pair<const char*, std::pair<const std::vector<float>*, const std::vector<float>*>>
          outs[] = {{"ctx", {&tiled.ctx, &kept_ctx}},
                    {"dq", {&tiled.dq, &kept.dq}},
                    {"dk", {&tiled.dk, &kept.dk}},
                    {"dv", {&tiled.dv, &kept.dv}}};
      const std::vector<float>* f32s[] = {&f32.ctx, &f32.dq, &f32.dk, &f32.dv};
      for (int i = 0; i < 4; ++i) {
        const auto& [name, ab] = outs[i];
        SCOPED_TRACE(std::string(name) + " dropout " + std::to_string(p) +
                     (d.causal ? " causal" : " linformer"));
        // Against the kept path: the same roundings, summed in another order.
        EXPECT_LT(rel_diff(*ab.first, *ab.second), 1e-4);
        // Against f32: bf16 rounding of the probabilities and score gradients only.
        EXPECT_LT(rel_diff(*ab.first, *f32s[i]), 1e-2);
      }
      // The query gradient written rounded instead (GradInto::overwrite), with its column sums
      // added to a bias gradient: the rounded f32 gradient, and its sums.
      {
        std::vector<float> scratch(attention_scratch_floats(d)), dq(nq), dk(nk), dv(nk);
        std::vector<float> dq_w(nq), dk_w(nk), dv_w(nk), db(d.D, 0.5f);
        std::vector<uint16_t> dq16(nq);
        for (int rounded : {0, 1}) {
          const AttnRun r{0.3f, p, 5, 9, 0, scratch.data(), ComputeType::bf16};
          attention_backward(AttnGrads{rounded ? Tensor(dq16.data()) : Tensor(dq_w.data()),
                                       (rounded ? dk : dk_w).data(), (rounded ? dv : dv_w).data(),
                                       GradInto::overwrite, rounded ? db.data() : nullptr},
                             dctx16.data(), AttnKept{}, q16.data(),
                             KeysValues{k.data(), v.data(), km}, d, r);
        }
        for (int64_t i = 0; i < nq; ++i) ASSERT_EQ(dq16[i], rne(dq_w[i])) << i;
        EXPECT_EQ(dk, dk_w);
        EXPECT_EQ(dv, dv_w);
        for (int64_t c = 0; c < d.D; ++c) {
          double sum = 0.5;
          for (int64_t r = 0; r < d.B * d.N; ++r) sum += dq_w[r * d.D + c];
          ASSERT_NEAR(db[c], sum, 1e-5 * (1.0 + std::abs(sum))) << c;
        }
      }
      // Padded keys get no key or value gradient from attention (only the starting values).
      if (cs.masked)
        for (int64_t j = d.Lk - 9; j < d.Lk; ++j)
          for (int64_t c = 0; c < d.D; ++c) {
            const int64_t at = (d.Lk + j) * d.D + c;
            ASSERT_EQ(tiled.dk[at], kstart[at]) << j;
            ASSERT_EQ(tiled.dv[at], kstart[at]) << j;
          }
    }
  }
}

// One MLM training step (forward, loss, backward) of m in precision p on fixed data: the loss
// and the gradients.
double bf16_test_step(Model& m, ComputeType p, std::vector<float>* grad) {
  const Config& c = m.config();
  const int64_t B = 4, N = 64;
  std::vector<int32_t> ids(B * N), labels(B * N, -100);
  for (int64_t i = 0; i < B * N; ++i) {
    ids[i] = static_cast<int32_t>(rng_bits(9, 0, i) % c.vocab_size);
    if (i % 5 == 0) labels[i] = static_cast<int32_t>(rng_bits(9, 1, i) % c.vocab_size);
  }
  m.set_train_compute_type(p);
  m.zero_grad();
  m.forward(Batch{ids.data(), nullptr, B, N}, true);
  int64_t cnt = 0;
  const double loss = m.mlm_loss(labels.data(), true, 1.f, &cnt) / cnt;
  m.backward();
  grad->assign(m.grad_data(), m.grad_data() + m.params().back().offset + m.params().back().numel);
  return loss;
}

// The whole bf16 gradient within 5e-2 of f32's, and tensor by tensor within 0.1: a wrong
// operand in one map's weight gradient is a small share of the whole gradient's norm but far
// off for that tensor. Tensors whose gradient is zero in exact arithmetic (the key bias:
// softmax ignores a score shift shared by a row) and holds only rounding noise are skipped.
void expect_close_per_tensor(const Model& m, const std::vector<float>& g16,
                             const std::vector<float>& g32, const std::string& what) {
  EXPECT_LT(test::rel_error(g16.data(), g32.data(), g32.size()), 5e-2) << what;
  double total = 0;
  for (float x : g32) total += double(x) * x;
  for (const ParamInfo& p : m.params()) {
    double nrm = 0;
    for (size_t i = 0; i < p.numel; ++i) nrm += double(g32[p.offset + i]) * g32[p.offset + i];
    if (nrm <= 1e-8 * total) continue;
    EXPECT_LT(test::rel_error(g16.data() + p.offset, g32.data() + p.offset, p.numel), 0.1)
        << what << ": " << p.name;
  }
}

// One training step of m in f32 and one in bf16 from the same weights: the losses within 1%
// (and not equal: the bf16 path was used), the gradients within expect_close_per_tensor's
// bounds.
void expect_bf16_step_close_to_f32(Model& m, const std::string& what) {
  std::vector<float> g32, g16;
  const double l32 = bf16_test_step(m, ComputeType::f32, &g32);
  const double l16 = bf16_test_step(m, ComputeType::bf16, &g16);
  EXPECT_NEAR(l16, l32, 1e-2 * l32) << what;
  EXPECT_NE(l16, l32) << what << ": the bf16 path was not used";
  expect_close_per_tensor(m, g16, g32, what);
}

// Every attention kind's variants (the registry's list), pre-norm, and dropout (with attention
// dropout: the same masks in both precisions): bf16 rounds the weights once per step and
// keeps the rounded inputs of the linear maps for their weight gradients; a copy of the wrong
// tensor (or a stale one) would put the gradients far outside the bf16 tolerance.
TEST(Bf16Training, LossAndGradientsCloseToF32) {
  LF_REQUIRE_BF16();
  std::vector<AttentionVariant> variants;
  for (const AttentionVariant& v : attention_variants(bf16_config()))  // f32-only kinds refuse
    if (attention_path(v.cfg).runs_precision(ComputeType::bf16, true)) variants.push_back(v);
  for (AttentionKind kind : {AttentionKind::linformer, AttentionKind::standard})
    for (float dropout : {0.f, 0.1f}) {
      Config c = bf16_config();
      c.attention = kind;
      c.norm = NormPlacement::pre;
      c.dropout = c.attention_dropout = dropout;
      variants.push_back(
          {std::string(to_string(kind)) + " pre-norm dropout " + std::to_string(dropout), c});
    }
  for (const AttentionVariant& v : variants) {
    Model m(v.cfg);
    m.init(5);
    expect_bf16_step_close_to_f32(m, v.name);
  }
}

// Attention heads wide enough (64 x 64 tiles of 128-wide heads) for bf16 training to run
// attention tile by tile, recomputing the probabilities in backward: loss and gradients
// within bf16 rounding of f32, and the probabilities not kept (which is how the tiled path
// is told from the kept one).
TEST(Bf16Training, TiledAttentionCloseToF32) {
  LF_REQUIRE_BF16();
  struct Variant {
    AttentionKind kind;
    NormPlacement norm;
    bool causal;
    float dropout;
  };
  const Variant variants[] = {
      {AttentionKind::linformer, NormPlacement::post, false, 0.f},
      {AttentionKind::linformer, NormPlacement::post, false, 0.1f},
      {AttentionKind::standard, NormPlacement::pre, false, 0.1f},
      {AttentionKind::standard, NormPlacement::post, true, 0.f},
  };
  for (const Variant& v : variants) {
    Config c = bf16_config();
    c.d_model = 256;
    c.n_heads = 2;
    c.d_ff = 256;
    c.k = {64};
    c.attention = v.kind;
    c.norm = v.norm;
    c.causal = v.causal;
    c.dropout = c.attention_dropout = v.dropout;
    Model m(c);
    m.init(6);
    const std::string what = std::string(to_string(v.kind)) + " " + to_string(v.norm) +
                             (v.causal ? " causal" : "") + " dropout " + std::to_string(v.dropout);
    expect_bf16_step_close_to_f32(m, what);  // the bf16 step last
    SCOPED_TRACE(what);
    EXPECT_ERROR_MENTIONS(m.attention_probs(0), "recomputes the probabilities");
  }
}

// The bf16 copy of the weights is made again after they change (here by hand between two
// steps, as an optimiser step does): the second bf16 step matches f32 on the new weights.
TEST(Bf16Training, WeightCopyFollowsParameterChanges) {
  LF_REQUIRE_BF16();
  Model m(bf16_config());
  m.init(5);
  std::vector<float> g;
  bf16_test_step(m, ComputeType::bf16, &g);
  float* w = m.param_data();
  for (const ParamInfo& p : m.params())
    for (size_t i = 0; i < p.numel; ++i) w[p.offset + i] *= (i % 3 == 0) ? -1.5f : 0.75f;
  std::vector<float> g32, g16;
  const double l32 = bf16_test_step(m, ComputeType::f32, &g32);
  const double l16 = bf16_test_step(m, ComputeType::bf16, &g16);
  EXPECT_NEAR(l16, l32, 1e-2 * l32);
  expect_close_per_tensor(m, g16, g32, "after the change");
}

// AdamW writes the weights' bf16 copy in its own pass (Model::bf16_params): after a step the
// copy is every updated weight rounded to nearest even (frozen projections included), and the
// next bf16 step uses it: its loss and gradients equal, bitwise, those of an identical model
// whose copy the forward made by rounding the weights itself.
TEST(Bf16Training, OptimiserWritesTheWeightCopy) {
  LF_REQUIRE_BF16();
  Config c = bf16_config();
  Model a(c), b(c);
  a.init(5);
  b.init(5);
  EXPECT_EQ(a.bf16_params(), nullptr);  // f32 training has no copy
  OptimOptions o;
  o.projection_lr_scale = 0.f;  // frozen E and F: rounded too, unchanged
  AdamW oa(a, o), ob(b, o);
  std::vector<float> ga, gb;
  for (int step = 0; step < 2; ++step) {
    bf16_test_step(a, ComputeType::bf16, &ga);
    bf16_test_step(b, ComputeType::bf16, &gb);
    oa.step(1e-3f);
    ob.step(1e-3f);
    b.weights_changed();  // b's next forward rounds the weights itself
  }
  const double la = bf16_test_step(a, ComputeType::bf16, &ga);
  const double lb = bf16_test_step(b, ComputeType::bf16, &gb);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(ga, gb);
  const uint16_t* w16 = a.bf16_params();
  const float* w = a.param_data();
  const size_t n = a.params().back().offset + a.params().back().numel;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(w16[i], rne(w[i])) << i;
}

// bf16 inference packs the weights; every way of changing the parameters must be seen by
// the next inference forward, and training must not use the packed copies.
TEST(Bf16Inference, PackedWeightsFollowParameterChanges) {
  LF_REQUIRE_BF16();
  const Config c = bf16_config();
  Model m(c);
  m.init(3);
  const int64_t B = 2, N = 64, R = B * N * c.d_model;
  std::vector<int32_t> ids(B * N);
  for (int64_t i = 0; i < B * N; ++i)
    ids[i] = static_cast<int32_t>(rng_bits(4, 0, i) % c.vocab_size);
  const Batch batch{ids.data(), nullptr, B, N};
  auto hidden = [&](ComputeType t, bool train) {
    m.set_compute_type(t);
    m.forward(batch, train);
    return std::vector<float>(m.hidden(), m.hidden() + R);
  };
  auto close = [&](const std::vector<float>& a, const std::vector<float>& b) {
    return test::rel_error(a.data(), b.data(), b.size()) < 2e-2;
  };
  // The FFN's output map: changing it changes the hidden states at once (the attention
  // maps of an initialised model barely do: its attention is near uniform).
  const std::string wq = "roberta.encoder.layer.0.output.dense.weight";
  const int64_t nq = c.d_model * c.d_ff;

  const std::vector<float> f0 = hidden(ComputeType::f32, false);
  const std::vector<float> b0 = hidden(ComputeType::bf16, false);
  EXPECT_TRUE(close(b0, f0));
  EXPECT_NE(b0, f0);
  EXPECT_EQ(m.compute_type(), ComputeType::bf16);

  // 1. Through param(): the next bf16 forward follows.
  for (int64_t i = 0; i < nq; ++i) m.param(wq)[i] *= -3.f;
  const std::vector<float> b1 = hidden(ComputeType::bf16, false);
  const std::vector<float> f1 = hidden(ComputeType::f32, false);
  EXPECT_FALSE(close(f1, f0));  // the change matters
  EXPECT_TRUE(close(b1, f1));

  // 2. Through a pointer kept from earlier, announced with weights_changed().
  hidden(ComputeType::bf16, false);
  float* w = m.param_data() + m.find(wq)->offset;
  hidden(ComputeType::bf16, false);  // packs again after param_data()
  for (int64_t i = 0; i < nq; ++i) w[i] *= -1.f;
  m.weights_changed();
  const std::vector<float> b2 = hidden(ComputeType::bf16, false);
  const std::vector<float> f2 = hidden(ComputeType::f32, false);
  EXPECT_TRUE(close(b2, f2));
  EXPECT_FALSE(close(b2, b1));

  // 3. init() re-draws the weights.
  hidden(ComputeType::bf16, false);
  m.init(99);
  const std::vector<float> b3 = hidden(ComputeType::bf16, false);
  const std::vector<float> f3 = hidden(ComputeType::f32, false);
  EXPECT_TRUE(close(b3, f3));

  // 4. Training forwards ignore the compute type and free the packed copies.
  const std::vector<float> t32 = hidden(ComputeType::f32, true);
  const std::vector<float> t16 = hidden(ComputeType::bf16, true);
  EXPECT_EQ(t16, t32);
  hidden(ComputeType::bf16, false);
  EXPECT_GT(m.packed_weight_bytes(), 0u);
  const size_t before = m.param_bytes();
  hidden(ComputeType::bf16, true);
  EXPECT_EQ(m.param_bytes(), before);
}

}  // namespace
}  // namespace lf
