// The one matrix-product entry point. Row-major:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// op(A) = A (M x K, leading dim lda) or A^T (A stored K x M); likewise for B.
#pragma once
#include <cstdint>

namespace lf {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc);

// Plain triple loop with double accumulation: the reference the tests compare against.
void gemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc);

}  // namespace lf
