// Phase timers: where a training step spends its wall-clock time. Always compiled, off by
// default; when off, a PhaseScope costs one relaxed load and a branch.
//
//   void gemm(...) { PhaseScope ps(Phase::matmul, 2.0 * M * N * K); ... }
//
// Attribution is exclusive, so the phases of a step add up to at most its wall time:
//  - A matrix product is always its own phase, wherever it is called (inside attention too).
//  - Any other phase opened while one is already running does not start: the outer phase
//    keeps the time (the softmax inside attention is attention, not element-wise).
//  - Products run on one core inside a parallel region (attention's per-head products) count
//    thread-time / threads-in-the-region, moved from the phase the region was entered in.
//    Other timers inside parallel regions do nothing.
// Time outside every phase is the caller's "other" (step time minus the phases).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>

namespace lf {

enum class Phase : int {
  none = -1,
  matmul = 0,   // every product of the matmul module (bf16 input rounding included)
  attention,    // attention's softmax, masking, dropout and layout work; sequence projections
  elementwise,  // LayerNorm, GELU, dropout, residuals, bias sums, embeddings, cross-entropy
  optimizer,    // zeroing gradients, norm clipping, AdamW
  data,         // building the batch (masking)
  count
};
constexpr int kPhaseCount = static_cast<int>(Phase::count);
const char* phase_name(Phase p);  // "matmul", "attention", ...

namespace profile {

extern std::atomic<bool> g_enabled;
inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
// Call between steps, outside parallel regions.
void set_enabled(bool on);
void reset();

struct Totals {
  std::array<double, kPhaseCount> seconds{};
  std::array<int64_t, kPhaseCount> calls{};
  double matmul_flops = 0;  // FLOPs (2 per multiply-add) of the products timed
};
// What has been recorded since reset(); call outside every PhaseScope.
Totals totals();

}  // namespace profile

class PhaseScope {
 public:
  explicit PhaseScope(Phase p, double flops = 0.0) {
    if (profile::enabled()) begin(p, flops);
  }
  ~PhaseScope() {
    if (mode_ != Mode::off) end();
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  enum class Mode : uint8_t { off, serial, in_region };
  void begin(Phase p, double flops);
  void end();
  Mode mode_ = Mode::off;
  Phase saved_ = Phase::none;  // serial: the phase to resume; in_region: the phase to charge
  int threads_ = 1;
  int64_t t0_ = 0;
};

}  // namespace lf
