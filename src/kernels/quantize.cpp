#include "kernels/quantize.h"

#include <cmath>

#include "core/parallel.h"
#include "kernels/vec_math.h"

namespace lf {

bool int8_vnni();  // kernels/matmul.cpp: the CPU's int8 dot product is VNNI

namespace {

// One row: the plain loops vectorise (nearbyint rounds half to even under the default
// rounding mode; -fno-math-errno lets it vectorise).
void quantize_row(int8_t* q, float* scale, const float* x, int64_t n, int qmax) {
  float amax = 0.f, poison = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    poison += x[i] * 0.f;  // NaN if any value is NaN or infinite
  }
  if (poison != 0.f || std::isnan(poison) || !std::isfinite(amax)) {
    for (int64_t i = 0; i < n; ++i) q[i] = 0;
    *scale = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (amax == 0.f) {
    for (int64_t i = 0; i < n; ++i) q[i] = 0;
    *scale = 0.f;
    return;
  }
  const float inv = static_cast<float>(qmax) / amax;
  const float lim = static_cast<float>(qmax);
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::min(lim, std::max(-lim, std::nearbyint(x[i] * inv)));
    q[i] = static_cast<int8_t>(static_cast<int32_t>(v));
  }
  *scale = amax / static_cast<float>(qmax);
}

}  // namespace

void quantize_rows(int8_t* q, int64_t ldq, float* scales, const float* x, int64_t rows,
                   int64_t cols, int64_t ldx, int qmax) {
  parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   quantize_row(q + r * ldq, scales + r, x + r * ldx, cols, qmax);
               });
}

int int8_weight_max() {
  static const int qmax = int8_vnni() ? 127 : 63;
  return qmax;
}

void dequantize_rows(float* out, const int32_t* acc, int64_t rows, int64_t N,
                     const float* row_scale, const float* col_scale, const float* bias,
                     DequantOp op) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t m = r0; m < r1; ++m) {
                   const int32_t* a = acc + m * N;
                   float* o = out + m * N;
                   const float rs = row_scale[m];
                   if (op == DequantOp::accumulate) {
                     if (bias)
                       for (int64_t n = 0; n < N; ++n)
                         o[n] += static_cast<float>(a[n]) * (rs * col_scale[n]) + bias[n];
                     else
                       for (int64_t n = 0; n < N; ++n)
                         o[n] += static_cast<float>(a[n]) * (rs * col_scale[n]);
                     continue;
                   }
                   if (bias)
                     for (int64_t n = 0; n < N; ++n)
                       o[n] = static_cast<float>(a[n]) * (rs * col_scale[n]) + bias[n];
                   else
                     for (int64_t n = 0; n < N; ++n)
                       o[n] = static_cast<float>(a[n]) * (rs * col_scale[n]);
                   if (op == DequantOp::gelu) vm::gelu_n(o, o, N);
                 }
               });
}

}  // namespace lf
