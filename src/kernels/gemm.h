// The one matrix-product entry point. Row-major:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// op(A) = A (M x K, leading dim lda) or A^T (A stored K x M); likewise for B.
#pragma once
#include <cstdint>

namespace lf {

// Precision of the matrix products. bf16: inputs rounded to bfloat16 (AVX512-BF16 through
// oneDNN), products accumulated and written in f32 -- mixed precision with f32 master weights.
// Small products (under ~1 MFLOP) stay f32, where conversion would cost more than it saves.
enum class GemmPrecision { f32, bf16 };
void set_gemm_precision(GemmPrecision p);
GemmPrecision gemm_precision();

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc);

// Plain triple loop with double accumulation: the reference the tests compare against.
void gemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc);

}  // namespace lf
