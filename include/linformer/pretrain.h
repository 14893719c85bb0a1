// Masked-language-model pretraining: the whole run, resumable.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/compute_type.h"
#include "linformer/optim.h"
#include "linformer/run.h"

namespace lf {

struct PretrainOptions {
  std::vector<std::string> train;  // corpus files or folders
  std::vector<std::string> valid;  // optional validation files; else a held-out share
  double valid_fraction = 0.05;
  std::string out;        // run folder
  std::string config;     // model config JSON (vocab_size taken from the tokenizer)
  std::vector<std::string> sets;  // KEY=VALUE overrides of the config (or of init_from's)
  std::string init_from;  // optional model folder to start from
  // Knowledge distillation (optional): a model folder with the same tokenizer whose MLM
  // logits on the masked positions are soft targets (Model::mlm_loss, MlmDistill).
  std::string teacher;
  double distill_alpha = 0.5;        // weight of the soft term
  double distill_temperature = 2.0;
  std::string tokenizer;  // existing tokenizer .model; else one is trained
  int64_t vocab_size = 8192;
  std::string tokenizer_type = "unigram";
  std::string cache_dir;  // token cache (default RUN/cache)
  int64_t seq_len = 0;    // 0: the config's max_len
  int64_t batch_size = 8;  // sequences per micro-batch and rank (mpirun: R ranks x this)
  int64_t grad_accum = 1;
  int64_t steps = 1000;
  OptimOptions optim;
  uint64_t seed = 0;
  double mask_prob = 0.15;
  int64_t log_every = 10;
  int64_t eval_every = 200;
  int64_t eval_batches = 20;
  int64_t checkpoint_every = 500;
  double time_limit = 0;  // seconds of this call; 0 = none. Stops with a checkpoint
                          // (stored for the record; --resume takes its own)
  // bf16: bf16 matrix products, f32 master weights (mixed precision; --precision)
  ComputeType precision = ComputeType::f32;
  // precision came from "auto" (--precision auto): a kind that trains in f32 only then
  // trains in f32 instead of being refused (not saved: the run stores what it chose)
  bool precision_auto = false;
  // precision was given to this call (--precision/--bf16, Python precision=): a resumed run
  // then runs this call in it instead of the stored one (not saved)
  bool precision_given = false;
  bool quiet = false;
  bool overwrite = false;  // a new run may replace a run already in `out` (not saved)
  RunHooks hooks;          // for library callers: progress records, stop requests (not saved)

  // Throws lf::Error naming the first option out of its range (with the range), before
  // anything is read or written; pretrain()/finetune() call it.
  void validate() const;
  nlohmann::json to_json() const;
  static PretrainOptions from_json(const nlohmann::json& j);
};

struct PretrainResult {
  int64_t steps_done = 0;
  double final_train_loss = 0, final_valid_loss = 0, final_valid_ppl = 0;
  // Whether the validation figures above were measured in this call: false when a resumed run
  // had already finished (nothing ran; the losses are then 0).
  bool evaluated = false;
  double seconds = 0, tokens_per_second = 0;  // tokens of all ranks
  int ranks = 1;                  // processes of a data-parallel run (docs/distributed.md)
  double comm_wait_seconds = 0;   // rank 0's time waiting for the others
  bool stopped = false;  // a limit or a stop request ended it before the last step
};

// Runs (or with resume = true continues from RUN/checkpoints/latest) a pretraining run.
PretrainResult pretrain(const PretrainOptions& opt, bool resume);

}  // namespace lf
