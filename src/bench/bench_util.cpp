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
#include "linformer/cpu.h"
#include "linformer/model.h"

namespace lf::bench {

bool AttentionChoice::trains() const { return name == to_string(attention); }

const std::vector<AttentionChoice>& attention_choices() {
  static const std::vector<AttentionChoice> choices = [] {
    std::vector<AttentionChoice> v;
    for (const AttentionVariant& a : attention_variants(Config{})) {
      const AttentionPath& p = attention_path(a.cfg);
      for (const InferenceWay& w : p.inference_ways()) {
        const std::string name = *w.name ? w.name : to_string(a.cfg.attention);
        const auto same = [&](const AttentionChoice& c) { return c.name == name; };
        if (std::any_of(v.begin(), v.end(), same)) continue;
        v.push_back({name, a.cfg.attention, w.exact, p.projected_length(a.cfg, 0) > 0});
      }
    }
    return v;
  }();
  return choices;
}

std::vector<std::string> attention_choice_names(bool training_only) {
  std::vector<std::string> names;
  for (const AttentionChoice& c : attention_choices())
    if (!training_only || c.trains()) names.push_back(c.name);
  return names;
}

namespace {
std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Each value of `key` (a projected kind's variant config -> its name) once, in registry order.
template <class F>
std::vector<std::string> projected_values(F key) {
  std::vector<std::string> out;
  for (const AttentionVariant& a : attention_variants(Config{})) {
    if (attention_path(a.cfg).projected_length(a.cfg, 0) == 0) continue;
    const std::string v = key(a.cfg);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}
}  // namespace

const AttentionChoice& attention_choice(const std::string& name, bool training) {
  for (const AttentionChoice& c : attention_choices()) {
    if (c.name != name) continue;
    LF_CHECK(!training || c.trains(), "bench --train: --attention ", name,
             " is an inference variant; training runs ", joined(attention_choice_names(true)));
    return c;
  }
  fail("bench: no attention '", name, "' (choices: ", joined(attention_choice_names(training)),
       ")");
}

std::vector<std::string> sharing_values() {
  return projected_values([](const Config& c) { return to_string(c.sharing); });
}
std::vector<std::string> projection_values() {
  return projected_values([](const Config& c) { return to_string(c.projection); });
}

void set_attention(Config& cfg, const AttentionChoice& choice, const std::string& sharing,
                   const std::string& projection) {
  cfg.attention = choice.attention;
  if (!choice.projected) return;
  for (const AttentionVariant& a : attention_variants(cfg)) {
    if (a.cfg.attention != choice.attention || to_string(a.cfg.sharing) != sharing ||
        to_string(a.cfg.projection) != projection)
      continue;
    cfg.sharing = a.cfg.sharing;
    cfg.projection = a.cfg.projection;
    return;
  }
  fail("bench: no attention kind runs ", choice.name, " with sharing '", sharing,
       "' and projection '", projection, "' (sharing: ", joined(sharing_values()),
       "; projection: ", joined(projection_values()), ")");
}

const std::vector<ComputeType>& precisions() {
  static const std::vector<ComputeType> v{ComputeType::f32, ComputeType::bf16, ComputeType::int8};
  return v;
}

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

namespace lf {

std::vector<ProductPeak> product_peaks(int reps) {
  std::vector<ProductPeak> out;
  for (ComputeType t : bench::precisions())
    if (compute_type_supported(t))
      out.push_back({t, bench::matmul_gflops(t, 2048, 3072, 768, reps)});
  return out;
}

}  // namespace lf
