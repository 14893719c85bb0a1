#include "linformer/pretrain.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "data/corpus.h"
#include "data/mlm_data.h"
#include "dist/comm.h"
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
// With R ranks, micro-batch m of a step is the global one of R x batch_size sequences and
// rank r trains on its slice [r * batch_size, (r + 1) * batch_size); the sequences, their
// masks and their dropout are those of the global micro-batch whatever R is.
class MlmTask final : public TrainTask {
 public:
  MlmTask(Model& model, const PretrainOptions& opt, const PackedSequences& train,
          const PackedSequences& valid, const MaskingOptions& mo, int64_t n, TrainLoop& loop,
          Model* teacher)
      : model_(model), opt_(opt), train_(train), valid_(valid), mo_(mo), n_(n), loop_(loop),
        comm_(loop.comm()), teacher_(teacher) {}

  int64_t begin_step(int64_t) override { return opt_.grad_accum; }

  double micro_batch(int64_t step, int64_t micro, uint64_t dropout_seed, LogWindow& w) override {
    // Sequence g of the run is position g % S of epoch g / S's order.
    const int64_t S = train_.count();
    const int64_t B = opt_.batch_size, G = B * comm_.size(), first = B * comm_.rank();
    std::vector<int64_t> which, epochs;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t g = (step * opt_.grad_accum + micro) * G + first + b;
      const int64_t epoch = g / S;
      epochs.push_back(epoch);
      if (epoch != order_epoch_) {
        order_ = epoch_order(S, opt_.seed, epoch);
        order_epoch_ = epoch;
      }
      which.push_back(order_[g % S]);
    }
    make_mlm_batch(train_, which, epochs, mo_, opt_.seed, &batch_);
    // Several ranks: the loss is the mean over the global micro-batch's masked tokens, so
    // every rank divides by their total (summed before backward needs it).
    int64_t global_masked = 0;
    if (comm_.size() > 1) {
      for (int32_t y : batch_.labels) global_masked += y != -100;
      Stopwatch t;
      comm_.sum(&global_masked, 1, "the micro-batch's masked-token count");
      loop_.add_comm_wait(t.seconds());
    }
    MlmDistill kd;
    if (teacher_) {  // the teacher's logits on the masked positions, in the student's row order
      rows_.clear();
      for (int64_t r = 0; r < B * n_; ++r)
        if (batch_.labels[r] != -100) rows_.push_back(r);
      teacher_->forward(Batch{batch_.ids.data(), batch_.mask.data(), B, n_, first}, false);
      teacher_logits_.resize(rows_.size() * static_cast<size_t>(teacher_->config().vocab_size));
      if (!rows_.empty()) teacher_->mlm_logits(teacher_logits_.data(), rows_);
      kd.teacher_logits = teacher_logits_.data();
      kd.alpha = static_cast<float>(opt_.distill_alpha);
      kd.temperature = static_cast<float>(opt_.distill_temperature);
    }
    model_.forward(Batch{batch_.ids.data(), batch_.mask.data(), B, n_, first}, true,
                   dropout_seed);
    int64_t c = 0;
    const double l = model_.mlm_loss(batch_.labels.data(), true,
                                     1.f / static_cast<float>(opt_.grad_accum), &c, global_masked,
                                     teacher_ ? &kd : nullptr);
    model_.backward();
    w.tokens += static_cast<double>(batch_.real_tokens);
    total_tokens += static_cast<double>(batch_.real_tokens);
    const int64_t denom = global_masked > 0 ? global_masked : c;
    return (denom ? l / denom : 0.0) / static_cast<double>(opt_.grad_accum);
  }

  void progress(const Progress& p, json& record) override {
    const double tps = p.window->tokens / std::max(p.window->time, 1e-9);
    record["ppl"] = std::exp(p.mean_loss);
    record["tokens_per_s"] = tps;
    say(opt_.quiet,
        "step %lld/%lld | loss %.4f | ppl %.2f | %.0f tok/s | lr %.2e | %s elapsed, %s left%s\n",
        static_cast<long long>(p.done), static_cast<long long>(p.total), p.mean_loss,
        std::exp(p.mean_loss), tps, p.lr, format_duration(p.elapsed).c_str(),
        format_duration(p.left).c_str(), comm_note(p).c_str());
  }

  // Mean loss over the first eval_batches validation batches (of the global micro-batch
  // size), with fixed masks; each rank takes its slice of every batch.
  void evaluate(int64_t done) override {
    const int64_t B = opt_.batch_size, G = B * comm_.size();
    const int64_t count = std::min(valid_.count(), opt_.eval_batches * G);
    double sums[2] = {0, 0};  // summed loss, masked tokens
    MlmBatch vb;
    for (int64_t i0 = 0; i0 < count; i0 += G) {
      std::vector<int64_t> which;
      const int64_t lo = i0 + B * comm_.rank();
      for (int64_t i = lo; i < std::min(count, lo + B); ++i) which.push_back(i);
      if (which.empty()) continue;
      // Fixed masks (epoch -1) so every evaluation sees the same task.
      make_mlm_batch(valid_, which, std::vector<int64_t>(which.size(), -1), mo_, opt_.seed, &vb);
      model_.forward(
          Batch{vb.ids.data(), vb.mask.data(), static_cast<int64_t>(which.size()), n_}, false);
      int64_t c = 0;
      sums[0] += model_.mlm_loss(vb.labels.data(), false, 1.f, &c);
      sums[1] += static_cast<double>(c);
    }
    comm_.sum(sums, 2, "the validation loss");
    const double total = sums[0];
    const int64_t tokens = std::llround(sums[1]);
    last_valid = tokens ? total / tokens : 0.0;
    evaluated = true;
    loop_.log().write({{"step", done},
                       {"split", "valid"},
                       {"loss", last_valid},
                       {"ppl", std::exp(last_valid)},
                       {"elapsed_s", loop_.seconds()}});
    say(opt_.quiet, "valid @ %lld | loss %.4f | ppl %.2f\n", static_cast<long long>(done),
        last_valid, std::exp(last_valid));
    if (comm_.root()) write_loss_plot(opt_.out, loop_.log().path());
  }

  json checkpoint_state() const override { return json{{"kind", "pretrain"}}; }

  double last_valid = 0;    // loss of the last evaluation
  bool evaluated = false;   // an evaluation ran in this session
  double total_tokens = 0;  // real tokens this rank trained on in this session

 private:
  Model& model_;
  const PretrainOptions& opt_;
  const PackedSequences &train_, &valid_;
  const MaskingOptions& mo_;
  const int64_t n_;  // tokens per sequence
  TrainLoop& loop_;  // its metrics log and clock
  dist::Comm& comm_;
  MlmBatch batch_;
  Model* teacher_;                     // distillation's teacher, or null
  std::vector<int64_t> rows_;          // the micro-batch's masked positions
  std::vector<float> teacher_logits_;  // [rows_, V]
  std::vector<int64_t> order_;  // the data order of epoch order_epoch_
  int64_t order_epoch_ = -1;
};

}  // namespace

PretrainResult pretrain(const PretrainOptions& opt_in, bool resume) {
  // Data-parallel: every rank runs this function; rank 0 alone prints and writes the run
  // folder, the others read what it wrote (docs/distributed.md).
  dist::Comm& comm = dist::world();
  const bool root = comm.root();
  const json saved = read_run_args("pretrain", "pretraining", opt_in.out, resume);
  PretrainOptions opt = resume ? PretrainOptions::from_json(saved) : opt_in;
  if (resume) {  // what the run's arguments do not hold, and this call's limit
    opt.quiet = opt_in.quiet;
    opt.hooks = opt_in.hooks;
    opt.time_limit = opt_in.time_limit;
    opt.out = opt_in.out;  // the folder may have been moved or copied
    take_call_precision("pretrain", opt_in, &opt);
  }
  if (!root) opt.quiet = true;
  validate_run_options("pretrain", opt, resume, opt_in.out);
  opt.batch_size = rank_batch("pretrain", "sequences", saved, opt.batch_size, comm.size(), opt.quiet);
  const fs::path run(opt_in.out);
  LF_CHECK(!opt.train.empty(), "pretrain: no training corpus given");
  NamedPaths inputs = {
      {"--config", opt.config}, {"--init-from", opt.init_from}, {"--tokenizer", opt.tokenizer},
      {"--teacher", opt.teacher}};
  for (const std::string& f : opt.train) inputs.push_back({"--train", f});
  for (const std::string& f : opt.valid) inputs.push_back({"--valid", f});
  std::unique_ptr<RunLock> lock;
  if (root) lock = take_run_folder(opt.out, "pretrain", resume, opt_in.overwrite, inputs);
  opt.optim.total_steps = opt.steps;
  if (opt.cache_dir.empty()) opt.cache_dir = (run / "cache").string();
  if (root) create_run_folder(opt.out);
  std::error_code ec;

  // Tokenizer: given, the --init-from model's, saved in the run, or trained on the training
  // corpus. Any kind (tokenizer.model, tokenizer.json, vocab.json + merges.txt, vocab.txt) is
  // kept in the run folder under its own file names.
  const std::vector<std::string> train_files = list_corpus_files(opt.train);
  const std::string tok_path = (run / "tokenizer.model").string();
  // Written under a temporary name and renamed, so a killed run never leaves a torn file.
  const std::string tok_tmp = (run / "tokenizer.tmp.model").string();
  std::string tok_src = opt.tokenizer;
  if (tok_src.empty() && !opt.init_from.empty() && !Tokenizer::files_in(opt.init_from).empty())
    tok_src = opt.init_from;
  if (root && (!resume || Tokenizer::files_in(run.string()).empty())) {
    if (!tok_src.empty()) {
      copy_tokenizer_files(Tokenizer(tok_src), run.string());
    } else {
      say(opt.quiet, "tokenizer: training %s, %lld pieces, on %zu file(s)\n", opt.tokenizer_type.c_str(),
          static_cast<long long>(opt.vocab_size), train_files.size());
      TokenizerTrainOptions to;
      to.vocab_size = opt.vocab_size;
      to.model_type = opt.tokenizer_type;
      to.seed = opt.seed;
      Tokenizer::train(opt.train, tok_tmp, to);
      fs::rename(tok_tmp, tok_path, ec);
      LF_CHECK(!ec, "cannot write ", tok_path, ": ", ec.message());
    }
  }
  comm.barrier("waiting for rank 0's tokenizer");
  LF_CHECK(!Tokenizer::files_in(run.string()).empty(), "rank ", comm.rank(),
           " cannot see the tokenizer in ", run.string(),
           ", which rank 0 wrote: the run folder must be on a file system all ranks share "
           "(docs/distributed.md)");
  Tokenizer tok(run.string());

  // Model configuration: the tokenizer decides the vocabulary.
  Config cfg;
  if (!opt.init_from.empty())
    cfg = Config::load_with_overrides((fs::path(opt.init_from) / "config.json").string(), opt.sets);
  else if (!opt.config.empty() || !opt.sets.empty())
    cfg = Config::load_with_overrides(opt.config, opt.sets);
  cfg.vocab_size = tok.vocab_size();
  cfg.pad_id = tok.special().pad;
  cfg.cls_id = tok.special().cls;
  const int64_t n = opt.seq_len > 0 ? opt.seq_len : cfg.max_len;
  LF_CHECK(n <= cfg.max_len, "pretrain: --seq-len ", n, " exceeds the model's max_len ",
           cfg.max_len);
  cfg.validate();

  // Data: rank 0 tokenises into the cache, then the other ranks map it.
  TokenStream train_stream, valid_stream;
  auto load_streams = [&] {
    train_stream = TokenStream::build(train_files, tok, opt.cache_dir, !opt.quiet, root);
    if (!opt.valid.empty())
      valid_stream =
          TokenStream::build(list_corpus_files(opt.valid), tok, opt.cache_dir, !opt.quiet, root);
  };
  if (root) load_streams();
  comm.barrier("waiting for rank 0's token cache");
  if (!root) load_streams();
  PackedSequences train_seqs, valid_seqs;
  if (!opt.valid.empty()) {
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

  opt.precision = trained_precision("pretrain", cfg, opt.precision, opt.precision_auto, opt.quiet);
  Model model(cfg);
  model.set_train_compute_type(opt.precision);
  if (!opt.init_from.empty()) {
    LoadReport rep =
        load_weights(model, (fs::path(opt.init_from) / "model.safetensors").string(), {true, opt.seed});
    (void)rep;
  } else {
    model.init(opt.seed);
  }
  // Distillation's teacher: same vocabulary and special ids, long enough for the sequences;
  // it runs inference only, so a resumed run sees the same soft targets.
  std::unique_ptr<Model> teacher;
  if (!opt.teacher.empty()) {
    teacher = load_model(opt.teacher, {false, 0});
    const Config& tc = teacher->config();
    LF_CHECK(tc.vocab_size == cfg.vocab_size && tc.pad_id == cfg.pad_id && tc.cls_id == cfg.cls_id,
             "pretrain: --teacher ", opt.teacher, " has vocab_size ", tc.vocab_size, ", pad_id ",
             tc.pad_id, ", cls_id ", tc.cls_id, " but the run's tokenizer gives ", cfg.vocab_size,
             ", ", cfg.pad_id, ", ", cfg.cls_id, ": the teacher must use the same tokenizer");
    LF_CHECK(tc.max_len >= n, "pretrain: --teacher ", opt.teacher, " takes at most ", tc.max_len,
             " tokens, fewer than the sequences of ", n);
    if (!Tokenizer::files_in(opt.teacher).empty()) {
      const Tokenizer tt(opt.teacher);
      bool same = tt.vocab_size() == tok.vocab_size();
      for (int32_t id = 0; same && id < tok.vocab_size(); ++id) same = tt.piece(id) == tok.piece(id);
      LF_CHECK(same, "pretrain: --teacher ", opt.teacher,
               "'s tokenizer differs from the run's: the teacher must use the same tokenizer");
    }
    teacher->set_compute_type(opt.precision);
    say(opt.quiet, "distillation: teacher %s (%s attention), alpha %.2f, temperature %.2f\n",
        opt.teacher.c_str(), to_string(tc.attention), opt.distill_alpha, opt.distill_temperature);
  }
  AdamW adam(model, opt.optim);
  LoopOptions lo = loop_options("pretrain", opt, opt.steps);
  lo.evaluate_at_stop = true;
  lo.comm = &comm;
  TrainLoop loop(model, adam, lo);
  loop.start(resume);
  if (!resume && root) {
    write_run_args(opt_in.out, opt.to_json(), comm.size());
    cfg.save((run / "config.json").string());
  }

  const MaskingOptions mo = masking_for(tok, opt.mask_prob, cfg.vocab_size);
  train_seqs.set_frame(tok.special());
  valid_seqs.set_frame(tok.special());
  MlmTask task(model, opt, train_seqs, valid_seqs, mo, n, loop, teacher.get());
  const LoopResult ran = loop.run(task);
  // The final model, ready for finetuning or inference.
  if (root) {
    const std::string final_dir = (run / "model").string();
    save_model(model, final_dir);
    copy_tokenizer_files(tok, final_dir);
  }
  comm.sum(&task.total_tokens, 1, "the tokens trained on");
  PretrainResult res;
  res.steps_done = ran.steps_done;
  res.final_train_loss = ran.last_loss;
  res.evaluated = task.evaluated;
  res.final_valid_loss = task.last_valid;
  res.final_valid_ppl = std::exp(task.last_valid);
  res.seconds = loop.seconds();
  res.tokens_per_second = task.total_tokens / std::max(res.seconds, 1e-9);
  res.ranks = comm.size();
  res.comm_wait_seconds = ran.comm_wait;
  res.stopped = ran.stopped;
  return res;
}

}  // namespace lf
