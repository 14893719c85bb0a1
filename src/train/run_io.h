// What every training run writes: resumable checkpoints, a metrics log, a progress line.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "linformer/model.h"
#include "train/optim.h"

namespace lf {

// Creates a run folder (and its parents); fails naming it.
void create_run_folder(const std::string& dir);

// A resumable checkpoint: RUN/checkpoints/step-NNNNNNNN/{config.json, model.safetensors,
// optimizer.safetensors, state.json}. The folder is written under a temporary name and
// renamed into place, then RUN/checkpoints/latest is replaced atomically, so a run killed at
// any moment leaves the previous checkpoint usable.
void save_checkpoint(const std::string& run_dir, int64_t step, Model& model, AdamW& opt,
                     const nlohmann::json& state, int keep_last = 2);
// Path of the newest complete checkpoint folder, or "" if none.
std::string latest_checkpoint(const std::string& run_dir);
// Loads model weights, optimizer moments and step; returns state.json.
nlohmann::json load_checkpoint(const std::string& ckpt_dir, Model& model, AdamW& opt);
// --resume: loads the newest checkpoint of run_dir and says so on stderr (unless quiet);
// returns its state.json, or null when the run has none yet (it starts from step 0).
nlohmann::json resume_latest(const std::string& run_dir, Model& model, AdamW& opt, bool quiet);

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

// The progress-log window: what the steps since the last progress line add up to. It is
// saved in every checkpoint's state, so that the first line after a resume averages the same
// steps as the uninterrupted run's.
struct LogWindow {
  double loss = 0;    // sum of the steps' mean losses
  double time = 0;    // seconds
  double tokens = 0;  // real tokens (pretraining)
  int64_t steps = 0;
  int64_t examples = 0, correct = 0;  // examples and correct predictions (finetuning)

  void add_step(double step_loss, double seconds) {
    loss += step_loss;
    time += seconds;
    ++steps;
  }
  double mean_loss() const { return loss / steps; }
  double seconds_per_step() const { return time / steps; }
  void clear() { *this = LogWindow(); }
  // Into / from checkpoint state (window_* keys); load leaves it empty when they are absent.
  void save(nlohmann::json& state) const;
  void load(const nlohmann::json& state);
};

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
