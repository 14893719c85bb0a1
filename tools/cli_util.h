// Pieces shared by the subcommands: option blocks of the training commands (pretrain,
// finetune) and the input/output plumbing of the text commands (predict, embed).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <istream>
#include <string>

#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/compute_type.h"
#include "linformer/optim.h"

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

// --bf16 for the inference commands (in group Speed).
void add_compute_option(CLI::App* cmd, bool* bf16);
ComputeType compute_type_of(bool bf16);

// --max-len if given, else the length the model was finetuned with; at most the model's max_len.
int64_t checked_max_len(int64_t max_len, const ClassifierBundle& cb);
// --input: stdin for "-", else the file, opened into *file.
std::istream* open_input(const std::string& path, std::ifstream* file);
// Output for JSON lines: stdout for "" or "-", else the file (option names it in errors).
std::FILE* open_output(const std::string& path, const char* option);
// "CMD: skipped N bad row(s)" and their messages on stderr, when the reader skipped any.
void report_bad_rows(const char* cmd, const TextInput& reader);

}  // namespace lf::cli
