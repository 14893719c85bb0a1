// int8 inference (--precision int8, docs/int8.md): the quantize and dequantize kernels against
// naive references (rounding half to even, saturation, zero and non-finite rows, leading
// dimensions), the packed int8 product against the double-precision product within the
// quantization bound, row independence, the model in int8 against f32 for every attention
// kind with padding, layers kept in f32, and training refusing int8.
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

// The naive quantization of one row: scale = max|x| / qmax, q = x / scale rounded half to
// even, in double.
void naive_quantize(const float* x, int64_t n, int qmax, std::vector<int>& q, double& scale) {
  double amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(double(x[i])));
  scale = amax / qmax;
  q.assign(n, 0);
  if (amax == 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const double v = double(x[i]) / scale;
    double r = std::floor(v + 0.5);
    if (r - v == 0.5 && std::fmod(r, 2.0) != 0) r -= 1;  // a tie goes to the even neighbour
    q[i] = static_cast<int>(r);
  }
}

TEST(Int8Quantize, MatchesNaiveRowByRowWithLeadingDimensions) {
  const int64_t rows = 37, cols = 45, ldx = 50, ldq = 48;
  std::vector<float> x = test::random_vec(rows * ldx, 3, 2.f);
  for (int64_t c = 0; c < cols; ++c) x[5 * ldx + c] = 0.f;      // a zero row
  for (int64_t c = 0; c < cols; ++c) x[9 * ldx + c] *= 1e-30f;  // a tiny one
  std::vector<int8_t> q(rows * ldq, 99);
  std::vector<float> s(rows, -1.f);
  for (int qmax : {127, 63}) {
    quantize_rows(q.data(), ldq, s.data(), x.data(), rows, cols, ldx, qmax);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int> want;
      double scale = 0;
      naive_quantize(x.data() + r * ldx, cols, qmax, want, scale);
      EXPECT_NEAR(s[r], scale, 1e-6 * scale) << "row " << r;
      int off_by_one = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const int got = q[r * ldq + c];
        ASSERT_LE(std::abs(got), qmax) << r << "," << c;
        // The kernel multiplies by qmax / amax in f32; at a value within f32 rounding of a
        // tie it may take the other neighbour (never more than one step).
        ASSERT_LE(std::abs(got - want[c]), 1) << r << "," << c;
        off_by_one += got != want[c];
      }
      EXPECT_LE(off_by_one, 1) << "row " << r;
      for (int64_t c = cols; c < ldq; ++c) ASSERT_EQ(q[r * ldq + c], 99) << "padding written";
    }
    EXPECT_EQ(s[5], 0.f);
    for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(q[5 * ldq + c], 0);
    EXPECT_GT(s[9], 0.f);
    // The unsigned form is the same values shifted by 128, with the same scales.
    std::vector<uint8_t> u(rows * ldq, 7);
    std::vector<float> su(rows);
    quantize_rows_u8(u.data(), ldq, su.data(), x.data(), rows, cols, ldx, qmax);
    EXPECT_EQ(su, s);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < ldq; ++c)
        ASSERT_EQ(int(u[r * ldq + c]), c < cols ? q[r * ldq + c] + 128 : 7) << r << "," << c;
  }
}

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

TEST(Int8Dequantize, MatchesNaiveForEveryEpilogue) {
  const int64_t rows = 9, N = 21;
  std::vector<int32_t> acc(rows * N);
  for (int64_t i = 0; i < rows * N; ++i) acc[i] = static_cast<int32_t>((i * 7919) % 20001) - 10000;
  const std::vector<float> rs = test::random_vec(rows, 4, 1e-3f),
                           cs = test::random_vec(N, 5, 1e-2f), bias = test::random_vec(N, 6),
                           start = test::random_vec(rows * N, 7);
  std::vector<int32_t> off(N);
  for (int64_t n = 0; n < N; ++n) off[n] = static_cast<int32_t>(n * 977) - 9000;
  for (DequantOp op : {DequantOp::store, DequantOp::gelu, DequantOp::accumulate})
    for (bool with_bias : {false, true})
      for (bool with_offset : {false, true}) {
        std::vector<float> out = start;
        dequantize_rows(out.data(), acc.data(), rows, N, rs.data(), cs.data(),
                        with_offset ? off.data() : nullptr, with_bias ? bias.data() : nullptr, op);
        for (int64_t m = 0; m < rows; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const double a = double(acc[m * N + n]) - (with_offset ? off[n] : 0);
            double v = a * rs[m] * cs[n] + (with_bias ? bias[n] : 0.0);
            if (op == DequantOp::gelu) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
            if (op == DequantOp::accumulate) v += start[m * N + n];
            ASSERT_NEAR(out[m * N + n], v, 1e-5 * (1 + std::fabs(v)))
                << static_cast<int>(op) << " bias " << with_bias << " offset " << with_offset
                << " at " << m << "," << n;
          }
      }
}

// Every element of the int8 product within the bound the quantization allows:
// |y - x.w| <= sum_k (|x_k| sw / 2 + |w_k| sx / 2 + sx sw / 4), sx = max|x| / 127 per row,
// sw = max|w| / qmax per output channel; checked against the double product.
TEST(Int8Product, WithinTheQuantizationBoundOfTheExactProduct) {
  LF_REQUIRE_INT8();
  const int64_t K = 200, N = 70;
  const int qw = int8_weight_max();
  const std::vector<float> W = test::random_vec(N * K, 11), b = test::random_vec(N, 12);
  PackedLinear p;
  p.pack(W.data(), N, K, ComputeType::int8);
  EXPECT_EQ(p.type(), ComputeType::int8);
  EXPECT_GE(p.bytes(), static_cast<size_t>(N * K));
  for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{300}, int64_t{1100}}) {
    std::vector<float> x = test::random_vec(rows * K, 13 + rows, 3.f);
    if (rows > 2)
      for (int64_t k = 0; k < K; ++k) x[2 * K + k] = 0.f;  // a zero row gives the bias
    std::vector<float> y(rows * N);
    p.apply(y.data(), x.data(), rows, b.data(), PackedLinear::Epilogue::store);
    for (int64_t m = 0; m < rows; ++m) {
      double ax = 0;
      for (int64_t k = 0; k < K; ++k) ax = std::max(ax, std::fabs(double(x[m * K + k])));
      const double sx = ax / 127;
      for (int64_t n = 0; n < N; ++n) {
        double aw = 0, exact = b[n], bound = 0;
        for (int64_t k = 0; k < K; ++k) aw = std::max(aw, std::fabs(double(W[n * K + k])));
        const double sw = aw / qw;
        for (int64_t k = 0; k < K; ++k) {
          const double xv = x[m * K + k], wv = W[n * K + k];
          exact += xv * wv;
          bound += std::fabs(xv) * sw / 2 + std::fabs(wv) * sx / 2 + sx * sw / 4;
        }
        ASSERT_LE(std::fabs(y[m * N + n] - exact), bound * 1.001 + 1e-5)
            << "rows " << rows << " at " << m << "," << n;
        if (m == 2 && rows > 2) {
          ASSERT_EQ(y[m * N + n], b[n]);
        }
      }
    }
  }
}

// The GELU epilogue quantizing its output for the next product: bitwise the f32 GELU epilogue
// followed by quantize_rows_u8 (each tested against naive references above), and within one
// quantization step of the naive dequantize + erf GELU + quantize in double.
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
    for (int64_t m = 0; m < rows; ++m) {
      std::vector<float> v(N);
      for (int64_t n = 0; n < N; ++n) {
        const double a = double(acc[m * N + n]) - (o ? o[n] : 0);
        const double x = a * rs[m] * cs[n] + (b ? b[n] : 0.0);
        v[n] = static_cast<float>(0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
      }
      std::vector<int> nq;
      double ns = 0;
      naive_quantize(v.data(), N, 127, nq, ns);
      EXPECT_NEAR(s[m], ns, 1e-5 * ns + 1e-30) << m;
      for (int64_t n = 0; n < N; ++n) ASSERT_LE(std::abs(int(q[m * N + n]) - 128 - nq[n]), 1) << m;
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
