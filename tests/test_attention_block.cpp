// The own streaming-attention kernel's properties (kernels/attention_block.h): NaN scores, scores
// large enough to overflow exp without the running max, the sgemm path it replaces, batch
// invariance (a query's result does not depend on its row block) and head-major keys; every
// case on every instruction-set level this CPU runs. Its values against a naive double-precision
// attention are op cases (tests/ops/cases_attention_block.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "isa_util.h"
#include "kernels/attention_block.h"
#include "layers/attention.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

using attn_block::HeadIn;
using test::random_vec;

class AttentionBlockEdge : public test::OnEveryIsa {};

// Random queries [B,N,D], keys and values [B,Lk,D] (seeds seed, seed + 1, seed + 2).
struct Qkv {
  std::vector<float> q, k, v;
};
Qkv random_qkv(const AttnDims& d, uint64_t seed) {
  return {random_vec(d.B * d.N * d.D, seed, 1.f), random_vec(d.B * d.Lk * d.D, seed + 1, 1.f),
          random_vec(d.B * d.Lk * d.D, seed + 2, 1.f)};
}

// Scores past exp's range (|scale * score| in the thousands) come out finite: the running max
// shifts every block, whatever the order in which the large scores arrive.
TEST_P(AttentionBlockEdge, LargeScoresStayFinite) {
  if (!attn_block::available()) GTEST_SKIP();
  const int64_t rows = 9, keys = 100, Dh = 16, kb = 32;
  std::vector<float> q(rows * Dh, 10.f), k(keys * Dh), v(keys * Dh);
  for (int64_t j = 0; j < keys; ++j)
    for (int64_t c = 0; c < Dh; ++c) {
      k[j * Dh + c] = static_cast<float>(j % 37) * (j % 2 ? 3.f : -2.f);
      v[j * Dh + c] = static_cast<float>(j);
    }
  std::vector<float> ctx(rows * Dh), work(attn_block::work_floats(rows, Dh, kb));
  attn_block::attend_head(ctx.data(), Dh, HeadIn{q.data(), k.data(), v.data(), Dh, Dh}, nullptr,
                          rows, keys, Dh, kb, -1, 1.f, work.data());
  // The largest score is key 73's (73 % 37 = 36, odd: 3 * 36 * 10 * 16 = 17280, in the third
  // block, after blocks whose own maxima are within 480 of it); it takes all the weight.
  for (float x : ctx) EXPECT_FLOAT_EQ(x, 73.f);
}

// A NaN among a query's visible scores makes its row NaN; a NaN key that the mask (or
// causality) hides changes nothing.
TEST_P(AttentionBlockEdge, NaNPoisonsOnlyWhereVisible) {
  if (!attn_block::available()) GTEST_SKIP();
  const int64_t rows = 20, keys = 40, Dh = 8, kb = 16;
  std::vector<float> q = random_vec(rows * Dh, 4, 1.f), k = random_vec(keys * Dh, 5, 1.f),
                     v = random_vec(keys * Dh, 6, 1.f), mask(keys, 1.f);
  k[30 * Dh + 3] = std::nanf("");
  std::vector<float> work(attn_block::work_floats(rows, Dh, kb)), a(rows * Dh), b(rows * Dh);
  const HeadIn in{q.data(), k.data(), v.data(), Dh, Dh};
  attn_block::attend_head(a.data(), Dh, in, mask.data(), rows, keys, Dh, kb, -1, 0.5f, work.data());
  for (float x : a) EXPECT_TRUE(std::isnan(x));
  mask[30] = 0.f;
  attn_block::attend_head(a.data(), Dh, in, mask.data(), rows, keys, Dh, kb, -1, 0.5f, work.data());
  for (float x : a) EXPECT_FALSE(std::isnan(x));
  // Causal from query 0: rows 0..29 never see key 30, rows 30.. do.
  mask[30] = 1.f;
  attn_block::attend_head(b.data(), Dh, in, mask.data(), rows, keys, Dh, kb, 15, 0.5f, work.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < Dh; ++c)
      EXPECT_EQ(std::isnan(b[r * Dh + c]), 15 + r >= 30) << "row " << r;
}

// attention_streaming_rows gives the same function on the own kernel and on the gemm path, in
// f32 and (where the kernel has it) bf16, and the own kernel's rows do not depend on the row
// block they are computed in (row blocks of 128 and 64 both run their products in bf16).
TEST_P(AttentionBlockEdge, MatchesGemmPathAndIsBatchInvariant) {
  if (!attn_block::available()) GTEST_SKIP();
  AttnDims d;
  d.B = 2, d.N = 300, d.Lk = 300, d.H = 4, d.Dh = 32, d.D = 128;
  const std::vector<float> q = random_vec(d.B * d.N * d.D, 8, 1.f),
                           k = random_vec(d.B * d.N * d.D, 9, 1.f),
                           v = random_vec(d.B * d.N * d.D, 10, 1.f);
  std::vector<float> mask(d.B * d.N, 1.f);
  for (int64_t j = 250; j < d.N; ++j) mask[d.N + j] = 0.f;
  for (ComputeType t : {ComputeType::f32, ComputeType::bf16}) {
    const bool bf16 = t == ComputeType::bf16;
    if (bf16 && !attn_block::available(attn_block::Operands::bf16)) continue;
    for (bool causal : {false, true}) {
      d.causal = causal;
      auto run = [&](bool own, int64_t block) {
        attn_block::set_enabled(own);
        std::vector<float> ctx(d.B * d.N * d.D), work(attention_streaming_work_floats(block, d));
        for (int64_t b = 0; b < d.B; ++b)
          for (int64_t i0 = 0; i0 < d.N; i0 += block) {
            const int64_t off = (b * d.N + i0) * d.D;
            attention_streaming_rows(
                ctx.data() + off, q.data() + off, KeysValues{k.data(), v.data(), mask.data()}, d,
                RowBlock{b, i0, std::min(d.N, i0 + block)}, 0.2f, work.data(), t);
          }
        attn_block::set_enabled(true);
        return ctx;
      };
      const std::vector<float> own = run(true, 128), sg = run(false, 128),
                               other = run(true, bf16 ? 64 : 7);
      double err = 0;
      for (size_t i = 0; i < own.size(); ++i) err = std::max(err, double(std::abs(own[i] - sg[i])));
      EXPECT_LT(err, bf16 ? 5e-3 : 1e-5) << "bf16 " << bf16 << " causal " << causal;
      EXPECT_EQ(own, other) << "bf16 " << bf16 << " causal " << causal
                            << ": rows depend on their row block";
    }
  }
}

// Head-major keys and values ([B,H,Lk,Dh], what streaming inference makes) give what the
// token-major [B,Lk,D] ones give, on the own kernel and on the sgemm path, in f32 and bf16.
TEST_P(AttentionBlockEdge, HeadMajorKeysMatchTokenMajor) {
  AttnDims d;
  d.B = 2, d.N = 70, d.Lk = 300, d.H = 3, d.Dh = 24, d.D = 72;
  const Qkv in = random_qkv(d, 11);
  const std::vector<float>&q = in.q, &k = in.k, &v = in.v;
  std::vector<float> kh(k.size()), vh(v.size());  // written here, independently of the engine
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t j = 0; j < d.Lk; ++j)
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t c = 0; c < d.Dh; ++c) {
          kh[((b * d.H + h) * d.Lk + j) * d.Dh + c] = k[(b * d.Lk + j) * d.D + h * d.Dh + c];
          vh[((b * d.H + h) * d.Lk + j) * d.Dh + c] = v[(b * d.Lk + j) * d.D + h * d.Dh + c];
        }
  std::vector<float> mask(d.B * d.Lk, 1.f);
  for (int64_t j = 200; j < d.Lk; ++j) mask[d.Lk + j] = 0.f;
  auto run = [&](const std::vector<float>& kk, const std::vector<float>& vv, KVLayout layout,
                 ComputeType t) {
    std::vector<float> ctx(d.B * d.N * d.D), work(attention_streaming_work_floats(d.N, d) + 64);
    for (int64_t b = 0; b < d.B; ++b)
      attention_streaming_rows(ctx.data() + b * d.N * d.D, q.data() + b * d.N * d.D,
                               KeysValues{kk.data(), vv.data(), mask.data(), layout}, d,
                               RowBlock{b, 0, d.N}, 0.3f, work.data(), t);
    return ctx;
  };
  for (bool own : {true, false}) {
    if (own && !attn_block::available()) continue;
    attn_block::set_enabled(own);
    for (ComputeType t : {ComputeType::f32, ComputeType::bf16}) {
      for (bool causal : {false, true}) {
        d.causal = causal;
        const std::vector<float> tm = run(k, v, KVLayout::token_major, t),
                                 hm = run(kh, vh, KVLayout::head_major, t);
        double err = 0, mag = 0;
        for (size_t i = 0; i < tm.size(); ++i) {
          err = std::max(err, double(std::abs(tm[i] - hm[i])));
          mag = std::max(mag, double(std::abs(tm[i])));
        }
        EXPECT_LT(err, 1e-6) << "own " << own << " bf16 " << (t == ComputeType::bf16) << " causal "
                             << causal;
        EXPECT_GT(mag, 0.05);
      }
    }
    attn_block::set_enabled(true);
  }
}

// Keys and values rounded once into head-major bf16 (round_heads_bf16, as inference's plan
// makes them when every row block's products run in bf16) give the bits the row functions give
// on the f32 ones in bf16, which round them per row block: attention_rows (gemm) and the own
// kernel's streaming rows, causal or not, with a short last row block.
TEST_P(AttentionBlockEdge, RoundedKeysGiveTheSameBits) {
  AttnDims d;
  d.B = 2, d.N = 300, d.Lk = 300, d.H = 2, d.Dh = 64, d.D = 128;
  const Qkv in = random_qkv(d, 14);
  const std::vector<float>&q = in.q, &k = in.k, &v = in.v;
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  round_heads_bf16(k16.data(), k.data(), d.D, d);
  round_heads_bf16(v16.data(), v.data(), d.D, d);
  std::vector<float> mask(d.B * d.Lk, 1.f);
  for (int64_t j = 200; j < d.Lk; ++j) mask[d.Lk + j] = 0.f;
  const KeysValues f32{k.data(), v.data(), mask.data()},
      h16{k16.data(), v16.data(), mask.data(), KVLayout::head_major};
  const int64_t block = 64;  // the last block of each sequence has 44 rows
  for (bool streaming : {false, true}) {
    if (streaming && !attention_streaming_runs_bf16(ComputeType::bf16, 44, d)) continue;
    ASSERT_TRUE(streaming || attention_rows_run_bf16(ComputeType::bf16, 44, d));
    for (bool causal : {false, true}) {
      d.causal = causal;
      auto run = [&](const KeysValues& kv) {
        std::vector<float> ctx(d.B * d.N * d.D),
            work(std::max(attention_streaming_work_floats(block, d),
                          attention_rows_work_floats(block, d)));
        for (int64_t b = 0; b < d.B; ++b)
          for (int64_t i0 = 0; i0 < d.N; i0 += block) {
            const int64_t off = (b * d.N + i0) * d.D;
            const RowBlock rb{b, i0, std::min(d.N, i0 + block)};
            if (streaming)
              attention_streaming_rows(ctx.data() + off, q.data() + off, kv, d, rb, 0.2f,
                                       work.data(), ComputeType::bf16);
            else
              attention_rows(ctx.data() + off, q.data() + off, kv, d, rb, 0.2f, work.data(),
                             ComputeType::bf16);
          }
        return ctx;
      };
      const std::vector<float> a = run(f32), b = run(h16);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "streaming " << streaming << " causal " << causal;
    }
  }
}

INSTANTIATE_ON_EVERY_ISA(AttentionBlockEdge);

}  // namespace
}  // namespace lf
