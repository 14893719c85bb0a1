// Symmetric int8 quantization for the int8 products (docs/int8.md): a row x of n values is
// stored as q = round(x / s), rounded half to even, with one scale s = max|x| / qmax per row:
// per token for activations (each sequence's result independent of its batch), per output
// channel for weights. qmax is 127, or 63 for weights on CPUs without VNNI (int8_weight_max).
#pragma once
#include <cstdint>

namespace lf {

// Rows of x [rows, cols] (leading dimension ldx) quantized into q (leading dimension ldq),
// scales[r] = max|row r| / qmax. A zero row gets scale 0 and q = 0; a row holding a NaN or an
// infinity gets scale NaN and q = 0, so that any product it feeds is NaN, as in f32. Parallel
// over rows outside an OpenMP parallel region.
void quantize_rows(int8_t* q, int64_t ldq, float* scales, const float* x, int64_t rows,
                   int64_t cols, int64_t ldx, int qmax);

// The same stored as unsigned bytes, q + 128 (1 ... 255): the input form of the u8 x s8 dot
// products (VNNI's VPDPBUSD, AVX2's VPMADDUBSW) that oneDNN then uses without converting.
// The product's sum is then off by 128 * sum_k w[n, k] per column, which dequantize_rows
// takes back (col_offset).
void quantize_rows_u8(uint8_t* q, int64_t ldq, float* scales, const float* x, int64_t rows,
                      int64_t cols, int64_t ldx, int qmax);

// The largest magnitude int8 weights take: 127 where the CPU's int8 dot product is VNNI (it
// cannot overflow), 63 on AVX2 without VNNI, whose u8 x s8 pair sums saturate in 16 bits for
// larger weights (oneDNN shifts s8 inputs to u8: 254 * 63 * 2 < 32767).
int int8_weight_max();

// What follows an int8 product acc [rows, N] (int32, leading dimension N): for every row m and
// column n, v = (acc - col_offset[n]) * row_scale[m] * col_scale[n] + bias[n] (col_offset
// and bias may be null), then
//   store: out = v;  gelu: out = GELU(v) (vm::gelu_fast_n: within 1e-6 (1 + |v|) of the
//   erf form);  accumulate: out += v.
// out has leading dimension N. Parallel over rows outside a parallel region.
enum class DequantOp { store, gelu, accumulate };
void dequantize_rows(float* out, const int32_t* acc, int64_t rows, int64_t N,
                     const float* row_scale, const float* col_scale, const int32_t* col_offset,
                     const float* bias, DequantOp op);
// dequantize_rows with op gelu, each row then quantized as quantize_rows_u8 stores it with qmax
// 127 (q + 128 into q, leading dimension N, and its scale into scales[m]) instead of written
// in f32: the input of the next int8 product, from an L1-sized row buffer.
void dequantize_gelu_quantize_rows(uint8_t* q, float* scales, const int32_t* acc, int64_t rows,
                                   int64_t N, const float* row_scale, const float* col_scale,
                                   const int32_t* col_offset, const float* bias);

}  // namespace lf
