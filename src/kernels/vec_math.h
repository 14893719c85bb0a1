// Vectorised exp, GELU and GELU's derivative for the hot loops (softmax, FFN activation), the
// softmax row's building blocks, bf16 conversions and short-row copies: the library's entry
// points. The scalar forms (vec_scalar.h) are inline here; every n-element form runs the
// active instruction-set level's kernel (isa_kernels.h: AVX-512 sixteen lanes, AVX2 + FMA
// eight, or baseline scalar code, chosen once at start-up from the CPU), one indirect call
// per row or block. The vector forms and their accuracy are in isa/simd_math.h: exp's give
// exp_scalar's bits, GELU's are within 1e-6 relative, the softmax row sums in sixteen lanes
// on every level, so the levels agree with each other to float rounding.
#pragma once
#include <cstdint>

#include "kernels/isa_kernels.h"
#include "kernels/vec_scalar.h"

namespace lf::vm {

// y[i] = exp(x[i]) for n elements (y may alias x).
inline void exp_n(float* y, const float* x, int64_t n) { isa::kernels().exp_n(y, x, n); }
// y[i] = GELU(x[i]) (exact erf form, to ~1e-7) for n elements (y may alias x).
inline void gelu_n(float* y, const float* x, int64_t n) { isa::kernels().gelu_n(y, x, n); }
// y[i] = GELU(x[i]) within 1e-6 (1 + |x|) (the rational erf of vec_scalar.h) for n elements
// (y may alias x): int8 inference's FFN epilogue.
inline void gelu_fast_n(float* y, const float* x, int64_t n) {
  isa::kernels().gelu_fast_n(y, x, n);
}

// d[i] += g[i] * GELU'(x[i]) for n elements.
inline void gelu_backward_n(float* d, const float* x, const float* g, int64_t n) {
  isa::kernels().gelu_backward_n(d, x, g, n);
}
// d[i] *= GELU'(x[i]) for n elements (d: the gradient of GELU's output on entry, of its input
// on exit).
inline void gelu_backward_inplace_n(float* d, const float* x, int64_t n) {
  isa::kernels().gelu_backward_inplace_n(d, x, n);
}

// Softmax building blocks over a row of n scores x with an optional key mask (mask[j] == 0:
// the key is excluded; null: every key counts).
// max_j scale * x[j] over the counted keys; -inf when there is none (also when every key is
// masked); NaN scores are skipped.
inline float masked_scaled_max(const float* x, const float* mask, int64_t n, float scale) {
  return isa::kernels().masked_scaled_max(x, mask, n, scale);
}
// y[j] = scale * x[j] - shift for counted keys, -inf (which exp maps to exactly 0) for the
// others. y may alias x.
inline void masked_scaled_shift(float* y, const float* x, const float* mask, int64_t n, float scale,
                                float shift) {
  isa::kernels().masked_scaled_shift(y, x, mask, n, scale, shift);
}
// y[j] = exp(scale * x[j] - shift) for counted keys, 0 for the others (mask[j] == 0), in one
// pass that also returns the sum of the y[j] (sixteen lane sums on every level). y may alias x.
inline float exp_shifted_sum(float* y, const float* x, const float* mask, int64_t n, float scale,
                             float shift) {
  return isa::kernels().exp_shifted_sum(y, x, mask, n, scale, shift);
}

// rows short rows of n elements, from src (rows lds elements apart) to dst (ldd apart): a head's
// columns gathered into a dense tile, or placed back (no library call per row).
template <typename T>
inline void copy_rows(T* dst, int64_t ldd, const T* src, int64_t lds, int64_t rows, int64_t n) {
  constexpr auto sz = static_cast<int64_t>(sizeof(T));
  isa::kernels().copy_rows(dst, ldd * sz, src, lds * sz, rows, n * sz);
}

// d[i] = bf16(s[i]) for n elements (round to nearest even, as bf16_round).
inline void to_bf16_n(uint16_t* d, const float* s, int64_t n) { isa::kernels().to_bf16_n(d, s, n); }

// One row g [cols] of an output gradient: rounded into d16, added to the column sums acc.
inline void round_and_sum_row(uint16_t* d16, float* acc, const float* g, int64_t cols) {
  isa::kernels().round_and_sum_row(d16, acc, g, cols);
}

// d[i] = s[i] widened from bf16 to f32 (exact) for n elements.
inline void from_bf16_n(float* d, const uint16_t* s, int64_t n) {
  isa::kernels().from_bf16_n(d, s, n);
}

}  // namespace lf::vm
