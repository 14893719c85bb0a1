#include "linformer/config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/config_names.h"
#include "core/limits.h"
#include "io/json_read.h"
#include "layers/attention_path.h"
#include "linformer/error.h"
#include "linformer/file_util.h"

namespace lf {

using json = nlohmann::json;

namespace {

// The enum value named by j (the names: core/config_names.h).
template <typename E>
E parse_enum(const json& j, const char* key) {
  LF_CHECK(j.is_string(), "config: '", key, "' must be a string");
  const std::string s = j.get<std::string>();
  std::string allowed;
  for (const Named<E>& n : names_of(E{})) {
    if (s == n.name) return n.value;
    allowed += std::string(allowed.empty() ? "" : ", ") + n.name;
  }
  fail("config: '", key, "' is '", s, "'; expected one of: ", allowed);
}

// The integer and float fields, written, read and known as keys from these lists (the enums,
// k and the booleans are written and read one by one).
const std::pair<const char*, int64_t Config::*> kIntFields[] = {
    {"vocab_size", &Config::vocab_size},
    {"max_len", &Config::max_len},
    {"d_model", &Config::d_model},
    {"n_heads", &Config::n_heads},
    {"d_ff", &Config::d_ff},
    {"n_layers", &Config::n_layers},
    {"type_vocab_size", &Config::type_vocab_size},
    {"position_offset", &Config::position_offset},
    {"num_classes", &Config::num_classes},
    {"pad_id", &Config::pad_id},
    {"cls_id", &Config::cls_id}};
const std::pair<const char*, float Config::*> kFloatFields[] = {
    {"dropout", &Config::dropout},
    {"attention_dropout", &Config::attention_dropout},
    {"layer_norm_eps", &Config::layer_norm_eps},
    {"init_std", &Config::init_std},
    {"projection_init_noise", &Config::projection_init_noise}};  // written with projection_init
const char* const kOtherKeys[] = {"attention",          "k",        "sharing", "projection",
                                  "projection_init",    "norm",     "causal",  "mask_empty_rows",
                                  "classifier_pooling", "landmarks"};

}  // namespace

namespace {

// The shortest decimal that reads back as the same float, as a double (so JSON shows 0.1,
// not 0.10000000149011612).
double short_float(float v) {
  char buf[32];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return std::strtod(buf, nullptr);
}

}  // namespace

void Config::validate() const {
  // Every size against its documented maximum (docs/config.md, Limits) before any arithmetic
  // on it: the element counts below then cannot wrap.
  auto in_range = [](const char* key, int64_t v, int64_t lo, int64_t hi) {
    LF_CHECK(v >= lo && v <= hi, "config: ", key, " must be in [", lo, ", ", hi, "], got ", v);
  };
  in_range("vocab_size", vocab_size, 1, limits::kMaxVocab);
  in_range("max_len", max_len, 1, limits::kMaxLen);
  in_range("d_model", d_model, 1, limits::kMaxDModel);
  in_range("n_heads", n_heads, 1, limits::kMaxHeads);
  LF_CHECK(d_model % n_heads == 0, "config: d_model (", d_model, ") must be divisible by n_heads (",
           n_heads, ")");
  in_range("d_ff", d_ff, 1, limits::kMaxDFF);
  in_range("n_layers", n_layers, 1, limits::kMaxLayers);
  in_range("type_vocab_size", type_vocab_size, 1, limits::kMaxTypeVocab);
  in_range("position_offset", position_offset, 0, limits::kMaxPositionOffset);
  in_range("num_classes", num_classes, 2, limits::kMaxClasses);
  in_range("pad_id", pad_id, 0, vocab_size - 1);
  in_range("cls_id", cls_id, 0, vocab_size - 1);
  // NaN fails every comparison, so each check is written to pass only for valid values.
  LF_CHECK(dropout >= 0.f && dropout < 1.f, "config: dropout must be in [0, 1), got ", dropout);
  LF_CHECK(attention_dropout >= 0.f && attention_dropout < 1.f,
           "config: attention_dropout must be in [0, 1), got ", attention_dropout);
  LF_CHECK(layer_norm_eps > 0.f && std::isfinite(layer_norm_eps),
           "config: layer_norm_eps must be positive and finite, got ", layer_norm_eps);
  LF_CHECK(init_std >= 0.f && std::isfinite(init_std),
           "config: init_std must be >= 0 and finite, got ", init_std);
  attention_path(*this).validate(*this);  // the kind's own keys (k, sharing, projection)
  LF_CHECK(std::isfinite(projection_init_noise) && projection_init_noise >= 0.f &&
               projection_init_noise <= 100.f,
           "config: projection_init_noise must be in [0, 100], got ", projection_init_noise);
  // Bounded fields keep every element count far below 2^63, so this sum cannot wrap.
  const int64_t params = num_parameters();
  LF_CHECK(params <= limits::kMaxParameters, "config: ", params, " parameters exceed the limit of ",
           limits::kMaxParameters);
}

std::string Config::to_json() const {
  json j;
  for (const auto& f : kIntFields) j[f.first] = this->*f.second;
  for (const auto& f : kFloatFields) j[f.first] = short_float(this->*f.second);
  // projection_init written where it means something (a learned projection), always: configs
  // of versions before mean_pool became the default lack the key and read as mean_pool; its
  // noise only with mean_pool.
  if (attention == AttentionKind::linformer && projection == Projection::linear)
    j["projection_init"] = to_string(projection_init);
  if (!j.contains("projection_init") || projection_init != ProjectionInit::mean_pool)
    j.erase("projection_init_noise");
  // mask_empty_rows only for Linformer; configs of versions before it lack the key and read
  // as true.
  if (attention == AttentionKind::linformer) j["mask_empty_rows"] = mask_empty_rows;
  // landmarks only for Nystromformer (the configs of the other kinds stay as they were).
  if (attention == AttentionKind::nystrom) j["landmarks"] = landmarks;
  j["attention"] = to_string(attention);
  if (k.size() == 1)
    j["k"] = k[0];
  else
    j["k"] = k;
  j["sharing"] = to_string(sharing);
  j["projection"] = to_string(projection);
  j["norm"] = to_string(norm);
  j["causal"] = causal;
  j["classifier_pooling"] = to_string(classifier_pooling);  // absent in older configs: first
  return j.dump(2) + "\n";
}

namespace {

// A parsed config object (the overrides are applied to the value, never re-serialised: a
// string --set value need not be valid UTF-8, which dump() would throw on).
Config from_value(const json& j) {
  LF_CHECK(j.is_object(), "config: expected a JSON object");
  Config c;
  auto get_int = [&](const char* key, int64_t& dst) {
    if (!j.contains(key)) return;
    LF_CHECK(
        j[key].is_number_integer() && (!j[key].is_number_unsigned() ||
                                       j[key].get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)),
        "config: '", key, "' must be an integer (at most ", INT64_MAX, ")");
    dst = j[key].get<int64_t>();
  };
  auto get_float = [&](const char* key, float& dst) {
    if (!j.contains(key)) return;
    LF_CHECK(j[key].is_number(), "config: '", key, "' must be a number");
    const double v = j[key].get<double>();
    // Beyond float range the conversion is undefined (and would store inf): refused.
    LF_CHECK(std::isfinite(v) && std::fabs(v) <= std::numeric_limits<float>::max(), "config: '",
             key, "' = ", v, " is not a finite float");
    dst = static_cast<float>(v);
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const auto& f : kIntFields) known = known || it.key() == f.first;
    for (const auto& f : kFloatFields) known = known || it.key() == f.first;
    for (const char* key : kOtherKeys) known = known || it.key() == key;
    LF_CHECK(known, "config: unknown key '", it.key(), "'");
  }
  for (const auto& f : kIntFields) get_int(f.first, c.*f.second);
  for (const auto& f : kFloatFields) get_float(f.first, c.*f.second);
  if (j.contains("attention"))
    c.attention = parse_enum<decltype(c.attention)>(j["attention"], "attention");
  if (j.contains("sharing")) c.sharing = parse_enum<decltype(c.sharing)>(j["sharing"], "sharing");
  if (j.contains("projection"))
    c.projection = parse_enum<decltype(c.projection)>(j["projection"], "projection");
  if (j.contains("projection_init"))
    c.projection_init =
        parse_enum<decltype(c.projection_init)>(j["projection_init"], "projection_init");
  if (j.contains("norm")) c.norm = parse_enum<decltype(c.norm)>(j["norm"], "norm");
  if (j.contains("classifier_pooling"))
    c.classifier_pooling =
        parse_enum<decltype(c.classifier_pooling)>(j["classifier_pooling"], "classifier_pooling");
  auto get_bool = [&](const char* key, bool& dst) {
    if (!j.contains(key)) return;
    LF_CHECK(j[key].is_boolean(), "config: '", key, "' must be true or false");
    dst = j[key].get<bool>();
  };
  get_bool("causal", c.causal);
  get_bool("mask_empty_rows", c.mask_empty_rows);
  get_int("landmarks", c.landmarks);
  if (j.contains("k")) {
    const json& kj = j["k"];
    if (kj.is_number_integer()) {
      c.k = {kj.get<int64_t>()};
    } else {
      LF_CHECK(kj.is_array() && !kj.empty(),
               "config: 'k' must be an integer or a list of integers");
      c.k.clear();
      for (const json& v : kj) {
        LF_CHECK(v.is_number_integer(), "config: 'k' must be an integer or a list of integers");
        c.k.push_back(v.get<int64_t>());
      }
    }
  }
  c.validate();
  return c;
}

}  // namespace

Config Config::from_json(const std::string& text) {
  return from_value(parse_json_bounded(text, "config"));
}

Config Config::load(const std::string& path) {
  try {
    return from_json(read_file(path));
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

Config Config::load_with_overrides(const std::string& path, const std::vector<std::string>& sets) {
  using nlohmann::json;
  json j = json::object();
  if (!path.empty()) {
    j = parse_json_bounded(read_file(path), path + ": config");
    LF_CHECK(j.is_object(), path, ": config: expected a JSON object");
  }
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    LF_CHECK(eq != std::string::npos && eq > 0, "--set ", s, ": expected KEY=VALUE");
    const std::string key = s.substr(0, eq), value = s.substr(eq + 1);
    json v;
    try {
      v = parse_json_bounded(value, "--set " + key);
    } catch (const Error&) {
      v = json(value);  // not JSON: the text itself
    }
    j[key] = std::move(v);
  }
  try {
    return from_value(j);
  } catch (const Error& e) {
    fail(path.empty() ? std::string("default config") : path,
         sets.empty() ? "" : " with --set overrides", ": ", e.what());
  }
}

void Config::save(const std::string& path) const {
  validate();  // never write a file that could not be loaded again (e.g. a non-finite value)
  const std::string text = to_json();
  write_file_atomic(path, [&](std::ostream& os) { os << text; });
}

}  // namespace lf
