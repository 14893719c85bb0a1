// `linformer bench --train`: training speed. Every (attention, n, k) runs in its own forked
// child (its peak RSS is its own): a matmul measured just before the run as the reference
// rate, then bench::time_training (warm-up steps, then timed MLM steps with the phase timers).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "cli_util.h"
#include "linformer/bench.h"
#include "linformer/file_util.h"
#include "linformer/model.h"

namespace lf::cli::benchcli {

namespace {

// The reference product of every run (the inference benchmark's).
constexpr int64_t kPeakM = 4096, kPeakN = 3072, kPeakK = 768;
// Phase columns in the order of the tables (bench::PhaseTime names).
const char* const kPhases[] = {"matmul", "attention", "elementwise", "optimizer", "data", "other"};

struct Job {
  std::string kind;  // standard | linformer
  int64_t n = 0, k = 0;
};

json train_job(const Opts& o, const Job& j) {
  const ComputeType ct = o.precision;
  const Config cfg = make_config(o, j.kind, j.n, j.k);
  json r;
  r["peak_gflops_now"] = bench::matmul_gflops(ct, kPeakM, kPeakN, kPeakK, 3);
  bench::TrainBenchOptions to;
  to.batch = o.batch;
  to.warmup_steps = o.warmup;
  to.steps = o.reps;
  to.compute = ct;
  to.seed = o.seed;
  const bench::TrainBenchResult res = bench::time_training(cfg, j.n, to);
  r["status"] = "ok";
  r["params"] = res.params;
  r["tokens_per_step"] = res.tokens_per_step;
  r["masked_per_step"] = res.masked_per_step;
  r["step_seconds"] = res.step_seconds;
  r["seconds_per_step"] = res.seconds_per_step;
  r["tokens_per_second"] = static_cast<double>(res.tokens_per_step) / res.seconds_per_step;
  r["flops_per_step"] = res.flops_per_step;
  r["gflops"] = res.flops_per_step / res.seconds_per_step / 1e9;
  r["matmul_flops_counted"] = res.matmul_flops_counted;
  r["masked_median_step"] = res.masked_median_step;
  json ph = json::object();
  for (const bench::PhaseTime& p : res.phases)
    ph[p.name] = {{"seconds", p.seconds}, {"calls", p.calls}};
  r["phases"] = ph;
  r["final_loss"] = res.final_loss;
  r["engine_bytes"] = res.engine_bytes;
  r["peak_rss_bytes"] = bench::peak_rss_bytes();
  r["threads"] = bench::threads();
  return r;
}

bool ok(const json& r) { return r.value("status", "") == "ok"; }

double phase_seconds(const json& r, const char* name) {
  if (!r.contains("phases") || !r["phases"].contains(name)) return 0.0;
  return r["phases"][name].value("seconds", 0.0);
}

std::string k_cell(const json& r) {
  return r.contains("k") && !r["k"].is_null() ? std::to_string(r["k"].get<int64_t>()) : "-";
}

std::string markdown(const std::vector<json>& runs, const json& meta) {
  std::ostringstream os;
  const bool bf16 = meta.value("compute", "f32") == "bf16";
  os << "# Training speed\n\n";
  os << "Model: " << meta.value("layers", 0) << " layer(s), d_model " << meta.value("d_model", 0)
     << ", " << meta.value("heads", 0) << " heads, d_ff " << meta.value("d_ff", 0) << ", vocab "
     << meta.value("vocab", 0) << "; Linformer: " << meta.value("projection", "linear")
     << " projections, sharing " << meta.value("sharing", "?") << ". The MLM step of pretraining: a batch of "
     << meta.value("batch", 0)
     << " random sequences with dynamic masking (15%), forward, loss on the masked rows, "
        "backward, gradient clipping, AdamW; dropout 0.\n";
  os << "Compute " << (bf16 ? "bf16 (every product of forward and backward on bf16 inputs, f32 "
                              "accumulation, f32 weights, gradients and optimiser)"
                            : "f32")
     << "; " << meta.value("threads", 0) << " threads. Matmul peak in this run "
     << fmt("%.0f", meta.value("peak_gflops", 0.0)) << " GFLOP/s (" << meta.value("peak_shape", "")
     << (bf16 ? ", bf16 packed weight" : ", sgemm") << "). Median of " << meta.value("steps", 0)
     << " timed steps after " << meta.value("warmup_steps", 0) << " warm-up steps.\n\n";
  os << "% of peak: against the same product measured in the same child just before the run. "
        "FLOPs: matrix products only, 3x the forward's (bench::training_flops).\n\n";
  os << "| attention | n | k | batch | params | tokens/s | ms/step | MFLOP/token | GFLOP/s | "
        "% of peak | peak RSS GiB | engine GiB |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const json& r : runs) {
    os << "| " << r.value("attention", "?") << " | " << r.value("n", 0) << " | " << k_cell(r)
       << " | " << r.value("batch", 0) << " | ";
    if (!ok(r)) {
      os << "error: " << r.value("error", "?") << " | | | | | | | |\n";
      continue;
    }
    const double peak = std::max(r.value("peak_gflops_now", 0.0), 1e-9);
    os << r.value("params", 0) << " | " << fmt("%.0f", r.value("tokens_per_second", 0.0))
       << " | " << fmt("%.1f", 1e3 * r.value("seconds_per_step", 0.0)) << " | "
       << fmt("%.1f", r.value("flops_per_step", 0.0) / r.value("tokens_per_step", 1.0) / 1e6)
       << " | " << fmt("%.0f", r.value("gflops", 0.0)) << " | "
       << fmt("%.0f%%", 100.0 * r.value("gflops", 0.0) / peak) << " | "
       << gib(r.value("peak_rss_bytes", 0.0)) << " | " << gib(r.value("engine_bytes", 0.0))
       << " |\n";
  }
  os << "\n## Where the time goes (the median step)\n\n"
     << "ms and share of the step. matmul: every matrix product (bf16 input rounding included), "
        "with its rate and % of the peak; attention: softmax, masks and layout of attention and "
        "the sequence projections; elementwise: LayerNorm, GELU, residuals, bias sums, "
        "embeddings, cross-entropy, zeroing; optimizer: zeroing gradients, clipping, AdamW; "
        "data: batch and masking; other: the rest of the step.\n\n"
     << "| attention | n | k | ms/step | matmul | matmul GFLOP/s | attention | elementwise | "
        "optimizer | data | other |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const json& r : runs) {
    if (!ok(r)) continue;
    const double step = r.value("seconds_per_step", 1.0);
    const double mm = phase_seconds(r, "matmul");
    const double peak = std::max(r.value("peak_gflops_now", 0.0), 1e-9);
    const double mm_rate = mm > 0 ? r.value("matmul_flops_counted", 0.0) / mm / 1e9 : 0.0;
    os << "| " << r.value("attention", "?") << " | " << r.value("n", 0) << " | " << k_cell(r)
       << " | " << fmt("%.1f", 1e3 * step) << " |";
    for (const char* p : kPhases) {
      const double s = phase_seconds(r, p);
      os << " " << fmt("%.1f", 1e3 * s) << " (" << fmt("%.0f%%", 100.0 * s / step) << ") |";
      if (std::string(p) == "matmul")
        os << " " << fmt("%.0f", mm_rate) << " (" << fmt("%.0f%%", 100.0 * mm_rate / peak) << ") |";
    }
    os << "\n";
  }
  return os.str();
}

void write_csv(const std::string& path, const std::vector<json>& runs, const json& meta) {
  std::ostringstream os;
  os.precision(9);
  os << "attention,n,k,sharing,batch,compute,params,tokens_per_second,seconds_per_step,"
        "flops_per_step,gflops,peak_gflops_now,peak_rss_bytes,engine_bytes";
  for (const char* p : kPhases) os << "," << p << "_seconds";
  os << ",matmul_flops_counted,status\n";
  for (const json& r : runs) {
    os << r.value("attention", "") << "," << r.value("n", 0) << ","
       << (k_cell(r) == "-" ? "" : k_cell(r)) << "," << meta.value("sharing", "") << ","
       << r.value("batch", 0) << "," << meta.value("compute", "") << ",";
    if (ok(r)) {
      os << r.value("params", 0) << "," << r.value("tokens_per_second", 0.0) << ","
         << r.value("seconds_per_step", 0.0) << "," << r.value("flops_per_step", 0.0) << ","
         << r.value("gflops", 0.0) << "," << r.value("peak_gflops_now", 0.0) << ","
         << r.value("peak_rss_bytes", 0.0) << "," << r.value("engine_bytes", 0.0);
      for (const char* p : kPhases) os << "," << phase_seconds(r, p);
      os << "," << r.value("matmul_flops_counted", 0.0);
    } else {
      os << ",,,,,,,";
      for (size_t i = 0; i < std::size(kPhases); ++i) os << ",";
    }
    os << "," << r.value("status", "") << "\n";
  }
  write_file_atomic(path, os.str());
}

void report(const json& r) {
  if (!ok(r)) {
    std::fprintf(stderr, " %s: %s\n", r.value("status", "?").c_str(),
                 r.value("error", "").c_str());
    return;
  }
  std::fprintf(stderr, " %.0f tokens/s, %.1f ms/step, %.0f GFLOP/s (%.0f%% of peak), RSS %.2f GiB\n",
               r.value("tokens_per_second", 0.0), 1e3 * r.value("seconds_per_step", 0.0),
               r.value("gflops", 0.0),
               100.0 * r.value("gflops", 0.0) / std::max(r.value("peak_gflops_now", 0.0), 1e-9),
               r.value("peak_rss_bytes", 0.0) / kGiB);
}

void write_outputs(const Opts& o, const std::vector<json>& runs, const json& meta, bool fresh) {
  const std::string md = markdown(runs, meta);
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    write_file_atomic(o.out_dir + "/bench_train.md", md);
    if (fresh)
      write_file_atomic(o.out_dir + "/bench_train.json",
                        json{{"meta", meta}, {"runs", runs}}.dump(1) + "\n");
    write_csv(o.out_dir + "/bench_train.csv", runs, meta);
    std::fprintf(stderr, "bench: wrote %s/bench_train.{md,csv%s}\n", o.out_dir.c_str(),
                 fresh ? ",json" : "");
  }
  if (o.json_out)
    std::printf("%s\n", json{{"meta", meta}, {"runs", runs}}.dump(1).c_str());
  else
    std::printf("%s", md.c_str());
}

}  // namespace

void run_train_bench(Opts o, const json* from_json) {
  if (from_json) {
    const json& meta = from_json->at("meta");
    const std::vector<json> runs(from_json->at("runs").begin(), from_json->at("runs").end());
    write_outputs(o, runs, meta, false);
    return;
  }
  for (const std::string& kind : o.kinds) bench::attention_choice(kind, /*training=*/true);
  require_trains(o.precision);
  LF_CHECK(o.layers > 0 && o.heads > 0 && o.d_model % o.heads == 0,
           "bench --train: need --layers > 0 and --d-model divisible by --heads");
  std::sort(o.ns.begin(), o.ns.end());
  std::sort(o.ks.begin(), o.ks.end());
  std::vector<Job> jobs;
  for (int64_t n : o.ns) {
    LF_CHECK(n >= 3, "bench --train: --n values must be at least 3, got ", n);
    for (const std::string& kind : o.kinds) {
      if (!bench::attention_choice(kind).projected) jobs.push_back({kind, n, 0});
      else
        for (int64_t k : o.ks) {
          LF_CHECK(k > 0, "bench --train: --k values must be positive, got ", k);
          if (k < n) jobs.push_back({kind, n, k});
        }
    }
  }
  LF_CHECK(!jobs.empty(), "bench --train: nothing to run (Linformer needs k < n)");
  auto run = [&](auto f) { return o.no_fork ? f() : isolated(f); };
  const ComputeType ct = o.precision;
  const json peak = run([&] {
    return json{{"gflops", bench::matmul_gflops(ct, kPeakM, kPeakN, kPeakK)},
                {"threads", bench::threads()}};
  });
  std::fprintf(stderr, "bench --train: %s matmul %lldx%lldx%lld: %.0f GFLOP/s on %d threads\n",
               compute_type_name(ct), static_cast<long long>(kPeakM),
               static_cast<long long>(kPeakN), static_cast<long long>(kPeakK),
               peak.value("gflops", 0.0), peak.value("threads", 0));
  std::vector<json> runs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    std::fprintf(stderr, "[%zu/%zu] %s n=%lld%s batch %lld ...", i + 1, jobs.size(),
                 j.kind.c_str(), static_cast<long long>(j.n),
                 j.k > 0 ? (" k=" + std::to_string(j.k)).c_str() : "",
                 static_cast<long long>(o.batch));
    std::fflush(stderr);
    json r = run([&] { return train_job(o, j); });
    r["attention"] = j.kind;
    r["n"] = j.n;
    r["k"] = j.k > 0 ? json(j.k) : json(nullptr);
    r["batch"] = o.batch;
    report(r);
    runs.push_back(std::move(r));
  }
  const json meta = {{"mode", "train"},
                     {"compute", compute_type_name(ct)},
                     {"peak_gflops", peak.value("gflops", 0.0)},
                     {"peak_shape", std::to_string(kPeakM) + "x" + std::to_string(kPeakN) + "x" +
                                        std::to_string(kPeakK)},
                     {"threads", peak.value("threads", 0)},
                     {"layers", o.layers},
                     {"d_model", o.d_model},
                     {"heads", o.heads},
                     {"d_ff", o.d_ff},
                     {"vocab", o.vocab},
                     {"sharing", o.sharing},
                     {"projection", o.projection},
                     {"batch", o.batch},
                     {"steps", o.reps},
                     {"warmup_steps", o.warmup},
                     {"seed", o.seed},
                     {"forked", !o.no_fork}};
  write_outputs(o, runs, meta, true);
}

}  // namespace lf::cli::benchcli
