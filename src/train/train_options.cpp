// The options of the training commands: range checks and their JSON form (train_args.json,
// which --resume reads back).
#include "core/limits.h"
#include "io/json_read.h"
#include "linformer/cpu.h"
#include "linformer/error.h"
#include "linformer/finetune.h"
#include "linformer/pretrain.h"
#include "linformer/tokenizer.h"

namespace lf {

using json = nlohmann::json;

void PretrainOptions::validate() const {
  check_below("--valid-fraction", valid_fraction, 0.0, 1.0);
  check_range("--vocab-size", vocab_size, int64_t{Tokenizer::kNumSpecial + 1}, limits::kMaxVocab);
  check_range("--seq-len", seq_len, int64_t{0}, limits::kMaxLen);
  check_range("--batch-size", batch_size, int64_t{1}, limits::kMaxBatch);
  check_range("--grad-accum", grad_accum, int64_t{1}, limits::kMaxBatch);
  check_range("--steps", steps, int64_t{1}, limits::kMaxSteps);
  LF_CHECK(mask_prob > 0 && mask_prob < 1, "--mask-prob must be in (0, 1), got ", mask_prob);
  check_range("--log-every", log_every, int64_t{1}, limits::kMaxSteps);
  check_range("--eval-every", eval_every, int64_t{0}, limits::kMaxSteps);
  check_range("--eval-batches", eval_batches, int64_t{1}, limits::kMaxSteps);
  check_range("--checkpoint-every", checkpoint_every, int64_t{0}, limits::kMaxSteps);
  check_range("--time-limit", time_limit, 0.0, 1e9);
  LF_CHECK(distill_alpha >= 0 && distill_alpha <= 1, "--distill-alpha must be in [0, 1], got ",
           distill_alpha);
  LF_CHECK(distill_temperature > 0 && distill_temperature <= 100,
           "--distill-temperature must be in (0, 100], got ", distill_temperature);
  require_trains(precision);
  optim.validate();
}

void FinetuneOptions::validate() const {
  check_range("--vocab-size", vocab_size, int64_t{Tokenizer::kNumSpecial + 1}, limits::kMaxVocab);
  check_range("--max-len", max_len, int64_t{0}, limits::kMaxLen);
  check_range("--max-train", max_train, int64_t{0}, limits::kMaxSteps);
  check_range("--max-dev", max_dev, int64_t{0}, limits::kMaxSteps);
  LF_CHECK(dropout == -1.f || (dropout >= 0.f && dropout < 1.f),
           "--dropout must be in [0, 1), got ", dropout);
  check_range("--batch-size", batch_size, int64_t{1}, limits::kMaxBatch);
  check_range("--grad-accum", grad_accum, int64_t{1}, limits::kMaxBatch);
  check_range("--eval-batch-size", eval_batch_size, int64_t{1}, limits::kMaxBatch);
  check_range("--epochs", epochs, int64_t{1}, int64_t{1000000});
  check_range("--warmup-ratio", warmup_ratio, 0.0, 1.0);
  check_range("--log-every", log_every, int64_t{1}, limits::kMaxSteps);
  check_range("--eval-every", eval_every, int64_t{0}, limits::kMaxSteps);
  check_range("--checkpoint-every", checkpoint_every, int64_t{0}, limits::kMaxSteps);
  check_range("--time-limit", time_limit, 0.0, 1e9);
  check_range("--stop-after", stop_after, int64_t{0}, limits::kMaxSteps);
  require_trains(precision);
  optim.validate();
}

// A precision is stored by its name.
void to_json(json& j, ComputeType t) { j = compute_type_name(t); }
// "auto": this CPU's faster training precision (the options' precision_auto remembers it).
void from_json(const json& j, ComputeType& t) { t = resolve_precision(j.get<std::string>()); }

// Runs of earlier versions stored "bf16": true|false instead of "precision".
static json precision_default(const json& j) {
  return j.value("bf16", false) ? "bf16" : "f32";
}

// train_args.json: the stored fields, each listed once (the key is the field's name). The
// optimiser's fields stand beside them (optim_to_json); quiet, overwrite and stop_after are
// not stored. A key that runs of earlier versions did not write is read with the value it meant.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PretrainOptions, train, valid, valid_fraction, out, config, sets,
                                   init_from, teacher, distill_alpha, distill_temperature,
                                   tokenizer, vocab_size, tokenizer_type, cache_dir,
                                   seq_len, batch_size, grad_accum, steps, seed, mask_prob,
                                   log_every, eval_every, eval_batches, checkpoint_every,
                                   time_limit, precision)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FinetuneOptions, train, dev, out, init_from, config, sets,
                                   tokenizer, vocab_size, tokenizer_type, max_len, truncate,
                                   lowercase, pad_to_max, bucket, bad_rows, max_train, max_dev,
                                   metric, dropout, batch_size, grad_accum, eval_batch_size, epochs,
                                   warmup_ratio, seed, log_every, eval_every, checkpoint_every,
                                   time_limit, precision)

json PretrainOptions::to_json() const {
  json j = *this;
  optim_to_json(optim, &j);
  return j;
}

PretrainOptions PretrainOptions::from_json(const json& j) {
  // Runs written before distillation existed have no teacher.
  auto o = with_defaults(j, {{"sets", json::array()},
                             {"precision", precision_default(j)},
                             {"teacher", ""},
                             {"distill_alpha", 0.5},
                             {"distill_temperature", 2.0}})
               .get<PretrainOptions>();
  o.optim = optim_from_json(j);
  o.optim.total_steps = o.steps;
  o.precision_auto = j.value("precision", "") == "auto";
  return o;
}

json FinetuneOptions::to_json() const {
  json j = *this;
  optim_to_json(optim, &j);
  return j;
}

FinetuneOptions FinetuneOptions::from_json(const json& j) {
  auto o = with_defaults(j, {{"lowercase", false}, {"precision", precision_default(j)}})
               .get<FinetuneOptions>();
  o.optim = optim_from_json(j);
  o.precision_auto = j.value("precision", "") == "auto";
  return o;
}

}  // namespace lf
