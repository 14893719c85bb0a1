#include "cli_util.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "linformer/bench.h"
#include "linformer/checkpoint.h"
#include "linformer/cpu.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/models.h"

namespace lf::cli {

namespace {
std::atomic<int> g_stop_signal{0};
struct sigaction g_old_int, g_old_term;

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (!g_stop_signal.compare_exchange_strong(expected, sig)) {  // the second: at once
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  static const char msg[] =
      "linformer: stopping after this step with a checkpoint (signal again to stop at once)\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
}
}  // namespace

StopOnSignals::StopOnSignals(RunHooks* hooks) {
  g_stop_signal = 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  hooks->stop_requested = [] { return g_stop_signal.load() != 0; };
}

StopOnSignals::~StopOnSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int StopOnSignals::signal() const { return g_stop_signal.load(); }

void exit_stopped(const char* cmd, int sig, int64_t step, const std::string& out) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "%s: stopped by %s at step %lld with a checkpoint; continue with `linformer %s "
               "--out %s --resume`\n",
               cmd, sig == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(step), cmd,
               out.c_str());
  std::exit(128 + sig);
}

CLI::Validator in_range(double lo, double hi) {
  auto fmt = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.10g", v);
    return std::string(b);
  };
  const std::string range = "[" + fmt(lo) + ", " + fmt(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !(v >= lo && v <= hi))
          return "must be in " + range + ", got " + text;
        return "";
      },
      "in " + range);
}

void add_run_folder_options(CLI::App* cmd, std::string* out, bool* resume, bool* overwrite) {
  cmd->add_option("--out", *out, "Run folder (locked while in use)")->required()->group("Run");
  auto* r = cmd->add_flag("--resume", *resume,
                          "Continue the run in --out from its latest checkpoint (all other "
                          "options come from its train_args.json)")
                ->group("Run");
  cmd->add_flag("--overwrite", *overwrite,
                "Replace a run already in --out (its checkpoints, models and metrics are "
                "deleted); without it such a folder is refused")
      ->excludes(r)
      ->group("Run");
}

void add_batch_options(CLI::App* cmd, int64_t* batch_size, const char* batch_help,
                       int64_t* grad_accum) {
  cmd->add_option("--batch-size", *batch_size, batch_help)
      ->capture_default_str()
      ->group("Optimiser");
  cmd->add_option("--grad-accum", *grad_accum, "Micro-batches per optimizer step")
      ->capture_default_str()
      ->group("Optimiser");
}

void add_adamw_options(CLI::App* cmd, OptimOptions* o) {
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW weight decay (not on biases/LayerNorm)")
      ->capture_default_str()
      ->group("Optimiser");
  cmd->add_option("--beta1", o->beta1, "AdamW beta1")->capture_default_str()->group("Optimiser");
  cmd->add_option("--beta2", o->beta2, "AdamW beta2")->capture_default_str()->group("Optimiser");
  cmd->add_option("--eps", o->eps, "AdamW epsilon")->capture_default_str()->group("Optimiser");
  cmd->add_option("--clip-norm", o->clip_norm, "Gradient-norm clipping (0: off)")
      ->capture_default_str()
      ->group("Optimiser");
  cmd->add_option("--projection-lr-scale", o->projection_lr_scale,
                  "Learning-rate multiplier of the Linformer projections E/F (0 freezes them)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0))
      ->group("Optimiser");
}

void add_progress_options(CLI::App* cmd, uint64_t* seed, const char* seed_help, int64_t* log_every,
                          int64_t* eval_every, const char* eval_help) {
  cmd->add_option("--seed", *seed, seed_help)->capture_default_str()->group("Run");
  cmd->add_option("--log-every", *log_every, "Steps between progress lines")
      ->capture_default_str()
      ->group("Run");
  cmd->add_option("--eval-every", *eval_every, eval_help)->capture_default_str()->group("Run");
}

void add_checkpoint_options(CLI::App* cmd, int64_t* checkpoint_every, const char* checkpoint_help,
                            double* time_limit) {
  cmd->add_option("--checkpoint-every", *checkpoint_every, checkpoint_help)
      ->capture_default_str()
      ->group("Run");
  cmd->add_option("--time-limit", *time_limit,
                  "Stop after this many seconds of this call, with a checkpoint (0: no limit); "
                  "a resumed run takes the limit given to --resume, not the first call's")
      ->capture_default_str()
      ->group("Run");
}

void add_tokenizer_options(CLI::App* cmd, const char* group, std::string* tokenizer,
                           const char* tokenizer_help, int64_t* vocab_size, const char* vocab_help,
                           std::string* tokenizer_type) {
  cmd->add_option("--tokenizer", *tokenizer, tokenizer_help)->group(group);
  cmd->add_option("--vocab-size", *vocab_size, vocab_help)->capture_default_str()->group(group);
  cmd->add_option("--tokenizer-type", *tokenizer_type, "unigram or bpe")
      ->check(CLI::IsMember({"unigram", "bpe"}))
      ->capture_default_str()
      ->group(group);
}

namespace {
// The names of the precisions (bench::precisions()), those that train only unless `inference`.
std::vector<std::string> precision_names(bool inference) {
  std::vector<std::string> v;
  for (ComputeType t : bench::precisions())
    if (inference || compute_type_trains(t)) v.push_back(compute_type_name(t));
  return v;
}
}  // namespace

void add_precision_option(CLI::App* cmd, ComputeType* t, const char* group, const char* help,
                          bool inference, bool* automatic, bool* given) {
  std::vector<std::string> choices = precision_names(inference);
  choices.insert(choices.begin(), "auto");
  const auto set = [t, automatic, given](const std::string& s) {
    if (automatic) *automatic = s == "auto";
    if (given) *given = true;
    if (s != "auto") {
      *t = resolve_precision(s);
      return;
    }
    const AutoPrecision a =
        auto_precision();  // say what it chose, as a run folder's model is named
    *t = a.precision;
    std::fprintf(stderr, "linformer: --precision auto: %s (%s)\n", compute_type_name(a.precision),
                 a.reason.c_str());
  };
  auto* p = cmd->add_option_function<std::string>("--precision", set, help)
                ->check(CLI::IsMember(choices))
                ->default_str("f32")
                ->group(group);
  auto* alias = cmd->add_flag_callback(
                       "--bf16",
                       [t, given] {
                         *t = ComputeType::bf16;
                         if (given) *given = true;
                       },
                       "The same as --precision bf16")
                    ->group(group);
  p->excludes(alias);
}

void add_train_compute_option(CLI::App* cmd, ComputeType* t, bool* automatic, bool* given) {
  add_precision_option(cmd, t, "Optimiser",
                       "f32, or bf16: mixed precision, bf16 matrix products (AVX-512; "
                       "AVX512-BF16 or AMX run them natively), f32 master weights, gradients "
                       "and optimiser (docs/training.md); auto: bf16 where it is faster (AMX, "
                       "AMD Zen 4/5), else f32 (`linformer info` says which); int8 is for "
                       "inference only; a kind that trains in f32 only (nystrom) trains in f32 "
                       "under auto; with --resume, this call's precision",
                       false, automatic, given);
}

void set_precision(Model& m, ComputeType t, const std::vector<int64_t>& float_layers) {
  m.set_compute_type(t);
  m.set_float_layers(float_layers);
}

void add_compute_option(CLI::App* cmd, ComputeType* t, std::vector<int64_t>* float_layers) {
  cmd->add_option("--float-layers", *float_layers,
                  "Encoder layers (0-based) whose linear maps stay f32 with --precision int8 or "
                  "bf16, e.g. --float-layers 0 11 (docs/int8.md)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->group("Speed");
  add_precision_option(
      cmd, t, "Speed",
      "auto: bf16 where its products are faster (AMX, AMD Zen 4/5), else f32 "
      "(`linformer info` says which; never int8); f32; bf16: the encoder's "
      "linear maps in bfloat16 (weights packed "
      "once, f32 accumulation; AVX-512): about 1.8x faster where bf16 products "
      "run at full rate (AMX, AMD Zen 4/5), slower than f32 on Intel CPUs with "
      "AVX512-BF16 but no AMX (0.6x measured); outputs within ~1e-2 of f32; int8: the same maps "
      "with int8 weights (a scale per output channel) and inputs quantized per "
      "token, int32 accumulation (AVX2; fastest with AVX512-VNNI); "
      "attention's products take bfloat16 operands with bf16 on AVX512-BF16 "
      "CPUs, with int8 where bf16 is the faster (AMX, AMD Zen 4/5); softmax, LayerNorm and the "
      "heads stay f32 "
      "(docs/int8.md)",
      true);
}

CLI::Validator model_folder(const std::string& option) {
  return CLI::Validator(
      [option](std::string& s) {
        try {
          const std::string named = resolve_model(s);
          std::string chosen;
          const std::string model = resolve_model_folder(named, &chosen);
          if (!chosen.empty())
            std::fprintf(stderr, "linformer: %s %s is a run folder: using its %s, %s\n",
                         option.c_str(), s.c_str(), chosen.c_str(), model.c_str());
          s = model;
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "", "MODEL");
}

CLI::Option* add_model_option(CLI::App* cmd, std::string* dir, const std::string& help) {
  return cmd
      ->add_option("--model", *dir,
                   help +
                       "; or an installed model's name (`linformer models`), or a run folder "
                       "of `linformer finetune` or `pretrain` (its best/ model, else its last, "
                       "model/)")
      ->required()
      ->transform(model_folder());
}

void add_model_run_options(CLI::App* cmd, ModelRunOptions* o, const char* model_help,
                           const char* max_len_help, const char* batch_help) {
  add_model_option(cmd, &o->model, model_help);
  cmd->add_option("--bad-rows", o->bad_rows,
                  "stop at the first bad row, or skip it (reported on stderr)")
      ->check(CLI::IsMember({"stop", "skip"}))
      ->capture_default_str();
  cmd->add_option("--max-len", o->max_len, max_len_help)->check(in_range(0, kMaxLen));
  cmd->add_option("--batch-size", o->batch_size, batch_help)
      ->capture_default_str()
      ->check(in_range(1, kMaxCount));
  add_compute_option(cmd, &o->precision, &o->float_layers);
}

ClassifierBundle load_model_to_run(const ModelRunOptions& o, bool need_labels, int64_t* max_len) {
  ClassifierBundle cb = load_classifier(o.model, need_labels);
  set_precision(*cb.model, o.precision, o.float_layers);
  *max_len = o.max_len > 0 ? o.max_len : cb.task.max_len;
  LF_CHECK(*max_len <= cb.model->config().max_len, "--max-len ", *max_len,
           " exceeds the model's max_len ", cb.model->config().max_len);
  return cb;
}

void add_text_input_options(CLI::App* cmd, TextInputOptions* o) {
  cmd->add_option("--input", o->input, "Input file, or - for stdin")->capture_default_str();
  cmd->add_option("--format", o->format,
                  "auto, tsv (a header line first) or lines (one text per line)")
      ->check(CLI::IsMember({"auto", "tsv", "lines"}))
      ->capture_default_str();
  cmd->add_option("--chunk", o->chunk, "Inputs read (and sorted by length) at a time")
      ->capture_default_str()
      ->check(in_range(1, kMaxCount));
}

void check_output_not_an_input(const std::string& out, const std::string& what,
                               const TextInputOptions& in, const ModelRunOptions& run) {
  if (out != "-")
    check_not_an_input(out, what,
                       {{"--input", in.input == "-" ? "" : in.input}, {"--model", run.model}});
}

namespace {

std::istream* open_input(const std::string& path, std::ifstream* file) {
  if (path == "-") return &std::cin;
  file->open(path, std::ios::binary);
  LF_CHECK(*file, "cannot open --input ", path);
  return file;
}

}  // namespace

TextChunks::TextChunks(const TextInputOptions& o, bool pairs, BadRows policy)
    : chunk_(static_cast<size_t>(std::max<int64_t>(o.chunk, 1))),
      reader_(*open_input(o.input, &file_), o.input == "-" ? "stdin" : o.input, o.format, pairs,
              policy) {}

bool TextChunks::next(const ClassifierBundle& cb, int64_t max_len, bool lowercase) {
  if (!reader_.next(chunk_, &texts_)) return false;
  seqs_ = encode_all(*cb.tokenizer, texts_, max_len, cb.task.truncate, lowercase);
  return true;
}

void TextChunks::report_bad_rows(const char* cmd) const {
  if (!reader_.bad_rows()) return;
  std::fprintf(stderr, "%s: skipped %lld bad row(s)\n", cmd,
               static_cast<long long>(reader_.bad_rows()));
  for (const std::string& m : reader_.bad_messages()) std::fprintf(stderr, "  %s\n", m.c_str());
}

std::FILE* open_output(const std::string& path, const char* option) {
  if (path.empty() || path == "-") return stdout;
  std::FILE* f = std::fopen(path.c_str(), "w");
  LF_CHECK(f, "cannot write ", option, " ", path);
  return f;
}

}  // namespace lf::cli
