#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"

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
      "and only the Linformer projections and the heads it lacks are initialised: this turns\n"
      "a Hugging Face RoBERTa model.safetensors into a complete folder (docs/checkpoint.md).\n"
      "Example:\n"
      "  linformer init --config configs/small-linformer.json --set k=64 --seed 1 --out runs/m");
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
                  "Start from the weights in this safetensors file (e.g. a RoBERTa checkpoint)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", o->seed, "Seed of the initial weights")->capture_default_str();
  cmd->add_option("--out", o->out, "Output folder (created if needed)")->required();
  cmd->add_flag("--overwrite", o->overwrite, "Replace a model already in --out (else refused)");
  cmd->callback([o] {
    const Config cfg = Config::load_with_overrides(o->config, o->sets);
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
      rep = load_weights(model, o->from, lo);
    }
    save_model(model, o->out);
    std::printf("initialised %s model (%zu parameters) in %s\n", to_string(cfg.attention),
                model.num_params(), o->out.c_str());
    if (!o->from.empty()) {
      std::printf("%zu of %zu tensors taken from %s\n",
                  model.params().size() - rep.initialised.size(), model.params().size(),
                  o->from.c_str());
      print_list("freshly initialised (not in the file)", rep.initialised);
      print_list("ignored (in the file, not used by this model)", rep.ignored);
    }
  });
}

}  // namespace lf::cli
