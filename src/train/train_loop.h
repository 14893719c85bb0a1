// The one training loop of pretraining and finetuning. It owns the steps: micro-batches and
// gradient accumulation, clipping, the learning-rate schedule, AdamW, the non-finite check,
// progress lines (with the LogWindow), periodic evaluation, atomic checkpoints with exact
// resume, and the time and step limits. A command supplies a TrainTask: what a micro-batch
// is, how to evaluate, and what a progress line and a checkpoint add.
//
// Data-parallel runs (several ranks, docs/distributed.md): every rank runs the same loop on
// its slice of each micro-batch. The loop sums the gradients over the ranks (in buckets
// started during the last micro-batch's backward), the step's loss and window counts, and
// decides the time limit together; rank 0 alone writes metrics and checkpoints; the weights
// are compared across ranks every kWeightCheckEvery steps and at every checkpoint.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "dist/comm.h"
#include "dist/grad_reducer.h"

#include "linformer/model.h"
#include "linformer/run.h"
#include "train/optim.h"
#include "train/run_io.h"

namespace lf {

// What the loop hands to a progress line.
struct Progress {
  int64_t done = 0, total = 0;  // steps
  double mean_loss = 0;         // over the window's steps
  float lr = 0;
  double grad_norm = 0;         // of the last step, before clipping
  double elapsed = 0, left = 0;  // seconds (left: estimated from the window)
  const LogWindow* window = nullptr;
  int ranks = 1;                 // processes of a data-parallel run
  double comm_wait = 0;          // seconds per step waiting for the other ranks (window mean)
};

// " | 2 ranks, comm wait 12.3 ms/step" for a data-parallel run's progress line, else "".
std::string comm_note(const Progress& p);

class TrainTask {
 public:
  virtual ~TrainTask() = default;
  // Prepares step `step` (from 0) and returns its number of micro-batches (at least 1).
  virtual int64_t begin_step(int64_t step) = 0;
  // Forward and backward of micro-batch `micro` of the step, dropout drawn from
  // `dropout_seed`: adds its share of the gradient of the step's mean loss into the model's
  // gradients and returns its share of that mean loss. Adds what the progress line counts
  // (tokens, examples, correct predictions) into `window`. With several ranks, micro-batch
  // `micro` is the global one: the task runs its rank's slice (possibly empty) and returns
  // and counts that slice's share; the loop sums the shares over the ranks.
  virtual double micro_batch(int64_t step, int64_t micro, uint64_t dropout_seed,
                             LogWindow& window) = 0;
  // Adds the task's fields to a progress record (the loop fills step, split, loss, lr,
  // grad_norm, elapsed_s) and prints the progress line.
  virtual void progress(const Progress& p, nlohmann::json& record) = 0;
  // Evaluates the model after `done` steps, writing its own records.
  virtual void evaluate(int64_t done) = 0;
  // The task's part of a checkpoint's state.json ("kind", the best model so far, ...).
  virtual nlohmann::json checkpoint_state() const = 0;
};

struct LoopOptions {
  const char* cmd = "";  // "pretrain" or "finetune", for messages
  std::string run_dir;
  int64_t total_steps = 0;
  int64_t grad_accum = 1;   // dropout seed of micro-batch m of step s: (seed, s * grad_accum + m)
  uint64_t seed = 0;
  int64_t epoch_steps = 0;  // > 0: a progress line and an evaluation end every epoch
  int64_t log_every = 1;
  int64_t eval_every = 0;        // 0: only at the end (and each epoch)
  int64_t checkpoint_every = 0;  // 0: only at the end (and when stopping)
  double time_limit = 0;         // seconds; 0: none
  int64_t stop_after = 0;        // steps of this session; 0: none
  bool evaluate_at_stop = false;    // evaluate when a limit stops the run
  bool checkpoint_at_eval = false;  // checkpoint at every evaluation
  int keep_checkpoints = 2;
  bool quiet = false;
  dist::Comm* comm = nullptr;  // the ranks of a data-parallel run; null: dist::world()
  RunHooks hooks;              // a library caller's progress listener and stop request
};

// Steps between the data-parallel weight comparisons (also done at every checkpoint).
constexpr int64_t kWeightCheckEvery = 50;

struct LoopResult {
  int64_t steps_done = 0;  // the step the run reached
  bool stopped = false;    // a limit stopped it before the last step
  double last_loss = 0;    // mean loss of the last step run
  double comm_wait = 0;    // seconds this rank waited for the others (data-parallel runs)
};

// The loop options of a command's options (PretrainOptions, FinetuneOptions: the fields of
// the same names); the rest stays at the defaults for the command to set.
template <typename CommandOptions>
LoopOptions loop_options(const char* cmd, const CommandOptions& o, int64_t total_steps) {
  LoopOptions lo;
  lo.cmd = cmd;
  lo.run_dir = o.out;
  lo.total_steps = total_steps;
  lo.grad_accum = o.grad_accum;
  lo.seed = o.seed;
  lo.log_every = o.log_every;
  lo.eval_every = o.eval_every;
  lo.checkpoint_every = o.checkpoint_every;
  lo.time_limit = o.time_limit;
  lo.quiet = o.quiet;
  lo.hooks = o.hooks;
  return lo;
}

class TrainLoop {
 public:
  TrainLoop(Model& model, AdamW& adam, const LoopOptions& o);
  // With resume, loads the newest checkpoint of the run (weights, AdamW moments, step, the
  // progress window in flight) and returns its state.json, or null when there is none yet.
  // Opens RUN/metrics.jsonl: a resumed run keeps its records up to the checkpoint's step.
  nlohmann::json start(bool resume);
  // Runs the steps from the start step to the end or a limit.
  LoopResult run(TrainTask& task);

  MetricsLog& log() { return log_; }  // writes nothing on ranks other than 0
  double seconds() const { return clock_.seconds(); }  // since run() began
  dist::Comm& comm() { return *comm_; }
  // A task's own waiting for the other ranks (counts all-reduced before backward), for the
  // progress line's comm wait.
  void add_comm_wait(double seconds) {
    comm_window_ += seconds;
    comm_total_ += seconds;
  }

 private:
  bool limit_reached(int64_t done) const;
  bool stop_requested() const;  // RunHooks::stop_requested, asked on rank 0 only

  Model& model_;
  AdamW& adam_;
  LoopOptions o_;
  dist::Comm* comm_;
  std::unique_ptr<dist::GradReducer> reducer_;  // several ranks only
  int64_t start_ = 0;
  LogWindow window_;
  MetricsLog log_;
  Stopwatch clock_;
  double comm_window_ = 0, comm_total_ = 0;  // seconds waited: since the last line, in all
};

}  // namespace lf
