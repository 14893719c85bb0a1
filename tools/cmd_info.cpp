#include <cstdio>
#include <memory>

#include "commands.h"
#include "io/safetensors.h"
#include "linformer/checkpoint.h"
#include "linformer/model.h"

namespace lf::cli {

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a model folder: configuration and tensors.");
  auto dir = std::make_shared<std::string>();
  cmd->add_option("--model", *dir, "Model folder")->required()->check(CLI::ExistingDirectory);
  cmd->callback([dir] {
    LoadOptions lo;
    lo.init_missing = false;
    auto model = load_model(*dir, lo);
    std::printf("%s", model->config().to_json().c_str());
    size_t total = 0;
    for (const ParamInfo& p : model->params()) {
      std::printf("%-64s %s\n", p.name.c_str(), shape_to_string(p.shape).c_str());
      total += p.numel;
    }
    std::printf("%zu tensors, %zu parameters\n", model->params().size(), total);
  });
}

}  // namespace lf::cli
