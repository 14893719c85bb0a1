// The scalar forms of the vectorised math (vec_math.h): exp, GELU, GELU' and bf16 rounding,
// and their constants. They are the specification the vector forms follow, and the tails of
// their loops. Included by the library (vec_math.h) and by each instruction-set level's
// kernel objects (src/kernels/isa/): each compiles them into an inline namespace of its own
// (LF_ISA_NS; the rest of the library: `core`), so that an out-of-line copy compiled with one
// level's flags can never stand in for another's at link time.
// exp: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, and the degree-7 Taylor
// polynomial of e^r (truncation error < 6e-9 relative); result ~2 ulp of std::exp.
// GELU: Phi(x) = 1 - erfc(z)/2 (x >= 0) or erfc(z)/2 (x < 0), z = |x|/sqrt(2), with
// erfc(z) = t exp(-z^2 + P(t)), t = 1/(1 + z/2) and P a degree-10 polynomial fitted here
// (least squares towards minimax on z in [0, 6]; fit error < 1e-9 in the exponent), so
// GELU is accurate to ~1e-7 relative in the range that matters.
// Non-finite inputs follow std::exp and the erfc form of GELU: NaN gives NaN, exp(+inf) =
// +inf, exp(-inf) = 0, GELU(+inf) = +inf, GELU(-inf) = NaN (-inf * 0), so a NaN anywhere
// upstream is never turned into a number.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace lf::vm {
#if defined(LF_ISA_NS)
inline namespace LF_ISA_NS {
#else
inline namespace core {
#endif

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;         // exactly representable high part of ln 2
constexpr float kLn2Lo = -2.12194440e-4f;      // ln 2 - kLn2Hi
constexpr float kExpMax = 88.72283935546875f;  // above: +inf (ln FLT_MAX, rounded up)
constexpr float kExpMin = -87.3365478515625f;  // below: result flushed to 0
// Taylor coefficients 1/k!, k = 7 .. 0.
constexpr float kE7 = 1.f / 5040.f, kE6 = 1.f / 720.f, kE5 = 1.f / 120.f, kE4 = 1.f / 24.f,
                kE3 = 1.f / 6.f, kE2 = 0.5f;

// erfc exponent polynomial P(t), degree 10, coefficients c0 .. c10.
constexpr float kErfcP[11] = {-1.265643930e+00f, 1.003207701e+00f,  3.404699268e-01f,
                              2.997266029e-01f,  -9.587036304e-01f, 2.213325609e+00f,
                              -4.365678155e+00f, 5.047115709e+00f,  -3.302974209e+00f,
                              1.161873965e+00f,  -1.727195901e-01f};

inline float exp_scalar(float x) {
  if (std::isnan(x)) return x;        // NaN propagates (never hidden as 0)
  if (x < kExpMin) return 0.f;        // also -inf (masked entries)
  if (x > kExpMax) return HUGE_VALF;  // overflows to +inf, as std::exp
  const float n = std::nearbyint(x * kLog2e);
  const float r = std::fma(n, -kLn2Lo, std::fma(n, -kLn2Hi, x));
  float p = kE7;
  p = std::fma(p, r, kE6);
  p = std::fma(p, r, kE5);
  p = std::fma(p, r, kE4);
  p = std::fma(p, r, kE3);
  p = std::fma(p, r, kE2);
  p = std::fma(p, r, 1.f);
  p = std::fma(p, r, 1.f);
  return std::ldexp(p, static_cast<int>(n));
}

// Standard normal CDF Phi(x) via the fitted erfc.
inline float phi_scalar(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  if (z > 10.f) return x > 0 ? 1.f : 0.f;
  const float t = 1.f / (1.f + 0.5f * z);
  float p = kErfcP[10];
  for (int i = 9; i >= 0; --i) p = std::fma(p, t, kErfcP[i]);
  const float e = t * exp_scalar(p - z * z);
  return x >= 0 ? 1.f - 0.5f * e : 0.5f * e;
}

inline float gelu_scalar(float x) { return x * phi_scalar(x); }

// A cheaper GELU for int8 inference's epilogue (whose inputs carry quantization error ~1e-2):
// erf(z) = z P(z^2) / Q(z^2) for |z| <= kErfRatClamp (beyond, erf rounds to +-1 in float),
// fitted here (weighted least squares towards minimax): absolute error < 5e-8 in exact
// arithmetic, < 4e-7 evaluated in float, so GELU is within 1e-6 (1 + |x|) of the exact form.
// Phi is 0 below -kErfRatClamp sqrt 2. No exp: about a third of gelu_n's time (AVX-512).
// NaN and +-inf give what gelu_n gives.
constexpr float kErfRatClamp = 3.92f;
constexpr float kErfRatP[7] = {
    1.1283787488937378f,     0.206168532371521f,      0.05140499770641327f,  0.003975231200456619f,
    0.00014904001727700233f, -1.994442527575302e-06f, 1.991908149534538e-08f};
constexpr float kErfRatQ[5] = {1.f, 0.5160409212112427f, 0.11758742481470108f,
                               0.014894099906086922f, 0.0010246775345876813f};

inline float gelu_fast_scalar(float x) {
  float z = x * 0.70710678118654752f;
  if (std::isnan(z)) return z;
  if (z <= -kErfRatClamp) return x * 0.f;  // Phi = 0 (so GELU(-inf) is NaN, as gelu_n's)
  z = std::min(z, kErfRatClamp);
  const float s = z * z;
  float p = kErfRatP[6], q = kErfRatQ[4];
  for (int i = 5; i >= 0; --i) p = std::fma(p, s, kErfRatP[i]);
  for (int i = 3; i >= 0; --i) q = std::fma(q, s, kErfRatQ[i]);
  return x * std::fma(0.5f, z * p / q, 0.5f);
}

constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1/sqrt(2 pi)

// GELU'(x) = Phi(x) + x phi(x), phi the standard normal density.
inline float gelu_grad_scalar(float x) {
  return phi_scalar(x) + x * kInvSqrt2Pi * exp_scalar(-0.5f * x * x);
}

// Round to nearest even f32 -> bf16 (the high 16 bits), NaN kept a NaN.
inline uint16_t bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // inline namespace
}  // namespace lf::vm
