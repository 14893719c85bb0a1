// What `linformer bench` (inference, cmd_bench.cpp) and `linformer bench --train`
// (cmd_bench_train.cpp) share: the options, the model configuration of a run, running a run in
// a forked child, and number formatting.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/bench.h"
#include "linformer/compute_type.h"
#include "linformer/config.h"
#include "linformer/error.h"

namespace lf::cli::benchcli {

using nlohmann::json;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Opts {
  int64_t layers = 12, d_model = 768, heads = 12, d_ff = 3072, vocab = 50265;
  std::vector<int64_t> ns, ks;
  std::vector<std::string> kinds = bench::attention_choice_names();  // every one
  std::string sharing;  // empty: layerwise (inference), headwise (training)
  std::string projection = "linear";
  double budget_gib = 0;  // 0: default
  int64_t batch_tokens = 8192;
  bool at_max_batch = false;
  int reps = 3;
  double max_run_seconds = 900;
  bool quick = false, json_out = false, no_fork = false;
  ComputeType precision = ComputeType::f32;
  std::vector<std::string> compare_precisions;  // --compare-precision
  std::string out_dir, from_json;
  uint64_t seed = 1;
  // --train
  bool train = false;
  int64_t batch = 8;
  int warmup = 2;
};

// The configuration of one run: attention `kind` (a bench::attention_choices() name; a
// projected kind uses k, the sharing and the projection), max_len n, dropout 0.
Config make_config(const Opts& o, const std::string& kind, int64_t n, int64_t k);

double median(std::vector<double> v);
std::string fmt(const char* f, double v);  // snprintf of one number
std::string gib(double bytes);             // "%.2f" GiB

// The markdown of an inference run (bench_report.cpp): the grids of every efficient kind that
// ran against each baseline (standard attention's ways), and every run.
std::string markdown(const std::vector<json>& all_runs, const json& meta, const Opts& o,
                     const std::vector<int64_t>& ns, const std::vector<int64_t>& ks);
// bench.csv (a row per record) and the plots bench_time.svg and bench_memory.svg in dir
// (bench_report.cpp).
void write_csv(const std::string& path, const std::vector<json>& runs);
void write_plots(const std::string& dir, const std::vector<json>& runs,
                 const std::vector<int64_t>& ks);
// The records of one precision ("compute"; f32 when absent), in order.
std::vector<json> runs_in(const std::vector<json>& runs, const std::string& compute);
// The markdown section of `bench --compare-precision` (bench_precisions.cpp): every
// configuration's time in each precision of meta["precisions"], the speed-ups over the first,
// and each rate against its own precision's peak (meta["peaks"]).
std::string precisions_table(const std::vector<json>& runs, const json& meta);

// `linformer bench --train` (cmd_bench_train.cpp); `from_json` rewrites the tables of an
// earlier bench.json instead of running.
void run_train_bench(Opts o, const json* from_json);

// Runs f() (returning json) in a forked child and returns the JSON it produced (or an error
// record), so that the child's VmHWM is its own. The parent must not have started OpenMP
// threads (a forked child of such a process may not use OpenMP).
template <typename F>
json isolated(const F& f) {
  int fd[2];
  LF_CHECK(pipe(fd) == 0, "bench: pipe failed: ", std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  LF_CHECK(pid >= 0, "bench: fork failed: ", std::strerror(errno));
  if (pid == 0) {
    close(fd[0]);
    std::string out;
    try {
      out = f().dump();
    } catch (const std::exception& e) {
      out = json{{"status", "error"}, {"error", e.what()}}.dump();
    }
    size_t off = 0;
    while (off < out.size()) {
      const ssize_t w = write(fd[1], out.data() + off, out.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fd[1]);
    _exit(0);
  }
  close(fd[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st))
    return json{{"status", "error"},
                {"error", std::string("killed by signal ") + std::to_string(WTERMSIG(st)) +
                              (WTERMSIG(st) == 9 ? " (out of memory?)" : "")}};
  if (text.empty()) return json{{"status", "error"}, {"error", "child produced no result"}};
  return json::parse(text);
}

}  // namespace lf::cli::benchcli
