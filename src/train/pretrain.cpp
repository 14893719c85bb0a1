#include "linformer/pretrain.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/limits.h"
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

namespace lf {

namespace fs = std::filesystem;
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

}  // namespace

PretrainResult pretrain(const PretrainOptions& opt_in, bool resume) {
  PretrainOptions opt = opt_in;
  LF_CHECK(!opt.out.empty(), "pretrain: no run folder (--out)");
  const fs::path run(opt.out);
  const fs::path args_path = run / "train_args.json";
  if (resume) {
    LF_CHECK(fs::exists(args_path), "pretrain --resume: ", args_path.string(),
             " not found; is ", opt.out, " a pretraining run folder?");
    json saved = read_json_file(args_path.string());
    opt = PretrainOptions::from_json(saved);
  }
  try {
    opt.validate();
  } catch (const Error& e) {
    fail("pretrain: ", e.what(), resume ? " (in " + args_path.string() + ")" : "");
  }
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
  auto say = [&](const char* fmt, auto... a) {
    if (!opt.quiet) std::fprintf(stderr, fmt, a...);
  };

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
      say("tokenizer: training %s, %lld pieces, on %zu file(s)\n", opt.tokenizer_type.c_str(),
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
  say("data: %lld training sequences of %lld tokens, %lld validation sequences\n",
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
  int64_t start = 0;
  json resume_state;  // state.json of the checkpoint resumed from
  if (resume) {
    resume_state = resume_latest(opt.out, model, adam, opt.quiet);
    if (!resume_state.is_null()) start = resume_state.at("step").get<int64_t>();
  } else {
    write_file_atomic(args_path.string(), opt.to_json().dump(2) + "\n");
    cfg.save((run / "config.json").string());
  }
  MetricsLog log((run / "metrics.jsonl").string(), resume ? start : -1);

  MaskingOptions mo;
  mo.mask_prob = opt.mask_prob;
  mo.vocab_size = cfg.vocab_size;
  mo.mask_id = Tokenizer::kMask;
  mo.first_normal_id = Tokenizer::kNumSpecial;

  auto evaluate = [&]() {
    const int64_t count = std::min(valid_seqs.count(), opt.eval_batches * opt.batch_size);
    double total = 0;
    int64_t tokens = 0;
    MlmBatch vb;
    for (int64_t i0 = 0; i0 < count; i0 += opt.batch_size) {
      std::vector<int64_t> which;
      for (int64_t i = i0; i < std::min(count, i0 + opt.batch_size); ++i) which.push_back(i);
      // Fixed masks (epoch -1) so every evaluation sees the same task.
      make_mlm_batch(valid_seqs, which, std::vector<int64_t>(which.size(), -1), mo, opt.seed, &vb);
      model.forward(Batch{vb.ids.data(), vb.mask.data(), static_cast<int64_t>(which.size()), n},
                    false);
      int64_t c = 0;
      total += model.mlm_loss(vb.labels.data(), false, 1.f, &c);
      tokens += c;
    }
    return tokens ? total / tokens : 0.0;
  };

  PretrainResult res;
  Stopwatch clock;
  const int64_t per_step = opt.batch_size * opt.grad_accum;
  MlmBatch batch;
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  LogWindow window;  // the progress window in flight at the checkpoint, if any
  window.load(resume_state);
  double total_tokens = 0;
  double last_valid = 0;
  int64_t step = start;
  for (; step < opt.steps; ++step) {
    Stopwatch st;
    model.zero_grad();
    double step_loss = 0;
    for (int64_t micro = 0; micro < opt.grad_accum; ++micro) {
      std::vector<int64_t> which, epochs;
      for (int64_t b = 0; b < opt.batch_size; ++b) {
        const int64_t g = step * per_step + micro * opt.batch_size + b;
        const int64_t epoch = g / S;
        epochs.push_back(epoch);
        if (epoch != order_epoch) {
          order = epoch_order(S, opt.seed, epoch);
          order_epoch = epoch;
        }
        which.push_back(order[g % S]);
      }
      make_mlm_batch(train_seqs, which, epochs, mo, opt.seed, &batch);
      const uint64_t dseed = mix64(opt.seed ^ mix64(static_cast<uint64_t>(step * opt.grad_accum + micro)));
      model.forward(Batch{batch.ids.data(), batch.mask.data(), opt.batch_size, n}, true, dseed);
      int64_t c = 0;
      const double l =
          model.mlm_loss(batch.labels.data(), true, 1.f / static_cast<float>(opt.grad_accum), &c);
      model.backward();
      step_loss += (c ? l / c : 0.0) / static_cast<double>(opt.grad_accum);
      window.tokens += static_cast<double>(batch.real_tokens);
      total_tokens += static_cast<double>(batch.real_tokens);
    }
    const double gnorm = clip_grad_norm(model, opt.optim.clip_norm);
    check_step_finite("pretrain", step_loss, gnorm, step + 1, opt.out);
    const float lr = lr_at(opt.optim, step);
    adam.step(lr);
    window.add_step(step_loss, st.seconds());
    const int64_t done = step + 1;
    res.final_train_loss = step_loss;
    if (done % opt.log_every == 0 || done == opt.steps) {
      const double mean = window.mean_loss();
      const double tps = window.tokens / std::max(window.time, 1e-9);
      const double left = (opt.steps - done) * window.seconds_per_step();
      log.write({{"step", done},
                 {"split", "train"},
                 {"loss", mean},
                 {"ppl", std::exp(mean)},
                 {"lr", lr},
                 {"grad_norm", gnorm},
                 {"tokens_per_s", tps},
                 {"elapsed_s", clock.seconds()}});
      say("step %lld/%lld | loss %.4f | ppl %.2f | %.0f tok/s | lr %.2e | %s elapsed, %s left\n",
          static_cast<long long>(done), static_cast<long long>(opt.steps), mean, std::exp(mean),
          tps, lr, format_duration(clock.seconds()).c_str(), format_duration(left).c_str());
      window.clear();
    }
    const bool time_up = opt.time_limit > 0 && clock.seconds() >= opt.time_limit;
    if ((opt.eval_every > 0 && done % opt.eval_every == 0) || done == opt.steps || time_up) {
      last_valid = evaluate();
      log.write({{"step", done},
                 {"split", "valid"},
                 {"loss", last_valid},
                 {"ppl", std::exp(last_valid)},
                 {"elapsed_s", clock.seconds()}});
      say("valid @ %lld | loss %.4f | ppl %.2f\n", static_cast<long long>(done), last_valid,
          std::exp(last_valid));
      write_loss_plot(opt.out, log.path());
    }
    if ((opt.checkpoint_every > 0 && done % opt.checkpoint_every == 0) || done == opt.steps ||
        time_up) {
      json state{{"kind", "pretrain"}};
      window.save(state);
      save_checkpoint(opt.out, done, model, adam, state);
    }
    if (time_up) {
      say("time limit reached after %lld steps; resume with --resume\n",
          static_cast<long long>(done));
      ++step;
      break;
    }
  }
  // The final model, ready for finetuning or inference.
  const std::string final_dir = (run / "model").string();
  save_model(model, final_dir);
  fs::copy_file(tok_path, fs::path(final_dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing, ec);
  res.steps_done = step;
  res.final_valid_loss = last_valid;
  res.final_valid_ppl = std::exp(last_valid);
  res.seconds = clock.seconds();
  res.tokens_per_second = total_tokens / std::max(res.seconds, 1e-9);
  return res;
}

}  // namespace lf
