#include "core/profile.h"

#include <omp.h>

#include <chrono>

namespace lf {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::matmul:
      return "matmul";
    case Phase::attention:
      return "attention";
    case Phase::elementwise:
      return "elementwise";
    case Phase::optimizer:
      return "optimizer";
    case Phase::data:
      return "data";
    default:
      return "none";
  }
}

namespace profile {

std::atomic<bool> g_enabled{false};

namespace {

// Accumulated nanoseconds and calls per phase, and the FLOPs of the timed products.
std::array<std::atomic<int64_t>, kPhaseCount> g_ns{};
std::array<std::atomic<int64_t>, kPhaseCount> g_calls{};
std::atomic<int64_t> g_flops{0};
// The phase running outside parallel regions, and when its current segment began. Written
// only outside parallel regions; read inside them (to know whom a region's products take from).
std::atomic<int> g_current{static_cast<int>(Phase::none)};
int64_t g_segment_start = 0;
// Inside a parallel region: whether this thread is already timing a product (a product that
// calls another, as a batched product calls gemm, is timed once).
thread_local bool t_in_product = false;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Phase current() { return static_cast<Phase>(g_current.load(std::memory_order_relaxed)); }

void charge(Phase p, int64_t ns) {
  if (p != Phase::none) g_ns[static_cast<int>(p)].fetch_add(ns, std::memory_order_relaxed);
}

void count_call(Phase p, double flops) {
  g_calls[static_cast<int>(p)].fetch_add(1, std::memory_order_relaxed);
  if (flops > 0) g_flops.fetch_add(static_cast<int64_t>(flops), std::memory_order_relaxed);
}

}  // namespace

void set_enabled(bool on) {
  g_current.store(static_cast<int>(Phase::none));
  g_segment_start = now_ns();
  g_enabled.store(on);
}

void reset() {
  for (auto& a : g_ns) a.store(0);
  for (auto& a : g_calls) a.store(0);
  g_flops.store(0);
  g_current.store(static_cast<int>(Phase::none));
  g_segment_start = now_ns();
}

Totals totals() {
  Totals t;
  for (int i = 0; i < kPhaseCount; ++i) {
    t.seconds[i] = static_cast<double>(g_ns[i].load()) * 1e-9;
    t.calls[i] = g_calls[i].load();
  }
  t.matmul_flops = static_cast<double>(g_flops.load());
  return t;
}

}  // namespace profile

void PhaseScope::begin(Phase p, double flops) {
  using namespace profile;
  const Phase cur = current();
  if (omp_in_parallel()) {
    // One thread of a region: only products are timed, at thread-time / threads.
    if (p != Phase::matmul || cur == Phase::matmul || t_in_product) return;
    t_in_product = true;
    mode_ = Mode::in_region;
    saved_ = cur;
    threads_ = omp_get_num_threads();
    count_call(p, flops);
    t0_ = now_ns();
    return;
  }
  if (cur != Phase::none && (p != Phase::matmul || cur == Phase::matmul)) return;  // outer wins
  const int64_t t = now_ns();
  charge(cur, t - g_segment_start);
  saved_ = cur;
  g_current.store(static_cast<int>(p), std::memory_order_relaxed);
  g_segment_start = t;
  count_call(p, flops);
  mode_ = Mode::serial;
}

void PhaseScope::end() {
  using namespace profile;
  const int64_t t = now_ns();
  if (mode_ == Mode::in_region) {
    t_in_product = false;
    const int64_t share = (t - t0_) / threads_;
    charge(Phase::matmul, share);
    charge(saved_, -share);
    return;
  }
  charge(current(), t - g_segment_start);
  g_current.store(static_cast<int>(saved_), std::memory_order_relaxed);
  g_segment_start = t;
}

}  // namespace lf
