#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/buffer.h"
#include "core/parallel.h"
#include "kernels/matmul.h"
#include "layers/attention_path.h"
#include "linformer/bench.h"
#include "linformer/model.h"

namespace lf::bench {

double layer_flops(const Config& cfg, int64_t l, int64_t n) {
  const double N = static_cast<double>(n), D = static_cast<double>(cfg.d_model),
               F = static_cast<double>(cfg.d_ff);
  // Q and output maps, FFN: always over all n rows; the rest depends on the attention path.
  const double f = 2.0 * N * (2.0 * D * D) + 2.0 * N * (2.0 * D * F);
  return f + attention_path(cfg).flops(cfg, l, N);
}

double encoder_flops(const Config& cfg, int64_t n) {
  double f = 0;
  for (int64_t l = 0; l < cfg.n_layers; ++l) f += layer_flops(cfg, l, n);
  return f;
}

size_t engine_bytes(const Model& m, int64_t B, int64_t n) {
  return m.param_bytes() + m.packed_weight_bytes() + m.forward_bytes(B, n, false) +
         static_cast<size_t>(B * n) * sizeof(int32_t);
}

int64_t max_batch(const Model& m, int64_t n, size_t budget, int64_t cap) {
  if (engine_bytes(m, 1, n) > budget) return 0;
  int64_t lo = 1, hi = 2;  // engine_bytes(lo) fits
  while (hi <= cap && engine_bytes(m, hi, n) <= budget) {
    lo = hi;
    hi *= 2;
  }
  hi = std::min(hi, cap + 1);  // engine_bytes(hi) does not fit, or hi is past the cap
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (engine_bytes(m, mid, n) <= budget)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

namespace {
size_t status_kb(const char* file, const char* key) {
  std::ifstream f(file);
  std::string line;
  const size_t klen = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, klen, key) == 0) {
      size_t kb = 0;
      std::sscanf(line.c_str() + klen, " %zu", &kb);
      return kb * 1024;
    }
  }
  return 0;
}
}  // namespace

size_t peak_rss_bytes() { return status_kb("/proc/self/status", "VmHWM:"); }
size_t current_rss_bytes() { return status_kb("/proc/self/status", "VmRSS:"); }
size_t mem_total_bytes() { return status_kb("/proc/meminfo", "MemTotal:"); }

int threads() { return num_threads(); }

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double matmul_gflops(ComputeType t, int64_t M, int64_t N, int64_t K, int reps) {
  Buffer<float> a(M * K), w(N * K), c(M * N);
  for (int64_t i = 0; i < M * K; ++i) a[i] = static_cast<float>((i * 7) % 13) * 0.01f;
  for (int64_t i = 0; i < N * K; ++i) w[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  c.zero();
  PackedLinear pl;
  if (t != ComputeType::f32) pl.pack(w.data(), N, K, t);
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    const double t0 = now_seconds();
    if (t != ComputeType::f32)
      pl.apply(c.data(), a.data(), M, nullptr, PackedLinear::Epilogue::store);
    else
      gemm(ComputeType::f32, false, true, M, N, K, 1.f, a.data(), K, w.data(), K, 0.f, c.data(), N);
    const double dt = now_seconds() - t0;
    if (r > 0) best = std::min(best, dt);  // r = 0 is the warm-up
  }
  return 2.0 * M * N * K / best / 1e9;
}

}  // namespace lf::bench
