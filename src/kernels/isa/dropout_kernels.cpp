// The dropout kernels' vector forms (isa_kernels.h: dropout_keep32, dropout_forward_n,
// dropout_backward_n, dropout_round_n), compiled once per instruction-set level; only the
// AVX-512 levels define them (the others leave the table's entries null and the callers run
// their scalar loops). Each gives the scalar loop's bits (ops_rows.cpp): the mask of
// DropoutMask::keep_scalar, the same products and sums (one multiply, then one add: never
// fused), and vm::bf16_round's rounding written out on the integer bits (round to nearest
// even, NaN kept a NaN, denormals rounded like any other value). The hardware conversion of
// AVX512-BF16 is not used: it reads denormal inputs as zero.
#include <cstdint>

#include "kernels/isa/simd_math.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
namespace lf::isa::LF_ISA_NS {
namespace {

// Bit k: whether mask element j + k is kept (j a multiple of 4, k < 32). The eight SplitMix64
// hashes of the groups from j / 4 at once (rng_bits_keyed's on 64-bit lanes), each lane's four
// 16-bit fields compared with the threshold (which fits 16 bits).
inline uint32_t keep_bits(uint64_t key, uint64_t j, uint32_t threshold) {
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

// The lanes [0, r) of a 32-element block, r >= 0.
inline uint32_t first_lanes(int64_t r) { return r >= 32 ? ~0u : (1u << r) - 1u; }

// Calls op(i, lanes, keep) over n elements whose mask indices start at j (any j): lanes, the
// elements [i, i + 32) that exist (bit k: element i + k < n); keep, their mask bits. A j that
// is not a multiple of 4 first takes a short block of the 1 to 3 elements up to the next one
// (the bits of the group's hash from the multiple of 4 below, shifted).
template <typename Op>
inline void for_blocks(int64_t n, uint64_t key, uint64_t j, uint32_t threshold, const Op& op) {
  int64_t i = 0;
  const int s = static_cast<int>(j & 3);
  if (s != 0 && n > 0) {
    const int64_t h = n < 4 - s ? n : 4 - s;
    op(0, first_lanes(h), keep_bits(key, j - s, threshold) >> s);
    i = h;
  }
  for (; i < n; i += 32) op(i, first_lanes(n - i), keep_bits(key, j + i, threshold));
}

// for_blocks by 16-lane halves: op(i, lanes, keep) for the elements [i, i + 16) of each half
// that holds any (lanes: those that exist; keep: their mask bits).
template <typename Op>
inline void for_halves(int64_t n, uint64_t key, uint64_t j, uint32_t threshold, const Op& op) {
  for_blocks(n, key, j, threshold, [&](int64_t i, uint32_t lanes, uint32_t keep) {
    for (int h = 0; h < 2; ++h) {
      const auto lm = static_cast<__mmask16>(lanes >> (16 * h));
      if (lm == 0) break;
      op(i + 16 * h, lm, static_cast<__mmask16>(keep >> (16 * h)));
    }
  });
}

// vm::bf16_round of sixteen floats, in the low 16 bits of their 32-bit lanes: NaN lanes
// (|u| > inf) give (u >> 16) | 0x40, the others (u + 0x7FFF + ((u >> 16) & 1)) >> 16.
inline __m512i bf16_round16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
  return _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x40));
}

}  // namespace

uint32_t dropout_keep32(uint64_t key, uint64_t j, uint32_t threshold) {
  return keep_bits(key, j, threshold);
}

void dropout_forward_n(float* out, const float* inp, int64_t n, uint64_t key, uint64_t j,
                       uint32_t threshold, float scale) {
  const __m512 sc = _mm512_set1_ps(scale);
  for_halves(n, key, j, threshold, [&](int64_t i, __mmask16 lm, __mmask16 km) {
    const __m512 x = _mm512_maskz_loadu_ps(lm, inp + i);
    _mm512_mask_storeu_ps(out + i, lm, _mm512_maskz_mul_ps(km, x, sc));
  });
}

void dropout_backward_n(float* dinp, const float* dout, int64_t n, uint64_t key, uint64_t j,
                        uint32_t threshold, float scale, bool add) {
  const __m512 sc = _mm512_set1_ps(scale);
  for_halves(n, key, j, threshold, [&](int64_t i, __mmask16 lm, __mmask16 km) {
    float* d = dinp + i;
    // dout * scale + base in kept lanes, base in the others (overwrite: base 0, and x + 0
    // as the scalar loop adds it, so -0 becomes +0 there too). The masked add is a
    // builtin, never contracted with the product into a fused multiply-add. The product is
    // its first operand, as in the scalar loop's 32-element blocks (GCC 12): where both
    // are NaN, the result is the product's NaN.
    const __m512 base = add ? _mm512_maskz_loadu_ps(lm, d) : _mm512_setzero_ps();
    const __m512 prod = _mm512_mul_ps(_mm512_maskz_loadu_ps(lm, dout + i), sc);
    _mm512_mask_storeu_ps(d, lm, _mm512_mask_add_ps(base, km, prod, base));
  });
}

void dropout_round_n(uint16_t* out16, const float* inp, float* g, int64_t n, uint64_t key,
                     uint64_t j, uint32_t threshold, float scale) {
  const __m512 sc = _mm512_set1_ps(scale);
  // _mm512_packus_epi32 interleaves its operands by 128-bit lanes; this puts a's sixteen
  // words before b's.
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  for_blocks(n, key, j, threshold, [&](int64_t i, uint32_t lanes, uint32_t keep) {
    const __mmask16 lm0 = static_cast<__mmask16>(lanes), lm1 = static_cast<__mmask16>(lanes >> 16);
    const __mmask16 km0 = static_cast<__mmask16>(keep), km1 = static_cast<__mmask16>(keep >> 16);
    const __m512 x0 = _mm512_maskz_mul_ps(km0, _mm512_maskz_loadu_ps(lm0, inp + i), sc);
    const __m512 x1 = lm1 ? _mm512_maskz_mul_ps(km1, _mm512_maskz_loadu_ps(lm1, inp + i + 16), sc)
                          : _mm512_setzero_ps();
    const __m512i w =
        _mm512_permutexvar_epi64(order, _mm512_packus_epi32(bf16_round16(x0), bf16_round16(x1)));
    _mm512_mask_storeu_epi16(out16 + i, lanes, w);
    if (!g) return;
    _mm512_mask_storeu_ps(g + i, lm0,
                          _mm512_maskz_mul_ps(km0, _mm512_maskz_loadu_ps(lm0, g + i), sc));
    if (lm1)
      _mm512_mask_storeu_ps(g + i + 16, lm1,
                            _mm512_maskz_mul_ps(km1, _mm512_maskz_loadu_ps(lm1, g + i + 16), sc));
  });
}

}  // namespace lf::isa::LF_ISA_NS
#endif
