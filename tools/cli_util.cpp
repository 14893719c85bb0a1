#include "cli_util.h"

#include <cstdlib>
#include <iostream>
#include <string>

#include "linformer/error.h"

namespace lf::cli {

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
                  "Stop after this many seconds, with a checkpoint (0: no limit)")
      ->capture_default_str()
      ->group("Run");
}

void add_compute_option(CLI::App* cmd, bool* bf16) {
  cmd->add_flag("--bf16", *bf16,
                "Run the encoder's linear maps in bfloat16 (weights packed once, f32 "
                "accumulation; AVX512-BF16): about 1.8x faster, outputs within ~1e-2 of f32")
      ->group("Speed");
}
ComputeType compute_type_of(bool bf16) { return bf16 ? ComputeType::bf16 : ComputeType::f32; }

int64_t checked_max_len(int64_t max_len, const ClassifierBundle& cb) {
  const int64_t n = max_len > 0 ? max_len : cb.task.max_len;
  LF_CHECK(n <= cb.model->config().max_len, "--max-len ", n, " exceeds the model's max_len ",
           cb.model->config().max_len);
  return n;
}

std::istream* open_input(const std::string& path, std::ifstream* file) {
  if (path == "-") return &std::cin;
  file->open(path, std::ios::binary);
  LF_CHECK(*file, "cannot open --input ", path);
  return file;
}

std::FILE* open_output(const std::string& path, const char* option) {
  if (path.empty() || path == "-") return stdout;
  std::FILE* f = std::fopen(path.c_str(), "w");
  LF_CHECK(f, "cannot write ", option, " ", path);
  return f;
}

void report_bad_rows(const char* cmd, const TextInput& reader) {
  if (!reader.bad_rows()) return;
  std::fprintf(stderr, "%s: skipped %lld bad row(s)\n", cmd,
               static_cast<long long>(reader.bad_rows()));
  for (const std::string& m : reader.bad_messages()) std::fprintf(stderr, "  %s\n", m.c_str());
}

}  // namespace lf::cli
