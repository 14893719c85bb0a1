// The vectorised exp, GELU and softmax row kernels (kernels/vec_math.h: sixteen lanes with
// AVX-512, eight with AVX2, else scalar) against the scalar specification and a double
// reference, on sweeps that cross every lane count and tail length, on every instruction-set
// level this CPU runs (isa_util.h). Special values (NaN, infinities) are covered by
// HostileNonFinite.*.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/dropout_mask.h"
#include "kernels/vec_math.h"
#include "isa_util.h"
#include "test_util.h"

namespace lf {
namespace {

class VecMath : public test::OnEveryIsa {};

// x from lo to hi in `count` steps.
std::vector<float> sweep(float lo, float hi, int count) {
  std::vector<float> x;
  for (int i = 0; i < count; ++i) x.push_back(lo + (hi - lo) * static_cast<float>(i) / (count - 1));
  return x;
}

// exp_n gives exp_scalar's bits on every path, down to the smallest results (n = -126, where
// 2^n alone is not a normal number) and up to the largest.
TEST_P(VecMath, ExpHasTheScalarBits) {
  std::vector<float> x = sweep(-87.3365f, 88.7228f, 20001);
  for (float v : sweep(-87.34f, -86.f, 3001)) x.push_back(v);
  for (float v : sweep(87.5f, 88.73f, 3001)) x.push_back(v);
  x.push_back(vm::kExpMin);
  x.push_back(vm::kExpMax);
  std::vector<float> y(x.size());
  vm::exp_n(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], vm::exp_scalar(x[i])) << "x = " << x[i] << " at " << i;
    if (x[i] < vm::kExpMin || x[i] > vm::kExpMax) continue;  // 0 and +inf (documented)
    const double e = std::exp(static_cast<double>(x[i]));
    if (e > std::numeric_limits<float>::max()) {
      ASSERT_TRUE(std::isinf(y[i])) << "x = " << x[i];
      continue;
    }
    ASSERT_NEAR(y[i], e, 3e-7 * e + 1e-44) << "x = " << x[i];
  }
}

// gelu_n against the scalar specification and the exact erf form.
TEST_P(VecMath, GeluMatchesTheScalarOneAndErf) {
  const std::vector<float> x = sweep(-12.f, 12.f, 24001);
  std::vector<float> y(x.size());
  vm::gelu_n(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], exact = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    ASSERT_NEAR(y[i], vm::gelu_scalar(x[i]), 1e-6f * std::max(1.f, std::fabs(y[i])))
        << "x = " << x[i];
    ASSERT_NEAR(y[i], exact, 1e-6 * std::max(1.0, std::fabs(exact))) << "x = " << x[i];
  }
}

// gelu_fast_n (int8's FFN epilogue) against the exact erf form, within the stated 1e-6 (1 + |x|)
// on a sweep past the clamp, on every path (its vector lanes, the masked tail and the scalar
// form agree), and on special values: NaN stays NaN, +inf gives +inf, -inf NaN (as gelu_n).
// gelu_backward_n (d += g GELU'(x)) and gelu_backward_inplace_n (d *= GELU'(x)) against the
// derivative of the exact erf form, in double, on every lane count and tail length.
TEST_P(VecMath, GeluGradientMatchesTheDerivativeOfErf) {
  const std::vector<float> x = sweep(-12.f, 12.f, 24001);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> d(n), g(n), scaled(n);
  for (int64_t i = 0; i < n; ++i) {
    d[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    g[i] = 1.f + 0.125f * static_cast<float>(i % 5);
    scaled[i] = g[i];
  }
  const std::vector<float> d0 = d;
  for (int64_t len : {n, int64_t{1}, int64_t{7}, int64_t{9}, int64_t{17}, int64_t{33}}) {
    d = d0;
    scaled = g;
    vm::gelu_backward_n(d.data(), x.data(), g.data(), len);
    vm::gelu_backward_inplace_n(scaled.data(), x.data(), len);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      const double grad = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                          v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      if (i >= len) {  // past the length: untouched
        ASSERT_EQ(d[i], d0[i]) << "len " << len << " i " << i;
        ASSERT_EQ(scaled[i], g[i]) << "len " << len << " i " << i;
        continue;
      }
      ASSERT_NEAR(d[i], d0[i] + g[i] * grad, 2e-6 * (1 + std::fabs(d0[i] + g[i] * grad)))
          << "x = " << x[i] << " len " << len;
      ASSERT_NEAR(scaled[i], g[i] * grad, 2e-6 * (1 + std::fabs(g[i] * grad)))
          << "x = " << x[i] << " len " << len;
    }
  }
}

TEST_P(VecMath, GeluFastWithinItsBoundOfErf) {
  std::vector<float> x = sweep(-12.f, 12.f, 48001);
  for (float v : sweep(-1e-3f, 1e-3f, 101)) x.push_back(v);
  x.push_back(3e4f), x.push_back(-3e4f), x.push_back(0.f);
  std::vector<float> y(x.size());
  vm::gelu_fast_n(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], exact = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    ASSERT_NEAR(y[i], exact, 1e-6 * (1 + std::fabs(v))) << "x = " << x[i];
    ASSERT_NEAR(y[i], vm::gelu_fast_scalar(x[i]), 2e-7 * (1 + std::fabs(v))) << "x = " << x[i];
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> sx{std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1.f, -1.f};
  for (int tail = 0; tail < 2; ++tail) {  // whole vectors and the tail / scalar path
    std::vector<float> in(tail ? 5 : 32, 0.5f);
    std::copy(sx.begin(), sx.end(), in.begin());
    std::vector<float> out(in.size());
    vm::gelu_fast_n(out.data(), in.data(), static_cast<int64_t>(in.size()));
    EXPECT_TRUE(std::isnan(out[0])) << tail;
    EXPECT_EQ(out[1], inf) << tail;
    EXPECT_TRUE(std::isnan(out[2])) << tail;
    EXPECT_NEAR(out[3], 0.8413447460685429, 1e-6) << tail;
    EXPECT_NEAR(out[4], -0.15865525393145707, 1e-6) << tail;
    EXPECT_TRUE(std::isnan(vm::gelu_fast_scalar(sx[0])));
    EXPECT_EQ(vm::gelu_fast_scalar(inf), inf);
    EXPECT_TRUE(std::isnan(vm::gelu_fast_scalar(-inf)));
  }
}

// exp_shifted_sum over every length 1..70 (full vectors, pairs of them and tails), with and
// without a key mask, aliased and not: each y[j] is exp(scale x[j] - shift) or 0 where masked,
// and the returned sum is their sum.
TEST_P(VecMath, ExpShiftedSumOfEveryLengthAndMask) {
  for (int64_t n = 1; n <= 70; ++n)
    for (int masked = 0; masked < 2; ++masked)
      for (int alias = 0; alias < 2; ++alias) {
        std::vector<float> x = test::random_vec(n, static_cast<uint64_t>(100 + n), 3.f);
        std::vector<float> mask(n, 1.f);
        for (int64_t j = 0; j < n; ++j)
          if (masked && (j * 7 + n) % 3 == 0) mask[j] = 0.f;
        if (masked) x[0] = std::numeric_limits<float>::quiet_NaN(), mask[0] = 0.f;
        const float scale = 0.7f, shift = 1.25f;
        std::vector<float> y(n, -1.f);
        float* out = alias ? x.data() : y.data();
        const std::vector<float> x0 = x;
        const float sum =
            vm::exp_shifted_sum(out, x.data(), masked ? mask.data() : nullptr, n, scale, shift);
        double want_sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double want =
              mask[j] != 0.f ? std::exp(double(x0[j]) * scale - double(shift)) : 0.0;
          want_sum += want;
          ASSERT_NEAR(out[j], want, 1e-6 * want + (want == 0 ? 0 : 1e-30))
              << "n " << n << " masked " << masked << " alias " << alias << " j " << j;
        }
        ASSERT_NEAR(sum, want_sum, 1e-6 * want_sum) << "n " << n << " masked " << masked;
      }
}

// The rest of the level's table against the scalar forms, at every length up to three
// vectors and a tail: bf16 rounding and widening (bits), short-row copies, the masked max,
// the bf16 GELU tables' lookups and the dropout mask's vector hash.
TEST_P(VecMath, TableEntriesMatchTheScalarForms) {
  const isa::Kernels& k = isa::kernels();
  ASSERT_EQ(k.level, GetParam());
  for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(n), mask(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = std::sin(0.37f * static_cast<float>(i)) * 1e3f + 1.f / (1.f + i);
      mask[i] = i % 3 == 1 ? 0.f : 1.f;
    }
    std::vector<uint16_t> h(n);
    vm::to_bf16_n(h.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(h[i], vm::bf16_round(x[i])) << i;
    std::vector<float> w(n);
    vm::from_bf16_n(w.data(), h.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u = static_cast<uint32_t>(h[i]) << 16;
      float want;
      std::memcpy(&want, &u, 4);
      ASSERT_EQ(w[i], want) << i;
    }
    // Three rows of n floats, 2n + 3 apart, into rows n + 1 apart; the gaps stay untouched.
    std::vector<float> src(3 * (2 * n + 3), 0.f), dst(3 * (n + 1), -1.f);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    vm::copy_rows(dst.data(), n + 1, src.data(), 2 * n + 3, 3, n);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c <= n; ++c)
        ASSERT_EQ(dst[r * (n + 1) + c], c < n ? src[r * (2 * n + 3) + c] : -1.f) << r << " " << c;
    float want_max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i)
      if (mask[i] != 0.f) want_max = std::max(want_max, 0.5f * x[i]);
    ASSERT_EQ(vm::masked_scaled_max(x.data(), mask.data(), n, 0.5f), want_max);
    // Lookups: a table of 65536 + 1 entries indexed by every kind of 16-bit value.
    std::vector<uint16_t> t16(65537), idx(n), got16(n);
    std::vector<float> t32(65536), buf(n, 3.f);
    for (uint32_t i = 0; i < 65536; ++i) {
      t16[i] = static_cast<uint16_t>(i * 2654435761u >> 16);
      t32[i] = static_cast<float>(i) * 0.5f;
    }
    for (int64_t i = 0; i < n; ++i) idx[i] = static_cast<uint16_t>((i * 40503u) ^ (i == n - 1 ? 0xFFFFu : 0u));
    k.lookup_u16(got16.data(), idx.data(), t16.data(), n);
    k.mul_lookup_f32(buf.data(), idx.data(), t32.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got16[i], t16[idx[i]]) << i;
      ASSERT_EQ(buf[i], 3.f * t32[idx[i]]) << i;
    }
  }
  // Dropout: every element's keep bit from for_range equals keep_scalar's, across starts that
  // are and are not multiples of four (the vector hash takes over at the first multiple).
  for (int64_t first : {0, 1, 3, 4, 1001}) {
    const DropoutMask dm(0.3f, 42, 7, first);
    std::vector<int> kept(300, -1);
    dm.for_range(5, 300, [&](int64_t i, bool keep) { kept[i] = keep; });
    for (int64_t i = 5; i < 300; ++i)
      ASSERT_EQ(kept[i], dm.keep_scalar(static_cast<uint64_t>(first + i))) << first << " " << i;
  }
}

INSTANTIATE_ON_EVERY_ISA(VecMath);

}  // namespace
}  // namespace lf
