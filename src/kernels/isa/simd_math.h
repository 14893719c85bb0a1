// The vector forms of vec_scalar.h's math and the row helpers built on them, for the
// instruction-set level a kernel object is compiled for (src/kernels/isa/: included only
// there, never by the rest of the library, which calls them through isa::kernels()). The
// level's flags decide the form: AVX-512 (sixteen lanes, masked tails) where __AVX512F__,
// AVX2 + FMA (eight lanes) where __AVX2__ and __FMA__, else the scalar forms. exp's vector
// forms give exp_scalar's bits; GELU's are within 1e-6 relative; the softmax row sums in
// sixteen lanes on every level. Like vec_scalar.h, everything here lives in the level's own
// inline namespace (LF_ISA_NS).
#pragma once
#if !defined(LF_ISA_NS)
#error "simd_math.h is for the per-level kernel objects (src/kernels/isa/), built with LF_ISA_NS"
#endif
#include "kernels/vec_scalar.h"

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized and -Wuninitialized (_mm512_undefined_*
// inside min/max/scalef/conversions); the warnings are known false positives.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace lf::vm {
inline namespace LF_ISA_NS {

// The formulas below are written once over a vector-width traits struct W (V16: AVX-512,
// sixteen lanes; V8: AVX2 + FMA, eight lanes; the streaming attention kernel builds on them
// too): V, the f32 vector of kWidth lanes; M, a lane mask; load, store, set1, zero, add, sub,
// mul, div, min, max (NaN: its second operand), abs, fmadd(a, b, c) = a b + c, fmsub = a b - c,
// fnmadd = c - a b; round (to nearest); eq, lt, le (lane masks); select(m, a, b) = a where m
// else b; exp (exp16, exp8).

// exp's range reduction and polynomial: x clamped to [kExpMin, kExpMax], n = round(x log2 e),
// r = x - n ln 2 (in two parts), returns e^r by its polynomial and n; each width applies 2^n.
template <class W>
inline typename W::V exp_poly(typename W::V x, typename W::V& n) {
  using V = typename W::V;
  x = W::min(x, W::set1(kExpMax));
  x = W::max(x, W::set1(kExpMin));
  n = W::round(W::mul(x, W::set1(kLog2e)));
  V r = W::fnmadd(n, W::set1(kLn2Hi), x);
  r = W::fnmadd(n, W::set1(kLn2Lo), r);
  V p = W::set1(kE7);
  // Written out: as a loop over an initializer_list, GCC 12 kept it a loop reading the
  // coefficients from the stack (GELU 2.7 ns an element on the AVX2 EPYC).
  p = W::fmadd(p, r, W::set1(kE6));
  p = W::fmadd(p, r, W::set1(kE5));
  p = W::fmadd(p, r, W::set1(kE4));
  p = W::fmadd(p, r, W::set1(kE3));
  p = W::fmadd(p, r, W::set1(kE2));
  p = W::fmadd(p, r, W::set1(1.f));
  return W::fmadd(p, r, W::set1(1.f));
}

// exp_scalar's function: lanes below kExpMin (including -inf) give 0, above kExpMax +inf, NaN
// lanes stay NaN; the others e^r 2^n (W::scale2n: exactly as exp_scalar's ldexp rounds).
template <class W>
inline typename W::V exp_of(typename W::V x) {
  using V = typename W::V;
  const typename W::M tiny = W::lt(x, W::set1(kExpMin)), huge = W::gt(x, W::set1(kExpMax)),
                      nan = W::unord(x, x);
  V n;
  const V p = exp_poly<W>(x, n);
  V res = W::select(tiny, W::zero(), W::scale2n(p, n));
  res = W::select(huge, W::set1(HUGE_VALF), res);
  return W::select(nan, x, res);
}

// Phi(x), phi_scalar's formula: the standard normal CDF through the fitted erfc.
template <class W>
inline typename W::V phi(typename W::V x) {
  using V = typename W::V;
  V z = W::mul(W::abs(x), W::set1(0.70710678118654752f));
  z = W::min(z, W::set1(10.f));
  const V t = W::div(W::set1(1.f), W::fmadd(z, W::set1(0.5f), W::set1(1.f)));
  V p = W::set1(kErfcP[10]);
  for (int i = 9; i >= 0; --i) p = W::fmadd(p, t, W::set1(kErfcP[i]));
  const V half_e = W::mul(W::mul(t, W::exp(W::fnmadd(z, z, p))), W::set1(0.5f));  // erfc(z) / 2
  return W::select(W::lt(x, W::zero()), half_e, W::sub(W::set1(1.f), half_e));
}

// gelu_fast_scalar's formula (a NaN lane: min/max give the clamp, then x * Phi gives NaN).
template <class W>
inline typename W::V gelu_fast(typename W::V x) {
  using V = typename W::V;
  V z = W::mul(x, W::set1(0.70710678118654752f));
  const typename W::M low = W::le(z, W::set1(-kErfRatClamp));
  z = W::min(W::max(z, W::set1(-kErfRatClamp)), W::set1(kErfRatClamp));
  const V s = W::mul(z, z);
  V p = W::set1(kErfRatP[6]), q = W::set1(kErfRatQ[4]);
  for (int i = 5; i >= 0; --i) p = W::fmadd(p, s, W::set1(kErfRatP[i]));
  for (int i = 3; i >= 0; --i) q = W::fmadd(q, s, W::set1(kErfRatQ[i]));
  const V erf = W::div(W::mul(z, p), q);
  const V ph = W::fmadd(erf, W::set1(0.5f), W::set1(0.5f));
  return W::mul(x, W::select(low, W::zero(), ph));
}

// GELU'(x) = Phi(x) + x phi(x).
template <class W>
inline typename W::V gelu_grad(typename W::V x) {
  const typename W::V pdf =
      W::mul(W::set1(kInvSqrt2Pi), W::exp(W::mul(W::set1(-0.5f), W::mul(x, x))));
  return W::fmadd(x, pdf, phi<W>(x));
}

// The formulas of one width under the names the kernels call: expN, phiN, geluN, gelu_fastN,
// gelu_gradN for N lanes.
#define LF_VM_NAMED(N, W)                                      \
  inline W::V exp##N(W::V x) { return exp_of<W>(x); }          \
  inline W::V phi##N(W::V x) { return phi<W>(x); }             \
  inline W::V gelu##N(W::V x) { return W::mul(x, phi<W>(x)); } \
  inline W::V gelu_fast##N(W::V x) { return gelu_fast<W>(x); } \
  inline W::V gelu_grad##N(W::V x) { return gelu_grad<W>(x); }

// 0, 1, ..., 15: each lane's index.
alignas(64) inline constexpr float kLaneIndex[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                     8, 9, 10, 11, 12, 13, 14, 15};

// The operations both widths spell alike (_mm256_add_ps, _mm512_add_ps, ...), for V16 and V8:
// LF_VM_PS(op) is the width's intrinsic, LF_VM_CMP(a, b, predicate) its comparison.
#define LF_VM_SAME_OPS                                                             \
  static V load(const float* p) { return LF_VM_PS(loadu)(p); }                     \
  static void store(float* p, V v) { LF_VM_PS(storeu)(p, v); }                     \
  static V set1(float x) { return LF_VM_PS(set1)(x); }                             \
  static V add(V a, V b) { return LF_VM_PS(add)(a, b); }                           \
  static V zero() { return LF_VM_PS(setzero)(); }                                  \
  static V sub(V a, V b) { return LF_VM_PS(sub)(a, b); }                           \
  static V mul(V a, V b) { return LF_VM_PS(mul)(a, b); }                           \
  static V div(V a, V b) { return LF_VM_PS(div)(a, b); }                           \
  static V min(V a, V b) { return LF_VM_PS(min)(a, b); }                           \
  static V max(V a, V b) { return LF_VM_PS(max)(a, b); }                           \
  static V fmadd(V a, V b, V c) { return LF_VM_PS(fmadd)(a, b, c); }               \
  static V fmsub(V a, V b, V c) { return LF_VM_PS(fmsub)(a, b, c); }               \
  static V fnmadd(V a, V b, V c) { return LF_VM_PS(fnmadd)(a, b, c); }             \
  static M eq(V a, V b) { return LF_VM_CMP(a, b, _CMP_EQ_OQ); }                    \
  static M lt(V a, V b) { return LF_VM_CMP(a, b, _CMP_LT_OQ); }                    \
  static M le(V a, V b) { return LF_VM_CMP(a, b, _CMP_LE_OQ); }                    \
  static M gt(V a, V b) { return LF_VM_CMP(a, b, _CMP_GT_OQ); }                    \
  static M unord(V a, V b) { return LF_VM_CMP(a, b, _CMP_UNORD_Q); }               \
  static V exp(V x) { return exp_of<W>(x); }                                       \
  /* The lanes t (0 .. kWidth - 1) with t > lim (|lim| < 2^24). */                 \
  static M lanes_above(int lim) {                                                  \
    return LF_VM_CMP(load(kLaneIndex), set1(static_cast<float>(lim)), _CMP_GT_OQ); \
  }

#if defined(__AVX512F__)
#define LF_VM_PS(op) _mm512_##op##_ps
#define LF_VM_CMP _mm512_cmp_ps_mask
struct V16 {
  using V = __m512;
  using M = __mmask16;
  using W = V16;
  static constexpr int64_t kWidth = 16;
  LF_VM_SAME_OPS
  static V abs(V x) { return _mm512_abs_ps(x); }
  static V round(V x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static V select(M m, V a, V b) { return _mm512_mask_mov_ps(b, m, a); }
  static V scale2n(V p, V n) { return _mm512_scalef_ps(p, n); }  // p * 2^n
};
#undef LF_VM_CMP
#undef LF_VM_PS

LF_VM_NAMED(16, V16)
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define LF_VM_AVX2 1
// The same formulas eight lanes at a time with AVX2, for CPUs without AVX-512.
#define LF_VM_PS(op) _mm256_##op##_ps
#define LF_VM_CMP _mm256_cmp_ps
struct V8 {
  using V = __m256;
  using M = __m256;  // a lane mask: all bits set or none
  using W = V8;
  static constexpr int64_t kWidth = 8;
  LF_VM_SAME_OPS
  static V abs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), x); }
  static V round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V select(M m, V a, V b) { return _mm256_blendv_ps(b, a, m); }
  // p * 2^n, n in [-126, 128] after the range checks, as exp_scalar's ldexp rounds: two normal
  // factors 2^(n/2) 2^(n - n/2), the first product exact, the second rounding once.
  static V scale2n(V p, V n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const auto pow2 = [](__m256i k) {  // 2^k for k in [-63, 64]
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
    };
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2(n1)), pow2(n2));
  }
};
#undef LF_VM_CMP
#undef LF_VM_PS

LF_VM_NAMED(8, V8)
#endif
#undef LF_VM_SAME_OPS
#undef LF_VM_NAMED

// y[i] = Op(x[i]) for n elements (y may alias x): with AVX-512 sixteen at a time
// (Op::lanes16) and the tail masked, with AVX2 eight at a time (Op::lanes8) and the tail one
// at a time, else one at a time (Op::scalar).
template <typename Op>
inline void apply_n(float* y, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, Op::lanes16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, Op::lanes16(_mm512_maskz_loadu_ps(m, x + i)));
    return;
  }
#elif defined(LF_VM_AVX2)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Op::lanes8(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = Op::scalar(x[i]);
}

// Op for apply_n: NAME_scalar, NAME16 and NAME8 as scalar, lanes16 and lanes8.
#if defined(__AVX512F__)
#define LF_VM_MAP_OP(Op, name)                                \
  struct Op {                                                 \
    static float scalar(float x) { return name##_scalar(x); } \
    static __m512 lanes16(__m512 x) { return name##16(x); }   \
  };
#elif defined(LF_VM_AVX2)
#define LF_VM_MAP_OP(Op, name)                                \
  struct Op {                                                 \
    static float scalar(float x) { return name##_scalar(x); } \
    static __m256 lanes8(__m256 x) { return name##8(x); }     \
  };
#else
#define LF_VM_MAP_OP(Op, name)                                \
  struct Op {                                                 \
    static float scalar(float x) { return name##_scalar(x); } \
  };
#endif
LF_VM_MAP_OP(ExpOp, exp)
LF_VM_MAP_OP(GeluOp, gelu)
LF_VM_MAP_OP(GeluFastOp, gelu_fast)
#undef LF_VM_MAP_OP

// y[i] = exp(x[i]) for n elements (y may alias x).
inline void exp_n(float* y, const float* x, int64_t n) { apply_n<ExpOp>(y, x, n); }
// y[i] = GELU(x[i]) (exact erf form, to ~1e-7) for n elements (y may alias x).
inline void gelu_n(float* y, const float* x, int64_t n) { apply_n<GeluOp>(y, x, n); }
// y[i] = GELU(x[i]) within 1e-6 (1 + |x|) (the rational erf above) for n elements (y may
// alias x): int8 inference's FFN epilogue.
inline void gelu_fast_n(float* y, const float* x, int64_t n) { apply_n<GeluFastOp>(y, x, n); }

// d[i] = Op(d[i], x[i], g[i]) for n elements, g read only when Op::kUsesG: with AVX-512
// sixteen at a time and the tail masked, with AVX2 eight at a time and the tail one at a time,
// else one at a time (Op::scalar).
template <typename Op>
inline void update_n(float* d, const float* x, const float* g, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const auto lanes = [&](__mmask16 m) {
    const __m512 gv = Op::kUsesG ? _mm512_maskz_loadu_ps(m, g + i) : _mm512_setzero_ps();
    return Op::lanes16(_mm512_maskz_loadu_ps(m, d + i), _mm512_maskz_loadu_ps(m, x + i), gv);
  };
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, lanes(0xFFFF));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(d + i, m, lanes(m));
    return;
  }
#elif defined(LF_VM_AVX2)
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = Op::kUsesG ? _mm256_loadu_ps(g + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(d + i, Op::lanes8(_mm256_loadu_ps(d + i), _mm256_loadu_ps(x + i), gv));
  }
#endif
  for (; i < n; ++i) d[i] = Op::scalar(d[i], x[i], Op::kUsesG ? g[i] : 0.f);
}

struct GeluGradAccumulate {  // d + g * GELU'(x)
  static constexpr bool kUsesG = true;
  static float scalar(float d, float x, float g) { return d + g * gelu_grad_scalar(x); }
#if defined(__AVX512F__)
  static __m512 lanes16(__m512 d, __m512 x, __m512 g) {
    return _mm512_fmadd_ps(g, gelu_grad16(x), d);
  }
#elif defined(LF_VM_AVX2)
  static __m256 lanes8(__m256 d, __m256 x, __m256 g) {
    return _mm256_fmadd_ps(g, gelu_grad8(x), d);
  }
#endif
};
struct GeluGradScale {  // d * GELU'(x)
  static constexpr bool kUsesG = false;
  static float scalar(float d, float x, float) { return d * gelu_grad_scalar(x); }
#if defined(__AVX512F__)
  static __m512 lanes16(__m512 d, __m512 x, __m512) { return _mm512_mul_ps(d, gelu_grad16(x)); }
#elif defined(LF_VM_AVX2)
  static __m256 lanes8(__m256 d, __m256 x, __m256) { return _mm256_mul_ps(d, gelu_grad8(x)); }
#endif
};

// d[i] += g[i] * GELU'(x[i]) for n elements.
inline void gelu_backward_n(float* d, const float* x, const float* g, int64_t n) {
  update_n<GeluGradAccumulate>(d, x, g, n);
}
// d[i] *= GELU'(x[i]) for n elements (d: the gradient of GELU's output on entry, of its input
// on exit).
inline void gelu_backward_inplace_n(float* d, const float* x, int64_t n) {
  update_n<GeluGradScale>(d, x, nullptr, n);
}

// Softmax building blocks over a row of n scores x with an optional key mask (mask[j] == 0:
// the key is excluded; null: every key counts).
// max_j scale * x[j] over the counted keys; -inf when there is none.
inline float masked_scaled_max(const float* x, const float* mask, int64_t n, float scale) {
  // Sixteen lane maxima that start at -inf, so that a row with every key masked gives exactly
  // -inf. (An OpenMP max reduction may start its private copies at the lowest finite float
  // instead, as clang's does, and a fully masked row would then give -FLT_MAX.) std::max keeps
  // its first argument when the second is NaN, so NaN scores are skipped here, as before.
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr int kLanes = 16;
  float lane[kLanes];
  for (float& l : lane) l = kNegInf;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l)
      lane[l] = std::max(lane[l], !mask || mask[j + l] != 0.f ? x[j + l] * scale : kNegInf);
  }
  for (; j < n; ++j) lane[0] = std::max(lane[0], !mask || mask[j] != 0.f ? x[j] * scale : kNegInf);
  float mx = kNegInf;
  for (float l : lane) mx = std::max(mx, l);
  return mx;
}
// y[j] = scale * x[j] - shift for counted keys, -inf (which exp maps to exactly 0) for the
// others. y may alias x.
inline void masked_scaled_shift(float* y, const float* x, const float* mask, int64_t n, float scale,
                                float shift) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (mask) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = mask[j] != 0.f ? x[j] * scale - shift : kNegInf;
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale - shift;
  }
}

// y[j] = exp(scale * x[j] - shift) for counted keys, 0 for the others (mask[j] == 0), in one
// pass that also returns the sum of the y[j]. y may alias x.
inline float exp_shifted_sum(float* y, const float* x, const float* mask, int64_t n, float scale,
                             float shift) {
  int64_t j = 0;
  float sum = 0.f;
#if defined(__AVX512F__)
  const __m512 vs = _mm512_set1_ps(scale), vh = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for (; j < n; j += 16) {
    const __mmask16 in =
        j + 16 <= n ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    __mmask16 keep = in;
    if (mask)
      keep = _mm512_mask_cmp_ps_mask(in, _mm512_maskz_loadu_ps(in, mask + j), _mm512_setzero_ps(),
                                     _CMP_NEQ_UQ);
    const __m512 e =
        _mm512_maskz_mov_ps(keep, exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(in, x + j), vs, vh)));
    _mm512_mask_storeu_ps(y + j, in, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
#elif defined(LF_VM_AVX2)
  // Sixteen lane sums in two registers, reduced in _mm512_reduce_add_ps's order: the sum the
  // AVX-512 path forms from the same terms.
  const __m256 vs = _mm256_set1_ps(scale), vh = _mm256_set1_ps(shift), zero = _mm256_setzero_ps();
  __m256 acc[2] = {zero, zero};
  // y[at, at + len), len <= 8, and its terms; a short tail loads and stores only its lanes.
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const auto eight = [&](int64_t at, int64_t len) {
    const bool full = len == 8;
    const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(len)), iota);
    const auto load = [&](const float* p) {
      return full ? _mm256_loadu_ps(p + at) : _mm256_maskload_ps(p + at, in);
    };
    __m256 keep = _mm256_castsi256_ps(in);
    if (mask) keep = _mm256_and_ps(keep, _mm256_cmp_ps(load(mask), zero, _CMP_NEQ_UQ));
    const __m256 e = _mm256_and_ps(exp8(_mm256_fmsub_ps(load(x), vs, vh)), keep);
    if (full)
      _mm256_storeu_ps(y + at, e);
    else
      _mm256_maskstore_ps(y + at, in, e);
    return e;
  };
  for (; j < n; j += 16) {
    const int64_t len = std::min<int64_t>(16, n - j);
    acc[0] = _mm256_add_ps(acc[0], eight(j, std::min<int64_t>(8, len)));
    if (len > 8) acc[1] = _mm256_add_ps(acc[1], eight(j + 8, len - 8));
  }
  const __m256 h = _mm256_add_ps(acc[1], acc[0]);
  const __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
  const __m128 w = _mm_add_ps(q, _mm_shuffle_ps(q, q, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(w) + _mm_cvtss_f32(_mm_shuffle_ps(w, w, 1));
#endif
  for (; j < n; ++j) {
    y[j] = !mask || mask[j] != 0.f ? exp_scalar(x[j] * scale - shift) : 0.f;
    sum += y[j];
  }
  return sum;
}

// Copies n bytes between non-overlapping short rows (a head's slice of an activation row)
// without a library call per row: 64 bytes at a time with AVX-512, 32 with AVX2.
inline void copy_row(void* d, const void* s, int64_t n) {
  auto* dp = static_cast<char*>(d);
  const auto* sp = static_cast<const char*>(s);
  int64_t c = 0;
#if defined(__AVX512F__)
  for (; c + 64 <= n; c += 64) _mm512_storeu_si512(dp + c, _mm512_loadu_si512(sp + c));
#elif defined(LF_VM_AVX2)
  for (; c + 32 <= n; c += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dp + c),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sp + c)));
#endif
  if (c < n) std::memcpy(dp + c, sp + c, static_cast<size_t>(n - c));
}

// rows short rows of n elements, from src (rows lds elements apart) to dst (ldd apart): a head's
// columns gathered into a dense tile, or placed back.
template <typename T>
inline void copy_rows(T* dst, int64_t ldd, const T* src, int64_t lds, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    copy_row(dst + r * ldd, src + r * lds, n * static_cast<int64_t>(sizeof(T)));
}

// d[i] = bf16(s[i]) for n elements: with AVX512-BF16 thirty-two at a time.
inline void to_bf16_n(uint16_t* d, const float* s, int64_t n) {
  int64_t c = 0;
#if defined(__AVX512BF16__)
  for (; c + 32 <= n; c += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + c + 16), _mm512_loadu_ps(s + c));
    _mm512_storeu_si512(d + c, reinterpret_cast<const __m512i&>(v));
  }
#endif
  for (; c < n; ++c) d[c] = bf16_round(s[c]);
}

// One row g [cols] of an output gradient: rounded into d16, added to the column sums acc.
inline void round_and_sum_row(uint16_t* d16, float* acc, const float* g, int64_t cols) {
  to_bf16_n(d16, g, cols);
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) acc[c] += g[c];
}

// d[i] = s[i] widened from bf16 to f32 (exact) for n elements.
inline void from_bf16_n(float* d, const uint16_t* s, int64_t n) {
  int64_t c = 0;
#if defined(__AVX512F__)
  for (; c + 16 <= n; c += 16) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + c)));
    _mm512_storeu_si512(d + c, _mm512_slli_epi32(w, 16));
  }
#endif
  for (; c < n; ++c) {
    const uint32_t u = static_cast<uint32_t>(s[c]) << 16;
    std::memcpy(d + c, &u, 4);
  }
}

}  // namespace LF_ISA_NS
}  // namespace lf::vm
