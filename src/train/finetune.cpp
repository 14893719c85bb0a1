#include "linformer/finetune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dist/comm.h"
#include "io/json_read.h"
#include "linformer/checkpoint.h"
#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/plot.h"
#include "linformer/rng.h"
#include "linformer/safetensors.h"
#include "linformer/tokenizer.h"
#include "train/run_io.h"
#include "train/train_loop.h"

namespace lf {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kClassifierInit = 0xC1A55;

// Copies every encoder (and MLM head) tensor of a pretrained model; the classifier is always
// freshly initialised (its class count is the data's). Linformer projections and the MLM head
// absent from the file are initialised too.
void load_pretrained_encoder(Model& model, const std::string& path, uint64_t seed,
                             std::vector<std::string>* initialised) {
  SafeTensorsReader r(path);
  std::vector<std::string> fresh;
  for (const ParamInfo& p : model.params()) {
    const bool head = p.name.rfind("classifier.", 0) == 0;
    const bool optional = p.name.find("_proj") != std::string::npos || p.name.rfind("lm_head.", 0) == 0;
    if (head || (!r.has(p.name) && optional)) {
      fresh.push_back(p.name);
      continue;
    }
    LF_CHECK(r.has(p.name), path, ": tensor '", p.name, "' is missing");
    r.read_f32(p.name, p.shape, model.param_data() + p.offset);
  }
  model.init_some(mix64(seed ^ kClassifierInit), fresh);
  if (initialised) *initialised = fresh;
}

void write_plot(const std::string& run_dir, const std::string& metrics_path, const std::string& metric) {
  PlotSeries tr{"train loss", {}, {}}, dv{"dev loss", {}, {}}, acc{"dev " + metric, {}, {}};
  for (const json& r : read_metrics(metrics_path)) {
    const std::string split = r.value("split", "");
    if (split == "train" && r.contains("loss")) {
      tr.x.push_back(r["step"].get<double>());
      tr.y.push_back(r["loss"].get<double>());
    } else if (split == "dev") {
      dv.x.push_back(r["step"].get<double>());
      dv.y.push_back(r["loss"].get<double>());
      acc.x.push_back(r["step"].get<double>());
      acc.y.push_back(r[metric].get<double>());
    }
  }
  PlotOptions po;
  po.title = "Finetuning loss";
  po.x_label = "step";
  po.y_label = "cross-entropy (nats)";
  write_svg_line_plot((fs::path(run_dir) / "loss.svg").string(), {tr, dv}, po);
  if (!acc.x.empty()) {
    po.title = "Dev " + metric;
    po.y_label = metric;
    write_svg_line_plot((fs::path(run_dir) / "dev.svg").string(), {acc}, po);
  }
}

double mean_length(const std::vector<std::vector<int32_t>>& seqs) {
  double s = 0;
  for (const auto& q : seqs) s += static_cast<double>(q.size());
  return seqs.empty() ? 0 : s / seqs.size();
}


// Classification steps over length-bucketed batches: the finetuning task of the loop.
// With R ranks the batches are planned at R x batch_size examples (the global micro-batch)
// and rank r trains on its slice [r * batch_size, (r + 1) * batch_size) of each, padded to the
// global micro-batch's longest sequence, so that shapes and dropout masks are those of one
// process running the whole micro-batch. The slice of the epoch's last, smaller micro-batch
// may be empty: that rank then only takes part in the gradient sum.
class ClassifyTask final : public TrainTask {
 public:
  // The run's encoded data and what its folders record.
  struct Data {
    const std::vector<std::vector<int32_t>>& train_x;
    const std::vector<int32_t>& train_y;
    const std::vector<int64_t>& lengths;  // of train_x
    const std::vector<std::vector<int32_t>>& dev_x;  // empty: no dev data
    const std::vector<int32_t>& dev_y;
    const LabelMap& labels;
    const TaskInfo& task;
    const std::string& metric;  // accuracy or f1
    const std::string& tok_path;
    int64_t steps_per_epoch, max_len;
  };
  ClassifyTask(Model& model, const FinetuneOptions& opt, TrainLoop& loop, const Data& d)
      : model_(model), opt_(opt), loop_(loop), comm_(loop.comm()), d_(d) {}

  // The best model so far, from a resumed checkpoint's state (null: none).
  void restore(const json& state) {
    if (state.is_null()) return;
    best = state.value("best_metric", -1.0);
    best_step = state.value("best_step", int64_t{0});
  }

  int64_t begin_step(int64_t step) override {
    const int64_t epoch = step / d_.steps_per_epoch;
    if (epoch != plan_epoch_) {
      plan_ = epoch_batches(d_.lengths, opt_.batch_size * comm_.size(), opt_.bucket, opt_.seed,
                            epoch);
      plan_epoch_ = epoch;
    }
    // The epoch's last step may have fewer micro-batches.
    first_ = (step % d_.steps_per_epoch) * opt_.grad_accum;
    const int64_t last =
        std::min<int64_t>(first_ + opt_.grad_accum, static_cast<int64_t>(plan_.size()));
    step_examples_ = 0;
    for (int64_t mb = first_; mb < last; ++mb)
      step_examples_ += static_cast<int64_t>(plan_[mb].size());
    return last - first_;
  }

  double micro_batch(int64_t, int64_t micro, uint64_t dropout_seed, LogWindow& w) override {
    const Config& cfg = model_.config();
    const std::vector<int64_t>& global = plan_[first_ + micro];
    const int64_t size = static_cast<int64_t>(global.size());
    const int64_t first = std::min(size, opt_.batch_size * comm_.rank());
    const std::vector<int64_t> which(global.begin() + first,
                                     global.begin() + std::min(size, first + opt_.batch_size));
    if (which.empty()) return 0.0;
    int64_t pad_to = opt_.pad_to_max ? d_.max_len : 0;
    if (comm_.size() > 1)
      for (int64_t i : global) pad_to = std::max(pad_to, d_.lengths[i]);
    make_padded_batch(d_.train_x, which, static_cast<int32_t>(cfg.pad_id), pad_to, &pb_);
    std::vector<int32_t> y(which.size());
    for (size_t b = 0; b < which.size(); ++b) y[b] = d_.train_y[which[b]];
    model_.forward(Batch{pb_.ids.data(), pb_.mask.data(), pb_.B, pb_.N, first}, true,
                   dropout_seed);
    logits_.resize(pb_.B * cfg.num_classes);
    model_.cls_logits(logits_.data());
    // Weight by the micro-batch's share of the step's examples: the step's gradient is the
    // mean over all its examples.
    const float weight = static_cast<float>(pb_.B) / static_cast<float>(step_examples_);
    const double l = model_.cls_loss(y.data(), true, weight);
    model_.backward();
    for (int64_t b = 0; b < pb_.B; ++b) {
      const float* lb = logits_.data() + b * cfg.num_classes;
      w.correct += (std::max_element(lb, lb + cfg.num_classes) - lb) == y[b];
    }
    w.examples += pb_.B;
    total_examples += static_cast<double>(pb_.B);
    return l / static_cast<double>(step_examples_);
  }

  void progress(const Progress& p, json& record) override {
    const LogWindow& w = *p.window;
    const double eps = w.examples / std::max(w.time, 1e-9);
    const double acc = static_cast<double>(w.correct) / std::max<int64_t>(w.examples, 1);
    record["epoch"] = static_cast<double>(p.done) / d_.steps_per_epoch;
    record["accuracy"] = acc;
    record["examples_per_s"] = eps;
    record["activation_bytes"] = model_.activation_bytes();
    say(opt_.quiet,
        "epoch %lld/%lld | step %lld/%lld | loss %.4f | acc %.1f%% | %.1f ex/s | lr %.2e | "
        "act %.0f MB | %s elapsed, %s left%s\n",
        static_cast<long long>((p.done - 1) / d_.steps_per_epoch + 1),
        static_cast<long long>(opt_.epochs), static_cast<long long>(p.done),
        static_cast<long long>(p.total), p.mean_loss, 100 * acc, eps, p.lr,
        model_.activation_bytes() / 1048576.0, format_duration(p.elapsed).c_str(),
        format_duration(p.left).c_str(), comm_note(p).c_str());
  }

  // On the dev data, keeping the best model in RUN/best; without dev data the latest
  // evaluated model is kept there. With several ranks each predicts its share of the dev
  // examples and the predictions are summed, so every rank computes the same metrics.
  void evaluate(int64_t done) override {
    const bool root = comm_.root();
    const fs::path best_dir = fs::path(opt_.out) / "best";
    if (d_.dev_x.empty()) {
      if (root)
        save_classifier_folder(model_, d_.tok_path, d_.labels, d_.task, best_dir.string(),
                               json{{"step", done}});
      best_step = done;
      return;
    }
    Stopwatch t;
    std::vector<float> probs;
    if (comm_.size() == 1) {
      probs = predict_probs(model_, d_.dev_x, opt_.eval_batch_size, true);
    } else {
      const int64_t n = static_cast<int64_t>(d_.dev_x.size()), C = d_.labels.size();
      const int64_t lo = n * comm_.rank() / comm_.size(),
                    hi = n * (comm_.rank() + 1) / comm_.size();
      probs.assign(n * C, 0.f);
      if (hi > lo) {
        const std::vector<std::vector<int32_t>> shard(d_.dev_x.begin() + lo,
                                                      d_.dev_x.begin() + hi);
        const std::vector<float> mine = predict_probs(model_, shard, opt_.eval_batch_size, true);
        std::copy(mine.begin(), mine.end(), probs.begin() + lo * C);
      }
      comm_.sum(probs.data(), n * C, "the dev predictions");
    }
    const ClassifyMetrics m =
        compute_metrics(probs, d_.dev_y, d_.labels.size(), d_.labels.positive);
    const double value = d_.metric == "f1" ? m.f1 : m.accuracy;
    const double epoch = static_cast<double>(done) / d_.steps_per_epoch;
    loop_.log().write({{"step", done}, {"epoch", epoch}, {"split", "dev"}, {"loss", m.loss},
                       {"accuracy", m.accuracy}, {"f1", m.f1}, {"eval_s", t.seconds()},
                       {"activation_bytes", model_.activation_bytes()}});
    say(opt_.quiet, "dev @ step %lld (epoch %.2f) | loss %.4f | accuracy %.2f%% | F1 %.2f%% | %s",
        static_cast<long long>(done), epoch, m.loss, 100 * m.accuracy, 100 * m.f1,
        format_duration(t.seconds()).c_str());
    last_dev = m.to_json(d_.labels);
    if (value > best) {
      best = value;
      best_step = done;
      json extra = last_dev;
      extra["step"] = done;
      extra["epoch"] = epoch;
      if (root)
        save_classifier_folder(model_, d_.tok_path, d_.labels, d_.task, best_dir.string(),
                               extra);
      say(opt_.quiet, " | new best %s, saved %s\n", d_.metric.c_str(), best_dir.string().c_str());
    } else {
      say(opt_.quiet, " | best %.2f%% at step %lld\n", 100 * best,
          static_cast<long long>(best_step));
    }
    if (root) write_plot(opt_.out, loop_.log().path(), d_.metric);
  }

  json checkpoint_state() const override {
    return json{{"kind", "finetune"}, {"best_metric", best}, {"best_step", best_step}};
  }

  double best = -1;          // the best dev metric so far
  int64_t best_step = 0;     // and its step
  json last_dev;             // metrics of the last dev evaluation
  double total_examples = 0;  // this rank trained on in this session

 private:
  Model& model_;
  const FinetuneOptions& opt_;
  TrainLoop& loop_;  // its metrics log
  dist::Comm& comm_;
  const Data d_;
  std::vector<std::vector<int64_t>> plan_;  // micro-batches of epoch plan_epoch_
  int64_t plan_epoch_ = -1;
  int64_t first_ = 0, step_examples_ = 0;  // the step's first micro-batch, its examples
  PaddedBatch pb_;
  std::vector<float> logits_;
};

}  // namespace

FinetuneResult finetune(const FinetuneOptions& opt_in, bool resume) {
  // Data-parallel: every rank runs this function; rank 0 alone prints and writes the run
  // folder, the others read what it wrote (docs/distributed.md).
  dist::Comm& comm = dist::world();
  const bool root = comm.root();
  const json saved = read_run_args("finetune", "finetuning", opt_in.out, resume);
  FinetuneOptions opt = opt_in;
  if (resume) {
    opt = FinetuneOptions::from_json(saved);
    opt.quiet = opt_in.quiet;
    opt.stop_after = opt_in.stop_after;
    opt.time_limit = opt_in.time_limit;  // a limit is this call's, not the stored one
    opt.hooks = opt_in.hooks;
    opt.out = opt_in.out;  // the folder may have been moved
    take_call_precision("finetune", opt_in, &opt);
  }
  if (!root) opt.quiet = true;
  LF_CHECK(!opt.train.empty(), "finetune: no training data (--train)");
  validate_run_options("finetune", opt, resume, opt_in.out);
  opt.batch_size = rank_batch("finetune", "examples", saved, opt.batch_size, comm.size(), opt.quiet);
  const fs::path run(opt.out);
  LF_CHECK(opt.bad_rows == "stop" || opt.bad_rows == "skip",
           "--bad-rows must be stop or skip, got ", opt.bad_rows);
  const Truncate trunc = parse_truncate(opt.truncate);
  std::unique_ptr<RunLock> lock;
  if (root) {
    lock = take_run_folder(opt.out, "finetune", resume, opt_in.overwrite,
                           {{"--train", opt.train},
                            {"--dev", opt.dev},
                            {"--init-from", opt.init_from},
                            {"--config", opt.config},
                            {"--tokenizer", opt.tokenizer}});
    create_run_folder(opt.out);
  }
  std::error_code ec;
  const BadRows policy = opt.bad_rows == "skip" ? BadRows::skip : BadRows::stop;
  auto report_bad = [&](const ClassifyData& d, const std::string& what) {
    if (d.bad_rows == 0) return;
    say(opt.quiet, "%s: skipped %lld bad row(s)\n", what.c_str(), static_cast<long long>(d.bad_rows));
    for (const std::string& m : d.bad_messages) say(opt.quiet, "  %s\n", m.c_str());
    if (d.bad_rows > static_cast<int64_t>(d.bad_messages.size()))
      say(opt.quiet, "  ... and %lld more\n", static_cast<long long>(d.bad_rows - d.bad_messages.size()));
  };

  // ---- Data and labels ----
  ReadOptions ro;
  ro.bad_rows = policy;
  ro.require_labels = true;
  ro.split = "train";
  ro.max_examples = opt.max_train;
  ClassifyData train = read_classify_data(opt.train, ro);
  const fs::path labels_path = run / "labels.json";
  LabelMap labels;
  if (resume && fs::exists(labels_path))
    labels = LabelMap::from_json(read_json_file(labels_path.string()).at("labels"));
  else
    labels = build_label_map(train);
  std::vector<int32_t> train_y = assign_labels(train, labels, policy);
  report_bad(train, opt.train);
  ClassifyData dev;
  std::vector<int32_t> dev_y;
  const bool have_dev = !opt.dev.empty();
  if (have_dev) {
    ro.split = "test";
    ro.max_examples = opt.max_dev;
    dev = read_classify_data(opt.dev, ro);
    LF_CHECK(dev.pairs == train.pairs, opt.dev, " holds ", dev.pairs ? "sentence pairs" : "single texts",
             " but ", opt.train, " holds ", train.pairs ? "sentence pairs" : "single texts");
    dev_y = assign_labels(dev, labels, policy);
    report_bad(dev, opt.dev);
  }
  std::string metric = opt.metric;
  if (metric == "auto") metric = train.format == "qqp" ? "f1" : "accuracy";
  LF_CHECK(metric == "accuracy" || metric == "f1", "--metric must be accuracy, f1 or auto, got ",
           metric);
  {
    std::vector<int64_t> count(labels.size(), 0);
    for (int32_t y : train_y) ++count[y];
    std::string dist;
    for (int64_t c = 0; c < labels.size(); ++c)
      dist += (c ? ", " : "") + labels.names[c] + " " + std::to_string(count[c]);
    say(opt.quiet, "data: %s format (%s), %zu training examples (%s)", train.format.c_str(),
        train.pairs ? "sentence pairs" : "single texts", train.examples.size(), dist.c_str());
    if (have_dev) say(opt.quiet, ", %zu dev examples (%s format)", dev.examples.size(), dev.format.c_str());
    say(opt.quiet, "\n");
  }

  // ---- Tokenizer ----
  // Any kind of tokenizer (tokenizer.model, tokenizer.json, vocab.json + merges.txt,
  // vocab.txt), kept in the run folder under its own file names; tok_path names the folder.
  const std::string tok_path = run.string();
  if (root && Tokenizer::files_in(tok_path).empty()) {
    std::string src = opt.tokenizer;
    if (src.empty() && !opt.init_from.empty()) {
      src = opt.init_from;
      LF_CHECK(!Tokenizer::files_in(src).empty(), "--init-from ", opt.init_from,
               " has no tokenizer (tokenizer.model, tokenizer.json, vocab.json + merges.txt or "
               "vocab.txt; give --tokenizer with the tokenizer it was trained with)");
    }
    if (!src.empty()) {
      copy_tokenizer_files(Tokenizer(src), tok_path);
    } else {
      const std::string corpus = (run / "tokenizer_corpus.txt").string();
      write_file_atomic(corpus, [&](std::ostream& os) {
        auto put = [&](const std::string& s) {
          os << (opt.lowercase ? lower_ascii(s) : s) << "\n";
        };
        for (const ClassifyExample& e : train.examples) {
          put(e.a);
          if (!e.b.empty()) put(e.b);
        }
      });
      say(opt.quiet, "tokenizer: training %s, %lld pieces, on the %zu training texts\n",
          opt.tokenizer_type.c_str(), static_cast<long long>(opt.vocab_size), train.examples.size());
      TokenizerTrainOptions to;
      to.vocab_size = opt.vocab_size;
      to.model_type = opt.tokenizer_type;
      to.seed = opt.seed;
      Tokenizer::train({corpus}, (run / "tokenizer.model").string(), to);
      fs::remove(corpus, ec);
    }
  }
  comm.barrier("waiting for rank 0's tokenizer");
  LF_CHECK(!Tokenizer::files_in(tok_path).empty(), "rank ", comm.rank(),
           " cannot see the tokenizer in ", tok_path,
           ", which rank 0 wrote: the run folder must be on a file system all ranks share "
           "(docs/distributed.md)");
  Tokenizer tok(tok_path);

  // ---- Model configuration ----
  Config cfg;
  if (!opt.init_from.empty()) {
    // --set may change what has no pretrained tensor shape to match, e.g. attention=linformer
    // on a standard checkpoint (the projections are then freshly initialised) or dropout.
    cfg = Config::load_with_overrides((fs::path(opt.init_from) / "config.json").string(), opt.sets);
    LF_CHECK(tok.vocab_size() <= cfg.vocab_size, "the tokenizer has ", tok.vocab_size(),
             " pieces but the model in ", opt.init_from, " only ", cfg.vocab_size);
  } else {
    cfg = Config::load_with_overrides(opt.config, opt.sets);
    cfg.vocab_size = tok.vocab_size();
    cfg.pad_id = tok.special().pad;
    cfg.cls_id = tok.special().cls;
  }
  cfg.num_classes = labels.size();
  if (opt.dropout >= 0) cfg.dropout = cfg.attention_dropout = opt.dropout;
  const int64_t max_len = opt.max_len > 0 ? opt.max_len : cfg.max_len;
  LF_CHECK(max_len <= cfg.max_len, "--max-len ", max_len, " exceeds the model's max_len ",
           cfg.max_len, " (the config decides the longest sequence; for a longer n start from a "
           "config with a larger max_len)");
  cfg.validate();
  TaskInfo task;
  task.format = train.format;
  task.pairs = train.pairs;
  task.max_len = max_len;
  task.truncate = trunc;
  task.metric = metric;
  task.lowercase = opt.lowercase;

  // ---- Encoding ----
  Stopwatch enc_clock;
  const std::vector<std::vector<int32_t>> train_x =
      encode_all(tok, train, max_len, trunc, opt.lowercase);
  std::vector<std::vector<int32_t>> dev_x;
  if (have_dev) dev_x = encode_all(tok, dev, max_len, trunc, opt.lowercase);
  int64_t cut = 0;
  for (const auto& s : train_x) cut += static_cast<int64_t>(s.size()) == max_len;
  char dev_len[64] = "";
  if (have_dev) std::snprintf(dev_len, sizeof dev_len, ", %.1f (dev)", mean_length(dev_x));
  say(opt.quiet, "encoded in %s: mean length %.1f tokens (train)%s; %lld of %zu training examples reach "
      "max_len %lld (truncation: %s)\n",
      format_duration(enc_clock.seconds()).c_str(), mean_length(train_x), dev_len,
      static_cast<long long>(cut), train_x.size(), static_cast<long long>(max_len),
      to_string(trunc));
  std::vector<int64_t> lengths(train_x.size());
  for (size_t i = 0; i < train_x.size(); ++i) lengths[i] = static_cast<int64_t>(train_x[i].size());

  // ---- Model ----
  opt.precision = trained_precision("finetune", cfg, opt.precision, opt.precision_auto, opt.quiet);
  Model model(cfg);
  model.init(opt.seed);
  model.set_train_compute_type(opt.precision);
  if (!opt.init_from.empty()) {
    std::vector<std::string> fresh;
    load_pretrained_encoder(model, (fs::path(opt.init_from) / "model.safetensors").string(),
                            opt.seed, &fresh);
    say(opt.quiet, "model: %s from %s (%zu tensors freshly initialised: the classifier%s)\n",
        to_string(cfg.attention), opt.init_from.c_str(), fresh.size(),
        fresh.size() > 4 ? " and projections/MLM head absent from the file" : "");
  } else {
    say(opt.quiet, "model: %s, trained from scratch (no pretrained checkpoint)\n", to_string(cfg.attention));
  }
  // Micro-batches of the global size: ranks x --batch-size.
  const int64_t global_batch = opt.batch_size * comm.size();
  const int64_t micro_per_epoch =
      (static_cast<int64_t>(train_x.size()) + global_batch - 1) / global_batch;
  const int64_t steps_per_epoch = (micro_per_epoch + opt.grad_accum - 1) / opt.grad_accum;
  const int64_t total_steps = steps_per_epoch * opt.epochs;
  opt.optim.total_steps = total_steps;
  if (opt.optim.warmup_steps <= 0)
    opt.optim.warmup_steps = static_cast<int64_t>(std::llround(opt.warmup_ratio * total_steps));
  AdamW adam(model, opt.optim);
  {
    const int64_t N = opt.pad_to_max ? max_len : std::min<int64_t>(max_len, *std::max_element(lengths.begin(), lengths.end()));
    say(opt.quiet, "model: %s attention%s, %lld layers, d %lld, n %lld, %zu parameters; %lld classes (%s)\n",
        to_string(cfg.attention),
        cfg.is_linformer() ? (" (k " + std::to_string(cfg.k_of(0)) + ", sharing " + to_string(cfg.sharing) + ")").c_str() : "",
        static_cast<long long>(cfg.n_layers), static_cast<long long>(cfg.d_model),
        static_cast<long long>(cfg.max_len), model.num_params(),
        static_cast<long long>(labels.size()), metric.c_str());
    say(opt.quiet, "memory: training activations for the longest batch (%lld x %lld): %.1f MB\n",
        static_cast<long long>(opt.batch_size), static_cast<long long>(N),
        model.forward_bytes(opt.batch_size, N, true, true) / 1048576.0);
  }

  LoopOptions lo = loop_options("finetune", opt, total_steps);
  lo.epoch_steps = steps_per_epoch;
  lo.stop_after = opt.stop_after;
  lo.checkpoint_at_eval = true;
  lo.keep_checkpoints = 1;
  lo.comm = &comm;
  TrainLoop loop(model, adam, lo);
  const json resumed = loop.start(resume);
  if (!resume && root) {
    write_run_args(opt.out, opt.to_json(), comm.size());
    save_labels(opt.out, labels, task);
    cfg.save((run / "config.json").string());
  }
  ClassifyTask cls(model, opt, loop,
                   {train_x, train_y, lengths, dev_x, dev_y, labels, task, metric, tok_path,
                    steps_per_epoch, max_len});
  cls.restore(resumed);
  const LoopResult ran = loop.run(cls);
  if (!ran.stopped && root) {
    const std::string final_dir = (run / "model").string();
    save_classifier_folder(model, tok_path, labels, task, final_dir);
  }
  comm.sum(&cls.total_examples, 1, "the examples trained on");
  FinetuneResult res;
  res.total_steps = total_steps;
  res.metric = metric;
  res.last_dev = cls.last_dev;
  res.steps_done = ran.steps_done;
  res.best_metric = have_dev ? cls.best : -1;
  res.best_step = cls.best_step;
  res.best_epoch = static_cast<double>(cls.best_step) / steps_per_epoch;
  res.seconds = loop.seconds();
  res.examples_per_second = cls.total_examples / std::max(res.seconds, 1e-9);
  res.activation_bytes = model.activation_bytes();
  res.ranks = comm.size();
  res.comm_wait_seconds = ran.comm_wait;
  res.stopped = ran.stopped;
  return res;
}

}  // namespace lf
