// The row passes of LayerNorm, the residual sum and the embedding sum (kernels/ops.h),
// compiled once per instruction-set level (isa_kernels.h). Plain loops the level's flags
// vectorise (AVX-512 sixteen lanes, AVX2 eight, baseline SSE2 four); the row sums are
// accumulated in double, so the levels agree to float rounding, not bit for bit.
#include <cmath>
#include <cstdint>

#include "kernels/isa/simd_math.h"

namespace lf::isa::LF_ISA_NS {

void layernorm_rows(float* y, uint16_t* y16, float* mean, float* rstd, float* sum, const float* x,
                    const float* x2, const float* w, const float* b, int64_t rows, int64_t C,
                    float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    double s = 0.0;
    if (x2) {  // the residual sum first: a = x + x2, kept in sum
      const float* x2r = x2 + r * C;
      float* a = sum + r * C;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < C; ++i) {
        a[i] = xr[i] + x2r[i];
        s += a[i];
      }
      xr = a;
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < C; ++i) s += xr[i];
    }
    const float m = static_cast<float>(s / C);
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < C; ++i) {
      const float d = xr[i] - m;
      v += static_cast<double>(d) * d;
    }
    const float rs = static_cast<float>(1.0 / std::sqrt(v / C + eps));
    float* yr = y + r * C;
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
    if (y16) vm::to_bf16_n(y16 + r * C, yr, C);
    if (mean) mean[r] = m;
    if (rstd) rstd[r] = rs;
  }
}

void layernorm_backward_row(float* dx, float* pw, float* pb, const float* g, const float* x,
                            const float* w, float m, float rs, int64_t C, bool add) {
  double sum_g = 0.0, sum_gx = 0.0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
  for (int64_t i = 0; i < C; ++i) {
    const float xhat = (x[i] - m) * rs;
    const float gw = g[i] * w[i];
    sum_g += gw;
    sum_gx += static_cast<double>(gw) * xhat;
    pw[i] += xhat * g[i];
    pb[i] += g[i];
  }
  const float mg = static_cast<float>(sum_g / C), mgx = static_cast<float>(sum_gx / C);
#pragma omp simd
  for (int64_t i = 0; i < C; ++i) {
    const float xhat = (x[i] - m) * rs;
    dx[i] = (add ? dx[i] : 0.f) + rs * (g[i] * w[i] - mg - xhat * mgx);
  }
}

void add3_n(float* y, const float* a, const float* b, const float* c, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i] + c[i];
}

void add_n(float* acc, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
}

}  // namespace lf::isa::LF_ISA_NS
