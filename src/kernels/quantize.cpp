#include "kernels/quantize.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/isa_kernels.h"
#include "kernels/matmul.h"

namespace lf {

namespace {

// One row, on the active instruction-set level (isa/quantize_kernels.cpp: the loops vectorise
// for the level's width; a running float sum or max over one accumulator did not, and was a
// tenth of an int8 layer's time).
inline void quantize_row(int8_t* q, float* scale, const float* x, int64_t n, int qmax) {
  isa::kernels().quantize_row_s8(q, scale, x, n, qmax);
}
inline void quantize_row(uint8_t* q, float* scale, const float* x, int64_t n, int qmax) {
  isa::kernels().quantize_row_u8(q, scale, x, n, qmax);
}

template <typename T>
void quantize_rows_as(T* q, int64_t ldq, float* scales, const float* x, int64_t rows,
                      int64_t cols, int64_t ldx, int qmax) {
  parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   quantize_row(q + r * ldq, scales + r, x + r * ldx, cols, qmax);
               });
}

}  // namespace

void quantize_rows(int8_t* q, int64_t ldq, float* scales, const float* x, int64_t rows,
                   int64_t cols, int64_t ldx, int qmax) {
  quantize_rows_as(q, ldq, scales, x, rows, cols, ldx, qmax);
}
void quantize_rows_u8(uint8_t* q, int64_t ldq, float* scales, const float* x, int64_t rows,
                      int64_t cols, int64_t ldx, int qmax) {
  quantize_rows_as(q, ldq, scales, x, rows, cols, ldx, qmax);
}

int int8_weight_max() {
  static const int qmax = int8_vnni() ? 127 : 63;
  return qmax;
}

namespace {

// One row of dequantize_rows: v = (a - off) * rs * cs + bias into o (store, gelu) or onto it
// (accumulate), on the active instruction-set level. bias and off are never null here.
inline void dequantize_row(float* o, const int32_t* a, int64_t N, float rs, const float* cs,
                           const int32_t* off, const float* bias, DequantOp op) {
  isa::kernels().dequantize_row(o, a, N, rs, cs, off, bias,
                                op == DequantOp::store ? 0 : op == DequantOp::gelu ? 1 : 2);
}

// Zeros standing in for a null bias or column offset of N columns.
template <typename T>
const T* zeros_if_null(const T* p, int64_t N) {
  if (p) return p;
  thread_local std::vector<T> zeros;
  if (static_cast<int64_t>(zeros.size()) < N) zeros.assign(static_cast<size_t>(N), T{});
  return zeros.data();
}

}  // namespace

void dequantize_rows(float* out, const int32_t* acc, int64_t rows, int64_t N,
                     const float* row_scale, const float* col_scale, const int32_t* col_offset,
                     const float* bias, DequantOp op) {
  bias = zeros_if_null(bias, N);
  col_offset = zeros_if_null(col_offset, N);
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t m = r0; m < r1; ++m)
                   dequantize_row(out + m * N, acc + m * N, N, row_scale[m], col_scale,
                                  col_offset, bias, op);
               });
}

void dequantize_gelu_quantize_rows(uint8_t* q, float* scales, const int32_t* acc, int64_t rows,
                                   int64_t N, const float* row_scale, const float* col_scale,
                                   const int32_t* col_offset, const float* bias) {
  bias = zeros_if_null(bias, N);
  col_offset = zeros_if_null(col_offset, N);
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)),
               [&](int64_t r0, int64_t r1) {
                 // Each row's f32 values live only in this row buffer (L1), never in memory.
                 thread_local std::vector<float> row;
                 if (static_cast<int64_t>(row.size()) < N) row.resize(static_cast<size_t>(N));
                 for (int64_t m = r0; m < r1; ++m) {
                   dequantize_row(row.data(), acc + m * N, N, row_scale[m], col_scale, col_offset,
                                  bias, DequantOp::gelu);
                   quantize_row(q + m * N, scales + m, row.data(), N, 127);
                 }
               });
}

}  // namespace lf
