// int8 inference's per-row passes (kernels/quantize.h), compiled once per instruction-set level
// (isa_kernels.h): quantizing a row (max |x|, then round(x / s)) and the epilogue of an int8
// product (dequantize, bias, GELU or accumulate). Plain loops the level's flags vectorise:
// AVX-512 sixteen lanes, AVX2 eight, baseline SSE2 four. SSE2 has no rounding instruction,
// where std::nearbyint would be a library call per element; the baseline level rounds with
// (y + 1.5 * 2^23) - 1.5 * 2^23 instead, which gives nearbyint's result (half to even) for
// |y| <= 2^22 (here |y| <= qmax), so every level stores the same q.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/isa/simd_math.h"

namespace lf::isa::LF_ISA_NS {

namespace {

inline float fmax0(float a, float b) { return a > b ? a : b; }

// One row: T int8_t stores q, uint8_t q + 128. max |x| and whether any value is NaN or
// infinite run in sixteen independent lanes (a max and an or: exact in any order, so they
// vectorise).
template <typename T>
void quantize_row(T* q, float* scale, const float* x, int64_t n, int qmax) {
  constexpr int32_t zero = std::is_same_v<T, uint8_t> ? 128 : 0;
  constexpr int kLanes = 16;
  float lane_max[kLanes] = {};
  int lane_bad[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const float a = std::fabs(x[i + l]);
      lane_max[l] = fmax0(lane_max[l], a);
      lane_bad[l] |= !(a <= std::numeric_limits<float>::max());
    }
  }
  for (; i < n; ++i) {
    const float a = std::fabs(x[i]);
    lane_max[0] = fmax0(lane_max[0], a);
    lane_bad[0] |= !(a <= std::numeric_limits<float>::max());
  }
  float amax = 0.f;
  int bad = 0;
  for (int l = 0; l < kLanes; ++l) {
    amax = fmax0(amax, lane_max[l]);
    bad |= lane_bad[l];
  }
  if (bad || amax == 0.f) {
    for (int64_t j = 0; j < n; ++j) q[j] = static_cast<T>(zero);
    *scale = bad ? std::numeric_limits<float>::quiet_NaN() : 0.f;
    return;
  }
  const float inv = static_cast<float>(qmax) / amax;
  const float lim = static_cast<float>(qmax);
#if defined(__SSE4_1__)
  for (int64_t j = 0; j < n; ++j) {
    float v = std::nearbyint(x[j] * inv);
    v = v < -lim ? -lim : v > lim ? lim : v;
    q[j] = static_cast<T>(static_cast<int32_t>(v) + zero);
  }
#else
  constexpr float kMagic = 12582912.f;
  for (int64_t j = 0; j < n; ++j) {
    const float y = x[j] * inv;
    float v = (y + kMagic) - kMagic;  // no FMA on this level: the product is rounded first
    v = v < -lim ? -lim : v > lim ? lim : v;
    q[j] = static_cast<T>(static_cast<int32_t>(v) + zero);
  }
#endif
  *scale = amax / static_cast<float>(qmax);
}

}  // namespace

void quantize_row_s8(int8_t* q, float* scale, const float* x, int64_t n, int qmax) {
  quantize_row(q, scale, x, n, qmax);
}
void quantize_row_u8(uint8_t* q, float* scale, const float* x, int64_t n, int qmax) {
  quantize_row(q, scale, x, n, qmax);
}

// v = (a - off) * rs * cs + bias into o (op 0 store, 1 gelu) or onto it (op 2 accumulate).
void dequantize_row(float* o, const int32_t* a, int64_t N, float rs, const float* cs,
                    const int32_t* off, const float* bias, int op) {
  if (op == 2) {
    for (int64_t n = 0; n < N; ++n)
      o[n] += static_cast<float>(a[n] - off[n]) * (rs * cs[n]) + bias[n];
    return;
  }
  for (int64_t n = 0; n < N; ++n) o[n] = static_cast<float>(a[n] - off[n]) * (rs * cs[n]) + bias[n];
  if (op == 1) vm::gelu_fast_n(o, o, N);
}

}  // namespace lf::isa::LF_ISA_NS
