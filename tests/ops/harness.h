// The op test harness, in the spirit of ggml's test-backend-ops: one table of cases, one or
// more per kernel and precision, each checked by the runner (harness.cpp) against
//   - a naive double-precision formulation written in the case (plain loops, independent of
//     the code under test), within the precision's tolerance below;
//   - where the kernel has a backward: central finite differences of that double reference
//     (L = sum(r * out), r fixed and random), within the precision's gradient tolerance; that
//     backward adds into its gradients and, for the inputs it can overwrite, that
//     GradInto::overwrite ignores what the buffer held;
//   - with LF_OPS_PERF=1: timed on larger shapes, printed as a table (asserts nothing).
// Kernels are called through the case's lambdas only, so that a signature change touches one
// place. Adding a kernel: add a maker to the family's list (cases_*.cpp).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "linformer/compute_type.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf::ops {

// Tolerances, relative Frobenius error against the double reference.
// f32: ~1e-7 per operation; sums of up to a few hundred terms stay below 1e-6.
inline constexpr double kTolF32 = 1e-5;
// Products with bf16 inputs (8 significant bits, relative error <= 2^-9 per input) and f32
// accumulation: a sum of random-sign products keeps relative error of order 2^-9 = 2e-3.
// Attention chains three products and a softmax (2e-2). An f32 result (error ~1e-7) is told
// apart by min_err.
inline constexpr double kTolBf16 = 1e-2, kTolBf16Attention = 2e-2;
// Our own rounding kernels (bf16 outputs): the reference rounds to nearest even as well, so
// only elements whose f32 and double values straddle a rounding boundary differ (by one bf16
// step, ~4e-3 of that element: a few dozen of ten thousand give ~2e-4); rounding the other
// way (truncation) puts half of the elements a step off (~2e-3).
inline constexpr double kTolBf16Rounded = 5e-4;
// Gradients against central differences of the double reference (h = 1e-3: truncation error
// ~h^2 |f'''| / 6 ~ 1e-7 relative; the f32 backward's own rounding ~1e-6).
inline constexpr double kGradTolF32 = 1e-4, kGradTolBf16 = 3e-2;
// int8 products (packed weights only): weights to 7 or 8 bits per output channel, inputs to 8
// bits per row, int32 accumulation: each input carries a relative error up to 0.5/63 of its
// row's largest value, so a random-sign sum's relative error is of order 1e-2 at most. An
// f32 product (error ~1e-7) is told apart by min_err.
inline constexpr double kTolInt8 = 3e-2;

struct Input {
  std::string name;
  std::vector<float> v;
  bool diff = true;  // differentiated (false: masks, fixed operands, initial outputs)
};
using Inputs = std::vector<Input>;
using Grads = std::vector<std::vector<float>>;  // one per input, same sizes

struct OpCase {
  std::string name;  // kernel and variant
  ComputeType t = ComputeType::f32;
  bool needs_bf16_matmul = false;  // runs oneDNN bf16 products: skipped on CPUs without them
  std::string shape;               // for the perf table
  Inputs in;
  size_t out_size = 0;
  size_t out_diff = SIZE_MAX;   // leading outputs the backward differentiates (rest: none)
  double flops = 0, bytes = 0;  // per call, for the perf table (GFLOP/s, else GB/s)
  double tol = kTolF32;         // forward, relative Frobenius error
  double min_err = 0;           // > 0: the error must exceed it (the bf16 path was taken)
  double max_abs_tol = 0;       // > 0: also every |out - ref| <= max_abs_tol * max(1, max |ref|)
  bool zero_reference = false;  // the reference is all zeros by design: the error is absolute
  double grad_tol = kGradTolF32;
  double fd_h = 1e-3;          // finite-difference step
  size_t fd_entries = 48;      // entries checked per differentiated input
  std::vector<int> overwrite;  // inputs whose gradient GradInto::overwrite writes over
  bool writes_grad = false;    // backward writes its gradients (never adds)
  bool in_place = false;       // out may alias input 0 (same size)
  // Why the case cannot run here (this CPU, the active instruction-set level), or "": it runs.
  // Beside needs_bf16_matmul, which the runner checks itself.
  std::function<std::string()> unavailable;
  // The case's own element rule, checked after the relative error: what is wrong, or "".
  std::function<std::string(const Inputs&, const std::vector<float>& out,
                            const std::vector<double>& ref)>
      check;
  // The kernel under test: out [out_size] from the inputs (out starts as NaN).
  std::function<void(const Inputs&, float* out)> run;
  // The naive formulation, in double.
  std::function<void(const Inputs&, double* out)> reference;
  // The kernel's backward from dout [out_size] into g (one per input; only those with
  // diff = true are read), adding or overwriting as `into` says. Null: forward only.
  std::function<void(const Inputs&, const float* dout, Grads& g, GradInto into)> backward;
};
inline void PrintTo(const OpCase* c, std::ostream* os) { *os << c->name; }

// A case at test size (perf = false) or at the perf table's larger size.
using CaseMaker = std::function<OpCase(bool perf)>;

// The dtypes an op runs in: its case maker is called once per dtype of its list.
using Dtypes = std::vector<ComputeType>;
inline const Dtypes kF32Only = {ComputeType::f32}, kF32Bf16 = {ComputeType::f32, ComputeType::bf16},
                    kBf16Only = {ComputeType::bf16}, kInt8Only = {ComputeType::int8};
// Appends make(t, perf) for every t of `dtypes`.
inline void add_per_dtype(std::vector<CaseMaker>& v, const Dtypes& dtypes,
                          std::function<OpCase(ComputeType, bool)> make) {
  for (ComputeType t : dtypes) v.push_back([=](bool perf) { return make(t, perf); });
}

// The case lists, one per kernel family.
std::vector<CaseMaker> product_cases();          // cases_gemm.cpp
std::vector<CaseMaker> linear_cases();           // cases_linear.cpp
std::vector<CaseMaker> row_cases();              // cases_rows.cpp
std::vector<CaseMaker> dropout_cases();          // cases_dropout.cpp
std::vector<CaseMaker> attention_cases();        // cases_attention.cpp
std::vector<CaseMaker> projection_cases();       // cases_projection.cpp
std::vector<CaseMaker> attention_block_cases();  // cases_attention_block.cpp
std::vector<CaseMaker> int8_cases();             // cases_int8.cpp

// Sets the precision and its tolerances; matmul: the kernel runs oneDNN bf16 products.
inline void set_precision(OpCase& c, ComputeType t, bool matmul = true) {
  c.t = t;
  if (t == ComputeType::int8) {
    c.tol = kTolInt8;
    c.min_err = 1e-5;
    return;
  }
  if (t != ComputeType::bf16) return;
  c.needs_bf16_matmul = matmul;
  c.tol = matmul ? kTolBf16 : kTolBf16Rounded;
  c.grad_tol = kGradTolBf16;
}
// A case with its inputs and output size; the caller adds the kernel and its reference.
inline OpCase new_case(const std::string& name, ComputeType t, bool matmul,
                       const std::string& shape, Inputs in, size_t out_size) {
  OpCase c;
  c.name = name;
  set_precision(c, t, matmul);
  c.shape = shape;
  c.in = std::move(in);
  c.out_size = out_size;
  return c;
}
// "2x3x4"
inline std::string dims(std::initializer_list<int64_t> v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}
inline const char* prec_name(ComputeType t) { return compute_type_name(t); }

// ---- Inputs

// Uniform with unit variance (times scale): bounded, and cheap enough that building every
// case at test start-up (each test process registers them all) takes a few milliseconds.
inline std::vector<float> rnd(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * 3.4641016f * (rng_uniform(seed, 7, i) - 0.5f);
  return v;
}
// A padding mask [B, N]: row b keeps its first N - b*step positions.
inline std::vector<float> pad_mask(int64_t B, int64_t N, int64_t step) {
  std::vector<float> m(B * N);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < N; ++t) m[b * N + t] = t < N - b * step ? 1.f : 0.f;
  return m;
}
inline const float* ptr(const Inputs& in, size_t i) { return in[i].v.data(); }

// ---- bf16, written out here from the format (independent of kernels/vec_math.h)

inline uint16_t bf16_bits(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float widen(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline double rne(double x) { return widen(bf16_bits(static_cast<float>(x))); }
inline std::vector<uint16_t> to16(const float* v, size_t n) {
  std::vector<uint16_t> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = bf16_bits(v[i]);
  return r;
}
inline void widen_n(float* out, const uint16_t* h, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = widen(h[i]);
}

// ---- Naive references

inline double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_grad_ref(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

// The dropout mask as ops.h specifies it: element `index` is kept iff 16 bits drawn for it from
// (seed, stream) are >= round(p * 65536); the 64-bit draw j serves indices 4j .. 4j+3.
inline bool dropout_keep(float p, uint64_t seed, uint64_t stream, int64_t index) {
  const uint32_t thr = static_cast<uint32_t>(std::lround(double(p) * 65536.0));
  const uint64_t j = static_cast<uint64_t>(index);
  return ((rng_bits(seed, stream, j >> 2) >> (16 * (j & 3))) & 0xFFFFu) >= thr;
}

// C = alpha op(A) op(B) + beta C0 with row-major operands; C0 null: beta ignored.
// (naive_gemm below is the same in float, for tests outside this harness.)
inline void ref_matmul(double* C, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, double beta,
                       const float* C0, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < K; ++p)
        s += double(ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
      C[i * ldc + j] = alpha * s + (C0 ? beta * C0[i * ldc + j] : 0.0);
    }
}

// ref_matmul written into a float C (beta = 0: C is not read): the reference of the tests that
// compare a kernel with a plain product outside the op cases.
inline void naive_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                       float* C, int64_t ldc) {
  std::vector<double> c(M * ldc);
  ref_matmul(c.data(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, beta != 0.f ? C : nullptr,
             ldc);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = static_cast<float>(c[i * ldc + j]);
}

// y = x W^T + b: x [rows, in], W [out, in], b [out] or null.
inline void ref_linear(double* y, const float* x, const float* W, const float* b, int64_t rows,
                       int64_t in, int64_t out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? b[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += double(x[r * in + i]) * W[o * in + i];
      y[r * out + o] = s;
    }
}

// Zeroed gradients shaped like the inputs.
inline Grads zero_grads(const Inputs& in) {
  Grads g;
  for (const Input& i : in) g.emplace_back(i.v.size(), 0.f);
  return g;
}

}  // namespace lf::ops
