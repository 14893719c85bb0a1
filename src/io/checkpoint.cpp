#include "linformer/checkpoint.h"

#include <filesystem>
#include <set>

#include "core/error.h"
#include "io/safetensors.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

// Parameters that may be absent from a file and freshly initialised instead.
bool may_init(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  return has("key_proj") || has("value_proj") || has("kv_proj") ||
         name.rfind("lm_head.", 0) == 0 || name.rfind("classifier.", 0) == 0;
}

}  // namespace

void save_model(Model& model, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LF_CHECK(!ec, "cannot create folder ", dir, ": ", ec.message());
  SafeTensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("linformer_config", model.config().to_json());
  for (const ParamInfo& p : model.params())
    w.add_f32(p.name, p.shape, model.param_data() + p.offset);
  w.write((fs::path(dir) / "model.safetensors").string());
  model.config().save((fs::path(dir) / "config.json").string());
}

LoadReport load_weights(Model& model, const std::string& path, const LoadOptions& opt) {
  SafeTensorsReader r(path);
  LoadReport rep;
  std::vector<std::string> missing;
  std::set<std::string> used;
  for (const ParamInfo& p : model.params()) {
    if (!r.has(p.name)) {
      if (opt.init_missing && may_init(p.name))
        rep.initialised.push_back(p.name);
      else
        missing.push_back(p.name);
      continue;
    }
    try {
      r.read_f32(p.name, p.shape, model.param_data() + p.offset);
    } catch (const Error& e) {
      fail(e.what(), " (does config.json match this checkpoint?)");
    }
    used.insert(p.name);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) list += "\n  " + missing[i];
    if (missing.size() > 8) list += "\n  ... and " + std::to_string(missing.size() - 8) + " more";
    fail(path, ": ", missing.size(), " tensor(s) the model needs are missing:", list);
  }
  for (const std::string& n : r.names())
    if (!used.count(n)) rep.ignored.push_back(n);
  if (!rep.initialised.empty()) model.init_some(opt.seed, rep.initialised);
  return rep;
}

std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& opt,
                                  LoadReport* report) {
  LF_CHECK(fs::is_directory(dir), "model folder ", dir, " does not exist");
  const fs::path weights = fs::path(dir) / "model.safetensors";
  const fs::path cfg_path = fs::path(dir) / "config.json";
  LF_CHECK(fs::exists(weights), "model folder ", dir, " has no model.safetensors");
  Config cfg;
  if (fs::exists(cfg_path)) {
    cfg = Config::load(cfg_path.string());
  } else {
    SafeTensorsReader r(weights.string());
    auto it = r.metadata().find("linformer_config");
    LF_CHECK(it != r.metadata().end(), "model folder ", dir,
             " has no config.json and its checkpoint holds no configuration");
    cfg = Config::from_json(it->second);
  }
  auto model = std::make_unique<Model>(cfg);
  LoadReport rep = load_weights(*model, weights.string(), opt);
  if (report) *report = rep;
  return model;
}

}  // namespace lf
