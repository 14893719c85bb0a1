#include "linformer/pretrain.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "data/corpus.h"
#include "data/mlm_data.h"
#include "io/json_read.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/plot.h"
#include "linformer/rng.h"
#include "linformer/tokenizer.h"
#include "train/run_io.h"
#include "train/train_loop.h"

namespace lf {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

void write_loss_plot(const std::string& run_dir, const std::string& metrics_path) {
  PlotSeries tr{"train", {}, {}}, va{"validation", {}, {}};
  for (const json& r : read_metrics(metrics_path)) {
    if (!r.contains("loss")) continue;
    PlotSeries& s = r.value("split", "") == "valid" ? va : tr;
    s.x.push_back(r["step"].get<double>());
    s.y.push_back(r["loss"].get<double>());
  }
  PlotOptions po;
  po.title = "MLM loss";
  po.x_label = "step";
  po.y_label = "cross-entropy (nats)";
  write_svg_line_plot((fs::path(run_dir) / "loss.svg").string(), {tr, va}, po);
}


// Masked-language-model steps over packed sequences: the pretraining task of the loop.
class MlmTask final : public TrainTask {
 public:
  MlmTask(Model& model, const PretrainOptions& opt, const PackedSequences& train,
          const PackedSequences& valid, const MaskingOptions& mo, int64_t n, TrainLoop& loop)
      : model_(model), opt_(opt), train_(train), valid_(valid), mo_(mo), n_(n), loop_(loop) {}

  int64_t begin_step(int64_t) override { return opt_.grad_accum; }

  double micro_batch(int64_t step, int64_t micro, uint64_t dropout_seed, LogWindow& w) override {
    // Sequence g of the run is position g % S of epoch g / S's order.
    const int64_t S = train_.count();
    std::vector<int64_t> which, epochs;
    for (int64_t b = 0; b < opt_.batch_size; ++b) {
      const int64_t g = (step * opt_.grad_accum + micro) * opt_.batch_size + b;
      const int64_t epoch = g / S;
      epochs.push_back(epoch);
      if (epoch != order_epoch_) {
        order_ = epoch_order(S, opt_.seed, epoch);
        order_epoch_ = epoch;
      }
      which.push_back(order_[g % S]);
    }
    make_mlm_batch(train_, which, epochs, mo_, opt_.seed, &batch_);
    model_.forward(Batch{batch_.ids.data(), batch_.mask.data(), opt_.batch_size, n_}, true,
                   dropout_seed);
    int64_t c = 0;
    const double l =
        model_.mlm_loss(batch_.labels.data(), true, 1.f / static_cast<float>(opt_.grad_accum), &c);
    model_.backward();
    w.tokens += static_cast<double>(batch_.real_tokens);
    total_tokens += static_cast<double>(batch_.real_tokens);
    return (c ? l / c : 0.0) / static_cast<double>(opt_.grad_accum);
  }

  void progress(const Progress& p, json& record) override {
    const double tps = p.window->tokens / std::max(p.window->time, 1e-9);
    record["ppl"] = std::exp(p.mean_loss);
    record["tokens_per_s"] = tps;
    say(opt_.quiet,
        "step %lld/%lld | loss %.4f | ppl %.2f | %.0f tok/s | lr %.2e | %s elapsed, %s left\n",
        static_cast<long long>(p.done), static_cast<long long>(p.total), p.mean_loss,
        std::exp(p.mean_loss), tps, p.lr, format_duration(p.elapsed).c_str(),
        format_duration(p.left).c_str());
  }

  // Mean loss over the first eval_batches validation batches, with fixed masks.
  void evaluate(int64_t done) override {
    const int64_t count = std::min(valid_.count(), opt_.eval_batches * opt_.batch_size);
    double total = 0;
    int64_t tokens = 0;
    MlmBatch vb;
    for (int64_t i0 = 0; i0 < count; i0 += opt_.batch_size) {
      std::vector<int64_t> which;
      for (int64_t i = i0; i < std::min(count, i0 + opt_.batch_size); ++i) which.push_back(i);
      // Fixed masks (epoch -1) so every evaluation sees the same task.
      make_mlm_batch(valid_, which, std::vector<int64_t>(which.size(), -1), mo_, opt_.seed, &vb);
      model_.forward(
          Batch{vb.ids.data(), vb.mask.data(), static_cast<int64_t>(which.size()), n_}, false);
      int64_t c = 0;
      total += model_.mlm_loss(vb.labels.data(), false, 1.f, &c);
      tokens += c;
    }
    last_valid = tokens ? total / tokens : 0.0;
    loop_.log().write({{"step", done},
                       {"split", "valid"},
                       {"loss", last_valid},
                       {"ppl", std::exp(last_valid)},
                       {"elapsed_s", loop_.seconds()}});
    say(opt_.quiet, "valid @ %lld | loss %.4f | ppl %.2f\n", static_cast<long long>(done),
        last_valid, std::exp(last_valid));
    write_loss_plot(opt_.out, loop_.log().path());
  }

  json checkpoint_state() const override { return json{{"kind", "pretrain"}}; }

  double last_valid = 0;    // loss of the last evaluation
  double total_tokens = 0;  // real tokens trained on in this session

 private:
  Model& model_;
  const PretrainOptions& opt_;
  const PackedSequences &train_, &valid_;
  const MaskingOptions& mo_;
  const int64_t n_;  // tokens per sequence
  TrainLoop& loop_;  // its metrics log and clock
  MlmBatch batch_;
  std::vector<int64_t> order_;  // the data order of epoch order_epoch_
  int64_t order_epoch_ = -1;
};

}  // namespace

PretrainResult pretrain(const PretrainOptions& opt_in, bool resume) {
  const json saved = read_run_args("pretrain", "pretraining", opt_in.out, resume);
  PretrainOptions opt = resume ? PretrainOptions::from_json(saved) : opt_in;
  validate_run_options("pretrain", opt, resume, opt_in.out);
  const fs::path run(opt_in.out);
  LF_CHECK(!opt.train.empty(), "pretrain: no training corpus given");
  NamedPaths inputs = {
      {"--config", opt.config}, {"--init-from", opt.init_from}, {"--tokenizer", opt.tokenizer}};
  for (const std::string& f : opt.train) inputs.push_back({"--train", f});
  for (const std::string& f : opt.valid) inputs.push_back({"--valid", f});
  const auto lock = take_run_folder(opt.out, "pretrain", resume, opt_in.overwrite, inputs);
  opt.optim.total_steps = opt.steps;
  if (opt.cache_dir.empty()) opt.cache_dir = (run / "cache").string();
  create_run_folder(opt.out);
  std::error_code ec;

  // Tokenizer: given, saved in the run, or trained on the training corpus.
  const std::vector<std::string> train_files = list_corpus_files(opt.train);
  const std::string tok_path = (run / "tokenizer.model").string();
  // Written under a temporary name and renamed, so a killed run never leaves a torn file.
  const std::string tok_tmp = (run / "tokenizer.tmp.model").string();
  if (!resume || !fs::exists(tok_path)) {
    if (!opt.tokenizer.empty()) {
      fs::copy_file(opt.tokenizer, tok_tmp, fs::copy_options::overwrite_existing, ec);
      LF_CHECK(!ec, "cannot copy tokenizer ", opt.tokenizer, ": ", ec.message());
    } else {
      say(opt.quiet, "tokenizer: training %s, %lld pieces, on %zu file(s)\n", opt.tokenizer_type.c_str(),
          static_cast<long long>(opt.vocab_size), train_files.size());
      TokenizerTrainOptions to;
      to.vocab_size = opt.vocab_size;
      to.model_type = opt.tokenizer_type;
      to.seed = opt.seed;
      Tokenizer::train(opt.train, tok_tmp, to);
    }
    fs::rename(tok_tmp, tok_path, ec);
    LF_CHECK(!ec, "cannot write ", tok_path, ": ", ec.message());
  }
  Tokenizer tok(tok_path);

  // Model configuration: the tokenizer decides the vocabulary.
  Config cfg;
  if (!opt.init_from.empty())
    cfg = Config::load_with_overrides((fs::path(opt.init_from) / "config.json").string(), opt.sets);
  else if (!opt.config.empty() || !opt.sets.empty())
    cfg = Config::load_with_overrides(opt.config, opt.sets);
  cfg.vocab_size = tok.vocab_size();
  cfg.pad_id = Tokenizer::kPad;
  cfg.cls_id = Tokenizer::kCls;
  const int64_t n = opt.seq_len > 0 ? opt.seq_len : cfg.max_len;
  LF_CHECK(n <= cfg.max_len, "pretrain: --seq-len ", n, " exceeds the model's max_len ",
           cfg.max_len);
  cfg.validate();

  // Data.
  TokenStream train_stream = TokenStream::build(train_files, tok, opt.cache_dir, !opt.quiet);
  PackedSequences train_seqs, valid_seqs;
  TokenStream valid_stream;
  if (!opt.valid.empty()) {
    valid_stream =
        TokenStream::build(list_corpus_files(opt.valid), tok, opt.cache_dir, !opt.quiet);
    train_seqs = PackedSequences{&train_stream, 0, train_stream.size(), n};
    valid_seqs = PackedSequences{&valid_stream, 0, valid_stream.size(), n};
    LF_CHECK(valid_seqs.count() > 0, "pretrain: the validation corpus is empty");
  } else {
    split_stream(train_stream, n, opt.valid_fraction, &train_seqs, &valid_seqs);
  }
  const int64_t S = train_seqs.count();
  say(opt.quiet, "data: %lld training sequences of %lld tokens, %lld validation sequences\n",
      static_cast<long long>(S), static_cast<long long>(n),
      static_cast<long long>(valid_seqs.count()));

  Model model(cfg);
  model.set_train_compute_type(opt.bf16 ? ComputeType::bf16 : ComputeType::f32);
  if (!opt.init_from.empty()) {
    LoadReport rep =
        load_weights(model, (fs::path(opt.init_from) / "model.safetensors").string(), {true, opt.seed});
    (void)rep;
  } else {
    model.init(opt.seed);
  }
  AdamW adam(model, opt.optim);
  LoopOptions lo = loop_options("pretrain", opt, opt.steps);
  lo.evaluate_at_stop = true;
  TrainLoop loop(model, adam, lo);
  loop.start(resume);
  if (!resume) {
    write_file_atomic(run_args_path(opt_in.out), opt.to_json().dump(2) + "\n");
    cfg.save((run / "config.json").string());
  }

  MaskingOptions mo;
  mo.mask_prob = opt.mask_prob;
  mo.vocab_size = cfg.vocab_size;
  mo.mask_id = Tokenizer::kMask;
  mo.first_normal_id = Tokenizer::kNumSpecial;
  MlmTask task(model, opt, train_seqs, valid_seqs, mo, n, loop);
  const LoopResult ran = loop.run(task);
  // The final model, ready for finetuning or inference.
  const std::string final_dir = (run / "model").string();
  save_model(model, final_dir);
  fs::copy_file(tok_path, fs::path(final_dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing, ec);
  PretrainResult res;
  res.steps_done = ran.steps_done;
  res.final_train_loss = ran.last_loss;
  res.final_valid_loss = task.last_valid;
  res.final_valid_ppl = std::exp(task.last_valid);
  res.seconds = loop.seconds();
  res.tokens_per_second = task.total_tokens / std::max(res.seconds, 1e-9);
  return res;
}

}  // namespace lf
