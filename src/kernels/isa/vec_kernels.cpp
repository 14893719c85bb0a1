// One instruction-set level's kernel table (isa_kernels.h): this file is compiled once per
// level, with the level's flags and LF_ISA_NS set to its name (CMakeLists.txt), and each
// entry is the vectorised form simd_math.h (or attention_block.cpp beside it) gives for those
// flags. Nothing here is compiled for the rest of the library.
#include <cstdint>
#include <cstring>

#include "kernels/attention_block.h"
#include "kernels/isa/simd_math.h"
#include "kernels/isa_kernels.h"

#if defined(LF_VM_AVX2) || defined(__AVX512F__)
namespace lf::attn_block::LF_ISA_NS {
bool has_bf16();
int64_t work_floats(int64_t rows, int64_t Dh, int64_t kb);
void attend_head(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
                 int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale,
                 float* work, Operands o);
}  // namespace lf::attn_block::LF_ISA_NS
#endif

namespace lf::isa::LF_ISA_NS {
// quantize_kernels.cpp
void quantize_row_s8(int8_t* q, float* scale, const float* x, int64_t n, int qmax);
void quantize_row_u8(uint8_t* q, float* scale, const float* x, int64_t n, int qmax);
void dequantize_row(float* o, const int32_t* a, int64_t N, float rs, const float* cs,
                    const int32_t* off, const float* bias, int op);
// row_kernels.cpp
void layernorm_rows(float* y, uint16_t* y16, float* mean, float* rstd, float* sum, const float* x,
                    const float* x2, const float* w, const float* b, int64_t rows, int64_t C,
                    float eps);
void layernorm_backward_row(float* dx, float* pw, float* pb, const float* g, const float* x,
                            const float* w, float m, float rs, int64_t C, bool add);
void add3_n(float* y, const float* a, const float* b, const float* c, int64_t n);
void add_n(float* acc, const float* x, int64_t n);

namespace {

#define LF_STR2(x) #x
#define LF_STR(x) LF_STR2(x)

constexpr Level level_of(const char* name) {
  return name[0] == 'b'   ? Level::baseline
         : name[3] == '2' ? Level::avx2
         : name[6] == 0   ? Level::avx512
                          : Level::avx512bf16;
}

void copy_rows(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows,
               int64_t row_bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (int64_t r = 0; r < rows; ++r) vm::copy_row(d + r * ldd, s + r * lds, row_bytes);
}

#if defined(__AVX512F__)
// Sixteen 16-bit table indices widened to 32-bit lanes, as the gathers take them.
inline __m512i indices16(const uint16_t* idx) {
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx)));
}
#endif

void lookup_u16(uint16_t* out, const uint16_t* idx, const uint16_t* table, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // Sixteen lookups per gather: 32 bits read at each 16-bit entry (the table's padding entry
  // keeps the last one in bounds), the low half kept.
  for (; i + 16 <= n; i += 16) {
    const __m512i v =
        _mm512_i32gather_epi32(indices16(idx + i), static_cast<const void*>(table), 2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(v));
  }
#endif
  for (; i < n; ++i) out[i] = table[idx[i]];
}

void mul_lookup_f32(float* buf, const uint16_t* idx, const float* table, int64_t n) {
  int64_t c = 0;
#if defined(__AVX512F__)
  for (; c + 16 <= n; c += 16)
    _mm512_storeu_ps(buf + c, _mm512_mul_ps(_mm512_loadu_ps(buf + c),
                                            _mm512_i32gather_ps(indices16(idx + c), table, 4)));
#endif
  for (; c < n; ++c) buf[c] *= table[idx[c]];
}

#if defined(__AVX512DQ__) && defined(__AVX512BW__)
// The eight SplitMix64 hashes of the groups from j / 4 at once (rng_bits_keyed's on 64-bit
// lanes), each lane's four 16-bit fields compared with the threshold.
uint32_t dropout_keep32(uint64_t key, uint64_t j, uint32_t threshold) {
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
#define LF_DROPOUT_KEEP32 dropout_keep32
#else
#define LF_DROPOUT_KEEP32 nullptr
#endif

#if defined(LF_VM_AVX2) || defined(__AVX512F__)
#define LF_ATTN_BF16 attn_block::LF_ISA_NS::has_bf16()
#define LF_ATTN_WORK attn_block::LF_ISA_NS::work_floats
#define LF_ATTN_HEAD attn_block::LF_ISA_NS::attend_head
#else
#define LF_ATTN_BF16 false
#define LF_ATTN_WORK nullptr
#define LF_ATTN_HEAD nullptr
#endif

}  // namespace

const Kernels& table() {
  static const Kernels k{
      level_of(LF_STR(LF_ISA_NS)),
      vm::exp_n,
      vm::gelu_n,
      vm::gelu_fast_n,
      vm::gelu_backward_n,
      vm::gelu_backward_inplace_n,
      vm::masked_scaled_max,
      vm::masked_scaled_shift,
      vm::exp_shifted_sum,
      copy_rows,
      vm::to_bf16_n,
      vm::from_bf16_n,
      vm::round_and_sum_row,
      lookup_u16,
      mul_lookup_f32,
      LF_DROPOUT_KEEP32,
      quantize_row_s8,
      quantize_row_u8,
      dequantize_row,
      layernorm_rows,
      layernorm_backward_row,
      add3_n,
      add_n,
      LF_ATTN_BF16,
      LF_ATTN_WORK,
      LF_ATTN_HEAD,
  };
  return k;
}

}  // namespace lf::isa::LF_ISA_NS
