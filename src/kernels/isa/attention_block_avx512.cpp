// Exact attention's streaming kernel (attention_block.h), AVX-512 form: the kernel of
// attention_block_common.h on sixteen-lane vectors (strips of 32 queries, 8-row tiles),
// compiled on the avx512 level and, with bf16 operands, avx512bf16 (the other levels compile
// this file to nothing; the AVX2 form is attention_block_avx2.cpp). The level's table
// (vec_kernels.cpp) points at attend_head, work_floats and has_bf16 here; attention_block.cpp
// checks the arguments and dispatches.
// The two products run either in f32 (one FMA per element of the reduction, Operands::f32) or,
// with AVX512-BF16, on bf16 operands (one VDPBF16PS per pair of elements: twice the
// multiply-adds an instruction, f32 sums, Operands::bf16). In bf16 the queries, keys and values
// given in f32 are rounded when they are laid out (those given in bf16 are moved), and the
// weights once per key block after the f32 softmax, as the bf16 gemm path rounds its operands;
// the running max, sums and output stay f32.
#include "kernels/isa/attention_block_common.h"

namespace lf::attn_block::LF_ISA_NS {

#if defined(__AVX512F__)

namespace {

// The vector width's operations (simd_math.h) and its register tile.
struct Avx512 : vm::V16 {
  static constexpr int kTile = 8;  // keys (scores) or value columns (accumulate) per tile
};

#if defined(__AVX512BF16__)
// dst[2c] = x[c], dst[2c + 1] = y[c] for c < n, from rows x and y as pair(c, in) gives 16 of
// them from column c on (in: the columns that exist), [x x 16, y x 16]: the pair layout
// VDPBF16PS reads.
template <class Pair>
inline void interleave(uint16_t* dst, int64_t n, Pair pair) {
  alignas(64) static const uint16_t kIdx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (int64_t c = 0; c < n; c += 16) {
    const int64_t len = (n - c < 16 ? n - c : 16);
    const auto in = static_cast<__mmask16>(len == 16 ? 0xFFFFu : (1u << len) - 1);
    const __m512i v = pair(c, in);
    const auto out = static_cast<__mmask32>(len == 16 ? 0xFFFFFFFFu : (1u << (2 * len)) - 1);
    _mm512_mask_storeu_epi16(dst + 2 * c, out, _mm512_permutexvar_epi16(idx, v));
  }
}

// Two f32 rows a, b (b null: zeros) rounded to bf16 in hardware and interleaved.
inline void interleave_bf16(uint16_t* dst, const float* a, const float* b, int64_t n) {
  interleave(dst, n, [&](int64_t c, __mmask16 in) {
    const __m512 lo = _mm512_maskz_loadu_ps(in, a + c),
                 hi = b ? _mm512_maskz_loadu_ps(in, b + c) : _mm512_setzero_ps();
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // [lo x 16, hi x 16]
  });
}

// Two rows already in bf16 interleaved as they are.
inline void interleave_u16(uint16_t* dst, const uint16_t* a, const uint16_t* b, int64_t n) {
  interleave(dst, n, [&](int64_t c, __mmask16 in) {
    const __m256i lo = _mm256_maskz_loadu_epi16(in, a + c),
                  hi = b ? _mm256_maskz_loadu_epi16(in, b + c) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  });
}

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
  static T query(const TensorIn& q, int64_t i) {
    const uint16_t* h = q.bf16();
    return h ? h[i] : vm::bf16_round(static_cast<const float*>(q.data)[i]);
  }
  // Kb [cols][Dp] (a zero past Dh), Vb in pairs of keys [cols/2][Dh][2]: an f32 K or V rounded
  // (K rows by to_bf16_n, V in hardware), a bf16 one moved.
  static void block(T* Kb, T* Vb, const TensorIn& K, const TensorIn& V, int64_t ld, int64_t cols,
                    int64_t Dh, int64_t Dp) {
    const float *kf = K.f32(), *vf = V.f32();
    const uint16_t *kh = K.bf16(), *vh = V.bf16();
    for (int64_t j = 0; j < cols; ++j) {
      if (kh)
        vm::copy_row(Kb + j * Dp, kh + j * ld, Dh * static_cast<int64_t>(sizeof(T)));
      else
        vm::to_bf16_n(Kb + j * Dp, kf + j * ld, Dh);
      if (Dp > Dh) Kb[j * Dp + Dh] = 0;
    }
    for (int64_t j = 0; j < cols; j += 2) {
      const bool pair = j + 1 < cols;
      if (vh)
        interleave_u16(Vb + j * Dh, vh + j * ld, pair ? vh + (j + 1) * ld : nullptr, Dh);
      else
        interleave_bf16(Vb + j * Dh, vf + j * ld, pair ? vf + (j + 1) * ld : nullptr, Dh);
    }
  }
  // A strip's weights St [cols][32] rounded into pairs of keys, Pt [cols/2][32][2].
  static const T* weights(T* Pt, const float* St, int64_t cols) {
    constexpr int64_t kLanes = 32;
    for (int64_t j = 0; j < cols; j += 2)
      for (int h = 0; h < 2; ++h)
        interleave_bf16(Pt + j * kLanes + 32 * h, St + j * kLanes + 16 * h,
                        j + 1 < cols ? St + (j + 1) * kLanes + 16 * h : nullptr, 16);
    return Pt;
  }
};
#endif

}  // namespace

bool has_bf16() {
#if defined(__AVX512BF16__)
  return true;
#else
  return false;
#endif
}

int64_t work_floats(int64_t rows, int64_t Dh, int64_t kb) {
  const int64_t f = Layout<Avx512, F32<Avx512>>::floats(rows, Dh, kb);
#if defined(__AVX512BF16__)
  const int64_t h = Layout<Avx512, BF16>::floats(rows, Dh, kb);
  return f > h ? f : h;
#else
  return f;
#endif
}

void attend_head(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
                 int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale,
                 float* work) {
#if defined(__AVX512BF16__)
  if (operands_of(in) == Operands::bf16)
    return attend<Avx512, BF16>(ctx, ldc, in, key_mask, rows, keys, Dh, kb, first_query, scale,
                                work);
#endif
  attend<Avx512, F32<Avx512>>(ctx, ldc, in, key_mask, rows, keys, Dh, kb, first_query, scale, work);
}

#endif

}  // namespace lf::attn_block::LF_ISA_NS
