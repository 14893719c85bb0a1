#include "linformer/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "linformer/error.h"
#include "linformer/safetensors.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

// Parameters that may be absent from a file and freshly initialised instead.
bool may_init(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  return has("key_proj") || has("value_proj") || has("kv_proj") || name.rfind("lm_head.", 0) == 0 ||
         name.rfind("classifier.", 0) == 0;
}

// Index of the first NaN or infinity in a floating tensor, read from its raw bits (no
// conversion, so a failed load leaves the model unchanged), or -1 when all are finite.
int64_t first_non_finite(const SafeTensorsReader& r, const TensorInfo& t) {
  // An IEEE value is NaN or infinite exactly when its exponent bits are all ones.
  size_t width = 0;
  uint64_t exponent = 0;
  switch (t.dtype) {
    case DType::F64: width = 8, exponent = 0x7ff0000000000000ull; break;
    case DType::F32: width = 4, exponent = 0x7f800000u; break;
    case DType::F16: width = 2, exponent = 0x7c00u; break;
    case DType::BF16: width = 2, exponent = 0x7f80u; break;
    default: return -1;
  }
  const unsigned char* p = r.raw_data(t.name);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t bits = 0;  // little-endian host (safetensors.cpp checks)
    std::memcpy(&bits, p + static_cast<size_t>(i) * width, width);
    if ((bits & exponent) == exponent) return i;
  }
  return -1;
}

constexpr const char* kPositionTable = "roberta.embeddings.position_embeddings.weight";

// Rows [0, offset) of `from` as they are, then its `old_len` learned rows repeated to fill
// `new_len` rows: dst is [(offset + new_len), width].
void extend_position_table(const std::vector<float>& from, int64_t offset, int64_t old_len,
                           int64_t new_len, int64_t width, float* dst) {
  std::memcpy(dst, from.data(), static_cast<size_t>(offset * width) * sizeof(float));
  for (int64_t t = 0; t < new_len; ++t)
    std::memcpy(dst + (offset + t) * width, from.data() + (offset + t % old_len) * width,
                static_cast<size_t>(width) * sizeof(float));
}

}  // namespace

void save_model(Model& model, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LF_CHECK(!ec, "cannot create folder ", dir, ": ", ec.message());
  LF_CHECK(fs::is_directory(dir), "cannot save a model in ", dir, ": it is not a folder");
  SafeTensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("linformer_config", model.config().to_json());
  for (const ParamInfo& p : model.params())
    w.add_f32(p.name, p.shape, model.param_data() + p.offset);
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  w.write((fs::path(dir) / "model.safetensors").string());
  try {
    model.config().save(cfg_path);
  } catch (const Error& e) {
    // The weights were replaced; a stale config.json could now contradict them. Without it
    // the folder loads with the configuration stored in the weights' metadata.
    std::error_code rm;
    fs::remove(cfg_path, rm);
    fail(e.what(), " (model.safetensors was written; ",
         rm ? "the old config.json could not be removed and may not match it"
            : "the old config.json was removed, its metadata holds the configuration",
         ")");
  }
}

LoadReport load_weights(Model& model, const std::string& path, const LoadOptions& opt) {
  SafeTensorsReader r(path);
  // A checkpoint saved from Hugging Face's bare RobertaModel or BertModel names the encoder
  // tensors without the "roberta." prefix ("embeddings.word_embeddings.weight",
  // "encoder.layer.0..."). BERT's (BertForMaskedLM, BertForSequenceClassification) use
  // "bert." and name the heads differently; its pooler is the classifier's dense layer (the
  // same function: tanh(W h_cls + b), then the output layer).
  const std::string prefix = "roberta.";
  const bool bare = !r.has(prefix + "embeddings.word_embeddings.weight") &&
                    r.has("embeddings.word_embeddings.weight");
  const bool bert = !r.has(prefix + "embeddings.word_embeddings.weight") &&
                    r.has("bert.embeddings.word_embeddings.weight");
  auto file_name = [&](const std::string& name) {
    if (bare && name.rfind(prefix, 0) == 0) return name.substr(prefix.size());
    if (!bert) return name;
    static const std::pair<const char*, const char*> kBert[] = {
        {"roberta.", "bert."},
        {"lm_head.dense.", "cls.predictions.transform.dense."},
        {"lm_head.layer_norm.", "cls.predictions.transform.LayerNorm."},
        {"lm_head.bias", "cls.predictions.bias"},
        {"classifier.dense.", "bert.pooler.dense."},
        {"classifier.out_proj.", "classifier."}};
    for (const auto& [ours, theirs] : kBert)
      if (name.rfind(ours, 0) == 0) return theirs + name.substr(std::string(ours).size());
    return name;
  };
  LoadReport rep;
  std::vector<std::string> missing;
  std::set<std::string> used;  // file names
  // Check every tensor before copying any, so that a failed load leaves the model unchanged.
  for (const ParamInfo& p : model.params()) {
    const std::string fname = file_name(p.name);
    if (!r.has(fname)) {
      if (opt.init_missing && may_init(p.name))
        rep.initialised.push_back(p.name);
      else
        missing.push_back(p.name);
      continue;
    }
    const TensorInfo& t = r.info(fname);
    if (opt.extend_positions && p.name == kPositionTable && t.shape.size() == 2 &&
        p.shape.size() == 2 && t.shape[1] == p.shape[1] && t.shape[0] < p.shape[0]) {
      const int64_t offset = model.config().position_offset;
      LF_CHECK(t.shape[0] > offset, path, ": tensor '", fname, "' has ", t.shape[0],
               " rows, no more than the position offset ", offset,
               ": it holds no learned position to extend from");
      rep.positions_from = t.shape[0] - offset;
      rep.positions_to = p.shape[0] - offset;
    } else if (opt.init_reshaped && t.shape != p.shape && may_init(p.name)) {
      rep.initialised.push_back(p.name);
      rep.reshaped.push_back(p.name + ": " + shape_to_string(t.shape) + " -> " +
                             shape_to_string(p.shape));
      continue;  // not used: the file's tensor lands in `ignored`
    } else {
      LF_CHECK(t.shape == p.shape, path, ": tensor '", fname, "' has shape ",
             shape_to_string(t.shape), ", expected ", shape_to_string(p.shape),
             " (does the model configuration (config.json) match this checkpoint?)");
    }
    LF_CHECK(dtype_is_float(t.dtype), path, ": tensor '", fname, "' has dtype ",
             dtype_name(t.dtype), "; parameters must be F32, F16, BF16 or F64");
    const int64_t bad = first_non_finite(r, t);
    LF_CHECK(bad < 0, path, ": tensor '", fname,
             "' holds a non-finite value (NaN or infinity) at "
             "element ",
             bad, "; the file is corrupt or the training that wrote it diverged");
    used.insert(fname);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) list += "\n  " + missing[i];
    if (missing.size() > 8) list += "\n  ... and " + std::to_string(missing.size() - 8) + " more";
    std::string hint;
    if (used.empty()) {
      const std::vector<std::string> names = r.names();
      hint = "\nNo tensor of the model is in the file, which holds " +
             std::to_string(names.size()) + " tensor(s)";
      for (size_t i = 0; i < names.size() && i < 3; ++i)
        hint += (i ? ", '" : ": '") + names[i] + "'";
      if (names.size() > 3) hint += ", ...";
      hint += "; names must follow docs/checkpoint.md.";
    }
    fail(path, ": ", missing.size(), " tensor(s) the model needs are missing:", list, hint);
  }
  for (const ParamInfo& p : model.params()) {
    const std::string fname = file_name(p.name);
    if (!used.count(fname)) continue;
    float* dst = model.param_data() + p.offset;
    if (p.name == kPositionTable && rep.positions_from > 0) {
      extend_position_table(r.read_f32(fname), model.config().position_offset,
                            rep.positions_from, rep.positions_to, p.shape[1], dst);
      continue;
    }
    r.read_f32(fname, p.shape, dst);
  }
  for (const std::string& n : r.names())
    if (!used.count(n)) rep.ignored.push_back(n);
  if (!rep.initialised.empty()) model.init_some(opt.seed, rep.initialised);
  return rep;
}

std::string resolve_model_folder(const std::string& dir, std::string* chosen) {
  if (chosen) chosen->clear();
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || fs::exists(fs::path(dir) / "model.safetensors", ec)) return dir;
  for (const auto& [sub, what] :
       {std::pair<const char*, const char*>{"best", "best model"}, {"model", "last model"}}) {
    const fs::path p = fs::path(dir) / sub;
    if (fs::exists(p / "model.safetensors", ec)) {
      if (chosen) *chosen = what;
      return p.string();
    }
  }
  return dir;
}

std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& opt,
                                  LoadReport* report) {
  LF_CHECK(fs::is_directory(dir), "model folder ", dir,
           fs::exists(dir) ? " is not a folder" : " does not exist");
  const fs::path weights = fs::path(dir) / "model.safetensors";
  const fs::path cfg_path = fs::path(dir) / "config.json";
  LF_CHECK(fs::exists(weights), "model folder ", dir, " has no model.safetensors",
           fs::exists(fs::path(dir) / "train_args.json")
               ? " (a run folder whose run has written neither best/ nor model/ yet)"
               : "");
  Config cfg;
  if (fs::exists(cfg_path)) {
    cfg = Config::load(cfg_path.string());
  } else {
    SafeTensorsReader r(weights.string());
    auto it = r.metadata().find("linformer_config");
    LF_CHECK(it != r.metadata().end(), "model folder ", dir,
             " has no config.json and its checkpoint holds no configuration");
    try {
      cfg = Config::from_json(it->second);
    } catch (const Error& e) {
      fail(weights.string(), ": metadata 'linformer_config': ", e.what());
    }
  }
  auto model = std::make_unique<Model>(cfg);
  LoadReport rep = load_weights(*model, weights.string(), opt);
  if (report) *report = rep;
  return model;
}

}  // namespace lf
