// `linformer bench`: inference time and memory of Linformer against standard attention (the
// paper's baseline, which holds the [B, H, n, n] attention matrices), against the engine's
// tiled standard attention and against exact streaming attention, with the paper's method
// (Table 3): random inputs; for every (n, k) the largest batch that fits a memory budget,
// predicted by the engine's own accounting (a dry run of the activation layout, no
// allocation); time per sequence.
//
// Every configuration runs in a forked child process, so its VmHWM (peak RSS) is its own.
// The parent never touches OpenMP or oneDNN (a forked child of a process that has started
// OpenMP threads may not use OpenMP).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "cli_util.h"
#include "commands.h"
#include "linformer/bench.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/plot.h"
#include "linformer/rng.h"

namespace lf::cli {

namespace {

using namespace benchcli;

std::vector<std::string> names_of(const std::vector<ComputeType>& types) {
  std::vector<std::string> v;
  for (ComputeType t : types) v.push_back(compute_type_name(t));
  return v;
}

struct Job {
  std::string kind;  // a bench::attention_choices() name
  int64_t n = 0, k = 0;
};

// Runs one configuration in this process. `predicted_gflops`: rate used to skip runs that
// would take longer than max_run_seconds.
json run_job(const Opts& o, const Job& j, size_t budget, double predicted_gflops) {
  json r;
  r["attention"] = j.kind;
  r["n"] = j.n;
  r["k"] = j.k > 0 ? json(j.k) : json(nullptr);
  r["layers"] = o.layers;
  const ComputeType ct = o.precision;
  r["compute"] = compute_type_name(ct);
  const Config cfg = make_config(o, j.kind, j.n, j.k);
  Model m(cfg);
  try {
    m.set_compute_type(ct);
  } catch (const Error& e) {  // a kind that does not run this precision says so
    r["status"] = "refused";
    r["error"] = e.what();
    return r;
  }
  m.set_exact_attention(bench::attention_choice(j.kind).exact);
  const int64_t maxb = bench::max_batch(m, j.n, budget);
  const size_t act1 = m.forward_bytes(1, j.n, false);
  r["max_batch"] = maxb;
  r["activation_bytes_batch1"] = act1;
  r["bytes_batch1"] = bench::engine_bytes(m, 1, j.n);
  // Marginal bytes of one more sequence (between batches 16 and 32, where the row-block size
  // no longer changes): activations + ids, without parameters or per-thread scratch.
  r["bytes_per_sequence"] =
      static_cast<double>(m.forward_bytes(32, j.n, false) - m.forward_bytes(16, j.n, false)) / 16 +
      static_cast<double>(j.n * sizeof(int32_t));
  r["param_bytes"] = m.param_bytes();
  r["packed_weight_bytes"] = m.packed_weight_bytes();
  const double flops = bench::encoder_flops(cfg, j.n);
  r["flops_per_sequence"] = flops;
  if (maxb == 0) {
    r["status"] = "does_not_fit";
    return r;
  }
  const int64_t bt =
      o.at_max_batch ? maxb : std::min(maxb, std::max<int64_t>(1, o.batch_tokens / j.n));
  r["batch"] = bt;
  const double predicted = flops * bt / (predicted_gflops * 1e9);
  if (predicted > o.max_run_seconds) {
    r["status"] = "skipped";
    r["predicted_seconds"] = predicted;
    return r;
  }
  m.init(o.seed);
  // The machine's GEMM rate right now: the reference for this run's GFLOP/s (other processes
  // on the machine change it from run to run).
  r["sgemm_gflops_now"] = bench::matmul_gflops(ct, 2048, 3072, 768, 3);
  std::vector<int32_t> ids(static_cast<size_t>(bt * j.n));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>(rng_bits(o.seed, 17, i) % static_cast<uint64_t>(o.vocab));
  const Batch batch{ids.data(), nullptr, bt, j.n};
  double t0 = bench::now_seconds();
  m.forward(batch, false);  // warm-up: first touch of the arena, oneDNN kernels
  const double warm = bench::now_seconds() - t0;
  const int reps = warm > 20.0 ? 1 : o.reps;
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    t0 = bench::now_seconds();
    m.forward(batch, false);
    times.push_back(bench::now_seconds() - t0);
  }
  const double sec = median(times) / static_cast<double>(bt);
  r["status"] = "ok";
  r["reps"] = reps;
  r["warmup_seconds"] = warm;
  r["seconds_per_sequence"] = sec;
  r["gflops"] = flops / sec / 1e9;
  r["peak_bytes_engine"] = m.param_bytes() + m.packed_weight_bytes() + m.activation_bytes() +
                           ids.size() * sizeof(int32_t);
  r["peak_rss_bytes"] = bench::peak_rss_bytes();
  r["threads"] = bench::threads();
  return r;
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Inference efficiency of the efficient attention kinds (Linformer, Nystromformer: every\n"
      "kind of the registry) against exact attention (paper Table 3): standard\n"
      "(the [B,H,n,n] attention matrices held, as in PyTorch, fairseq and the paper), tiled\n"
      "(the engine's standard path, one n x n tile per thread) and streaming (online softmax,\n"
      "O(n) memory). For every (n, k), the largest batch that fits the memory\n"
      "budget (engine accounting, no allocation), and the time per sequence. Each\n"
      "configuration runs in its own child process (peak RSS per configuration). Writes\n"
      "the grids as markdown (stdout, or JSON with --json) and, with --out-dir, bench.md,\n"
      "bench.csv, bench.json, bench_time.svg and bench_memory.svg. Progress on stderr.\n"
      "With --train: training speed instead (MLM steps: forward, backward, AdamW), tokens/s,\n"
      "GFLOP/s against the matmul peak, peak RSS and where the time goes (matmul, attention,\n"
      "element-wise, optimiser, data); defaults to the model of docs/benchmarks.md, \"Training\n"
      "speed\" (4 layers, d 256, 4 heads, d_ff 1024, vocab 8192, Linformer k 128 headwise,\n"
      "n 512, batch 8). bench/pytorch/bench_torch_train.py runs PyTorch's peer beside it.");
  auto o = std::make_shared<Opts>();
  cmd->add_option("--layers", o->layers, "Encoder layers (ratios are per layer)")
      ->capture_default_str();
  cmd->add_option("--d-model", o->d_model, "Model width")->capture_default_str();
  cmd->add_option("--heads", o->heads, "Attention heads")->capture_default_str();
  cmd->add_option("--d-ff", o->d_ff, "FFN width")->capture_default_str();
  cmd->add_option("--vocab", o->vocab, "Vocabulary size")->capture_default_str();
  cmd->add_option("--n", o->ns, "Sequence lengths (default 512 1024 ... 65536; --train: 512)")
      ->delimiter(',');
  cmd->add_option("--k", o->ks, "Projected lengths (default 128 256 512 1024 2048; --train: 128)")
      ->delimiter(',');
  // The choices come from the registry of attention kinds (bench::attention_choices).
  std::string names;
  for (const std::string& n : bench::attention_choice_names())
    names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--attention", o->kinds,
                  "Attention to run, default every one: " + names +
                      ". standard: the [B,H,n,n] layout of PyTorch and the paper; tiled, "
                      "streaming: the engine's exact ways (streaming, online softmax, is its "
                      "default on AVX2 and AVX-512 builds); a projected kind (linformer) runs at "
                      "each --k. --train: the kinds that train; default linformer")
      ->check(CLI::IsMember(bench::attention_choice_names()))
      ->capture_default_str();
  cmd->add_option("--sharing", o->sharing,
                  "Linformer projection sharing (default layerwise; --train: headwise)")
      ->check(CLI::IsMember(bench::sharing_values()));
  cmd->add_option("--projection", o->projection, "Linformer projection")
      ->check(CLI::IsMember(bench::projection_values()))
      ->capture_default_str();
  cmd->add_option("--memory-budget", o->budget_gib,
                  "Memory budget in GiB (default: 16, or 70% of RAM if less)");
  cmd->add_option("--batch-tokens", o->batch_tokens,
                  "Timed batch = min(max batch, max(1, this / n)) sequences")
      ->capture_default_str();
  cmd->add_flag("--at-max-batch", o->at_max_batch,
                "Time at the largest batch that fits (slow; the paper's setting)");
  cmd->add_option("--reps", o->reps,
                  "Timed repetitions after one warm-up (median); --train: timed steps "
                  "(default 5)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--max-run-seconds", o->max_run_seconds,
                  "Skip a configuration whose predicted forward takes longer")
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick,
                "Short grid: n 512..4096, k 128 256, 2 layers unless --layers is given");
  cli::add_precision_option(
      cmd, &o->precision, "Options",
      "f32, bf16 or int8 inference: the linear maps' weights packed once in bfloat16 "
      "(AVX-512, f32 accumulation) or int8 (a scale per output channel, inputs quantized per "
      "token); the GEMM peak reference is then the same packed product (for int8 with its "
      "quantization and dequantization: GOP/s). --train takes f32 or bf16",
      true);
  cmd->add_option("--compare-precision", o->compare_precisions,
                  "Also run the grid in these precisions (f32 bf16 int8), each configuration "
                  "in every precision back to back, and add a table of "
                  "every configuration's time in each, the speed-up over --precision and each "
                  "rate against its own precision's product peak (measured in the same run)")
      ->check(CLI::IsMember(names_of(bench::precisions())))
      ->group("Options");
  cmd->add_flag("--json", o->json_out, "Print the JSON document instead of markdown");
  cmd->add_flag("--no-fork", o->no_fork,
                "Run every configuration in this process (peak RSS is then process-wide)");
  cmd->add_option("--out-dir", o->out_dir, "Folder for bench.md/.csv/.json and the SVG plots");
  cmd->add_option("--seed", o->seed, "Seed of weights and token ids")->capture_default_str();
  cmd->add_flag("--train", o->train,
                "Training speed: timed MLM training steps (see above) instead of inference");
  cmd->add_option("--batch", o->batch, "--train: sequences per step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "--train: untimed steps before the timed ones")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--from-json", o->from_json,
                  "Run nothing: rewrite the markdown/CSV/plots from an earlier bench.json")
      ->check(CLI::ExistingFile);
  auto* layers_opt = cmd->get_option("--layers");
  cmd->callback([o, layers_opt, cmd] {
    Opts& opt = *o;
    const auto given = [cmd](const char* name) { return cmd->get_option(name)->count() > 0; };
    json train_doc;
    if (!opt.from_json.empty()) {
      train_doc = json::parse(read_file(opt.from_json));
      if (train_doc.at("meta").value("mode", "") != "train") train_doc = nullptr;
    }
    if (opt.train || !train_doc.is_null()) {
      for (const char* name :
           {"--memory-budget", "--batch-tokens", "--at-max-batch", "--max-run-seconds", "--quick"})
        LF_CHECK(!given(name), "bench --train: ", name, " is an option of the inference benchmark");
      // The model of issue 13 unless given (docs/benchmarks.md, "Training speed").
      if (!given("--layers")) opt.layers = 4;
      if (!given("--d-model")) opt.d_model = 256;
      if (!given("--heads")) opt.heads = 4;
      if (!given("--d-ff")) opt.d_ff = 1024;
      if (!given("--vocab")) opt.vocab = 8192;
      if (!given("--attention")) opt.kinds = {"linformer"};
      if (!given("--reps")) opt.reps = 5;
      if (opt.sharing.empty()) opt.sharing = "headwise";
      if (opt.ns.empty()) opt.ns = {512};
      if (opt.ks.empty()) opt.ks = {128};
      run_train_bench(opt, train_doc.is_null() ? nullptr : &train_doc);
      return;
    }
    LF_CHECK(!given("--batch") && !given("--warmup"),
             "bench: --batch and --warmup are options of --train (inference sizes its batch "
             "with --batch-tokens)");
    if (opt.quick) {
      if (opt.ns.empty()) opt.ns = {512, 1024, 2048, 4096};
      if (opt.ks.empty()) opt.ks = {128, 256};
      if (layers_opt->count() == 0) opt.layers = 2;
      opt.reps = std::min(opt.reps, 3);
    }
    if (opt.ns.empty()) opt.ns = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    if (opt.ks.empty()) opt.ks = {128, 256, 512, 1024, 2048};
    std::sort(opt.ns.begin(), opt.ns.end());
    std::sort(opt.ks.begin(), opt.ks.end());
    for (int64_t n : opt.ns) LF_CHECK(n > 0, "bench: --n values must be positive");
    for (int64_t k : opt.ks) LF_CHECK(k > 0, "bench: --k values must be positive");
    LF_CHECK(opt.layers > 0 && opt.d_model % opt.heads == 0,
             "bench: need --layers > 0 and --d-model divisible by --heads");
    if (!opt.from_json.empty()) {
      const json doc = json::parse(read_file(opt.from_json));
      const json& meta = doc.at("meta");
      std::vector<json> runs(doc.at("runs").begin(), doc.at("runs").end());
      opt.layers = meta.value("layers", opt.layers);
      opt.d_model = meta.value("d_model", opt.d_model);
      opt.heads = meta.value("heads", opt.heads);
      opt.d_ff = meta.value("d_ff", opt.d_ff);
      opt.vocab = meta.value("vocab", opt.vocab);
      opt.batch_tokens = meta.value("batch_tokens", opt.batch_tokens);
      opt.at_max_batch = meta.value("at_max_batch", false);
      std::set<int64_t> ns, ks;
      for (const json& r : runs) {
        ns.insert(r.value("n", int64_t(0)));
        if (r.contains("k") && !r["k"].is_null()) ks.insert(r["k"].get<int64_t>());
      }
      const std::vector<int64_t> nv(ns.begin(), ns.end()), kv(ks.begin(), ks.end());
      const std::string md = markdown(runs, meta, opt, nv, kv);
      if (!opt.out_dir.empty()) {
        std::filesystem::create_directories(opt.out_dir);
        write_file_atomic(opt.out_dir + "/bench.md", md);
        write_csv(opt.out_dir + "/bench.csv", runs);
        write_plots(opt.out_dir, runs_in(runs, meta.value("compute", "f32")), kv);
      }
      std::printf("%s", md.c_str());
      return;
    }
    const size_t ram = bench::mem_total_bytes();
    double budget = opt.budget_gib > 0 ? opt.budget_gib * kGiB : 16.0 * kGiB;
    if (opt.budget_gib <= 0 && ram > 0) budget = std::min(budget, 0.7 * static_cast<double>(ram));
    const size_t budget_bytes = static_cast<size_t>(budget);
    std::set<std::string> kinds(opt.kinds.begin(), opt.kinds.end());

    auto run = [&](auto f) { return opt.no_fork ? f() : isolated(f); };
    // The precisions to run: --precision, then each --compare-precision not already listed.
    std::vector<ComputeType> precisions{opt.precision};
    for (const std::string& p : opt.compare_precisions) {
      const ComputeType t = parse_compute_type(p);
      if (std::find(precisions.begin(), precisions.end(), t) == precisions.end())
        precisions.push_back(t);
    }
    const ComputeType main_precision = opt.precision;
    json peaks = json::object();
    std::vector<json> runs;
    double peak_gflops = 0;
    json peak;
    const int64_t gm = 4096, gn = 3072, gk = 768;
    // 1. The product peak of each precision, in a child like everything else.
    std::map<ComputeType, double> peak_of;
    for (ComputeType prec : precisions) {
      opt.precision = prec;
      peak = run([&] {
        return json{{"gflops", bench::matmul_gflops(opt.precision, gm, gn, gk)},
                    {"threads", bench::threads()}};
      });
      peak_of[prec] = peak.value("gflops", 0.0);
      peaks[compute_type_name(prec)] = peak_of[prec];
      if (prec == main_precision) peak_gflops = peak_of[prec];
      std::fprintf(
          stderr, "bench: %s product %lldx%lldx%lld: %.0f %s on %d threads; budget %.1f GiB\n",
          compute_type_name(prec), static_cast<long long>(gm), static_cast<long long>(gn),
          static_cast<long long>(gk), peak_of[prec],
          prec == ComputeType::int8 ? "GOP/s" : "GFLOP/s", peak.value("threads", 0), budget / kGiB);
    }
    // 2. The grid, each configuration in every precision back to back: a ratio between
    // precisions is then measured seconds apart, not a grid's length apart (on a shared
    // machine a slow spell then slows both sides of a ratio, or neither).
    std::vector<Job> jobs;
    for (int64_t n : opt.ns)
      for (const bench::AttentionChoice& c : bench::attention_choices()) {
        if (!kinds.count(c.name)) continue;
        if (!c.projected)
          jobs.push_back({c.name, n, 0});
        else
          for (int64_t k : opt.ks)
            if (k < n && n % k == 0) jobs.push_back({c.name, n, k});
      }
    const size_t total = jobs.size() * precisions.size();
    size_t done = 0;
    for (const Job& j : jobs)
      for (ComputeType prec : precisions) {
        opt.precision = prec;
        const double this_peak = peak_of[prec];
        const std::string name = j.kind + " n=" + std::to_string(j.n) +
                                 (j.k > 0 ? " k=" + std::to_string(j.k) : std::string());
        std::fprintf(
            stderr, "[%zu/%zu] %s%s ...", ++done, total, name.c_str(),
            precisions.size() > 1 ? (std::string(" ") + compute_type_name(prec)).c_str() : "");
        std::fflush(stderr);
        const double t0 = bench::now_seconds();
        json r = run([&] { return run_job(opt, j, budget_bytes, 0.8 * std::max(this_peak, 1.0)); });
        r["attention"] = j.kind;
        r["n"] = j.n;
        r["k"] = j.k > 0 ? json(j.k) : json(nullptr);
        r["layers"] = opt.layers;
        const std::string st = r.value("status", "?");
        if (st == "ok")
          std::fprintf(stderr,
                       " max batch %lld, timed %lld: %.2f ms/seq, %.0f GFLOP/s (%.0f%% of sgemm), "
                       "RSS %.2f GiB [%.0f s]\n",
                       static_cast<long long>(r.value("max_batch", 0)),
                       static_cast<long long>(r.value("batch", 0)),
                       1e3 * r.value("seconds_per_sequence", 0.0), r.value("gflops", 0.0),
                       100.0 * r.value("gflops", 0.0) /
                           std::max(r.value("sgemm_gflops_now", this_peak), 1e-9),
                       r.value("peak_rss_bytes", 0.0) / kGiB, bench::now_seconds() - t0);
        else if (st == "does_not_fit")
          std::fprintf(stderr, " does not fit batch 1 (needs %.2f GiB)\n",
                       r.value("bytes_batch1", 0.0) / kGiB);
        else if (st == "skipped")
          std::fprintf(stderr, " skipped: predicted %.0f s > --max-run-seconds\n",
                       r.value("predicted_seconds", 0.0));
        else
          std::fprintf(stderr, " %s: %s\n", st.c_str(), r.value("error", "").c_str());
        runs.push_back(std::move(r));
      }
    opt.precision = main_precision;
    json meta = {
        {"sgemm_gflops", peak_gflops},
        {"compute", compute_type_name(opt.precision)},
        {"peaks", peaks},
        {"sgemm_shape", std::to_string(gm) + "x" + std::to_string(gn) + "x" + std::to_string(gk)},
        {"threads", peak.value("threads", 0)},
        {"budget_bytes", budget_bytes},
        {"layers", opt.layers},
        {"d_model", opt.d_model},
        {"heads", opt.heads},
        {"d_ff", opt.d_ff},
        {"vocab", opt.vocab},
        {"sharing", opt.sharing.empty() ? "layerwise" : opt.sharing},
        {"projection", opt.projection},
        {"batch_tokens", opt.batch_tokens},
        {"at_max_batch", opt.at_max_batch},
        {"forked", !opt.no_fork}};
    if (precisions.size() > 1) {
      meta["precisions"] = json::array();
      for (ComputeType t : precisions) meta["precisions"].push_back(compute_type_name(t));
    }
    json doc = {{"meta", meta}, {"runs", runs}};
    const std::string md = markdown(runs, meta, opt, opt.ns, opt.ks);
    if (!opt.out_dir.empty()) {
      std::filesystem::create_directories(opt.out_dir);
      write_file_atomic(opt.out_dir + "/bench.md", md);
      write_file_atomic(opt.out_dir + "/bench.json", doc.dump(1) + "\n");
      write_csv(opt.out_dir + "/bench.csv", runs);
      write_plots(opt.out_dir, runs_in(runs, compute_type_name(opt.precision)), opt.ks);
      std::fprintf(stderr, "bench: wrote %s/bench.{md,csv,json} and bench_{time,memory}.svg\n",
                   opt.out_dir.c_str());
    }
    if (opt.json_out)
      std::printf("%s\n", doc.dump(1).c_str());
    else
      std::printf("%s", md.c_str());
  });
}

}  // namespace lf::cli

namespace lf::cli::benchcli {

Config make_config(const Opts& o, const std::string& kind, int64_t n, int64_t k) {
  Config c;
  c.vocab_size = o.vocab;
  c.max_len = n;
  c.d_model = o.d_model;
  c.n_heads = o.heads;
  c.d_ff = o.d_ff;
  c.n_layers = o.layers;
  c.position_offset = 2;
  c.k = {k > 0 ? k : 128};
  bench::set_attention(c, bench::attention_choice(kind),
                       o.sharing.empty() ? "layerwise" : o.sharing, o.projection);
  c.dropout = 0.f;
  c.attention_dropout = 0.f;
  c.validate();
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string gib(double bytes) { return fmt("%.2f", bytes / kGiB); }

}  // namespace lf::cli::benchcli
