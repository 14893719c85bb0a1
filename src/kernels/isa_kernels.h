// The engine's own kernels for one instruction-set level, as a table of function pointers.
// Each level's table is built from the same sources (src/kernels/isa/) compiled with that
// level's flags, in objects of their own (CMakeLists.txt, LINFORMER_ISA_LEVELS); the rest of
// the library is compiled for the x86-64 baseline and calls the kernels through
// isa::kernels(), the table of the level chosen once at start-up (cpu_isa.h). Adding a kernel
// with a vector form: a pointer here, its function in isa/vec_kernels.cpp (or a file beside
// it), a line in that file's table, and a case in the op harness or test_vec_math.cpp, which
// run every level the CPU has.
#pragma once
#include <atomic>
#include <cstdint>

#include "kernels/attention_block.h"

namespace lf::isa {

// The levels, lowest first; each runs on every CPU that runs the next one.
//   baseline    x86-64 (SSE2): scalar or auto-vectorised code
//   avx2        AVX2 + FMA (x86-64-v3's vector part): 8-lane exp/GELU, the 16-query attention kernel
//   avx512      AVX-512 F, DQ, BW, VL, CD (x86-64-v4): 16 lanes, the 32-query attention
//               kernel, the dropout mask's vector hash and dropout kernels, gathers for the
//               bf16 GELU tables
//   avx512bf16  avx512 + AVX512-BF16: bf16 rounding in hardware, attention on bf16 operands
enum class Level : int { baseline = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3 };
constexpr int kLevels = 4;

struct Kernels {
  Level level;
  // y[i] = exp(x[i]), GELU(x[i]) (erf form), GELU within 1e-6 (1 + |x|) (rational erf) for n
  // elements; y may alias x (vec_math.h documents each).
  void (*exp_n)(float* y, const float* x, int64_t n);
  void (*gelu_n)(float* y, const float* x, int64_t n);
  void (*gelu_fast_n)(float* y, const float* x, int64_t n);
  // d[i] += g[i] GELU'(x[i]); d[i] *= GELU'(x[i]).
  void (*gelu_backward_n)(float* d, const float* x, const float* g, int64_t n);
  void (*gelu_backward_inplace_n)(float* d, const float* x, int64_t n);
  // Softmax building blocks over a row (vec_math.h).
  float (*masked_scaled_max)(const float* x, const float* mask, int64_t n, float scale);
  void (*masked_scaled_shift)(float* y, const float* x, const float* mask, int64_t n, float scale,
                              float shift);
  float (*exp_shifted_sum)(float* y, const float* x, const float* mask, int64_t n, float scale,
                           float shift);
  // rows rows of row_bytes bytes, ldd and lds bytes apart.
  void (*copy_rows)(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows,
                    int64_t row_bytes);
  void (*to_bf16_n)(uint16_t* d, const float* s, int64_t n);
  void (*from_bf16_n)(float* d, const uint16_t* s, int64_t n);
  // d16 = bf16(g), acc += g for one row of cols.
  void (*round_and_sum_row)(uint16_t* d16, float* acc, const float* g, int64_t cols);
  // out[i] = table[idx[i]] (table has one padding entry past its last index);
  // buf[i] *= table[idx[i]]: the bf16 GELU tables' lookups.
  void (*lookup_u16)(uint16_t* out, const uint16_t* idx, const uint16_t* table, int64_t n);
  void (*mul_lookup_f32)(float* buf, const uint16_t* idx, const float* table, int64_t n);
  // Bit k: whether dropout mask element j + k (j a multiple of 4) is kept, k < 32
  // (DropoutMask::keep32, dropout_mask.h); null where the level has no vector form.
  uint32_t (*dropout_keep32)(uint64_t key, uint64_t j, uint32_t threshold);
  // The dropout kernels of ops.h over n elements whose mask indices start at j (any j; key and
  // threshold DropoutMask's, threshold <= 0xFFFF), scale = 1 / (1 - p): out = keep ? inp *
  // scale : 0; dinp = keep ? base + dout * scale : base (base: dinp with add, else 0);
  // out16 = bf16_round(keep ? inp * scale : 0) and, g non-null, g = keep ? g * scale : 0.
  // The scalar loops' bits (ops_rows.cpp); null where the level has no vector form
  // (isa/dropout_kernels.cpp).
  void (*dropout_forward_n)(float* out, const float* inp, int64_t n, uint64_t key, uint64_t j,
                            uint32_t threshold, float scale);
  void (*dropout_backward_n)(float* dinp, const float* dout, int64_t n, uint64_t key, uint64_t j,
                             uint32_t threshold, float scale, bool add);
  void (*dropout_round_n)(uint16_t* out16, const float* inp, float* g, int64_t n, uint64_t key,
                          uint64_t j, uint32_t threshold, float scale);
  // int8 inference's row passes (quantize.h): one row quantized (T int8_t: q; uint8_t: q + 128)
  // with its scale; one row of an int8 product's epilogue (op 0 store, 1 GELU, 2 accumulate).
  void (*quantize_row_s8)(int8_t* q, float* scale, const float* x, int64_t n, int qmax);
  void (*quantize_row_u8)(uint8_t* q, float* scale, const float* x, int64_t n, int qmax);
  void (*dequantize_row)(float* o, const int32_t* a, int64_t N, float rs, const float* cs,
                         const int32_t* off, const float* bias, int op);
  // LayerNorm of rows rows of C (ops.h layernorm_forward): y, and y16 (or null) rounded to bf16,
  // mean/rstd per row (either null). x2 non-null: the residual sum = x + x2 first, written
  // to sum and normalised (add_layernorm_forward).
  void (*layernorm_rows)(float* y, uint16_t* y16, float* mean, float* rstd, float* sum,
                         const float* x, const float* x2, const float* w, const float* b,
                         int64_t rows, int64_t C, float eps);
  // One row of layernorm_backward: dx = (or += with add) the input gradient; pw, pb += the
  // row's share of the weight and bias gradients.
  void (*layernorm_backward_row)(float* dx, float* pw, float* pb, const float* g, const float* x,
                                 const float* w, float m, float rs, int64_t C, bool add);
  // y[i] = a[i] + b[i] + c[i] (the embedding sum); acc[i] += x[i] (bias gradients' sums).
  void (*add3_n)(float* y, const float* a, const float* b, const float* c, int64_t n);
  void (*add_n)(float* acc, const float* x, int64_t n);
  // Exact attention's streaming kernel (attention_block.h); attend_head null where the level
  // has none (baseline: the callers use gemm), attend_bf16 whether it takes bf16 operands.
  bool attend_bf16;
  int64_t (*attend_work_floats)(int64_t rows, int64_t Dh, int64_t kb);
  void (*attend_head)(float* ctx, int64_t ldc, const attn_block::HeadIn& in, const float* key_mask,
                      int64_t rows, int64_t keys, int64_t Dh, int64_t kb, int64_t first_query,
                      float scale, float* work);
};

// The active level's table: decided on first use (cpu_isa.cpp: the CPU's best level, or the
// one LINFORMER_ISA names, refused with lf::Error when the CPU lacks it).
extern std::atomic<const Kernels*> g_active;
const Kernels& init_active();
inline const Kernels& kernels() {
  const Kernels* k = g_active.load(std::memory_order_acquire);
  return k ? *k : init_active();
}

}  // namespace lf::isa
