// Hugging Face's tokenizer.json: a BPE model with the ByteLevel pre-tokenizer (GPT-2, RoBERTa)
// or a WordPiece model with BERT's normaliser and pre-tokenizer, its added tokens and the
// post-processor that says which tokens frame a sequence. Anything else is refused with the
// JSON path of the part that is not supported.
#include <algorithm>

#include "core/limits.h"
#include "data/tokenizer_impl.h"
#include "io/json_read.h"
#include "linformer/error.h"

namespace lf {

namespace {

using json = nlohmann::json;

struct Reader {
  std::string file;
  [[noreturn]] void bad(const std::string& path, const std::string& what) const {
    fail(file, ": ", path, ": ", what);
  }
  const json& get(const json& j, const std::string& path, const char* key) const {
    if (!j.is_object()) bad(path, "expected an object, got " + json_excerpt(j));
    const auto it = j.find(key);
    if (it == j.end()) bad(path, std::string("has no '") + key + "'");
    return *it;
  }
  std::string str(const json& j, const std::string& path) const {
    if (!j.is_string()) bad(path, "expected a string, got " + json_excerpt(j));
    return j.get<std::string>();
  }
  // A string or null ("" for null), as many optional fields are written.
  std::string opt_str(const json& j, const char* key, const std::string& path) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "";
    return str(*it, path + "." + key);
  }
  bool opt_bool(const json& j, const char* key, const std::string& path, bool dflt) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) bad(path + "." + key, "expected true or false, got " + json_excerpt(*it));
    return it->get<bool>();
  }
  int32_t id(const json& j, const std::string& path) const {
    if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() >= limits::kMaxVocab)
      bad(path, "expected an id in [0, " + std::to_string(limits::kMaxVocab) + "), got " +
                    json_excerpt(j));
    return static_cast<int32_t>(j.get<int64_t>());
  }
  std::unordered_map<std::string, int32_t> vocab(const json& model) const {
    const json& v = get(model, "model", "vocab");
    if (!v.is_object()) bad("model.vocab", "expected an object of token -> id, got " + json_excerpt(v));
    if (v.empty()) bad("model.vocab", "the vocabulary is empty");
    std::unordered_map<std::string, int32_t> out;
    for (const auto& [tok, i] : v.items()) out[tok] = id(i, "model.vocab[" + json_excerpt(tok) + "]");
    return out;
  }
  std::string type(const json& j, const std::string& path) const {
    return str(get(j, path, "type"), path + ".type");
  }
};

// The ByteLevel pre-tokenizer (alone or the only member of a Sequence): add_prefix_space.
bool byte_level_prefix_space(const Reader& r, const json& pre) {
  std::string path = "pre_tokenizer";
  const json* p = &pre;
  if (pre.is_null()) r.bad(path, "a BPE model needs the ByteLevel pre-tokenizer, got null");
  if (r.type(pre, path) == "Sequence") {
    const json& list = r.get(pre, path, "pretokenizers");
    if (!list.is_array() || list.size() != 1)
      r.bad(path + ".pretokenizers", "only a Sequence of one ByteLevel pre-tokenizer is supported");
    p = &list[0];
    path += ".pretokenizers[0]";
  }
  const std::string t = r.type(*p, path);
  if (t != "ByteLevel")
    r.bad(path + ".type", "'" + t + "' is not supported with a BPE model (supported: ByteLevel)");
  if (!r.opt_bool(*p, "use_regex", path, true))
    r.bad(path + ".use_regex", "only GPT-2's pattern (use_regex: true) is supported");
  return r.opt_bool(*p, "add_prefix_space", path, false);
}

void read_bpe(const Reader& r, const json& j, const json& model, BpeModelSpec* spec) {
  spec->where = r.file;
  spec->vocab = r.vocab(model);
  spec->unk_token = r.opt_str(model, "unk_token", "model");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!r.opt_str(model, k, "model").empty())
      r.bad(std::string("model.") + k, "is not supported by byte-level BPE (must be empty)");
  if (model.contains("dropout") && !model["dropout"].is_null())
    r.bad("model.dropout", "BPE dropout is not supported (must be null)");
  if (r.opt_bool(model, "byte_fallback", "model", false))
    r.bad("model.byte_fallback", "is not supported (must be false)");
  if (r.opt_bool(model, "ignore_merges", "model", false))
    r.bad("model.ignore_merges", "is not supported (must be false)");
  const json& merges = r.get(model, "model", "merges");
  if (!merges.is_array()) r.bad("model.merges", "expected an array, got " + json_excerpt(merges));
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string path = "model.merges[" + std::to_string(i) + "]";
    const json& m = merges[i];
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() ||
          s.find(' ', sp + 1) != std::string::npos)
        r.bad(path, "expected two tokens separated by one space, got " + json_excerpt(m));
      spec->merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2) {  // ["a", "b"] (tokenizers >= 0.20)
      spec->merges.emplace_back(r.str(m[0], path + "[0]"), r.str(m[1], path + "[1]"));
    } else {
      r.bad(path, "expected \"a b\" or [\"a\", \"b\"], got " + json_excerpt(m));
    }
  }
  const json& norm = j.contains("normalizer") ? j["normalizer"] : json();
  if (!norm.is_null())
    r.bad("normalizer", "a normalizer with a byte-level BPE model is not supported (must be null)");
  spec->add_prefix_space =
      byte_level_prefix_space(r, j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json());
}

void read_wordpiece(const Reader& r, const json& j, const json& model, WordPieceSpec* spec) {
  spec->where = r.file;
  spec->vocab = r.vocab(model);
  const std::string unk = r.opt_str(model, "unk_token", "model");
  if (!unk.empty()) spec->unk_token = unk;
  if (model.contains("continuing_subword_prefix"))
    spec->prefix = r.opt_str(model, "continuing_subword_prefix", "model");
  if (model.contains("max_input_chars_per_word")) {
    const json& m = model["max_input_chars_per_word"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1)
      r.bad("model.max_input_chars_per_word", "expected a positive integer, got " + json_excerpt(m));
    spec->max_chars_per_word = m.get<int64_t>();
  }
  const json& norm = j.contains("normalizer") ? j["normalizer"] : json();
  if (norm.is_null()) {
    spec->clean_text = spec->chinese_chars = spec->strip_accents = spec->lowercase = false;
  } else {
    const std::string t = r.type(norm, "normalizer");
    if (t != "BertNormalizer")
      r.bad("normalizer.type", "'" + t + "' is not supported with WordPiece (supported: BertNormalizer)");
    spec->clean_text = r.opt_bool(norm, "clean_text", "normalizer", true);
    spec->chinese_chars = r.opt_bool(norm, "handle_chinese_chars", "normalizer", true);
    spec->lowercase = r.opt_bool(norm, "lowercase", "normalizer", true);
    spec->strip_accents = r.opt_bool(norm, "strip_accents", "normalizer", spec->lowercase);
  }
  const json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  const std::string t = pre.is_null() ? "null" : r.type(pre, "pre_tokenizer");
  if (t != "BertPreTokenizer")
    r.bad("pre_tokenizer", "'" + t + "' is not supported with WordPiece (supported: BertPreTokenizer)");
}

// cls, sep and the pair layout from the post-processor, when it names them.
void read_post_processor(const Reader& r, const json& post, TokenizerImpl* t) {
  if (post.is_null()) return;
  const std::string type = r.type(post, "post_processor");
  SpecialIds& s = t->special;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* k : {"cls", "sep"}) {
      const std::string path = std::string("post_processor.") + k;
      const json& v = r.get(post, "post_processor", k);
      if (!v.is_array() || v.size() != 2) r.bad(path, "expected [token, id], got " + json_excerpt(v));
      (k[0] == 'c' ? s.cls : s.sep) = r.id(v[1], path + "[1]");
    }
    s.pair_double_sep = type == "RobertaProcessing";
  } else if (type == "TemplateProcessing") {
    // single: [cls] $A [sep]; pair: the special tokens between $A and $B count the seps.
    const json& specials = r.get(post, "post_processor", "special_tokens");
    auto special_id = [&](const json& piece, const std::string& path) -> int32_t {
      const std::string name = r.str(r.get(r.get(piece, path, "SpecialToken"), path, "id"), path);
      const json& ids = r.get(r.get(specials, "post_processor.special_tokens", name.c_str()),
                              "post_processor.special_tokens." + name, "ids");
      if (!ids.is_array() || ids.size() != 1)
        r.bad("post_processor.special_tokens." + name + ".ids", "expected one id");
      return r.id(ids[0], "post_processor.special_tokens." + name + ".ids[0]");
    };
    const json& single = r.get(post, "post_processor", "single");
    if (!single.is_array() || single.size() != 3 || !single[0].contains("SpecialToken") ||
        !single[2].contains("SpecialToken"))
      r.bad("post_processor.single", "only the template `CLS $A SEP` is supported");
    s.cls = special_id(single[0], "post_processor.single[0]");
    s.sep = special_id(single[2], "post_processor.single[2]");
    const json& pair = r.get(post, "post_processor", "pair");
    if (!pair.is_array()) r.bad("post_processor.pair", "expected an array");
    size_t between = 0;
    bool seen_a = false;
    for (const json& p : pair) {
      if (p.contains("Sequence")) {
        if (seen_a) break;
        seen_a = true;
      } else if (seen_a) {
        ++between;
      }
    }
    if (between != 1 && between != 2)
      r.bad("post_processor.pair", "expected one or two separators between $A and $B");
    s.pair_double_sep = between == 2;
  } else {
    r.bad("post_processor.type", "'" + type + "' is not supported (supported: RobertaProcessing, "
          "BertProcessing, TemplateProcessing)");
  }
}

}  // namespace

std::unique_ptr<TokenizerImpl> make_tokenizer_json(const std::string& path) {
  const Reader r{path};
  const json j = read_json_file(path);
  if (!j.is_object()) r.bad("(top level)", "expected an object, got " + json_excerpt(j));
  const json& model = r.get(j, "(top level)", "model");
  const auto mit = model.is_object() ? model.find("type") : model.end();
  // Files from older versions of the library have no model.type: it is BPE when merges exist.
  const std::string type = mit != model.end() ? r.str(*mit, "model.type")
                           : (model.is_object() && model.contains("merges")) ? "BPE"
                                                                             : "WordPiece";
  std::unique_ptr<TokenizerImpl> t;
  if (type == "BPE") {
    BpeModelSpec spec;
    read_bpe(r, j, model, &spec);
    t = build_bpe(std::move(spec));
  } else if (type == "WordPiece") {
    WordPieceSpec spec;
    read_wordpiece(r, j, model, &spec);
    t = build_wordpiece(std::move(spec));
  } else {
    r.bad("model.type", "'" + type + "' is not supported (supported: BPE, WordPiece)");
  }
  t->files = {path};
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    const json& list = j["added_tokens"];
    if (!list.is_array()) r.bad("added_tokens", "expected an array, got " + json_excerpt(list));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string p = "added_tokens[" + std::to_string(i) + "]";
      TokenizerImpl::Added a;
      a.id = r.id(r.get(list[i], p, "id"), p + ".id");
      a.content = r.str(r.get(list[i], p, "content"), p + ".content");
      if (a.content.empty()) r.bad(p + ".content", "is empty");
      a.special = r.opt_bool(list[i], "special", p, false);
      a.lstrip = r.opt_bool(list[i], "lstrip", p, false);
      a.rstrip = r.opt_bool(list[i], "rstrip", p, false);
      t->added.push_back(std::move(a));
    }
  }
  assign_special_by_name(*t, type == "WordPiece");
  read_post_processor(r, j.contains("post_processor") ? j["post_processor"] : json(), t.get());
  finish_special(*t);
  return t;
}

}  // namespace lf
