#include "io/json_read.h"

#include "core/limits.h"
#include "linformer/error.h"
#include "linformer/file_util.h"

namespace lf {

using json = nlohmann::json;

json parse_json_bounded(const char* begin, const char* end, const std::string& what,
                        const json::parser_callback_t& extra) {
  // depth is the number of arrays and objects already open when one more starts.
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if ((ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start) &&
        depth >= limits::kMaxJsonDepth)
      fail(what, ": JSON nested deeper than ", limits::kMaxJsonDepth, " levels");
    return extra ? extra(depth, ev, parsed) : true;
  };
  try {
    return json::parse(begin, end, cb, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    fail(what, ": not valid JSON: ", e.what());
  }
}

json parse_json_bounded(const std::string& text, const std::string& what) {
  return parse_json_bounded(text.data(), text.data() + text.size(), what);
}

json read_json_file(const std::string& path) { return parse_json_bounded(read_file(path), path); }

json with_defaults(json j, const json& defaults) {
  if (j.is_object())
    for (const auto& kv : defaults.items()) j.emplace(kv.key(), kv.value());
  return j;
}

std::string json_excerpt(const json& v, size_t max_chars) {
  // Containers are described, never serialised (their text could be any size).
  if (v.is_array() || v.is_object())
    return std::string("an ") + (v.is_array() ? "array" : "object") + " of " +
           std::to_string(v.size()) + " element(s)";
  if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    if (str.size() > max_chars)
      return json(str.substr(0, max_chars)).dump(-1, ' ', true, json::error_handler_t::replace) +
             "...";
  }
  return v.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
}

}  // namespace lf
