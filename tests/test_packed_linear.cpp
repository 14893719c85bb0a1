// Packed-weight linear maps (inference products) beyond the op harness's reference cases
// (tests/ops/cases_linear.cpp): bf16 really rounds, weights are copied at pack time,
// re-packing, pre-rounded inputs, bf16 outputs, and use before packing refused.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "ops/harness.h"
#include "test_util.h"

namespace lf {
namespace {

float round_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) << 16;
  std::memcpy(&f, &u, 4);
  return f;
}

using Epi = PackedLinear::Epilogue;

// out = epi(x W^T + b), in double from the given (possibly rounded) inputs.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& W,
                             const float* b, std::vector<float> out, int64_t rows, int64_t N,
                             int64_t K, Epi e, bool bf16) {
  auto r = [&](float v) { return bf16 ? round_bf16(v) : v; };
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = b ? b[j] : 0.0;
      for (int64_t p = 0; p < K; ++p) acc += double(r(x[i * K + p])) * r(W[j * K + p]);
      if (e == Epi::gelu) acc = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
      float& o = out[i * N + j];
      o = static_cast<float>(e == Epi::accumulate ? o + acc : acc);
    }
  return out;
}

TEST(PackedLinear, Bf16RoundsInputsAndF32DoesNot) {
  // The bf16 result must differ from the unrounded product (the rounding really happens)
  // by about bf16's precision, and the f32 result must not.
  const int64_t N = 64, K = 256, rows = 32;
  auto W = test::random_vec(N * K, 21);
  auto x = test::random_vec(rows * K, 22);
  std::vector<float> zero(rows * N, 0.f);
  const auto exact = reference(x, W, nullptr, zero, rows, N, K, Epi::store, false);
  for (ComputeType t : test::compute_types()) {
    PackedLinear pl;
    pl.pack(W.data(), N, K, t);
    std::vector<float> out(rows * N);
    pl.apply(out.data(), x.data(), rows, nullptr, Epi::store);
    const double rel = test::rel_error(out.data(), exact.data(), out.size());
    if (t == ComputeType::f32) {
      EXPECT_LT(rel, 1e-6);
    } else {
      EXPECT_GT(rel, 1e-4);
      EXPECT_LT(rel, 1e-2);
    }
  }
}

TEST(PackedLinear, WeightsAreCopiedAtPackTime) {
  const int64_t N = 16, K = 32;
  auto W = test::random_vec(N * K, 31);
  auto x = test::random_vec(4 * K, 32);
  PackedLinear pl;
  pl.pack(W.data(), N, K, ComputeType::f32);
  std::vector<float> before(4 * N), after(4 * N);
  pl.apply(before.data(), x.data(), 4, nullptr, Epi::store);
  for (float& w : W) w = 0.f;
  pl.apply(after.data(), x.data(), 4, nullptr, Epi::store);
  EXPECT_EQ(before, after);
  EXPECT_EQ(pl.bytes() >= size_t(N * K * 4), true);
}

// The input-gradient form: pack_transposed(W [rows, cols]) maps x [., rows] to x W, checked
// against the naive product (ops::naive_gemm) on the rounded operands; re-packing new weights of
// the same shape into the same object (as bf16 training does after every step) gives the new
// product; a pre-rounded input gives the same result as rounding inside, over more rows than one
// block.
TEST(PackedLinear, TransposedRepackedAndPreRounded) {
  const int64_t Wr = 72, Wc = 136, rows = PackedLinear::kMaxRowsDirect + 100;
  for (ComputeType t : test::compute_types()) {
    const bool bf16 = t == ComputeType::bf16;
    auto r = [&](std::vector<float> v) {
      if (bf16)
        for (float& f : v) f = round_bf16(f);
      return v;
    };
    PackedLinear pl;
    for (uint64_t seed : {41u, 42u}) {
      const auto W = test::random_vec(Wr * Wc, seed);
      const auto x = test::random_vec(rows * Wr, seed + 10);
      pl.pack_transposed(W.data(), Wr, Wc, t);
      ASSERT_EQ(pl.in_features(), Wr);
      ASSERT_EQ(pl.out_features(), Wc);
      std::vector<float> out(rows * Wc), want(rows * Wc);
      pl.apply(out.data(), x.data(), rows, nullptr, Epi::store);
      const auto xr = r(x), Wrd = r(W);
      ops::naive_gemm(false, false, rows, Wc, Wr, 1.f, xr.data(), Wr, Wrd.data(), Wc, 0.f,
                      want.data(), Wc);
      EXPECT_LT(test::rel_error(out.data(), want.data(), out.size()), 2e-6)
          << compute_type_name(t) << " seed " << seed;
      if (!bf16) continue;
      std::vector<uint16_t> x16(x.size());
      to_bf16(x16.data(), x.data(), rows, Wr, Wr);
      // The input given in bf16 is used as it is.
      std::vector<float> pre(rows * Wc);
      pl.apply(pre.data(), x16.data(), rows, nullptr, Epi::store);
      EXPECT_LT(test::rel_error(pre.data(), want.data(), pre.size()), 2e-6) << "seed " << seed;
    }
  }
}

// A bf16 output (bf16 training's FFN pre-activation and hidden gradient): every element is the
// f32-output product rounded to nearest even, within one bf16 step of it (the accumulator
// may round either way where the two primitives add in a different order), with and without
// a bias, over more rows than one block. f32 weights refuse a bf16 output.
TEST(PackedLinear, Bf16OutputIsTheRoundedProduct) {
  LF_REQUIRE_BF16();
  const int64_t N = 72, K = 136, rows = PackedLinear::kMaxRowsDirect + 100;
  const auto W = test::random_vec(N * K, 51);
  const auto x = test::random_vec(rows * K, 52);
  const auto b = test::random_vec(N, 53);
  std::vector<uint16_t> x16(x.size());
  to_bf16(x16.data(), x.data(), rows, K, K);
  PackedLinear pl;
  pl.pack(W.data(), N, K, ComputeType::bf16);
  for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
    std::vector<float> want(rows * N);
    pl.apply(want.data(), x16.data(), rows, bias, Epi::store);
    std::vector<uint16_t> out(rows * N, 0xFFFF);
    pl.apply(out.data(), x16.data(), rows, bias, Epi::store);
    int64_t exact = 0;
    for (int64_t i = 0; i < rows * N; ++i) {
      uint32_t u = static_cast<uint32_t>(out[i]) << 16;
      float got;
      std::memcpy(&got, &u, 4);
      ASSERT_LE(std::abs(got - want[i]), std::abs(want[i]) * (1.f / 128) + 1e-30f)
          << i << " bias " << (bias != nullptr);
      exact += got == round_bf16(want[i]);
    }
    EXPECT_GT(exact, rows * N * 95 / 100) << "bias " << (bias != nullptr);
  }
  PackedLinear f;
  f.pack(W.data(), N, K, ComputeType::f32);
  std::vector<uint16_t> out(N);
  EXPECT_THROW(f.apply(out.data(), x16.data(), 1, nullptr, Epi::store), Error);
}

TEST(PackedLinear, RejectsUseBeforePackAndEmptyWeights) {
  PackedLinear pl;
  float y = 0, x = 0;
  EXPECT_THROW(pl.apply(&y, &x, 1, nullptr, Epi::store), Error);
  EXPECT_THROW(pl.pack(&x, 0, 4, ComputeType::bf16), Error);
}

}  // namespace
}  // namespace lf
