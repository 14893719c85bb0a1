// Model folders: DIR/config.json + DIR/model.safetensors (see docs/checkpoint.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "linformer/model.h"

namespace lf {

struct LoadOptions {
  // Parameters absent from the file that may be freshly initialised instead of being an
  // error: Linformer projections and the task heads (lm_head.*, classifier.*), so that a
  // RoBERTa checkpoint loads as a Linformer model or gains a classification head.
  bool init_missing = true;
  uint64_t seed = 0;  // for freshly initialised parameters
};

struct LoadReport {
  std::vector<std::string> initialised;  // parameters not in the file, freshly initialised
  std::vector<std::string> ignored;      // tensors in the file the model does not use
};

// Writes DIR/config.json and DIR/model.safetensors (each atomically); creates DIR.
void save_model(Model& model, const std::string& dir);

// Copies the file's tensors into the model's parameters, checking names, shapes and dtypes.
LoadReport load_weights(Model& model, const std::string& safetensors_path,
                        const LoadOptions& opt = {});

// Reads DIR/config.json (or the config stored in the checkpoint's metadata) and the weights.
std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& opt = {},
                                  LoadReport* report = nullptr);

}  // namespace lf
