// Helpers of the efficiency benchmark (`linformer bench`) and the kernel micro-benchmarks:
// model FLOP counts, memory sizing against a budget, process memory figures, sgemm peak, and
// the timed training steps of `linformer bench --train`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "linformer/compute_type.h"
#include "linformer/config.h"
#include "linformer/params.h"

namespace lf {
class Model;

namespace bench {

// ---- The attention configurations the benchmark compares ----
// Derived from the registry of attention kinds (src/layers/attention_path.h), so a kind added
// there is benchmarked without touching the tools.

// One way of running attention: every inference way of every kind, by name ("standard", the
// materialized layout that is the paper's baseline; "tiled"; "streaming" (the engine's default
// on AVX2 and AVX-512 builds, default_exact_attention());
// "linformer", which runs at each projected length k), in registry order.
struct AttentionChoice {
  std::string name;
  AttentionKind attention = AttentionKind::standard;
  ExactAttention exact = ExactAttention::tiled;
  bool projected = false;  // runs at a projected length k
  // Training runs it: the kind's own name (training ignores ExactAttention).
  bool trains() const;
};
const std::vector<AttentionChoice>& attention_choices();
std::vector<std::string> attention_choice_names(bool training_only = false);
// The choice named `name` (with `training`, one that trains); lf::Error listing the names
// when there is none.
const AttentionChoice& attention_choice(const std::string& name, bool training = false);
// The sharing and projection values the registry's projected kinds take, each once in
// registry order (the CLI's choices).
std::vector<std::string> sharing_values();
std::vector<std::string> projection_values();
// Sets cfg's attention to `choice`, with a projected kind's sharing and projection by name;
// lf::Error when no kind of the registry runs that combination.
void set_attention(Config& cfg, const AttentionChoice& choice, const std::string& sharing,
                   const std::string& projection);

// Every precision (ComputeType), in order: what the benchmarks run through and the CLI offers.
const std::vector<ComputeType>& precisions();

// Matrix-product FLOPs (2 per multiply-add) of one encoder forward for one sequence of
// length n, following the engine's evaluation order (docs/model.md): the Q/K/V/output maps,
// the FFN, the attention products (scores and weighted values), and Linformer's sequence
// projections. Element-wise work (softmax, LayerNorm, GELU) and the embedding gather are
// not counted. Heads are excluded.
double encoder_flops(const Config& cfg, int64_t n);
// The same for one layer (layer index l).
double layer_flops(const Config& cfg, int64_t l, int64_t n);

// Matrix-product FLOPs of the MLM head for one labelled row, forward: the dense D x D map and
// the output map to the vocabulary (D x V, tied to the word embeddings).
double mlm_head_flops(const Config& cfg);
// Matrix-product FLOPs of one MLM training step on B sequences of length n with `masked`
// labelled rows: forward plus backward, which computes two products (input and weight
// gradients) for every product of the forward, so 3 x (B x encoder_flops + masked x
// mlm_head_flops). The engine's product timers count the same (docs/benchmarks.md).
double training_flops(const Config& cfg, int64_t n, int64_t B, double masked);

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

// ---- Training steps (`linformer bench --train`) ----

struct TrainBenchOptions {
  int64_t batch = 8;                       // sequences per step
  int warmup_steps = 2;                    // untimed steps first (arena growth, oneDNN primitives)
  int steps = 5;                           // timed steps (the median is reported)
  ComputeType compute = ComputeType::f32;  // Model::set_train_compute_type
  bool phases = true;                      // run the phase timers during the timed steps
  uint64_t seed = 1;                       // weights, token ids, masking
};

// Wall-clock seconds of one phase of a step: matmul, attention, elementwise, optimizer, data
// (core/profile.h says what each holds) and other (the rest of the step).
struct PhaseTime {
  std::string name;
  double seconds = 0;
  double calls = 0;
};

struct TrainBenchResult {
  size_t params = 0;                 // parameters AdamW updates (the whole table)
  int64_t tokens_per_step = 0;       // B x n
  double masked_per_step = 0;        // labelled rows of the timed steps, mean
  std::vector<double> step_seconds;  // every timed step, in order
  double seconds_per_step = 0;       // median of step_seconds
  double flops_per_step = 0;         // training_flops() at masked_per_step
  // Of the median step (the mean of the middle two for an even count); empty without phases.
  std::vector<PhaseTime> phases;
  double matmul_flops_counted = 0;  // FLOPs the product timers saw in that step
  double masked_median_step = 0;    // labelled rows of that step
  double final_loss = 0;            // MLM loss of the last step
  size_t engine_bytes = 0;          // parameters + gradients + AdamW moments + activations
};

// Runs warm-up then timed MLM training steps as pretraining does (batch from a random token
// stream with dynamic masking, zero_grad, forward, MLM loss, backward, gradient clipping at 1,
// AdamW) on a model of `cfg` (dropout as configured) with sequences of length n <= max_len.
TrainBenchResult time_training(const Config& cfg, int64_t n, const TrainBenchOptions& o);

}  // namespace bench
}  // namespace lf
