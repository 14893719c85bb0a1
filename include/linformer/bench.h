// Helpers of the efficiency benchmark (`linformer bench`) and the kernel micro-benchmarks:
// model FLOP counts, memory sizing against a budget, process memory figures, sgemm peak.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "linformer/compute_type.h"
#include "linformer/config.h"

namespace lf {
class Model;

namespace bench {

// Matrix-product FLOPs (2 per multiply-add) of one encoder forward for one sequence of
// length n, following the engine's evaluation order (docs/model.md): the Q/K/V/output maps,
// the FFN, the attention products (scores and weighted values), and Linformer's sequence
// projections. Element-wise work (softmax, LayerNorm, GELU) and the embedding gather are
// not counted. Heads are excluded.
double encoder_flops(const Config& cfg, int64_t n);
// The same for one layer (layer index l).
double layer_flops(const Config& cfg, int64_t l, int64_t n);

// Bytes the engine accounts for a forward pass of (B, n) in inference: parameters (and
// gradients if allocated) + packed inference weights + activations and scratch
// (Model::forward_bytes) + the input ids.
size_t engine_bytes(const Model& m, int64_t B, int64_t n);
// Largest B <= cap with engine_bytes(m, B, n) <= budget (0 if batch 1 does not fit).
int64_t max_batch(const Model& m, int64_t n, size_t budget, int64_t cap = int64_t(1) << 24);

// Process memory from /proc/self/status: VmHWM (peak resident set, a process-wide
// high-water mark) and VmRSS, in bytes; 0 when unavailable.
size_t peak_rss_bytes();
size_t current_rss_bytes();
// MemTotal from /proc/meminfo, in bytes (0 when unavailable).
size_t mem_total_bytes();

// GFLOP/s of C[M,N] = A[M,K] B[N,K]^T (the engine's linear-layer form), best of `reps` after
// one warm-up, on all threads: an sgemm for f32; for bf16 the packed bf16 weight of
// inference (PackedLinear), input rounding included.
double matmul_gflops(ComputeType t, int64_t M, int64_t N, int64_t K, int reps = 5);

// Threads the engine's parallel regions run on (OpenMP's maximum: OMP_NUM_THREADS).
int threads();

// Seconds on a steady clock.
double now_seconds();

}  // namespace bench
}  // namespace lf
