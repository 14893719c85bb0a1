// Hugging Face RoBERTa and BERT folders: their config.json translated into the engine's
// configuration (the tensors are matched by load_weights, model/checkpoint.cpp).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/json_read.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/tokenizer.h"

namespace lf {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool is_hf_model_folder(const std::string& dir) {
  const fs::path p = fs::path(dir) / "config.json";
  if (!fs::is_directory(dir) || !fs::is_regular_file(p)) return false;
  try {
    const json j = read_json_file(p.string());
    return j.is_object() && j.contains("model_type");
  } catch (const Error&) {
    return false;
  }
}

std::string hf_config_json(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  const json hf = read_json_file(path);
  LF_CHECK(hf.is_object(), path, ": expected a JSON object");
  auto get = [&](const char* key) -> const json& {
    const auto it = hf.find(key);
    LF_CHECK(it != hf.end(), path, ": '", key, "' is missing");
    return *it;
  };
  auto integer = [&](const char* key) {
    const json& v = get(key);
    LF_CHECK(v.is_number_integer(), path, ": '", key, "' must be an integer, got ", json_excerpt(v));
    return v.get<int64_t>();
  };
  auto number = [&](const char* key, double dflt) {
    const auto it = hf.find(key);
    if (it == hf.end() || it->is_null()) return dflt;
    LF_CHECK(it->is_number(), path, ": '", key, "' must be a number, got ", json_excerpt(*it));
    return it->get<double>();
  };
  const json& mt = get("model_type");
  LF_CHECK(mt.is_string(), path, ": 'model_type' must be a string");
  const std::string type = mt.get<std::string>();
  const bool roberta = type == "roberta";
  LF_CHECK(roberta || type == "bert", path, ": model_type '", type,
           "' is not supported (supported: roberta, bert)");
  const auto act = hf.find("hidden_act");
  LF_CHECK(act == hf.end() || *act == "gelu", path, ": hidden_act ",
           act == hf.end() ? "" : json_excerpt(*act),
           " is not supported (the engine uses the exact GELU, \"gelu\")");
  const auto pe = hf.find("position_embedding_type");
  LF_CHECK(pe == hf.end() || *pe == "absolute", path, ": position_embedding_type ",
           pe == hf.end() ? "" : json_excerpt(*pe), " is not supported (only \"absolute\")");

  const Tokenizer tok(dir);
  const SpecialIds& sp = tok.special();
  const int64_t pad = hf.contains("pad_token_id") && hf["pad_token_id"].is_number_integer()
                          ? hf["pad_token_id"].get<int64_t>()
                          : sp.pad;
  // RoBERTa numbers positions from pad_token_id + 1 (2), BERT from 0.
  const int64_t offset = roberta ? pad + 1 : 0;
  const int64_t positions = integer("max_position_embeddings");
  LF_CHECK(positions > offset, path, ": max_position_embeddings ", positions,
           " leaves no position after the offset ", offset);
  LF_CHECK(sp.cls >= 0, dir, ": the tokenizer has no cls token (<s> or [CLS])");
  json c;
  c["vocab_size"] = integer("vocab_size");
  c["max_len"] = positions - offset;
  c["position_offset"] = offset;
  c["type_vocab_size"] = hf.contains("type_vocab_size") ? integer("type_vocab_size") : 1;
  c["d_model"] = integer("hidden_size");
  c["n_heads"] = integer("num_attention_heads");
  c["d_ff"] = integer("intermediate_size");
  c["n_layers"] = integer("num_hidden_layers");
  c["layer_norm_eps"] = number("layer_norm_eps", roberta ? 1e-5 : 1e-12);
  c["dropout"] = number("hidden_dropout_prob", 0.1);
  c["attention_dropout"] = number("attention_probs_dropout_prob", 0.1);
  c["init_std"] = number("initializer_range", 0.02);
  c["pad_id"] = pad;
  c["cls_id"] = sp.cls;
  c["norm"] = "post";
  c["attention"] = "standard";
  if (hf.contains("num_labels") && hf["num_labels"].is_number_integer())
    c["num_classes"] = hf["num_labels"];
  else if (hf.contains("id2label") && hf["id2label"].is_object() && !hf["id2label"].empty())
    c["num_classes"] = hf["id2label"].size();
  return c.dump(2);
}

}  // namespace lf
