// int8 inference (--precision int8, docs/int8.md): the quantize kernels' ties, saturation and
// non-finite rows, the packed int8 product's quantized forms and row independence, the model in
// int8 against f32 for every attention kind with padding, layers kept in f32, and training
// refusing int8. The kernels against naive references (quantize, dequantize, the GELU epilogue,
// the product within its quantization bound) are op cases (tests/ops/cases_int8.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quantize.h"
#include "kernels/vec_math.h"
#include "layers/feed_forward.h"
#include "linformer/model.h"
#include "test_util.h"

namespace lf {
namespace {

TEST(Int8Quantize, TiesGoToEvenAndTheLargestValueSaturatesExactly) {
  // amax = 127 gives scale 1: the values themselves are rounded.
  const std::vector<float> x = {127.f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.49f, -127.f};
  std::vector<int8_t> q(x.size());
  float s = 0;
  quantize_rows(q.data(), 0, &s, x.data(), 1, static_cast<int64_t>(x.size()), 0, 127);
  EXPECT_EQ(s, 1.f);
  const std::vector<int8_t> want = {127, 2, 4, -2, -4, 0, 0, 1, -127};
  EXPECT_EQ(q, want);
  // With qmax 63 the largest magnitude maps to +-63, never beyond.
  quantize_rows(q.data(), 0, &s, x.data(), 1, static_cast<int64_t>(x.size()), 0, 63);
  EXPECT_EQ(q[0], 63);
  EXPECT_EQ(q[8], -63);
}

TEST(Int8Quantize, NonFiniteRowsPoisonTheirScaleOnly) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {1.f, 2.f,  nan, 4.f,  // NaN
                          1.f, inf,  3.f, 4.f,  // +inf
                          1.f, -2.f, 3.f, -4.f};
  std::vector<int8_t> q(12, 5);
  std::vector<float> s(3);
  quantize_rows(q.data(), 4, s.data(), x.data(), 3, 4, 4, 127);
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_TRUE(std::isnan(s[1]));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q[i], 0);
  EXPECT_FLOAT_EQ(s[2], 4.f / 127);
  EXPECT_EQ(q[11], -127);
}

// The GELU epilogue quantizing its output for the next product: bitwise the f32 GELU epilogue
// followed by quantize_rows_u8 (each, and this one, against naive references: the op cases of
// tests/ops/cases_int8.cpp).
TEST(Int8Dequantize, GeluQuantizedIsGeluThenQuantize) {
  const int64_t rows = 7, N = 53;
  std::vector<int32_t> acc(rows * N);
  for (int64_t i = 0; i < rows * N; ++i) acc[i] = static_cast<int32_t>((i * 6007) % 30011) - 15000;
  for (int64_t n = 0; n < N; ++n) acc[3 * N + n] = 0;  // with no bias and offset: a zero row
  const std::vector<float> rs = test::random_vec(rows, 8, 1e-3f),
                           cs = test::random_vec(N, 9, 1e-2f), bias = test::random_vec(N, 10);
  std::vector<int32_t> off(N);
  for (int64_t n = 0; n < N; ++n) off[n] = static_cast<int32_t>(n * 331) - 8000;
  for (bool with_bias : {false, true}) {
    const float* b = with_bias ? bias.data() : nullptr;
    const int32_t* o = with_bias ? off.data() : nullptr;
    std::vector<uint8_t> q(rows * N, 1), want_q(rows * N, 2);
    std::vector<float> s(rows, -1.f), want_s(rows, -2.f), f(rows * N);
    dequantize_gelu_quantize_rows(q.data(), s.data(), acc.data(), rows, N, rs.data(), cs.data(), o,
                                  b);
    dequantize_rows(f.data(), acc.data(), rows, N, rs.data(), cs.data(), o, b, DequantOp::gelu);
    quantize_rows_u8(want_q.data(), N, want_s.data(), f.data(), rows, N, N, 127);
    EXPECT_EQ(q, want_q) << "bias " << with_bias;
    EXPECT_EQ(s, want_s) << "bias " << with_bias;
    if (!with_bias) {
      EXPECT_EQ(s[3], 0.f);
    }
  }
}

// apply() on int8 rows quantize_rows_u8 made is apply() on the f32 rows, bitwise, for every
// epilogue; apply() into an int8 output is apply() with the GELU epilogue, then quantize_rows_u8;
// both over one block and over blocks shared among threads, and inside a parallel region.
TEST(Int8Product, QuantizedInputsAndOutputsAreTheF32FormsQuantized) {
  LF_REQUIRE_INT8();
  const int64_t K = 72, N = 90;
  const std::vector<float> W = test::random_vec(N * K, 31), b = test::random_vec(N, 32);
  PackedLinear p;
  p.pack(W.data(), N, K, ComputeType::int8);
  for (int64_t rows : {int64_t{1}, int64_t{37}, int64_t{421}}) {
    const std::vector<float> x = test::random_vec(rows * K, 33 + rows, 2.f);
    std::vector<uint8_t> xq(rows * K);
    std::vector<float> xs(rows);
    quantize_rows_u8(xq.data(), K, xs.data(), x.data(), rows, K, K, 127);
    for (auto e : {PackedLinear::Epilogue::store, PackedLinear::Epilogue::gelu,
                   PackedLinear::Epilogue::accumulate}) {
      std::vector<float> want = test::random_vec(rows * N, 34), got = want;
      p.apply(want.data(), x.data(), rows, b.data(), e);
      p.apply(got.data(), TensorIn(xq.data(), xs.data()), rows, b.data(), e);
      ASSERT_EQ(got, want) << "rows " << rows << " epilogue " << static_cast<int>(e);
    }
    std::vector<float> g(rows * N);
    p.apply(g.data(), x.data(), rows, b.data(), PackedLinear::Epilogue::gelu);
    std::vector<uint8_t> want_q(rows * N), hq(rows * N);
    std::vector<float> want_s(rows), hs(rows);
    quantize_rows_u8(want_q.data(), N, want_s.data(), g.data(), rows, N, N, 127);
    p.apply(Tensor(hq.data(), hs.data()), x.data(), rows, b.data(), PackedLinear::Epilogue::gelu);
    ASSERT_EQ(hq, want_q) << "rows " << rows;
    ASSERT_EQ(hs, want_s) << "rows " << rows;
    // The same from inside a parallel region (each thread its own rows, single-threaded).
    std::vector<uint8_t> pq(rows * N);
    std::vector<float> ps(rows);
#pragma omp parallel for schedule(static, 1)
    for (int64_t r = 0; r < rows; r += 16) {
      const int64_t n = std::min<int64_t>(16, rows - r);
      p.apply(Tensor(pq.data() + r * N, ps.data() + r), x.data() + r * K, n, b.data(),
              PackedLinear::Epilogue::gelu);
    }
    ASSERT_EQ(pq, want_q) << "rows " << rows << " in a parallel region";
    ASSERT_EQ(ps, want_s) << "rows " << rows << " in a parallel region";
  }
  PackedLinear f;
  f.pack(W.data(), N, K, ComputeType::f32);
  std::vector<uint8_t> q(K);
  std::vector<float> s(1), out(N);
  EXPECT_ERROR_MENTIONS(
      f.apply(out.data(), TensorIn(q.data(), s.data()), 1, nullptr, PackedLinear::Epilogue::store),
      "int8 weights");
  EXPECT_ERROR_MENTIONS(
      f.apply(Tensor(q.data(), s.data()), out.data(), 1, nullptr, PackedLinear::Epilogue::gelu),
      "int8 weights");
}

// The FFN in int8 hands its hidden activation from the first product to the second quantized,
// kFusedRows rows at a time: bitwise the two products through an f32 hidden activation, for
// row counts below, at and past a whole number of sub-blocks, with y aliasing base or not.
TEST(Int8Product, FusedFeedForwardIsTheTwoProducts) {
  LF_REQUIRE_INT8();
  const int64_t D = 48, F = 136, kR = FeedForward::kFusedRows;
  std::vector<float> w1 = test::random_vec(F * D, 51), b1 = test::random_vec(F, 52),
                     w2 = test::random_vec(D * F, 53), b2 = test::random_vec(D, 54);
  Linear inter, out;
  inter.w = w1.data(), inter.b = b1.data(), out.w = w2.data(), out.b = b2.data();
  inter.packed.pack(w1.data(), F, D, ComputeType::int8);
  out.packed.pack(w2.data(), D, F, ComputeType::int8);
  const FeedForward ffn{inter, out, D, F};
  for (int64_t rows : {int64_t{3}, kR, 2 * kR + 22}) {
    const std::vector<float> x = test::random_vec(rows * D, 55 + rows),
                             base = test::random_vec(rows * D, 56 + rows);
    std::vector<float> h(rows * F), want(rows * D);
    inter.packed.apply(h.data(), x.data(), rows, b1.data(), PackedLinear::Epilogue::gelu);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < D; ++c) want[r * D + c] = base[r * D + c] + b2[c];
    out.packed.apply(want.data(), h.data(), rows, nullptr, PackedLinear::Epilogue::accumulate);
    std::vector<float> got(rows * D, 7.f), ws(rows * F, 9.f);
    ffn.infer_rows(got.data(), base.data(), ws.data(), x.data(), rows);
    ASSERT_EQ(got, want) << rows << " rows";
    std::vector<float> in_place = base;
    ffn.infer_rows(in_place.data(), in_place.data(), ws.data(), x.data(), rows);
    ASSERT_EQ(in_place, want) << rows << " rows, y aliasing base";
  }
}

// Per-row scales and exact integer sums: a row's result is bitwise the same whatever rows
// share its call, and a NaN in one row makes that row NaN and leaves the others alone.
TEST(Int8Product, RowsAreIndependentOfTheirBatch) {
  LF_REQUIRE_INT8();
  const int64_t K = 96, N = 40, rows = 600;
  const std::vector<float> W = test::random_vec(N * K, 21), b = test::random_vec(N, 22);
  std::vector<float> x = test::random_vec(rows * K, 23);
  PackedLinear p;
  p.pack(W.data(), N, K, ComputeType::int8);
  for (auto e : {PackedLinear::Epilogue::store, PackedLinear::Epilogue::gelu}) {
    std::vector<float> all(rows * N), one(N);
    p.apply(all.data(), x.data(), rows, b.data(), e);
    for (int64_t m : {int64_t{0}, int64_t{17}, int64_t{255}, int64_t{256}, rows - 1}) {
      p.apply(one.data(), x.data() + m * K, 1, b.data(), e);
      for (int64_t n = 0; n < N; ++n) ASSERT_EQ(one[n], all[m * N + n]) << m << "," << n;
    }
    std::vector<float> tiled(rows * N);
    p.apply_tiled(tiled.data(), x.data(), rows, b.data(), e, 16);
    EXPECT_EQ(tiled, all);
  }
  std::vector<float> before(rows * N), after(rows * N);
  p.apply(before.data(), x.data(), rows, b.data(), PackedLinear::Epilogue::store);
  x[40 * K + 3] = std::numeric_limits<float>::quiet_NaN();
  p.apply(after.data(), x.data(), rows, b.data(), PackedLinear::Epilogue::store);
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < N; ++n) {
      if (m == 40)
        ASSERT_TRUE(std::isnan(after[m * N + n])) << n;
      else
        ASSERT_EQ(after[m * N + n], before[m * N + n]) << m << "," << n;
    }
}

TEST(Int8Product, RefusesTrainingForms) {
  LF_REQUIRE_INT8();
  const std::vector<float> W = test::random_vec(8 * 8, 1);
  PackedLinear p;
  EXPECT_ERROR_MENTIONS(p.pack_transposed(W.data(), 8, 8, ComputeType::int8), "int8");
  p.pack(W.data(), 8, 8, ComputeType::int8);
  std::vector<uint16_t> x16(8);
  std::vector<float> out(8);
  EXPECT_ERROR_MENTIONS(p.apply(out.data(), x16.data(), 1, nullptr, PackedLinear::Epilogue::store),
                        "bf16 input");
}

// A model wide enough that the quantization error is averaged as in real models.
Config int8_config() {
  Config c = test::tiny_config();
  c.d_model = 64;
  c.d_ff = 128;
  c.n_heads = 4;
  c.max_len = 32;
  c.k = {8};
  return c;
}

// Hidden states of the real (unpadded) rows of a padded batch of two sequences.
std::vector<float> real_rows(Model& m, ComputeType t) {
  const Config& c = m.config();
  const int64_t B = 2, N = c.max_len, D = c.d_model, len1 = N - 11;
  std::vector<int32_t> ids(B * N, static_cast<int32_t>(c.pad_id));
  std::vector<float> mask(B * N, 0.f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < (b == 0 ? N : len1); ++i) {
      ids[b * N + i] = static_cast<int32_t>(rng_bits(31, b, i) % c.vocab_size);
      mask[b * N + i] = 1.f;
    }
  m.set_compute_type(t);
  m.forward(Batch{ids.data(), mask.data(), B, N}, false);
  std::vector<float> h;
  for (int64_t b = 0; b < B; ++b)
    h.insert(h.end(), m.hidden() + b * N * D, m.hidden() + (b * N + (b == 0 ? N : len1)) * D);
  return h;
}

class Int8Model : public ::testing::TestWithParam<test::NamedConfig> {};

// Every attention kind and sharing, with padding: int8 hidden states within 5% (relative
// Frobenius) of f32's, and not equal to them (the int8 path ran).
TEST_P(Int8Model, CloseToF32WithPadding) {
  LF_REQUIRE_INT8();
  LF_REQUIRE_KIND_RUNS(GetParam().cfg, ComputeType::int8);
  Model m(GetParam().cfg);
  test::randomise(m, 41);
  const std::vector<float> f = real_rows(m, ComputeType::f32);
  const std::vector<float> q = real_rows(m, ComputeType::int8);
  ASSERT_EQ(f.size(), q.size());
  const double rel = test::rel_error(q.data(), f.data(), f.size());
  EXPECT_LT(rel, 5e-2) << GetParam().name;
  EXPECT_GT(rel, 1e-6) << GetParam().name << ": int8 had no effect";
  EXPECT_EQ(m.compute_type(), ComputeType::int8);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Int8Model,
                         ::testing::ValuesIn(test::attention_matrix(int8_config(), {8, 4})),
                         [](const auto& info) { return info.param.name; });

// Layers kept in f32 (Model::set_float_layers): all of them gives f32's outputs bitwise; one
// of them moves the result towards f32; a layer index out of range is refused.
TEST(Int8Model, FloatLayersStayF32) {
  LF_REQUIRE_INT8();
  Model m(int8_config());
  test::randomise(m, 43);
  const std::vector<float> f = real_rows(m, ComputeType::f32);
  const std::vector<float> q = real_rows(m, ComputeType::int8);
  m.set_float_layers({0, 1});
  EXPECT_EQ(real_rows(m, ComputeType::int8), f);
  m.set_float_layers({1});
  const std::vector<float> q1 = real_rows(m, ComputeType::int8);
  EXPECT_NE(q1, f);
  EXPECT_NE(q1, q);
  EXPECT_LT(test::rel_error(q1.data(), f.data(), f.size()),
            test::rel_error(q.data(), f.data(), f.size()));
  EXPECT_ERROR_MENTIONS(m.set_float_layers({2}), "layer 2");
  m.set_float_layers({});
  EXPECT_EQ(real_rows(m, ComputeType::int8), q);
}

TEST(Int8Model, TrainingRefusesInt8) {
  Model m(test::tiny_config());
  EXPECT_ERROR_MENTIONS(m.set_train_compute_type(ComputeType::int8), "inference only");
  EXPECT_EQ(m.train_compute_type(), ComputeType::f32);
  EXPECT_EQ(parse_compute_type("int8"), ComputeType::int8);
  EXPECT_STREQ(compute_type_name(ComputeType::int8), "int8");
  EXPECT_ERROR_MENTIONS(parse_compute_type("int4"), "int8");
}

}  // namespace
}  // namespace lf
