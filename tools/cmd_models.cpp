#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "linformer/models.h"

namespace lf::cli {

void add_models(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "models", "List the installed models: the names --model accepts without a path.");
  cmd->footer(
      "A model folder (config.json + model.safetensors) directly inside one of the folders\n"
      "below is installed under its folder's name; the first folder wins when a name is\n"
      "found twice. The released models (docs/models.md) are installed by `make install`\n"
      "and by the linformer-models Debian package. LINFORMER_MODELS (':'-separated folders)\n"
      "is searched first.\n"
      "Examples:\n"
      "  linformer models\n"
      "  linformer predict --model linformer-mini --input texts.txt");
  auto json = std::make_shared<bool>(false);
  auto path = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "One JSON array: name, path, attention, max_len, bytes, card");
  cmd->add_flag("--path", *path, "Print the folders searched, in order, and nothing else");
  cmd->callback([json, path] {
    if (*path) {
      for (const std::string& d : model_search_path()) std::printf("%s\n", d.c_str());
      return;
    }
    const std::vector<InstalledModel> models = installed_models();
    if (*json) {
      nlohmann::json a = nlohmann::json::array();
      for (const InstalledModel& m : models)
        a.push_back({{"name", m.name},
                     {"path", m.path},
                     {"attention", m.attention},
                     {"max_len", m.max_len},
                     {"bytes", m.bytes},
                     {"card", m.has_card}});
      std::printf("%s\n", a.dump(2).c_str());
      return;
    }
    if (models.empty()) {
      std::printf("no model is installed; searched:\n");
      for (const std::string& d : model_search_path()) std::printf("  %s\n", d.c_str());
      return;
    }
    std::printf("%-24s %-10s %8s %9s  %s\n", "NAME", "ATTENTION", "MAX_LEN", "SIZE", "PATH");
    for (const InstalledModel& m : models)
      std::printf("%-24s %-10s %8lld %7.1f M  %s\n", m.name.c_str(), m.attention.c_str(),
                  static_cast<long long>(m.max_len), static_cast<double>(m.bytes) / 1e6,
                  m.path.c_str());
  });
}

}  // namespace lf::cli
