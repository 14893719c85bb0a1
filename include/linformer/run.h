// Run folders of the training commands: the progress log (RUN/metrics.jsonl), where the
// newest checkpoint is, and the timing helpers that print progress.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lf {

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

 private:
  std::string path_;
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
