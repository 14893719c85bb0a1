// Exact attention's streaming kernel (attention_block.h), AVX-512 form, compiled on the
// avx512 level and, with bf16 operands, avx512bf16 (the other levels compile this file to
// nothing; the AVX2 form is attention_block_avx2.cpp). The level's table (vec_kernels.cpp)
// points at attend_head, work_floats and has_bf16 here; attention_block.cpp checks the
// arguments and dispatches. No std algorithm is instantiated here (plain loops instead of
// std::fill): an out-of-line copy of a library template compiled with this level's flags could
// be the one the linker keeps for baseline code.
#include "kernels/isa/attention_block_common.h"

namespace lf::attn_block::LF_ISA_NS {

#if defined(__AVX512F__)

// The same kernel for AVX-512: a strip is 32 queries (two vectors), tiles are up to 8 keys or
// value columns (16 accumulators), and the two products run either in f32 (one FMA per
// element of the reduction, Operands::f32) or, with AVX512-BF16, on bf16 operands (one
// VDPBF16PS per pair of elements: twice the multiply-adds an instruction, f32 sums,
// Operands::bf16). In bf16 the queries, keys and values are rounded once when they are laid
// out, and the weights once per key block after the f32 softmax, as the bf16 gemm path
// rounds its operands; the running max, sums and output stay f32.

namespace {

constexpr int64_t kLanes = 32;  // queries per strip: two vectors
constexpr int kTile = 8;        // keys (scores) or value columns (accumulate) per tile

inline int64_t strips(int64_t rows) { return (rows + kLanes - 1) / kLanes; }
inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Pins a loaded vector in a register (see the AVX2 kernel).
template <typename V>
[[gnu::always_inline]] inline void in_register(V& v) {
  asm("" : "+v"(v));
}

// f32 operands: a step of the reduction is one element.
struct F32 {
  using T = float;
  using Vec = __m512;
  static constexpr int64_t kStep = 1;
  static Vec load(const T* p) { return _mm512_loadu_ps(p); }
  static __m512 madd(__m512 acc, const T* a, Vec b) {
    return _mm512_fmadd_ps(_mm512_set1_ps(*a), b, acc);
  }
  static T from(float x) { return x; }
};

#if defined(__AVX512BF16__)
// bf16 operands: a step is a pair of elements, adjacent in memory (a's pair broadcast to
// every lane, b's pairs one per lane), multiplied and summed into the f32 lane.
struct BF16 {
  using T = uint16_t;
  using Vec = __m512i;
  static constexpr int64_t kStep = 2;
  static Vec load(const T* p) { return _mm512_loadu_si512(p); }
  static __m512 madd(__m512 acc, const T* a, Vec b) {
    int32_t pair;
    std::memcpy(&pair, a, 4);
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(pair), (__m512bh)b);
  }
  static T from(float x) { return vm::bf16_round(x); }
};

// dst[2c] = bf16(a[c]), dst[2c + 1] = bf16(b[c]) (0 when b is null) for c < n: two f32 rows
// interleaved into the pair layout VDPBF16PS reads.
inline void interleave_bf16(uint16_t* dst, const float* a, const float* b, int64_t n) {
  alignas(64) static const uint16_t kIdx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (int64_t c = 0; c < n; c += 16) {
    const int64_t len = (n - c < 16 ? n - c : 16);
    const auto in = static_cast<__mmask16>(len == 16 ? 0xFFFFu : (1u << len) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(in, a + c),
                 hi = b ? _mm512_maskz_loadu_ps(in, b + c) : _mm512_setzero_ps();
    const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // [lo x 16, hi x 16]
    const auto out = static_cast<__mmask32>(len == 16 ? 0xFFFFFFFFu : (1u << (2 * len)) - 1);
    _mm512_mask_storeu_epi16(dst + 2 * c, out, _mm512_permutexvar_epi16(idx, v));
  }
}
#endif

// The register tile of both products: acc[r] += sum_t A[r * sa + t * st] . B[t][0..32] for
// r < R, t < steps (B's steps kLanes * kStep elements apart; each a pair in bf16).
template <class E, int R>
[[gnu::always_inline]] inline void fma_tile(__m512 (&acc)[R][2], const typename E::T* A, int64_t sa,
                                            int64_t st, const typename E::T* B, int64_t steps) {
  constexpr int64_t half = 16 * E::kStep;
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

// St[r][0..32] = K[r] . Qt[..][0..32] for the tile's R keys (rows ldk apart, steps steps);
// with mx (not causal) also mx = max(mx, scale * St[r]) over the keys the mask counts.
template <class E, int R>
[[gnu::always_inline]] inline void scores_tile(float* St, const typename E::T* K, int64_t ldk,
                                               const typename E::T* Qt, int64_t steps,
                                               const float* mask, float scale, float* mx) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  fma_tile<E, R>(acc, K, ldk, E::kStep, Qt, steps);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(St + r * kLanes, acc[r][0]);
    _mm512_storeu_ps(St + r * kLanes + 16, acc[r][1]);
  }
  if (!mx) return;
  const __m512 vs = _mm512_set1_ps(scale);
  __m512 m0 = _mm512_loadu_ps(mx), m1 = _mm512_loadu_ps(mx + 16);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (mask && mask[r] == 0.f) continue;
    m0 = _mm512_max_ps(_mm512_mul_ps(acc[r][0], vs), m0);
    m1 = _mm512_max_ps(_mm512_mul_ps(acc[r][1], vs), m1);
  }
  _mm512_storeu_ps(mx, m0);
  _mm512_storeu_ps(mx + 16, m1);
}

// Ot[r][0..32] += sum_t V[r * sa + t * st] . Pt[t][0..32] for the tile's R value columns.
template <class E, int R>
[[gnu::always_inline]] inline void accumulate_tile(float* Ot, const typename E::T* V, int64_t sa,
                                                   int64_t st, const typename E::T* Pt,
                                                   int64_t steps) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm512_loadu_ps(Ot + r * kLanes);
    acc[r][1] = _mm512_loadu_ps(Ot + r * kLanes + 16);
  }
  fma_tile<E, R>(acc, V, sa, st, Pt, steps);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(Ot + r * kLanes, acc[r][0]);
    _mm512_storeu_ps(Ot + r * kLanes + 16, acc[r][1]);
  }
}

// One strip's scores St [cols][32] become its weights for this key block, in place, and its
// running state (max m, sum l [32]; output Ot [Dh][32]) is rescaled to the new max: the AVX2
// kernel's softmax_strip in two sixteen-lane halves (same rules for masks, causality, NaN).
void softmax_strip(float* St, int64_t cols, const float* mask, int64_t q0, int64_t j0, float scale,
                   const float* premax, float* m, float* l, float* Ot, int64_t Dh) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const __m512 ninf = _mm512_set1_ps(kNegInf), vs = _mm512_set1_ps(scale),
               zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const bool causal = q0 >= 0;
  // Lanes of half h that see key j (causal): t + 16h >= j0 + j - q0.
  const auto sees = [&](int64_t j, int h) {
    const auto lim = static_cast<int>(j0 + j - q0 - 16 * h - 1);
    return _mm512_cmpgt_epi32_mask(iota, _mm512_set1_epi32(lim));
  };
  __m512 mx[2] = {ninf, ninf};
  if (premax) {
    mx[0] = _mm512_loadu_ps(premax);
    mx[1] = _mm512_loadu_ps(premax + 16);
  } else {
    for (int64_t j = 0; j < cols; ++j) {
      if (mask && mask[j] == 0.f) continue;
      for (int h = 0; h < 2; ++h) {
        __m512 s = _mm512_mul_ps(_mm512_loadu_ps(St + j * kLanes + 16 * h), vs);
        if (causal) s = _mm512_mask_mov_ps(ninf, sees(j, h), s);
        mx[h] = _mm512_max_ps(s, mx[h]);  // NaN scores skipped (maxps keeps its second operand)
      }
    }
  }
  __m512 shift[2], alpha[2];
  for (int h = 0; h < 2; ++h) {
    const __m512 mold = _mm512_loadu_ps(m + 16 * h), mnew = _mm512_max_ps(mx[h], mold);
    shift[h] = _mm512_mask_mov_ps(mnew, _mm512_cmp_ps_mask(mnew, ninf, _CMP_EQ_OQ), zero);
    alpha[h] = _mm512_mask_mov_ps(vm::exp16(_mm512_sub_ps(mold, mnew)),
                                  _mm512_cmp_ps_mask(mold, mnew, _CMP_EQ_OQ), one);
    _mm512_storeu_ps(m + 16 * h, mnew);
  }
  __m512 sum[2] = {zero, zero};
  for (int64_t j = 0; j < cols; ++j) {
    float* s = St + j * kLanes;
    if (mask && mask[j] == 0.f) {
      _mm512_storeu_ps(s, zero);
      _mm512_storeu_ps(s + 16, zero);
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      __m512 e = vm::exp16(_mm512_fmsub_ps(_mm512_loadu_ps(s + 16 * h), vs, shift[h]));
      if (causal) e = _mm512_maskz_mov_ps(sees(j, h), e);
      _mm512_storeu_ps(s + 16 * h, e);
      sum[h] = _mm512_add_ps(sum[h], e);
    }
  }
  for (int h = 0; h < 2; ++h)
    _mm512_storeu_ps(l + 16 * h, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16 * h), alpha[h], sum[h]));
  for (int64_t c = 0; c < Dh; ++c)
    for (int h = 0; h < 2; ++h) {
      float* o = Ot + c * kLanes + 16 * h;
      _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_loadu_ps(o), alpha[h]));
    }
}

// Where each operand is laid out in the workspace for operand type E: Qt [strip][Dp/step][32]
// [step], the block's keys Kb [kb][Dp] (Dp: Dh rounded up to a whole step, zero-padded), its
// values (f32: Vb [kb][Dh]; bf16: pairs of keys [kb/2][Dh][2]) and, in bf16, the weights in
// pairs of keys Pt [kb/2][32][2].
template <class E>
struct Layout {
  using T = typename E::T;
  int64_t ns, lanes, Dp, kbp;
  float *Ot, *St, *m, *l, *bmax;
  T *Qt, *Kb, *Vb, *Pt;
  Layout(float* work, int64_t rows, int64_t Dh, int64_t kb)
      : ns(strips(rows)), lanes(ns * kLanes), Dp(round_up(Dh, E::kStep)), kbp(round_up(kb, 2)) {
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
  // In floats, the end of Pt [kbp][32] (unused in f32).
  static int64_t floats(int64_t rows, int64_t Dh, int64_t kb) {
    const int64_t lanes = strips(rows) * kLanes, Dp = round_up(Dh, E::kStep), kbp = round_up(kb, 2);
    const int64_t ts = lanes * Dp + kb * Dp + kbp * Dh + kbp * kLanes;
    return lanes * Dh + kb * kLanes + 2 * lanes + kLanes +
           (ts * static_cast<int64_t>(sizeof(T)) + 3) / 4;
  }
};

template <class E>
void attend(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
            int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale, float* work) {
  using T = typename E::T;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr int64_t S = E::kStep;
  const Layout<E> w(work, rows, Dh, kb);
  const int64_t ns = w.ns, Dp = w.Dp;
  for (int64_t s = 0; s < ns; ++s)
    for (int64_t t = 0; t < kLanes; ++t) {
      const int64_t r = s * kLanes + t;
      T* dst = w.Qt + s * Dp * kLanes + t * S;
      for (int64_t c = 0; c < Dp; ++c)
        dst[(c / S) * kLanes * S + c % S] =
            r < rows && c < Dh ? E::from(in.q[r * in.ldq + c]) : T{};
    }
  fill(w.Ot, w.lanes * Dh, 0.f);
  fill(w.m, w.lanes, kNegInf);
  fill(w.l, w.lanes, 0.f);
  const bool causal = first_query >= 0;
  const int64_t key_end = causal ? (keys < first_query + rows ? keys : first_query + rows) : keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += kb) {
    const int64_t cols = (kb < key_end - j0 ? kb : key_end - j0);
    const float* mj = key_mask ? key_mask + j0 : nullptr;
    if (mj && all_zero(mj, cols))
      continue;  // a fully padded key block contributes nothing
    const float* K = in.k + j0 * in.ldkv;
    const float* V = in.v + j0 * in.ldkv;
    // The block's keys and values, dense (and in bf16, rounded; values in pairs of keys).
    if constexpr (S == 1) {
      vm::copy_rows(w.Kb, Dp, K, in.ldkv, cols, Dh);
      vm::copy_rows(w.Vb, Dh, V, in.ldkv, cols, Dh);
    } else {
#if defined(__AVX512BF16__)
      for (int64_t j = 0; j < cols; ++j) {
        vm::to_bf16_n(w.Kb + j * Dp, K + j * in.ldkv, Dh);
        if (Dp > Dh) w.Kb[j * Dp + Dh] = 0;
      }
      for (int64_t j = 0; j < cols; j += 2)
        interleave_bf16(w.Vb + j * Dh, V + j * in.ldkv,
                        j + 1 < cols ? V + (j + 1) * in.ldkv : nullptr, Dh);
#endif
    }
    for (int64_t s = 0; s < ns; ++s) {
      const int64_t q0 = first_query + s * kLanes;
      if (causal && j0 > q0 + kLanes - 1) continue;  // no query of this strip sees the block
      float* Os = w.Ot + s * Dh * kLanes;
      const T* Qs = w.Qt + s * Dp * kLanes;
      float* mx = causal ? nullptr : w.bmax;
      if (mx) fill(mx, kLanes, kNegInf);
      in_tiles<kTile>(cols, [&](int64_t i, auto R) {
        scores_tile<E, decltype(R)::value>(w.St + i * kLanes, w.Kb + i * Dp, Dp, Qs, Dp / S,
                                           mj ? mj + i : nullptr, scale, mx);
      });
      softmax_strip(w.St, cols, mj, causal ? q0 : -1, j0, scale, mx, w.m + s * kLanes,
                    w.l + s * kLanes, Os, Dh);
      if constexpr (S == 1) {
        in_tiles<kTile>(Dh, [&](int64_t i, auto R) {
          accumulate_tile<E, decltype(R)::value>(Os + i * kLanes, w.Vb + i, 1, Dh, w.St, cols);
        });
      } else {
#if defined(__AVX512BF16__)
        for (int64_t j = 0; j < cols; j += 2)
          for (int h = 0; h < 2; ++h)
            interleave_bf16(w.Pt + j * kLanes + 32 * h, w.St + j * kLanes + 16 * h,
                            j + 1 < cols ? w.St + (j + 1) * kLanes + 16 * h : nullptr, 16);
#endif
        in_tiles<kTile>(Dh, [&](int64_t i, auto R) {
          accumulate_tile<E, decltype(R)::value>(Os + i * kLanes, w.Vb + 2 * i, 2, 2 * Dh, w.Pt,
                                                 (cols + 1) / 2);
        });
      }
    }
  }
  write_context(ctx, ldc, w.Ot, w.l, rows, Dh, kLanes);
}

}  // namespace

bool has_bf16() {
#if defined(__AVX512BF16__)
  return true;
#else
  return false;
#endif
}
int64_t work_floats(int64_t rows, int64_t Dh, int64_t kb) {
#if defined(__AVX512BF16__)
  const int64_t f = Layout<F32>::floats(rows, Dh, kb), h = Layout<BF16>::floats(rows, Dh, kb);
  return f > h ? f : h;
#else
  return Layout<F32>::floats(rows, Dh, kb);
#endif
}

void attend_head(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
                 int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale,
                 float* work, Operands o) {
#if defined(__AVX512BF16__)
  if (o == Operands::bf16)
    return attend<BF16>(ctx, ldc, in, key_mask, rows, keys, Dh, kb, first_query, scale, work);
#endif
  attend<F32>(ctx, ldc, in, key_mask, rows, keys, Dh, kb, first_query, scale, work);
}

#endif

}  // namespace lf::attn_block::LF_ISA_NS
