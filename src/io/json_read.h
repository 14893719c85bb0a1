// JSON read from files and other untrusted sources: nesting is limited (limits::kMaxJsonDepth)
// so that nothing downstream (serialising, walking, error messages) recurses without bound,
// and error messages quote a bounded excerpt of a value, never the whole of it.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace lf {

// Parses [begin, end). Throws lf::Error "<what>: not valid JSON: ..." or "<what>: JSON nested
// deeper than N levels". `extra`, when given, sees every parse event as well (return false to
// drop a value, as with nlohmann::json::parse).
nlohmann::json parse_json_bounded(const char* begin, const char* end, const std::string& what,
                                  const nlohmann::json::parser_callback_t& extra = nullptr);
nlohmann::json parse_json_bounded(const std::string& text, const std::string& what);
// read_file(path) then parse_json_bounded, naming the file in errors.
nlohmann::json read_json_file(const std::string& path);

// j with the keys of `defaults` that it lacks added (j unchanged when it is not an object): for
// files of earlier versions, which lack keys added since.
nlohmann::json with_defaults(nlohmann::json j, const nlohmann::json& defaults);

// At most `max_chars` characters of a value's JSON text (then "..."), for error messages.
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 60);

}  // namespace lf
