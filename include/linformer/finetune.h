// Finetuning for text classification: the whole run, resumable.
// RUN/ holds train_args.json, labels.json, tokenizer.model, metrics.jsonl, loss.svg,
// checkpoints/ (resumable, atomic), best/ (the best model by the dev metric: a complete model
// folder with tokenizer.model, labels.json and eval.json) and model/ (the final model).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/compute_type.h"
#include "linformer/optim.h"
#include "linformer/run.h"

namespace lf {

struct FinetuneOptions {
  std::string train, dev;         // data files or aclImdb folders (see linformer/classify_data.h)
  std::string out;                // run folder
  std::string init_from;          // pretrained model folder (with tokenizer.model)
  std::string config;             // from scratch: model configuration JSON (else the defaults)
  std::vector<std::string> sets;  // KEY=VALUE configuration overrides (from scratch)
  std::string tokenizer;          // from scratch: an existing tokenizer; else one is trained
  int64_t vocab_size = 8000;      // of a newly trained tokenizer
  std::string tokenizer_type = "unigram";
  int64_t max_len = 0;                 // tokens per example; 0: the model's max_len
  std::string truncate = "head";       // head, tail, head+tail
  bool lowercase = false;              // ASCII-lowercase texts (for an uncased tokenizer)
  bool pad_to_max = false;             // pad every batch to max_len (else to its longest sequence)
  bool bucket = true;                  // sort by length within pools (less padding)
  std::string bad_rows = "stop";       // stop or skip
  int64_t max_train = 0, max_dev = 0;  // evenly spread subsets (0: all)
  std::string metric = "auto";         // accuracy, f1, or auto (f1 for QQP, else accuracy)
  float dropout = -1;                  // >= 0: overrides the config's dropout
  int64_t batch_size = 32;  // examples per micro-batch and rank (mpirun: R ranks x this)
  int64_t grad_accum = 1;
  int64_t eval_batch_size = 64;
  int64_t epochs = 3;
  double warmup_ratio = 0.06;  // share of the steps used for warm-up (when warmup_steps is 0)
  OptimOptions optim;
  uint64_t seed = 0;
  int64_t log_every = 50;
  int64_t eval_every = 0;        // steps between dev evaluations (0: once per epoch)
  int64_t checkpoint_every = 0;  // steps between checkpoints (0: at each evaluation)
  double time_limit = 0;         // seconds of this call; 0 = none. Stops with a checkpoint
                                 // (stored for the record; --resume takes its own)
  // bf16: bf16 matrix products in training, f32 master weights (--precision)
  ComputeType precision = ComputeType::f32;
  // precision came from "auto" (--precision auto): a kind that trains in f32 only then
  // trains in f32 instead of being refused (not saved: the run stores what it chose)
  bool precision_auto = false;
  // precision was given to this call (--precision/--bf16, Python precision=): a resumed run
  // then runs this call in it instead of the stored one (not saved)
  bool precision_given = false;
  int64_t stop_after = 0;        // stop after this many steps of this session, with a
                                 // checkpoint (0: none; not saved: --resume runs to the end)
  bool quiet = false;
  bool overwrite = false;  // a new run may replace a run already in `out` (not saved)
  RunHooks hooks;          // for library callers: progress records, stop requests (not saved)

  // Throws lf::Error naming the first option out of its range (with the range), before
  // anything is read or written; pretrain()/finetune() call it.
  void validate() const;
  nlohmann::json to_json() const;
  static FinetuneOptions from_json(const nlohmann::json& j);
};

struct FinetuneResult {
  int64_t steps_done = 0, total_steps = 0;
  double best_metric = -1;  // on dev (accuracy or F1), -1 without dev data
  int64_t best_step = 0;
  double best_epoch = 0;
  nlohmann::json last_dev;  // metrics of the last evaluation
  double seconds = 0, examples_per_second = 0;
  size_t activation_bytes = 0;  // the engine's activation memory (largest shape)
  std::string metric;
  int ranks = 1;                 // processes of a data-parallel run (docs/distributed.md)
  double comm_wait_seconds = 0;  // rank 0's time waiting for the others
  bool stopped = false;  // a limit or a stop request ended it before the last step
};

// Runs (or with resume = true continues from RUN/checkpoints/latest) a finetuning run.
FinetuneResult finetune(const FinetuneOptions& opt, bool resume);

}  // namespace lf
