// Pieces shared by the subcommands: option blocks of the training commands (pretrain,
// finetune) and the input/output plumbing of the text commands (predict, embed).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/compute_type.h"
#include "linformer/optim.h"
#include "linformer/run.h"

namespace lf::cli {

// A check that an option is a number in [lo, hi]: "must be in [lo, hi], got X". Unlike
// CLI::Range it refuses NaN (every comparison with NaN is false, so a check written as
// "v < lo || v > hi" lets it through). The training options are also checked by
// PretrainOptions / FinetuneOptions::validate() in the library.
CLI::Validator in_range(double lo, double hi);
// The upper bound of batch sizes, chunks and lengths on the command line (as the library's).
constexpr double kMaxCount = 1 << 20;
constexpr double kMaxLen = 1 << 20;

// --out (required), --resume and --overwrite, in group Run.
void add_run_folder_options(CLI::App* cmd, std::string* out, bool* resume, bool* overwrite);
// --batch-size (batch_help says what a micro-batch holds) and --grad-accum, in group Optimiser.
void add_batch_options(CLI::App* cmd, int64_t* batch_size, const char* batch_help,
                       int64_t* grad_accum);
// --weight-decay, --beta1, --beta2, --eps and --clip-norm, in group Optimiser.
void add_adamw_options(CLI::App* cmd, OptimOptions* o);
// --seed, --log-every and --eval-every, in group Run; the helps say what the command seeds
// and evaluates.
void add_progress_options(CLI::App* cmd, uint64_t* seed, const char* seed_help, int64_t* log_every,
                          int64_t* eval_every, const char* eval_help);
// --checkpoint-every and --time-limit, in group Run.
void add_checkpoint_options(CLI::App* cmd, int64_t* checkpoint_every, const char* checkpoint_help,
                            double* time_limit);

// --tokenizer (an existing tokenizer.model), --vocab-size and --tokenizer-type (of one trained
// for the run), in `group`; the helps of the first two say when they apply.
void add_tokenizer_options(CLI::App* cmd, const char* group, std::string* tokenizer,
                           const char* tokenizer_help, int64_t* vocab_size, const char* vocab_help,
                           std::string* tokenizer_type);

// --precision auto|f32|bf16 (and int8 when `inference`) into *t, with --bf16 as an alias of
// --precision bf16, in `group`; *automatic (if given) says whether "auto" chose it, *given
// (if given) whether either option was on the command line.
void add_precision_option(CLI::App* cmd, ComputeType* t, const char* group, const char* help,
                          bool inference, bool* automatic = nullptr, bool* given = nullptr);
// --precision for the training commands (mixed precision, in group Optimiser); a resumed run
// takes it for that call (*given).
void add_train_compute_option(CLI::App* cmd, ComputeType* t, bool* automatic, bool* given);
// --precision and --float-layers for the inference commands (in group Speed).
void add_compute_option(CLI::App* cmd, ComputeType* t, std::vector<int64_t>* float_layers);
// Sets the model's inference precision and the layers kept in f32.
void set_precision(Model& m, ComputeType t, const std::vector<int64_t>& float_layers);

// A --model-like option's transform: an installed model's bare name (`linformer models`)
// becomes its folder (lf::resolve_model), and a run folder of `linformer finetune` or
// `pretrain` its best model (RUN/best), else its last (RUN/model), the choice printed on
// stderr (lf::resolve_model_folder); another path stays as it is. The error lists the
// installed models.
CLI::Validator model_folder(const std::string& option = "--model");

// --model (required) into *dir, with model_folder()'s transform. Every command taking --model
// adds it here.
CLI::Option* add_model_option(CLI::App* cmd, std::string* dir, const std::string& help);

// ---- The commands that run a model folder on texts (evaluate, predict, embed) ----

struct ModelRunOptions {
  std::string model, bad_rows = "stop";
  int64_t max_len = 0, batch_size = 32;
  ComputeType precision = ComputeType::f32;
  std::vector<int64_t> float_layers;  // --float-layers
  BadRows policy() const { return bad_rows == "skip" ? BadRows::skip : BadRows::stop; }
};
// --model (required), --bad-rows, --max-len, --batch-size and --precision (--bf16); the helps say
// what the folder holds, what --max-len defaults to and what a batch holds.
void add_model_run_options(CLI::App* cmd, ModelRunOptions* o, const char* model_help,
                           const char* max_len_help, const char* batch_help);
// The model folder (labels.json required when need_labels) in --precision, and in
// *max_len the tokens per text: --max-len if given, else the length the model was finetuned
// with; at most the model's max_len.
ClassifierBundle load_model_to_run(const ModelRunOptions& o, bool need_labels, int64_t* max_len);

// Texts read in chunks (predict, embed): --input, --format and --chunk.
struct TextInputOptions {
  std::string input = "-", format = "auto";
  int64_t chunk = 4096;
};
void add_text_input_options(CLI::App* cmd, TextInputOptions* o);
// Refuses an output file (option `what`) that is --input or the model folder.
void check_output_not_an_input(const std::string& out, const std::string& what,
                               const TextInputOptions& in, const ModelRunOptions& run);

// --input ("-": stdin) read chunk by chunk, each chunk's texts encoded for a model.
class TextChunks {
 public:
  TextChunks(const TextInputOptions& o, bool pairs, BadRows policy);
  // Reads the next chunk (at most --chunk texts) and encodes it with cb's tokenizer and
  // truncation to max_len tokens (ASCII-lowercased first when `lowercase`); false at the end.
  bool next(const ClassifierBundle& cb, int64_t max_len, bool lowercase);
  const ClassifyData& texts() const { return texts_; }
  const std::vector<std::vector<int32_t>>& seqs() const { return seqs_; }
  // "CMD: skipped N bad row(s)" and their messages on stderr, when any row was skipped.
  void report_bad_rows(const char* cmd) const;

 private:
  const size_t chunk_;
  std::ifstream file_;
  TextInput reader_;
  ClassifyData texts_;
  std::vector<std::vector<int32_t>> seqs_;
};

// Output for JSON lines: stdout for "" or "-", else the file (option names it in errors).
std::FILE* open_output(const std::string& path, const char* option);

// The training commands' SIGINT and SIGTERM: the first asks the run to stop after the current
// step with a checkpoint (hooks->stop_requested; the folder stays complete and --resume
// continues it), said on stderr; a second ends the program at once. Restores the previous
// handlers when destroyed. signal(): the signal that asked for the stop, or 0.
class StopOnSignals {
 public:
  explicit StopOnSignals(RunHooks* hooks);
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
  int signal() const;
};
// After a run that a signal stopped: "<cmd>: stopped by SIGNAL at step S with a checkpoint;
// continue with `linformer <cmd> --out OUT --resume`" on stderr, then exits with 128 + the
// signal's number, as a shell reports an interrupted program.
[[noreturn]] void exit_stopped(const char* cmd, int sig, int64_t step, const std::string& out);

}  // namespace lf::cli
