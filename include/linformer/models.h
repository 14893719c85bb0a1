// Installed models: a bare name such as "linformer-mini" stands for a model folder found in
// the model search path (docs/models.md), so every command, `linformer serve` and
// `linformer.Model(...)` accept --model linformer-mini as well as a path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lf {

// The folders searched for installed models, in order: each entry of $LINFORMER_MODELS
// (':'-separated), $XDG_DATA_HOME/linformer/models (default ~/.local/share/linformer/models),
// <the program's folder>/../share/linformer/models, the install prefix's
// share/linformer/models, /usr/local/share/linformer/models and /usr/share/linformer/models;
// duplicates removed, missing folders kept (a later install may create them).
std::vector<std::string> model_search_path();

struct InstalledModel {
  std::string name;       // the folder's name
  std::string path;       // the folder
  std::string attention;  // "standard", "linformer", ... from config.json
  int64_t max_len = 0;
  int64_t bytes = 0;       // size of model.safetensors
  bool has_card = false;   // README.md (model card) present
};

// Every model folder (config.json + model.safetensors) directly inside a search-path
// folder; a name found twice is listed once, from the earlier folder.
std::vector<InstalledModel> installed_models();

// What --model (or --init-from, --from, linformer.Model) names: an existing path is returned
// unchanged; a bare name (no '/') that is not a path is looked up among the installed models;
// anything else throws lf::Error saying it does not exist and listing the installed models.
std::string resolve_model(const std::string& name_or_path);

}  // namespace lf
