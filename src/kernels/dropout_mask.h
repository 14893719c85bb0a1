// The dropout mask of the kernels that drop (ops.cpp's fused LayerNorm, ops_rows.cpp's
// dropout): a pure function of (seed, stream, element index), so that resuming or
// recomputing a mask needs nothing stored.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/isa_kernels.h"
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
  // Calls f(i, keep) for i in [i0, i1).
  template <typename F>
  void for_range(int64_t i0, int64_t i1, const F& f) const {
    // With AVX-512 (the active level's keep32, isa_kernels.h): 32 elements per hash vector once
    // the index is a multiple of 4; the same bits as the scalar loop below.
    const auto keep32 = isa::kernels().dropout_keep32;
    if (keep32 && fits16()) {
      int64_t i = i0;
      for (; i < i1 && ((first + i) & 3) != 0; ++i)
        f(i, keep_scalar(static_cast<uint64_t>(first + i)));
      for (; i + 32 <= i1; i += 32) {
        const uint32_t k = keep32(key, static_cast<uint64_t>(first + i), threshold);
        for (int b = 0; b < 32; ++b) f(i + b, ((k >> b) & 1u) != 0);
      }
      for (; i < i1; ++i) f(i, keep_scalar(static_cast<uint64_t>(first + i)));
      return;
    }
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
  // Whether the threshold fits the vector kernels' 16-bit compare (p < 1 - 2^-17).
  bool fits16() const { return threshold <= 0xFFFFu; }
  // The mask index of buffer element i.
  uint64_t index(int64_t i) const { return static_cast<uint64_t>(first + i); }
  bool keep_scalar(uint64_t j) const {
    return ((rng_bits_keyed(key, j >> 2) >> (16 * (j & 3))) & 0xFFFFu) >= threshold;
  }
};

}  // namespace lf
