// What the two forms of exact attention's streaming kernel share (isa/attention_block_avx2.cpp
// and isa/attention_block_avx512.cpp, compiled once per instruction-set level): the tile
// dispatcher and the final normalisation. Included only by those two files.
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

// What both builds of the kernel share: the tile dispatcher and the final normalisation.
// has_bf16() is each build's own.
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

}  // namespace

#endif

}  // namespace lf::attn_block::LF_ISA_NS
