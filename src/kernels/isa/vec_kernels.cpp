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
                 float* work);
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
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
// dropout_kernels.cpp
uint32_t dropout_keep32(uint64_t key, uint64_t j, uint32_t threshold);
void dropout_forward_n(float* out, const float* inp, int64_t n, uint64_t key, uint64_t j,
                       uint32_t threshold, float scale);
void dropout_backward_n(float* dinp, const float* dout, int64_t n, uint64_t key, uint64_t j,
                        uint32_t threshold, float scale, bool add);
void dropout_round_n(uint16_t* out16, const float* inp, float* g, int64_t n, uint64_t key,
                     uint64_t j, uint32_t threshold, float scale);
#define LF_DROPOUT(f) f
#else
#define LF_DROPOUT(f) nullptr
#endif

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
      LF_DROPOUT(dropout_keep32),
      LF_DROPOUT(dropout_forward_n),
      LF_DROPOUT(dropout_backward_n),
      LF_DROPOUT(dropout_round_n),
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
