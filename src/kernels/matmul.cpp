#include "kernels/matmul.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/dnnl_util.h"
#include "linformer/error.h"

namespace lf {

namespace {

inline uint16_t bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void to_bf16_row(uint16_t* d, const float* s, int64_t n) {
  int64_t c = 0;
#if defined(__AVX512BF16__)
  for (; c + 32 <= n; c += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + c + 16), _mm512_loadu_ps(s + c));
    _mm512_storeu_si512(d + c, reinterpret_cast<const __m512i&>(v));
  }
#endif
  for (; c < n; ++c) d[c] = bf16_round(s[c]);
}

}  // namespace

void to_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t cols, int64_t ld) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) to_bf16_row(dst + r * cols, src + r * ld, cols);
               });
}

const uint16_t* round_bf16(uint16_t* dst, const float* src, int64_t n) {
  PhaseScope ps(Phase::matmul);
  parallel_for(0, n, 16384,
               [&](int64_t i0, int64_t i1) { to_bf16_row(dst + i0, src + i0, i1 - i0); });
  return dst;
}

const dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

namespace {

// A bf16 product's shape: everything its oneDNN primitive depends on (the inputs are copied
// densely, so their leading dimensions are not part of it).
using Bf16Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, float, float>;

struct Bf16Product {
  dnnl::memory::desc a, b, c;
  dnnl::matmul prim;
};

// The primitive for a shape, built on first use; one cache per thread (primitives are not
// shared between threads that may run them at once).
const Bf16Product& bf16_product(const Bf16Key& key) {
  thread_local std::map<Bf16Key, Bf16Product> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using dt = dnnl::memory::data_type;
  const auto [ta, tb, M, N, K, ldc, alpha, beta] = key;
  // Logical op(A) is M x K: strides {K, 1} for plain storage, {1, M} for the transposed one.
  dnnl::memory::desc a({M, K}, dt::bf16, ta ? dnnl::memory::dims{1, M} : dnnl::memory::dims{K, 1});
  dnnl::memory::desc b({K, N}, dt::bf16, tb ? dnnl::memory::dims{1, K} : dnnl::memory::dims{N, 1});
  dnnl::memory::desc c({M, N}, dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.f) attr.set_output_scales(0, {alpha});
  if (beta != 0.f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
  return cache.emplace(key, Bf16Product{a, b, c, dnnl::matmul(pd)}).first->second;
}

// C = alpha op(A) op(B) + beta C with bf16 inputs through a cached oneDNN matmul primitive;
// operands not given rounded in `pre` are rounded into per-thread buffers.
void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const Bf16Inputs& pre) {
  thread_local Buffer<uint16_t> abuf, bbuf;
  thread_local dnnl::stream strm(cpu_engine());
  const uint16_t* a = pre.a;
  const uint16_t* b = pre.b;
  if (!a) {
    const int64_t ar = ta ? K : M, ac = ta ? M : K;  // stored shape of A
    if (abuf.size() < static_cast<size_t>(ar * ac)) abuf.resize(ar * ac);
    to_bf16(abuf.data(), A, ar, ac, lda);
    a = abuf.data();
  }
  if (!b) {
    const int64_t br = tb ? N : K, bc = tb ? K : N;  // stored shape of B
    if (bbuf.size() < static_cast<size_t>(br * bc)) bbuf.resize(br * bc);
    to_bf16(bbuf.data(), B, br, bc, ldb);
    b = bbuf.data();
  }
  const Bf16Product& p = bf16_product(Bf16Key{ta, tb, M, N, K, ldc, alpha, beta});
  dnnl::memory ma(p.a, cpu_engine(), const_cast<uint16_t*>(a)),
      mb(p.b, cpu_engine(), const_cast<uint16_t*>(b)), mc(p.c, cpu_engine(), C);
  p.prim.execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  strm.wait();
}

}  // namespace

bool gemm_runs_bf16(ComputeType t, int64_t M, int64_t N, int64_t K) {
  return t == ComputeType::bf16 && M * N * K >= (int64_t{1} << 19);
}

void gemm(ComputeType t, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc, const Bf16Inputs& pre) {
  LF_DCHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  LF_DCHECK(lda >= std::max<int64_t>(1, trans_a ? M : K) &&
                ldb >= std::max<int64_t>(1, trans_b ? K : N) && ldc >= std::max<int64_t>(1, N),
            "gemm: leading dimension too small for M=", M, " N=", N, " K=", K, " (lda=", lda,
            " ldb=", ldb, " ldc=", ldc, ", trans_a=", trans_a, " trans_b=", trans_b, ")");
  LF_DCHECK(M == 0 || N == 0 || (C && (K == 0 || (A && B))), "gemm: null operand for M=", M,
            " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  PhaseScope ps(Phase::matmul, 2.0 * static_cast<double>(M) * static_cast<double>(N) * K);
  if (K == 0) {  // oneDNN rejects K = 0; the product is then just beta * C.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  if (gemm_runs_bf16(t, M, N, K)) {
    gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pre);
    return;
  }
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B,
                                ldb, beta, C, ldc);
  LF_CHECK(st == dnnl_success, "gemm: oneDNN sgemm failed (status ", static_cast<int>(st),
           ") for M=", M, " N=", N, " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc);
}

void gemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < K; ++p) {
        const float a = trans_a ? A[p * lda + i] : A[i * lda + p];
        const float b = trans_b ? B[j * ldb + p] : B[p * ldb + j];
        acc += static_cast<double>(a) * b;
      }
      float& c = C[i * ldc + j];
      c = static_cast<float>(alpha * acc + (beta == 0.f ? 0.0 : static_cast<double>(beta) * c));
    }
  }
}

}  // namespace lf
