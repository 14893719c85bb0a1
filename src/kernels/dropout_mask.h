// The dropout mask of the kernels that drop (ops.cpp's fused LayerNorm, ops_rows.cpp's
// dropout): a pure function of (seed, stream, element index), so that resuming or
// recomputing a mask needs nothing stored.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "linformer/rng.h"

namespace lf {

// Element j of a dropout mask is kept iff 16 bits of rng_bits(seed, stream, j / 4) (the
// (j % 4)-th group) are >= round(p * 65536): one hash serves four elements. Buffer element i
// is mask element j = first + i.
struct DropoutMask {
  uint64_t key;
  uint32_t threshold;
  int64_t first;
  DropoutMask(float p, uint64_t seed, uint64_t stream, int64_t first_index)
      : key(rng_key(seed, stream)),
        threshold(static_cast<uint32_t>(std::lround(static_cast<double>(p) * 65536.0))),
        first(first_index) {}
#if defined(__AVX512DQ__) && defined(__AVX512BW__)
  // Whether each of the 32 mask elements from index j (a multiple of 4) is kept, bit k for
  // element j + k: the eight hashes of their groups at once (SplitMix64 on 64-bit lanes), each
  // lane's four 16-bit fields compared with the threshold.
  uint32_t keep32(uint64_t j) const {
    __m512i x = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(key + (j >> 2))),
                                 _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0x9E3779B97F4A7C15ull)));
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                           _mm512_set1_epi64(static_cast<int64_t>(0xBF58476D1CE4E5B9ull)));
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                           _mm512_set1_epi64(static_cast<int64_t>(0x94D049BB133111EBull)));
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
    return static_cast<uint32_t>(
        _mm512_cmpge_epu16_mask(x, _mm512_set1_epi16(static_cast<int16_t>(threshold))));
  }
#endif
  // Calls f(i, keep) for i in [i0, i1).
  template <typename F>
  void for_range(int64_t i0, int64_t i1, const F& f) const {
#if defined(__AVX512DQ__) && defined(__AVX512BW__)
    if (threshold <= 0xFFFFu) {  // 32 elements per hash vector once the index is a multiple of 4
      int64_t i = i0;
      for (; i < i1 && ((first + i) & 3) != 0; ++i)
        f(i, keep_scalar(static_cast<uint64_t>(first + i)));
      for (; i + 32 <= i1; i += 32) {
        const uint32_t k = keep32(static_cast<uint64_t>(first + i));
        for (int b = 0; b < 32; ++b) f(i + b, ((k >> b) & 1u) != 0);
      }
      for (; i < i1; ++i) f(i, keep_scalar(static_cast<uint64_t>(first + i)));
      return;
    }
#endif
    uint64_t group = ~uint64_t{0}, h = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const uint64_t j = static_cast<uint64_t>(first + i);
      const uint64_t g = j >> 2;
      if (g != group) {
        group = g;
        h = rng_bits_keyed(key, g);
      }
      f(i, ((h >> (16 * (j & 3))) & 0xFFFFu) >= threshold);
    }
  }
  bool keep_scalar(uint64_t j) const {
    return ((rng_bits_keyed(key, j >> 2) >> (16 * (j & 3))) & 0xFFFFu) >= threshold;
  }
};

}  // namespace lf
