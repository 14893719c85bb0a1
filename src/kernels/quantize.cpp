#include "kernels/quantize.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/matmul.h"
#include "kernels/vec_math.h"

namespace lf {

namespace {

// One row: the plain loops vectorise (nearbyint rounds half to even under the default
// rounding mode; -fno-math-errno lets it vectorise). T int8_t stores q, uint8_t q + 128.
template <typename T>
void quantize_row(T* q, float* scale, const float* x, int64_t n, int qmax) {
  constexpr int32_t zero = std::is_same_v<T, uint8_t> ? 128 : 0;
  // max |x| and whether any value is NaN or infinite, in sixteen independent lanes (a max and
  // an or: exact in any order, so they vectorise; a running float sum or max over one
  // accumulator did not, and was a tenth of an int8 layer's time).
  constexpr int kLanes = 16;
  float lane_max[kLanes] = {};
  int lane_bad[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const float a = std::fabs(x[i + l]);
      lane_max[l] = std::max(lane_max[l], a);
      lane_bad[l] |= !(a <= std::numeric_limits<float>::max());
    }
  }
  for (; i < n; ++i) {
    const float a = std::fabs(x[i]);
    lane_max[0] = std::max(lane_max[0], a);
    lane_bad[0] |= !(a <= std::numeric_limits<float>::max());
  }
  float amax = 0.f;
  int bad = 0;
  for (int l = 0; l < kLanes; ++l) {
    amax = std::max(amax, lane_max[l]);
    bad |= lane_bad[l];
  }
  if (bad) {
    for (int64_t i = 0; i < n; ++i) q[i] = static_cast<T>(zero);
    *scale = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (amax == 0.f) {
    for (int64_t i = 0; i < n; ++i) q[i] = static_cast<T>(zero);
    *scale = 0.f;
    return;
  }
  const float inv = static_cast<float>(qmax) / amax;
  const float lim = static_cast<float>(qmax);
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::min(lim, std::max(-lim, std::nearbyint(x[i] * inv)));
    q[i] = static_cast<T>(static_cast<int32_t>(v) + zero);
  }
  *scale = amax / static_cast<float>(qmax);
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
// (accumulate). bias and off are never null here.
inline void dequantize_row(float* o, const int32_t* a, int64_t N, float rs, const float* cs,
                           const int32_t* off, const float* bias, DequantOp op) {
  if (op == DequantOp::accumulate) {
    for (int64_t n = 0; n < N; ++n)
      o[n] += static_cast<float>(a[n] - off[n]) * (rs * cs[n]) + bias[n];
    return;
  }
  for (int64_t n = 0; n < N; ++n) o[n] = static_cast<float>(a[n] - off[n]) * (rs * cs[n]) + bias[n];
  if (op == DequantOp::gelu) vm::gelu_fast_n(o, o, N);
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
