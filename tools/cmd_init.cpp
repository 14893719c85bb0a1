#include <cstdio>
#include <memory>

#include "commands.h"
#include "linformer/checkpoint.h"
#include "linformer/model.h"

namespace lf::cli {

void add_init(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "init", "Create a freshly initialised model folder (config.json + model.safetensors).");
  struct Opts {
    std::string config, out;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--config", o->config, "Model configuration JSON (see docs/config.md)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", o->seed, "Seed of the initial weights")->capture_default_str();
  cmd->add_option("--out", o->out, "Output folder (created if needed)")->required();
  cmd->callback([o] {
    Config cfg = Config::load(o->config);
    Model model(cfg);
    model.init(o->seed);
    save_model(model, o->out);
    std::printf("initialised %s model (%zu parameters) in %s\n", to_string(cfg.attention),
                model.num_params(), o->out.c_str());
  });
}

}  // namespace lf::cli
