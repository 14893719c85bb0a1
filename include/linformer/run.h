// Run folders of the training commands: the progress log (RUN/metrics.jsonl), where the
// newest checkpoint is, and the timing helpers that print progress.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lf {

// What a library caller (e.g. the Python module) can attach to a pretraining or finetuning
// run; the command line uses neither. Both are called on rank 0's thread between steps.
struct RunHooks {
  // Sees every record the run appends to RUN/metrics.jsonl (progress lines with step, loss,
  // tokens_per_s or examples_per_s; evaluations), right after it is written.
  std::function<void(const nlohmann::json&)> on_record;
  // Asked after every step: true stops the run there with a checkpoint, as --time-limit does
  // (the run folder stays complete and --resume continues it). E.g. Python's Ctrl-C.
  std::function<bool()> stop_requested;
};

// Creates a run folder (and its parents); fails naming it.
void create_run_folder(const std::string& dir);

// Path of the newest complete checkpoint folder, or "" if none.
std::string latest_checkpoint(const std::string& run_dir);
// Appends JSON lines to RUN/metrics.jsonl (flushed per line).
class MetricsLog {
 public:
  MetricsLog() = default;
  // keep_until_step >= 0: rewrites the existing log keeping only records with
  // step <= keep_until_step (resume); < 0: starts a new log.
  MetricsLog(const std::string& path, int64_t keep_until_step);
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  // Called with every record after it is written (RunHooks::on_record).
  void set_listener(std::function<void(const nlohmann::json&)> f) { listener_ = std::move(f); }

 private:
  std::string path_;
  std::function<void(const nlohmann::json&)> listener_;
};

// Reads every record of a metrics log (skips a torn last line).
std::vector<nlohmann::json> read_metrics(const std::string& path);

// "1h02m03s"
std::string format_duration(double seconds);

class Stopwatch {
 public:
  Stopwatch() : t0_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace lf
