// The options of the training commands: range checks and their JSON form (train_args.json,
// which --resume reads back).
#include "core/limits.h"
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
  optim.validate();
}

json PretrainOptions::to_json() const {
  json j{{"train", train},
         {"valid", valid},
         {"valid_fraction", valid_fraction},
         {"out", out},
         {"config", config},
         {"sets", sets},
         {"init_from", init_from},
         {"tokenizer", tokenizer},
         {"vocab_size", vocab_size},
         {"tokenizer_type", tokenizer_type},
         {"cache_dir", cache_dir},
         {"seq_len", seq_len},
         {"batch_size", batch_size},
         {"grad_accum", grad_accum},
         {"steps", steps},
         {"seed", seed},
         {"mask_prob", mask_prob},
         {"log_every", log_every},
         {"eval_every", eval_every},
         {"eval_batches", eval_batches},
         {"checkpoint_every", checkpoint_every},
         {"time_limit", time_limit},
         {"bf16", bf16}};
  optim_to_json(optim, &j);
  return j;
}

PretrainOptions PretrainOptions::from_json(const json& j) {
  PretrainOptions o;
  o.train = j.at("train").get<std::vector<std::string>>();
  o.valid = j.at("valid").get<std::vector<std::string>>();
  o.valid_fraction = j.at("valid_fraction");
  o.out = j.at("out");
  o.config = j.at("config");
  o.sets = j.value("sets", std::vector<std::string>{});
  o.init_from = j.at("init_from");
  o.tokenizer = j.at("tokenizer");
  o.vocab_size = j.at("vocab_size");
  o.tokenizer_type = j.at("tokenizer_type");
  o.cache_dir = j.at("cache_dir");
  o.seq_len = j.at("seq_len");
  o.batch_size = j.at("batch_size");
  o.grad_accum = j.at("grad_accum");
  o.steps = j.at("steps");
  o.optim = optim_from_json(j);
  o.optim.total_steps = o.steps;
  o.seed = j.at("seed");
  o.mask_prob = j.at("mask_prob");
  o.log_every = j.at("log_every");
  o.eval_every = j.at("eval_every");
  o.eval_batches = j.at("eval_batches");
  o.checkpoint_every = j.at("checkpoint_every");
  o.time_limit = j.at("time_limit");
  o.bf16 = j.value("bf16", false);
  return o;
}

json FinetuneOptions::to_json() const {
  json j{{"train", train},
         {"dev", dev},
         {"out", out},
         {"init_from", init_from},
         {"config", config},
         {"sets", sets},
         {"tokenizer", tokenizer},
         {"vocab_size", vocab_size},
         {"tokenizer_type", tokenizer_type},
         {"max_len", max_len},
         {"truncate", truncate},
         {"lowercase", lowercase},
         {"pad_to_max", pad_to_max},
         {"bucket", bucket},
         {"bad_rows", bad_rows},
         {"max_train", max_train},
         {"max_dev", max_dev},
         {"metric", metric},
         {"dropout", dropout},
         {"batch_size", batch_size},
         {"grad_accum", grad_accum},
         {"eval_batch_size", eval_batch_size},
         {"epochs", epochs},
         {"warmup_ratio", warmup_ratio},
         {"seed", seed},
         {"log_every", log_every},
         {"eval_every", eval_every},
         {"checkpoint_every", checkpoint_every},
         {"time_limit", time_limit}};
  optim_to_json(optim, &j);
  return j;
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
  optim.validate();
}

FinetuneOptions FinetuneOptions::from_json(const json& j) {
  FinetuneOptions o;
  o.train = j.at("train");
  o.dev = j.at("dev");
  o.out = j.at("out");
  o.init_from = j.at("init_from");
  o.config = j.at("config");
  o.sets = j.at("sets").get<std::vector<std::string>>();
  o.tokenizer = j.at("tokenizer");
  o.vocab_size = j.at("vocab_size");
  o.tokenizer_type = j.at("tokenizer_type");
  o.max_len = j.at("max_len");
  o.truncate = j.at("truncate");
  o.lowercase = j.value("lowercase", false);
  o.pad_to_max = j.at("pad_to_max");
  o.bucket = j.at("bucket");
  o.bad_rows = j.at("bad_rows");
  o.max_train = j.at("max_train");
  o.max_dev = j.at("max_dev");
  o.metric = j.at("metric");
  o.dropout = j.at("dropout");
  o.batch_size = j.at("batch_size");
  o.grad_accum = j.at("grad_accum");
  o.eval_batch_size = j.at("eval_batch_size");
  o.epochs = j.at("epochs");
  o.warmup_ratio = j.at("warmup_ratio");
  o.optim = optim_from_json(j);
  o.seed = j.at("seed");
  o.log_every = j.at("log_every");
  o.eval_every = j.at("eval_every");
  o.checkpoint_every = j.at("checkpoint_every");
  o.time_limit = j.at("time_limit");
  return o;
}

}  // namespace lf
