// Resumable checkpoints of the training runs (the rest of a run folder: linformer/run.h).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/run_lock.h"
#include "linformer/error.h"
#include "linformer/model.h"
#include "linformer/run.h"
#include "train/optim.h"

namespace lf {

// A resumable checkpoint: RUN/checkpoints/step-NNNNNNNN/{config.json, model.safetensors,
// optimizer.safetensors, state.json}. The folder is written under a temporary name and
// renamed into place, then RUN/checkpoints/latest is replaced atomically, so a run killed at
// any moment leaves the previous checkpoint usable.
void save_checkpoint(const std::string& run_dir, int64_t step, Model& model, AdamW& opt,
                     const nlohmann::json& state, int keep_last = 2);
// Loads model weights, optimizer moments and step; returns state.json.
nlohmann::json load_checkpoint(const std::string& ckpt_dir, Model& model, AdamW& opt);
// The inputs of a run, as (option, path) pairs, for check_not_an_input.
using NamedPaths = std::vector<std::pair<std::string, std::string>>;
// RUN/train_args.json: the options a run was started with, which --resume reads back.
std::string run_args_path(const std::string& run_dir);
// With resume, RUN/train_args.json; else null. Throws "<cmd>: no run folder (--out)" for an
// empty run_dir and "<cmd> --resume: PATH not found; is RUN a <kind> run folder?".
nlohmann::json read_run_args(const char* cmd, const char* kind, const std::string& run_dir,
                             bool resume);
// opt.validate(), its error as "<cmd>: <what>", followed by " (in RUN/train_args.json)" when
// the options were read from there (resume).
template <typename Options>
void validate_run_options(const char* cmd, const Options& opt, bool resume,
                          const std::string& run_dir) {
  try {
    opt.validate();
  } catch (const Error& e) {
    fail(cmd, ": ", e.what(), resume ? " (in " + run_args_path(run_dir) + ")" : "");
  }
}
// Data-parallel runs. The per-rank micro-batch: `batch` unless the run (train_args.json,
// `saved`) started on another number of ranks, in which case the run's global micro-batch
// (its ranks x batch) is split over comm.size() ranks, so that its data order, masks and
// dropout stay those of the run; throws when it cannot be split evenly. `what` names the
// items ("sequences", "examples").
int64_t rank_batch(const char* cmd, const char* what, const nlohmann::json& saved,
                   int64_t batch, int ranks, bool quiet);
// Writes RUN/train_args.json atomically: `args`, plus "ranks" when more than one (--batch-size
// is per rank).
void write_run_args(const std::string& run_dir, nlohmann::json args, int ranks);
// Takes the run folder for this process (RunLock, created if needed), removes the
// temporaries a killed run left there, and makes sure nothing of the user's is lost: a new
// (not resumed) run refuses a folder that already holds a run unless `overwrite`, which then
// removes that run's files first; no file or folder the run writes may be one of `inputs`.
// Returns the lock, held until the run ends.
std::unique_ptr<RunLock> take_run_folder(const std::string& dir, const char* cmd, bool resume,
                                         bool overwrite, const NamedPaths& inputs);

// Throws lf::Error when a training step's loss or gradient norm is not finite, before the
// optimizer applies it: "<cmd>: the loss (or gradient norm) became nan at step S; stopped
// before updating the weights; the last good checkpoint is <dir> (resume it with --resume
// and a lower --lr)". Nothing of the run is overwritten.
void check_step_finite(const char* cmd, double loss, double grad_norm, int64_t step,
                       const std::string& run_dir);
// --precision auto chose t for this CPU; a kind that does not train in t (Nystromformer
// trains in f32 only) trains in f32, said on stderr. Any other precision is left as asked.
ComputeType trained_precision(const char* cmd, const Config& cfg, ComputeType t, bool automatic,
                              bool quiet);

// --resume with a precision given to the call (--precision/--bf16, Python precision=): that
// call runs in it, not in the one stored in RUN/train_args.json (which keeps the first choice),
// so that a run moved to a CPU where another precision is faster continues in it; said on
// stderr unless quiet. The master weights and moments are f32 in every precision.
template <typename Options>
void take_call_precision(const char* cmd, const Options& call, Options* run) {
  if (!call.precision_given) return;
  if (!call.quiet && call.precision != run->precision)
    std::fprintf(stderr, "%s --resume: this call trains in %s (the run began in %s)\n", cmd,
                 compute_type_name(call.precision), compute_type_name(run->precision));
  run->precision = call.precision;
  run->precision_auto = call.precision_auto;
}

// --resume: loads the newest checkpoint of run_dir and says so on stderr (unless quiet);
// returns its state.json, or null when the run has none yet (it starts from step 0).
nlohmann::json resume_latest(const std::string& run_dir, Model& model, AdamW& opt, bool quiet);

// Progress output of the training commands: printf to stderr unless quiet.
template <typename... Args>
void say(bool quiet, const char* fmt, Args... args) {
  if (!quiet) std::fprintf(stderr, fmt, args...);
}

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

}  // namespace lf
