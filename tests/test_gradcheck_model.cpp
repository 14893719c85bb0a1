// The whole model's parameter gradients against central finite differences (method and
// helpers: gradcheck_util.h), over the attention matrix of test_util.h and with dropout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gradcheck_util.h"
#include "linformer/model.h"
#include "test_util.h"

namespace lf {
namespace {

using namespace gradcheck;

// Random, non-trivial weights: every tensor (LayerNorm and biases too) gets noise.
using test::randomise;

// A padded batch (3 sequences of lengths 12, 7, 10 at N = 12) with MLM and class labels.
struct TestBatch {
  int64_t B = 3, N = 12;
  std::vector<int32_t> ids, labels, cls = {2, 0, 1};
  std::vector<float> mask;
  explicit TestBatch(const Config& cfg) {
    const int64_t lens[] = {12, 7, 10};
    ids.resize(B * N);
    labels.assign(B * N, -100);
    mask.resize(B * N);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < N; ++t) {
        const int64_t i = b * N + t;
        const bool real = t < lens[b];
        mask[i] = real;
        ids[i] = real ? static_cast<int32_t>(rng_bits(5, 1, i) % cfg.vocab_size)
                      : static_cast<int32_t>(cfg.pad_id);
        if (real && t % 3 == 1)
          labels[i] = static_cast<int32_t>(rng_bits(5, 2, i) % cfg.vocab_size);
      }
  }
  Batch batch() const { return Batch{ids.data(), mask.data(), B, N}; }
};

// loss = w_mlm * mean MLM loss + w_cls * mean classification loss, computed with train = true.
double model_loss(Model& m, const TestBatch& tb, uint64_t dseed, bool grad) {
  const float w_mlm = 0.8f, w_cls = 1.3f;
  if (grad) m.zero_grad();
  m.forward(tb.batch(), true, dseed);
  int64_t count = 0;
  const double mlm = m.mlm_loss(tb.labels.data(), grad, w_mlm, &count);
  const double cls = m.cls_loss(tb.cls.data(), grad, w_cls);
  if (grad) m.backward();
  return w_mlm * mlm / count + w_cls * cls / tb.B;
}

// Model gradients vs central differences of the loss, for ~20 random entries of every tensor.
//
// Tolerance: the loss (~4) is evaluated by a float32 forward, so each evaluation carries a
// rounding error of ~1e-6 relative; with h = 1e-2 the central difference therefore has noise
// up to ~4e-6 / 2e-2 = 2e-4, and truncation error ~h^2 |L'''| / 6 ~ 1e-5. Parameter gradients
// of interest are ~1e-3..1e-1. An entry passes if |numeric - analytic| <= 5e-4 + 2e-2
// |analytic|; measured errors stay below ~0.2 of that bound (median ~0.001), while a wrong
// gradient (dropped term, wrong factor, wrong slice of E) fails by O(|gradient|) on most of
// the 20 entries of its tensor.
//
// Max pooling is piecewise linear: a step may move the argmax of some window, and then the
// central difference straddles a kink instead of measuring the derivative. Two measures:
//   - a smaller step, h = 1e-3, makes crossing a kink ~10x less likely than h = 1e-2 (with
//     h = 1e-2 a few entries of 800 did cross one); rounding noise grows 10x but measured
//     errors stay below 0.15 of the same tolerance;
//   - entries whose two one-sided differences (L(x+h) - L(x)) / h and (L(x) - L(x-h)) / h
//     disagree by more than 1e-3 + 0.1 |analytic| are excluded: at a smooth point they differ
//     only by L'' h (~1e-4 here) plus rounding noise (~1e-4), so a larger gap means a slope
//     change (an argmax flip) inside [x-h, x+h]. At most 10% of the entries may be excluded.
void model_gradcheck(const Config& cfg, uint64_t dseed, int per_tensor = 20) {
  Model m(cfg);
  randomise(m, 17);
  const TestBatch tb(cfg);
  const double L0 = model_loss(m, tb, dseed, true);
  const std::vector<float> grad(m.grad_data(),
                                m.grad_data() + m.params().back().offset + m.params().back().numel);
  // The gradient call must not have changed the loss value.
  EXPECT_EQ(model_loss(m, tb, dseed, false), L0);
  OneThread one;
  const double L0_one = model_loss(m, tb, dseed, false);  // base point for one-sided slopes
  const bool kinks = cfg.is_linformer() && cfg.projection == Projection::max_pool;
  const float h = kinks ? 1e-3f : kH;
  const double atol = 5e-4, rtol = 2e-2;
  int checked = 0, excluded = 0, bad = 0;
  double worst = 0;
  for (const ParamInfo& p : m.params()) {
    float* w = m.param_data() + p.offset;
    double max_abs = 0;
    for (size_t i : pick(p.numel, per_tensor, p.offset + 3)) {
      const float x0 = w[i], xp = x0 + h, xm = x0 - h;
      // Each write announced: training packs the linear maps' weights for its products.
      w[i] = xp;
      m.weights_changed();
      const double lp = model_loss(m, tb, dseed, false);
      w[i] = xm;
      m.weights_changed();
      const double lm = model_loss(m, tb, dseed, false);
      w[i] = x0;
      m.weights_changed();
      const double num = (lp - lm) / (double(xp) - double(xm));
      const double ana = grad[p.offset + i];
      max_abs = std::max(max_abs, std::abs(ana));
      const double tol = atol + rtol * std::abs(ana);
      ++checked;
      if (kinks) {
        const double fwd = (lp - L0_one) / (double(xp) - x0),
                     bwd = (L0_one - lm) / (double(x0) - xm);
        if (std::abs(fwd - bwd) > 1e-3 + 0.1 * std::abs(ana)) {
          ++excluded;
          continue;
        }
      }
      worst = std::max(worst, std::abs(num - ana) / tol);
      if (std::abs(num - ana) > tol && bad++ < 8)
        ADD_FAILURE() << p.name << "[" << i << "]: analytic " << ana << " numeric " << num;
    }
    // Every tensor but one should have a non-trivial gradient; a tensor whose gradient is
    // identically zero would make its check vacuous. The exception is the key bias: softmax
    // ignores a constant shift of a row's scores, so its gradient is zero in exact arithmetic
    // for every kind that adds it equally to each key a query sees (standard attention, max
    // pooling with empty rows masked, any selection of rows). Its entries are still compared
    // with the finite differences above.
    const bool may_be_zero = p.name.find("attention.self.key.bias") != std::string::npos;
    if (!may_be_zero) {
      EXPECT_GT(max_abs, 1e-6) << p.name << ": gradient is zero at every checked entry";
    }
  }
  EXPECT_EQ(bad, 0) << bad << " of " << checked << " entries out of tolerance";
  EXPECT_LE(excluded, checked / 10) << "too many entries at max-pool kinks";
  ::testing::Test::RecordProperty("checked", checked);
  ::testing::Test::RecordProperty("excluded", excluded);
  ::testing::Test::RecordProperty("worst_err_over_tol", std::to_string(worst));
}

class GradCheckModel : public ::testing::TestWithParam<test::NamedConfig> {};

TEST_P(GradCheckModel, ParametersMatchFiniteDifferences) { model_gradcheck(GetParam().cfg, 0); }

INSTANTIATE_TEST_SUITE_P(GradCheck, GradCheckModel,
                         ::testing::ValuesIn(test::attention_matrix(test::tiny_config())),
                         [](const auto& info) { return info.param.name; });

// With dropout the loss is still a deterministic, smooth function of the parameters when every
// forward uses the same dropout_seed (masks are a pure function of seed, site and index), so
// the gradients must match finite differences; a different seed gives a different loss.
TEST(GradCheckDropout, GradientsMatchWithFixedSeed) {
  for (AttentionKind kind : {AttentionKind::standard, AttentionKind::linformer}) {
    SCOPED_TRACE(to_string(kind));
    Config c = test::tiny_config();
    c.attention = kind;
    c.sharing = Sharing::headwise;
    c.dropout = 0.2f;
    c.attention_dropout = 0.2f;
    model_gradcheck(c, 99, 12);

    Model m(c);
    randomise(m, 17);
    const TestBatch tb(c);
    const double a = model_loss(m, tb, 99, false), a2 = model_loss(m, tb, 99, false),
                 b = model_loss(m, tb, 100, false);
    EXPECT_EQ(a, a2) << "same seed must give the same loss";
    EXPECT_GT(std::abs(a - b), 1e-4 * std::abs(a)) << "different seeds must give different masks";
    // Evaluation (train = false) ignores dropout: independent of the seed.
    m.forward(tb.batch(), false, 1);
    std::vector<float> h1(m.hidden(), m.hidden() + tb.B * tb.N * c.d_model);
    m.forward(tb.batch(), false, 2);
    EXPECT_EQ(std::memcmp(h1.data(), m.hidden(), h1.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace lf
