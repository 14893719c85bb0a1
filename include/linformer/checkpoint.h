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
  // A position table in the file with fewer rows than the model's (a model made longer with
  // a larger max_len) is extended instead of refused: the rows before position_offset are
  // copied, then the file's learned positions are copied again and again until the longer
  // table is full (Longformer's recipe, Beltagy et al. 2020, section 5). Positions the file
  // has keep their values, so inputs within the old length give the same outputs.
  bool extend_positions = false;
  // A parameter that may be freshly initialised (as for init_missing) whose shape in the file
  // differs from the model's (a Linformer projection [k, max_len] of a model made longer or
  // given another k, a classifier with another number of classes) is initialised afresh
  // instead of refused, and reported in LoadReport::reshaped.
  bool init_reshaped = false;
};

struct LoadReport {
  std::vector<std::string> initialised;  // parameters not in the file, freshly initialised
  std::vector<std::string> ignored;      // tensors in the file the model does not use
  // With init_reshaped: parameters whose shape in the file differs, freshly initialised
  // (also listed in `initialised`), each as "name: [file shape] -> [model shape]".
  std::vector<std::string> reshaped;
  // With extend_positions: the learned positions in the file and in the model (both 0 when
  // the table was not extended).
  int64_t positions_from = 0, positions_to = 0;
};

// Writes DIR/config.json and DIR/model.safetensors (each atomically); creates DIR.
void save_model(Model& model, const std::string& dir);

// Copies the file's tensors into the model's parameters, checking names, shapes and dtypes.
LoadReport load_weights(Model& model, const std::string& safetensors_path,
                        const LoadOptions& opt = {});

// Reads DIR/config.json (or the config stored in the checkpoint's metadata) and the weights.
std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& opt = {},
                                  LoadReport* report = nullptr);

// The model folder a --model argument names. A model folder (DIR/model.safetensors) is
// itself. A folder without one whose best/ or model/ has one (the run folder of `linformer
// finetune` or `pretrain`, the --out it was given) gives its best model, DIR/best
// (finetune's best on the dev set, or its latest evaluated model without dev data), else its
// last, DIR/model (written when the run finished); *chosen then says which, for the user
// ("best model", "last model"), and is left empty when DIR is returned unchanged. Anything
// else is returned unchanged for the loader to refuse with its own message.
std::string resolve_model_folder(const std::string& dir, std::string* chosen = nullptr);

// ---- Hugging Face model folders (docs/checkpoint.md) ----
// True when DIR/config.json is a Hugging Face configuration (it has "model_type").
bool is_hf_model_folder(const std::string& dir);
// The engine's configuration of the RoBERTa or BERT model in DIR (config.json read as
// Hugging Face writes it; standard attention, post-norm), as the JSON text Config::from_json
// reads. pad_id and cls_id come from the folder's tokenizer. Unsupported models or options
// (another model_type, an activation other than exact GELU, ...) throw lf::Error naming the
// file and key.
std::string hf_config_json(const std::string& dir);

}  // namespace lf
