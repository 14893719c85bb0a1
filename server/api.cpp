#include "api.h"

#include <charconv>
#include <cmath>

namespace lf::serve {

using json = nlohmann::json;

void invalid(const std::string& message) { throw ApiError(422, "validation", message); }

const char* to_string(Pooling p) { return p == Pooling::mean ? "mean" : "cls"; }

namespace {

// The body as a JSON object, or 422 naming the parse error.
json parse_object(const std::string& body) {
  if (body.empty()) invalid("empty request body: expected a JSON object");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse errors, and numbers too large for a double
    invalid(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) invalid(std::string("the body must be a JSON object, got ") + j.type_name());
  return j;
}

const char* type_of(const json& v) { return v.type_name(); }

// The byte offset of the first invalid UTF-8 sequence in s (overlong forms, surrogates and
// code points past U+10FFFF included), or npos. The JSON parser passes such bytes through.
size_t invalid_utf8_at(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string::npos;
}

// A string field's value: 422 when it is not a string, empty or not UTF-8.
std::string text_of(const json& v, const std::string& where) {
  if (!v.is_string()) invalid(where + " must be a string, got " + type_of(v));
  std::string s = v.get<std::string>();
  if (s.empty()) invalid(where + " is an empty string");
  const size_t bad = invalid_utf8_at(s);
  if (bad != std::string::npos)
    invalid(where + " is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  return s;
}

bool flag(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean())
    invalid(std::string("\"") + key + "\" must be true or false, got " + type_of(*it));
  return it->get<bool>();
}

void check_count(size_t n, const ParseLimits& lim, const char* field) {
  if (n == 0) invalid(std::string("\"") + field + "\" is an empty list");
  if (static_cast<int64_t>(n) > lim.max_client_batch_size)
    invalid(std::string("\"") + field + "\" holds " + std::to_string(n) +
            " inputs; this server takes at most " + std::to_string(lim.max_client_batch_size) +
            " per request (--max-client-batch-size): split them over several requests");
}

// "truncate" (default: the server's --auto-truncate) and "truncation_direction".
void read_truncation(const json& j, const ParseLimits& lim, RunRequest* r) {
  r->truncate = flag(j, "truncate", lim.auto_truncate);
  auto it = j.find("truncation_direction");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_string()) invalid("\"truncation_direction\" must be \"right\" or \"left\"");
    std::string d = it->get<std::string>();
    for (char& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (d != "right" && d != "left")
      invalid("\"truncation_direction\" must be \"right\" or \"left\", got \"" +
              it->get<std::string>() + "\"");
    r->truncate_left = d == "left";
  }
}

// "inputs"/"input": a string or a list of strings.
std::vector<std::string> texts_of(const json& j, const char* field, const ParseLimits& lim,
                                  bool* batched) {
  auto it = j.find(field);
  if (it == j.end()) invalid(std::string("missing field \"") + field + "\"");
  const json& v = *it;
  std::vector<std::string> out;
  if (v.is_string()) {
    *batched = false;
    out.push_back(text_of(v, std::string("\"") + field + "\""));
    return out;
  }
  if (!v.is_array())
    invalid(std::string("\"") + field + "\" must be a string or a list of strings, got " +
            type_of(v));
  *batched = true;
  check_count(v.size(), lim, field);
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(text_of(v[i], std::string("\"") + field + "\"[" + std::to_string(i) + "]"));
  return out;
}

Pooling pooling_of(const json& j, Pooling def) {
  auto it = j.find("pooling");
  if (it == j.end() || it->is_null()) return def;
  if (it->is_string()) {
    if (*it == "cls") return Pooling::cls;
    if (*it == "mean") return Pooling::mean;
  }
  invalid("\"pooling\" must be \"cls\" or \"mean\", got " + it->dump());
}

}  // namespace

EmbedRequest parse_embed(const std::string& body, const ParseLimits& lim) {
  const json j = parse_object(body);
  EmbedRequest r;
  for (std::string& t : texts_of(j, "inputs", lim, &r.batched)) r.inputs.push_back({t, "", false});
  r.batched = true;  // TEI answers /embed with a list of vectors either way
  read_truncation(j, lim, &r);
  r.normalize = flag(j, "normalize", true);
  r.pooling = pooling_of(j, lim.default_pooling);
  return r;
}

OpenAIEmbedRequest parse_openai_embed(const std::string& body, const ParseLimits& lim) {
  const json j = parse_object(body);
  OpenAIEmbedRequest r;
  auto it = j.find("input");
  if (it != j.end() && it->is_array() && !it->empty() &&
      ((*it)[0].is_number() || (*it)[0].is_array()))
    invalid("\"input\" holds token ids; this server takes texts (a string or a list of strings)");
  for (std::string& t : texts_of(j, "input", lim, &r.batched)) r.inputs.push_back({t, "", false});
  r.truncate = lim.auto_truncate;
  auto f = j.find("encoding_format");
  if (f != j.end() && !f->is_null()) {
    if (*f == "base64")
      r.base64 = true;
    else if (*f != "float")
      invalid("\"encoding_format\" must be \"float\" or \"base64\", got " + f->dump());
  }
  auto d = j.find("dimensions");
  if (d != j.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<int64_t>() <= 0)
      invalid("\"dimensions\" must be a positive integer, got " + d->dump());
    r.dimensions = d->get<int64_t>();
  }
  auto m = j.find("model");
  if (m != j.end() && !m->is_null()) {
    if (!m->is_string()) invalid("\"model\" must be a string, got " + std::string(type_of(*m)));
    r.model = m->get<std::string>();
  }
  auto u = j.find("user");
  if (u != j.end() && !u->is_null() && !u->is_string())
    invalid("\"user\" must be a string, got " + std::string(type_of(*u)));
  return r;
}

PredictRequest parse_predict(const std::string& body, const ParseLimits& lim) {
  const json j = parse_object(body);
  PredictRequest r;
  auto it = j.find("inputs");
  if (it == j.end()) invalid("missing field \"inputs\"");
  const json& v = *it;
  // One element of a batch: [text] or [a, b].
  auto sequence = [&](const json& e, const std::string& where) {
    if (e.is_string()) return TextInput{text_of(e, where), "", false};
    if (!e.is_array() || e.empty() || e.size() > 2)
      invalid(where + " must be [text] or a pair [text_a, text_b], got " +
              (e.is_array() ? "a list of " + std::to_string(e.size()) : std::string(type_of(e))));
    if (e.size() == 1) return TextInput{text_of(e[0], where + "[0]"), "", false};
    return TextInput{text_of(e[0], where + "[0]"), text_of(e[1], where + "[1]"), true};
  };
  if (v.is_string()) {
    r.batched = false;
    r.inputs.push_back({text_of(v, "\"inputs\""), "", false});
  } else if (v.is_array()) {
    check_count(v.size(), lim, "inputs");
    const bool flat = v[0].is_string();
    if (flat && lim.model_pairs) {  // TEI: [a, b] is one pair
      if (v.size() != 2)
        invalid(
            "\"inputs\" of a pair classifier must be a pair [text_a, text_b] or a list of "
            "pairs [[a, b], ...], got a list of " +
            std::to_string(v.size()) + " strings");
      r.batched = false;
      r.inputs.push_back(sequence(v, "\"inputs\""));
    } else {
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string where = "\"inputs\"[" + std::to_string(i) + "]";
        if (flat != v[i].is_string())
          invalid(
              "\"inputs\" mixes strings and lists: give a list of strings, or a list of "
              "[text] and [text_a, text_b] lists");
        r.inputs.push_back(sequence(v[i], where));
      }
    }
  } else {
    invalid("\"inputs\" must be a string, a pair [a, b] or a list of inputs, got " +
            std::string(type_of(v)));
  }
  for (const TextInput& in : r.inputs)
    if (in.pair != lim.model_pairs)
      invalid(lim.model_pairs ? "this classifier was finetuned on sentence pairs: give each input "
                                "as [text_a, text_b]"
                              : "this classifier takes single texts, not pairs");
  read_truncation(j, lim, &r);
  r.raw_scores = flag(j, "raw_scores", false);
  return r;
}

TokenizeRequest parse_tokenize(const std::string& body, const ParseLimits& lim) {
  const json j = parse_object(body);
  TokenizeRequest r;
  r.inputs = texts_of(j, "inputs", lim, &r.batched);
  r.add_special_tokens = flag(j, "add_special_tokens", true);
  return r;
}

EmbedAllRequest parse_embed_all(const std::string& body, const ParseLimits& lim) {
  const json j = parse_object(body);
  EmbedAllRequest r;
  for (std::string& t : texts_of(j, "inputs", lim, &r.batched)) r.inputs.push_back({t, "", false});
  r.batched = true;  // TEI answers a list (per input) of lists (per token) either way
  read_truncation(j, lim, &r);
  return r;
}

RerankRequest parse_rerank(const std::string& body, const ParseLimits& lim) {
  const json j = parse_object(body);
  RerankRequest r;
  auto q = j.find("query");
  if (q == j.end()) invalid("missing field \"query\"");
  r.query = text_of(*q, "\"query\"");
  auto t = j.find("texts");
  if (t == j.end()) invalid("missing field \"texts\"");
  if (!t->is_array())
    invalid(std::string("\"texts\" must be a list of strings, got ") + type_of(*t));
  r.texts = texts_of(j, "texts", lim, &r.batched);
  for (const std::string& text : r.texts) r.inputs.push_back({r.query, text, true});
  read_truncation(j, lim, &r);
  r.raw_scores = flag(j, "raw_scores", false);
  r.return_text = flag(j, "return_text", false);
  return r;
}

DecodeRequest parse_decode(const std::string& body, const ParseLimits& lim, int64_t vocab_size) {
  const json j = parse_object(body);
  DecodeRequest r;
  auto it = j.find("ids");
  if (it == j.end()) invalid("missing field \"ids\"");
  const json& v = *it;
  if (!v.is_array())
    invalid(std::string("\"ids\" must be a list of token ids or a list of such lists, got ") +
            type_of(v));
  auto one = [&](const json& a, const std::string& where) {
    if (!a.is_array()) invalid(where + " must be a list of token ids, got " + type_of(a));
    std::vector<int32_t> ids;
    for (size_t i = 0; i < a.size(); ++i) {
      const json& x = a[i];
      const std::string w = where + "[" + std::to_string(i) + "]";
      if (!x.is_number_integer())
        invalid(w + " must be a token id (an integer), got " +
                (x.is_number() ? x.dump() : type_of(x)));
      const bool neg = x.is_number_integer() && !x.is_number_unsigned() && x.get<int64_t>() < 0;
      if (neg || (x.is_number_unsigned() ? x.get<uint64_t>() >= static_cast<uint64_t>(vocab_size)
                                         : x.get<int64_t>() >= vocab_size))
        invalid(w + " is " + x.dump() + ", not a token id of this model's tokenizer (0 to " +
                std::to_string(vocab_size - 1) + ")");
      ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    return ids;
  };
  if (v.empty() || !v[0].is_array()) {  // one sequence (an empty one decodes to "")
    if (static_cast<int64_t>(v.size()) > (int64_t{1} << 20))
      invalid("\"ids\" holds " + std::to_string(v.size()) + " ids; at most 1048576");
    r.ids.push_back(one(v, "\"ids\""));
  } else {
    check_count(v.size(), lim, "ids");
    for (size_t i = 0; i < v.size(); ++i)
      r.ids.push_back(one(v[i], "\"ids\"[" + std::to_string(i) + "]"));
  }
  r.skip_special_tokens = flag(j, "skip_special_tokens", true);
  return r;
}

std::string error_body(const ApiError& e) {
  // The message may quote the request (JSON parse errors do): invalid UTF-8 becomes U+FFFD.
  return json{{"error", e.what()}, {"error_type", e.type}}.dump(-1, ' ', false,
                                                                json::error_handler_t::replace);
}

std::string base64_encode(const void* data, size_t bytes) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((bytes + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes; i += 3) {
    const uint32_t v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += k[(v >> s) & 63];
  }
  if (i < bytes) {
    const uint32_t v = (p[i] << 16) | (i + 1 < bytes ? p[i + 1] << 8 : 0);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < bytes ? k[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

void append_floats(std::string* out, const float* v, int64_t n) {
  char buf[32];
  out->push_back('[');
  for (int64_t i = 0; i < n; ++i) {
    if (i) out->push_back(',');
    if (!std::isfinite(v[i])) {  // JSON has no NaN or infinity
      out->append("null");
      continue;
    }
    if (v[i] == 0 && std::signbit(v[i])) {  // "-0" reads back as the integer 0 in JSON
      out->append("-0.0");
      continue;
    }
    const auto r = std::to_chars(buf, buf + sizeof buf, v[i]);
    out->append(buf, r.ptr);
  }
  out->push_back(']');
}

}  // namespace lf::serve
