#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/tokenizer.h"

#include <unistd.h>

namespace lf::cli {

namespace {

void print_list(const char* title, const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::printf("%s (%zu):\n", title, names.size());
  for (const std::string& n : names) std::printf("  %s\n", n.c_str());
}

}  // namespace

void add_init(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "init", "Create a model folder (config.json + model.safetensors) with fresh weights.");
  cmd->footer(
      "Weights follow docs/model.md (Initialisation) and depend only on --seed. With --from,\n"
      "every tensor found in FILE is taken from it (names and shapes must match the config)\n"
      "and only the Linformer projections and the heads it lacks, or holds in another shape\n"
      "(a Linformer's [k, max_len] projections after --set max_len or --set k, a classifier\n"
      "with other classes), are initialised: this turns\n"
      "a Hugging Face RoBERTa model.safetensors into a complete folder (docs/checkpoint.md).\n"
      "--from a Hugging Face RoBERTa or BERT folder (config.json, model.safetensors and the\n"
      "tokenizer files) takes the configuration from its config.json (standard attention;\n"
      "--set attention=linformer --set k=128 turns it into a Linformer) and copies its\n"
      "tokenizer, so that --out is a complete model folder. --from one of this program's\n"
      "model folders takes its config.json the same way. A larger --set max_len extends the\n"
      "position embeddings by copying the learned ones (Longformer's recipe); continue with\n"
      "`linformer pretrain --init-from OUT` at the new length (docs/models.md).\n"
      "Examples:\n"
      "  linformer init --config configs/small-linformer.json --set k=64 --seed 1 --out runs/m\n"
      "  linformer init --from hf/roberta-base --set attention=linformer --set k=128 --out runs/rl\n"
      "  linformer init --from standard-mini --set attention=linformer --set max_len=4096 \\\n"
      "      --set k=256 --set projection_init=mean_pool --out runs/lin-4k");
  struct Opts {
    std::string config, out, from;
    std::vector<std::string> sets;
    uint64_t seed = 0;
    bool overwrite = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--config", o->config,
                  "Model configuration JSON (docs/config.md); without it the defaults are used")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", o->sets,
                  "KEY=VALUE: override one configuration key (repeatable), e.g. --set k=64 "
                  "--set attention=standard --set 'k=[64,32]'")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--from", o->from,
                  "Start from the weights in this safetensors file (e.g. a RoBERTa checkpoint), "
                  "or from a Hugging Face RoBERTa/BERT folder (config.json, model.safetensors, "
                  "tokenizer files), or one of this program's model folders or installed models")
      ->transform(model_folder("--from"))
      ->check(CLI::ExistingPath);
  cmd->add_option("--seed", o->seed, "Seed of the initial weights")->capture_default_str();
  cmd->add_option("--out", o->out, "Output folder (created if needed)")->required();
  cmd->add_flag("--overwrite", o->overwrite, "Replace a model already in --out (else refused)");
  cmd->callback([o] {
    namespace fs = std::filesystem;
    const bool from_dir = !o->from.empty() && fs::is_directory(o->from);
    const bool hf = from_dir && is_hf_model_folder(o->from);
    std::string weights = o->from;
    if (from_dir) {
      weights = (fs::path(o->from) / "model.safetensors").string();
      LF_CHECK(fs::is_regular_file(weights), "init: --from ", o->from,
               " has no model.safetensors (a pytorch_model.bin must be converted to safetensors "
               "first)");
    }
    Config cfg;
    if (hf) {
      LF_CHECK(o->config.empty(), "init: --from a Hugging Face folder takes its configuration "
                                  "from its config.json; change it with --set (e.g. --set "
                                  "attention=linformer --set k=128), not --config");
      // The translated configuration, then the --set overrides.
      const fs::path tmp = fs::temp_directory_path() /
                           ("linformer-hf-config-" + std::to_string(::getpid()) + ".json");
      write_file_atomic(tmp.string(), hf_config_json(o->from));
      try {
        cfg = Config::load_with_overrides(tmp.string(), o->sets);
      } catch (...) {
        fs::remove(tmp);
        throw;
      }
      fs::remove(tmp);
    } else if (from_dir && o->config.empty() &&
               std::filesystem::is_regular_file(std::filesystem::path(o->from) / "config.json")) {
      // One of our own model folders: its configuration, then the --set overrides (e.g.
      // --set attention=linformer --set max_len=4096).
      cfg = Config::load_with_overrides(
          (std::filesystem::path(o->from) / "config.json").string(), o->sets);
    } else {
      cfg = Config::load_with_overrides(o->config, o->sets);
    }
    std::unique_ptr<Tokenizer> tok;
    if (from_dir && !Tokenizer::files_in(o->from).empty()) {
      tok = std::make_unique<Tokenizer>(o->from);
      LF_CHECK(tok->vocab_size() <= cfg.vocab_size, "init: the tokenizer of ", o->from, " has ",
               tok->vocab_size(), " ids but the model's vocab_size is ", cfg.vocab_size);
    }
    const std::vector<std::pair<std::string, std::string>> inputs = {{"--config", o->config},
                                                                     {"--from", o->from}};
    for (const char* f : {"model.safetensors", "config.json"}) {
      const std::string path = (std::filesystem::path(o->out) / f).string();
      check_not_an_input(path, "init: --out", inputs);
      LF_CHECK(o->overwrite || !std::filesystem::exists(path), "init: ", o->out,
               " already holds a model (", f,
               "); give --overwrite to replace it, or choose "
               "another --out");
    }
    Model model(cfg);
    model.init(o->seed);
    LoadReport rep;
    if (!o->from.empty()) {
      LoadOptions lo;
      lo.init_missing = true;
      lo.seed = o->seed;
      lo.extend_positions = true;
      lo.init_reshaped = true;
      rep = load_weights(model, weights, lo);
    }
    save_model(model, o->out);
    if (tok) copy_tokenizer_files(*tok, o->out);
    std::printf("initialised %s model (%zu parameters) in %s\n", to_string(cfg.attention),
                model.num_params(), o->out.c_str());
    if (tok)
      std::printf("tokenizer (%s, %lld ids) copied from %s\n", tok->kind(),
                  static_cast<long long>(tok->vocab_size()), o->from.c_str());
    if (!o->from.empty()) {
      std::printf("%zu of %zu tensors taken from %s\n",
                  model.params().size() - rep.initialised.size(), model.params().size(),
                  weights.c_str());
      if (rep.positions_from > 0)
        std::printf("position embeddings extended from %lld to %lld positions by copying the "
                    "%lld learned ones (Longformer's recipe)\n",
                    static_cast<long long>(rep.positions_from),
                    static_cast<long long>(rep.positions_to),
                    static_cast<long long>(rep.positions_from));
      print_list("freshly initialised (not in the file, or shaped otherwise there)",
                 rep.initialised);
      print_list("shaped otherwise in the file (another max_len, k or number of classes)",
                 rep.reshaped);
      print_list("ignored (in the file, not used by this model)", rep.ignored);
    }
  });
}

}  // namespace lf::cli
