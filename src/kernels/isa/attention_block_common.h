// Exact attention's streaming kernel (attention_block.h), written once over a vector-width traits
// struct: isa/attention_block_avx2.cpp instantiates it with AVX2 + FMA (strips of 16 queries,
// 6-row tiles, f32), isa/attention_block_avx512.cpp with AVX-512 (strips of 32, 8-row tiles, f32
// or, with AVX512-BF16, bf16 operands), each compiled on its own instruction-set level.
// Included only by those two files. No std algorithm is instantiated here (plain loops instead
// of std::fill): an out-of-line copy of a library template compiled with a level's flags could
// be the one the linker keeps for baseline code.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/attention_block.h"
#include "kernels/isa/simd_math.h"

namespace lf::attn_block::LF_ISA_NS {

#if defined(LF_VM_AVX2) || defined(__AVX512F__)
#define LF_ATTN_KERNEL 1

namespace {

template <class T>
inline void fill(T* p, int64_t n, T v) {
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}
inline bool all_zero(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (p[i] != 0.f) return false;
  return true;
}

// f(i, std::integral_constant<int, R>) over i = 0, T, 2T, ... < n, with R = T, and a last
// tile with the remainder R < T.
template <int R, class F>
inline void remainder_tile(int64_t rest, int64_t i, F& f) {
  if constexpr (R > 0) {
    if (rest == R)
      f(i, std::integral_constant<int, R>{});
    else
      remainder_tile<R - 1>(rest, i, f);
  }
}
template <int T, class F>
inline void in_tiles(int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + T <= n; i += T) f(i, std::integral_constant<int, T>{});
  if (i < n) remainder_tile<T - 1>(n - i, i, f);
}

// ctx = O / l per query, from Ot [strip][Dh][lanes] and l [strip * lanes]: 0 for a query that
// saw no key, NaN stays NaN.
inline void write_context(float* ctx, int64_t ldc, const float* Ot, const float* l, int64_t rows,
                          int64_t Dh, int64_t lanes) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t s = r / lanes, t = r % lanes;
    const float* Os = Ot + s * Dh * lanes;
    const float lt = l[r];
    const float inv = lt > 0.f ? 1.f / lt : std::isnan(lt) ? lt : 0.f;
    float* o = ctx + r * ldc;
    for (int64_t c = 0; c < Dh; ++c) o[c] = Os[c * lanes + t] * inv;
  }
}

// ---- The kernel, over a vector-width traits struct W and an operand traits struct E ----
// W (each kernel file defines its own: Avx2, Avx512): simd_math.h's vector traits (vm::V8,
// vm::V16: V, the f32 vector of kWidth lanes, M, a lane mask, and their operations) plus kTile,
// the keys or value columns of a register tile. A strip is two vectors of queries.
// E: the products' operands (F32 below; the AVX-512 file adds BF16): T, the stored element;
// Vec, a vector of them; kStep, the elements of one step of the reduction; load, madd(acc, a,
// b) = acc + a . b per lane (a broadcast), query (an element of the queries as T, from their
// own dtype); block (the key block's keys and values laid out, from their own dtypes) and
// weights (a strip's weights as the value product reads them).

// Pins a loaded vector in a register (fma_tile says why).
template <typename T>
[[gnu::always_inline]] inline void in_register(T& v) {
  asm("" : "+v"(v));
}

// f32 operands (every input f32): a step of the reduction is one element.
template <class W>
struct F32 {
  using T = float;
  using Vec = typename W::V;
  static constexpr int64_t kStep = 1;
  static Vec load(const T* p) { return W::load(p); }
  static Vec madd(Vec acc, const T* a, Vec b) { return W::fmadd(W::set1(*a), b, acc); }
  // Element i of a query operand.
  static T query(const TensorIn& q, int64_t i) { return static_cast<const float*>(q.data)[i]; }
  // Kb [cols][Dp], Vb [cols][Dh] from K, V (rows ld apart), dense.
  static void block(T* Kb, T* Vb, const TensorIn& K, const TensorIn& V, int64_t ld, int64_t cols,
                    int64_t Dh, int64_t Dp) {
    vm::copy_rows(Kb, Dp, static_cast<const float*>(K.data), ld, cols, Dh);
    vm::copy_rows(Vb, Dh, static_cast<const float*>(V.data), ld, cols, Dh);
  }
  static const T* weights(T*, const float* St, int64_t) { return St; }
};

// The register tile of both products: acc[r] += sum_t A[r * sa + t * st] . B[t][0..lanes] for
// r < R, t < steps (B's steps lanes * kStep elements apart), one broadcast of A per row and
// step. The two vectors of B's step are pinned in registers: without that GCC 12 folds the
// shared loads into each FMA (18 loads per 12 FMAs instead of 8 on AVX2: load-bound at ~70% of
// the FMA rate).
template <class W, class E, int R>
[[gnu::always_inline]] inline void fma_tile(typename W::V (&acc)[R][2], const typename E::T* A,
                                            int64_t sa, int64_t st, const typename E::T* B,
                                            int64_t steps) {
  constexpr int64_t half = W::kWidth * E::kStep;
  for (int64_t t = 0; t < steps; ++t) {
    typename E::Vec b0 = E::load(B + t * 2 * half), b1 = E::load(B + t * 2 * half + half);
    in_register(b0);
    in_register(b1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = E::madd(acc[r][0], A + r * sa + t * st, b0);
      acc[r][1] = E::madd(acc[r][1], A + r * sa + t * st, b1);
    }
  }
}

// St[r][0..lanes] = K[r] . Qt[..][0..lanes] for the tile's R keys (rows ldk apart, `steps`
// steps). With mx (not causal): also mx = max(mx, scale * St[r]) over the tile's keys that the
// mask (offset to the tile's first key, or null) counts, as softmax_strip's max pass would.
template <class W, class E, int R>
[[gnu::always_inline]] inline void scores_tile(float* St, const typename E::T* K, int64_t ldk,
                                               const typename E::T* Qt, int64_t steps,
                                               const float* mask, float scale, float* mx) {
  constexpr int64_t kW = W::kWidth, kLanes = 2 * kW;
  typename W::V acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = W::zero();
  fma_tile<W, E, R>(acc, K, ldk, E::kStep, Qt, steps);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    W::store(St + r * kLanes, acc[r][0]);
    W::store(St + r * kLanes + kW, acc[r][1]);
  }
  if (!mx) return;
  const typename W::V vs = W::set1(scale);
  typename W::V m0 = W::load(mx), m1 = W::load(mx + kW);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (mask && mask[r] == 0.f) continue;
    m0 = W::max(W::mul(acc[r][0], vs), m0);
    m1 = W::max(W::mul(acc[r][1], vs), m1);
  }
  W::store(mx, m0);
  W::store(mx + kW, m1);
}

// Ot[r][0..lanes] += sum_t V[r * sa + t * st] . Pt[t][0..lanes] for the tile's R value columns.
template <class W, class E, int R>
[[gnu::always_inline]] inline void accumulate_tile(float* Ot, const typename E::T* V, int64_t sa,
                                                   int64_t st, const typename E::T* Pt,
                                                   int64_t steps) {
  constexpr int64_t kW = W::kWidth, kLanes = 2 * kW;
  typename W::V acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r][0] = W::load(Ot + r * kLanes);
    acc[r][1] = W::load(Ot + r * kLanes + kW);
  }
  fma_tile<W, E, R>(acc, V, sa, st, Pt, steps);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    W::store(Ot + r * kLanes, acc[r][0]);
    W::store(Ot + r * kLanes + kW, acc[r][1]);
  }
}

// One strip's scores St [cols][lanes] become its weights for this key block, in place, and its
// running state (max m, sum l [lanes]; output Ot [Dh][lanes]) is rescaled to the new max. mask:
// the block's key mask or null. Causal when q0 >= 0: lane t (query q0 + t) sees key j0 + j
// only if j0 + j <= q0 + t. premax (not causal): the block's max per lane, found by the scores
// tiles; else (causal) the max pass runs here.
template <class W>
void softmax_strip(float* St, int64_t cols, const float* mask, int64_t q0, int64_t j0, float scale,
                   const float* premax, float* m, float* l, float* Ot, int64_t Dh) {
  using V = typename W::V;
  constexpr int64_t kW = W::kWidth, kLanes = 2 * kW;
  const V ninf = W::set1(-std::numeric_limits<float>::infinity()), vs = W::set1(scale),
          zero = W::zero(), one = W::set1(1.f);
  const bool causal = q0 >= 0;
  // Lanes of half h that see key j (causal): t + kW h >= j0 + j - q0.
  const auto sees = [&](int64_t j, int h) {
    return W::lanes_above(static_cast<int>(j0 + j - q0 - kW * h - 1));
  };
  // The block's max of scale * score per lane over the keys it sees. max returns its second
  // operand when either is NaN: NaN scores are skipped here (and poison the sum below).
  V mx[2] = {ninf, ninf};
  if (premax) {
    mx[0] = W::load(premax);
    mx[1] = W::load(premax + kW);
  } else {
    for (int64_t j = 0; j < cols; ++j) {
      if (mask && mask[j] == 0.f) continue;
      for (int h = 0; h < 2; ++h) {
        V s = W::mul(W::load(St + j * kLanes + kW * h), vs);
        if (causal) s = W::select(sees(j, h), s, ninf);
        mx[h] = W::max(s, mx[h]);
      }
    }
  }
  V shift[2], alpha[2];
  for (int h = 0; h < 2; ++h) {
    const V mold = W::load(m + kW * h), mnew = W::max(mx[h], mold);
    // A lane that has seen no number yet shifts by 0 (its visible scores are NaN or -inf);
    // an unchanged max rescales by exactly 1.
    shift[h] = W::select(W::eq(mnew, ninf), zero, mnew);
    alpha[h] = W::select(W::eq(mold, mnew), one, W::exp(W::sub(mold, mnew)));
    W::store(m + kW * h, mnew);
  }
  V sum[2] = {zero, zero};
  for (int64_t j = 0; j < cols; ++j) {
    float* s = St + j * kLanes;
    if (mask && mask[j] == 0.f) {
      W::store(s, zero);
      W::store(s + kW, zero);
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      V e = W::exp(W::fmsub(W::load(s + kW * h), vs, shift[h]));
      if (causal) e = W::select(sees(j, h), e, zero);
      W::store(s + kW * h, e);
      sum[h] = W::add(sum[h], e);
    }
  }
  for (int h = 0; h < 2; ++h) W::store(l + kW * h, W::fmadd(W::load(l + kW * h), alpha[h], sum[h]));
  for (int64_t c = 0; c < Dh; ++c)
    for (int h = 0; h < 2; ++h) {
      float* o = Ot + c * kLanes + kW * h;
      W::store(o, W::mul(W::load(o), alpha[h]));
    }
}

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Where each operand is laid out in the workspace for W and E: Ot [strip][Dh][lanes], St
// [kb][lanes], m and l [lanes], bmax [lanes]; Qt [strip][Dp/step][lanes][step], the block's
// keys Kb [kb][Dp] (Dp: Dh rounded up to a whole step, zero-padded), its values (f32: Vb
// [kb][Dh]; bf16: pairs of keys [kb/2][Dh][2]) and, with pairs (bf16), the weights in pairs of
// keys Pt [kb/2][lanes][2].
template <class W, class E>
struct Layout {
  using T = typename E::T;
  static constexpr int64_t kLanes = 2 * W::kWidth;
  int64_t ns, lanes, Dp, kbp;
  float *Ot, *St, *m, *l, *bmax;
  T *Qt, *Kb, *Vb, *Pt;
  static int64_t strips(int64_t rows) { return (rows + kLanes - 1) / kLanes; }
  Layout(float* work, int64_t rows, int64_t Dh, int64_t kb)
      : ns(strips(rows)),
        lanes(ns * kLanes),
        Dp(round_up(Dh, E::kStep)),
        kbp(round_up(kb, E::kStep)) {
    Ot = work;
    St = Ot + lanes * Dh;
    m = St + kb * kLanes;
    l = m + lanes;
    bmax = l + lanes;
    Qt = reinterpret_cast<T*>(bmax + kLanes);
    Kb = Qt + lanes * Dp;
    Vb = Kb + kb * Dp;
    Pt = Vb + kbp * Dh;
  }
  // In floats, the end of the workspace (Pt [kbp][lanes] only with pairs).
  static int64_t floats(int64_t rows, int64_t Dh, int64_t kb) {
    const int64_t lanes = strips(rows) * kLanes, Dp = round_up(Dh, E::kStep),
                  kbp = round_up(kb, E::kStep);
    const int64_t ts = lanes * Dp + kb * Dp + kbp * Dh + (E::kStep > 1 ? kbp * kLanes : 0);
    return lanes * Dh + kb * kLanes + 2 * lanes + kLanes +
           (ts * static_cast<int64_t>(sizeof(T)) + 3) / 4;
  }
};

// attend_head (attention_block.h) for vector width W and operands E.
template <class W, class E>
void attend(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
            int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale, float* work) {
  using T = typename E::T;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr int64_t S = E::kStep, kLanes = 2 * W::kWidth;
  const Layout<W, E> w(work, rows, Dh, kb);
  const int64_t ns = w.ns, Dp = w.Dp;
  for (int64_t s = 0; s < ns; ++s)
    for (int64_t t = 0; t < kLanes; ++t) {
      const int64_t r = s * kLanes + t;
      T* dst = w.Qt + s * Dp * kLanes + t * S;
      for (int64_t c = 0; c < Dp; ++c)
        dst[(c / S) * kLanes * S + c % S] =
            r < rows && c < Dh ? E::query(in.q, r * in.ldq + c) : T{};
    }
  fill(w.Ot, w.lanes * Dh, 0.f);
  fill(w.m, w.lanes, kNegInf);
  fill(w.l, w.lanes, 0.f);
  const bool causal = first_query >= 0;
  const int64_t key_end = causal ? (keys < first_query + rows ? keys : first_query + rows) : keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += kb) {
    const int64_t cols = (kb < key_end - j0 ? kb : key_end - j0);
    const float* mj = key_mask ? key_mask + j0 : nullptr;
    if (mj && all_zero(mj, cols)) continue;  // a fully padded key block contributes nothing
    // The block's keys and values copied densely (in bf16, rounded; values in pairs of keys):
    // read in place, rows ldkv apart, every strip ran slower (the model's n = 4096 layer on
    // AVX2 1.09x faster than sgemm's path in place, 1.14x copied, alternating in one process).
    E::block(w.Kb, w.Vb, in.k.at(j0 * in.ldkv), in.v.at(j0 * in.ldkv), in.ldkv, cols, Dh, Dp);
    for (int64_t s = 0; s < ns; ++s) {
      const int64_t q0 = first_query + s * kLanes;
      if (causal && j0 > q0 + kLanes - 1) continue;  // no query of this strip sees the block
      float* Os = w.Ot + s * Dh * kLanes;
      const T* Qs = w.Qt + s * Dp * kLanes;
      float* mx = causal ? nullptr : w.bmax;
      if (mx) fill(mx, kLanes, kNegInf);
      in_tiles<W::kTile>(cols, [&](int64_t i, auto R) {
        scores_tile<W, E, decltype(R)::value>(w.St + i * kLanes, w.Kb + i * Dp, Dp, Qs, Dp / S,
                                              mj ? mj + i : nullptr, scale, mx);
      });
      softmax_strip<W>(w.St, cols, mj, causal ? q0 : -1, j0, scale, mx, w.m + s * kLanes,
                       w.l + s * kLanes, Os, Dh);
      const T* P = E::weights(w.Pt, w.St, cols);
      in_tiles<W::kTile>(Dh, [&](int64_t i, auto R) {
        accumulate_tile<W, E, decltype(R)::value>(Os + i * kLanes, w.Vb + S * i, S, S * Dh, P,
                                                  (cols + S - 1) / S);
      });
    }
  }
  write_context(ctx, ldc, w.Ot, w.l, rows, Dh, kLanes);
}

}  // namespace

#endif

}  // namespace lf::attn_block::LF_ISA_NS
