#include "kernels/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include "core/error.h"

namespace lf {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // oneDNN rejects K = 0; the product is then just beta * C.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda,
                                B, ldb, beta, C, ldc);
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
