// The tokenizer implementations behind lf::Tokenizer: one class per model kind, chosen by what
// the path holds (tokenizer.cpp). Shared pieces: added (special) tokens split out of the text
// before the model sees it, as Hugging Face's tokenizers do, and Unicode helpers on ICU.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "linformer/tokenizer.h"

namespace lf {

class TokenizerImpl {
 public:
  virtual ~TokenizerImpl() = default;
  virtual const char* kind() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Appends the ids of `text` (valid UTF-8, holding no added token) to out.
  virtual void encode_plain(const std::string& text, std::vector<int32_t>* out) const = 0;
  // The text of these ids (none of them special).
  virtual std::string decode_plain(const std::vector<int32_t>& ids) const = 0;
  virtual std::string piece(int32_t id) const = 0;
  virtual int32_t find(const std::string& token) const = 0;  // -1 if absent

  // Added tokens of a tokenizer.json, matched in the raw text first.
  struct Added {
    std::string content;
    int32_t id = -1;
    bool special = false, lstrip = false, rstrip = false;
  };
  std::vector<Added> added;
  std::vector<std::string> files;
  SpecialIds special;
  std::vector<char> is_special;  // [vocab_size]

  // Text -> ids with the added tokens split out.
  void encode(const std::string& text, std::vector<int32_t>* out) const;
  // The model's vocabulary and the added tokens together.
  int64_t total_vocab() const;
  int32_t lookup(const std::string& token) const;  // added tokens first; -1 if absent
  std::string token(int32_t id) const;             // "" if unknown
  const Added* added_token(int32_t id) const;
};

// Builders (the path names are used in error messages).
std::unique_ptr<TokenizerImpl> make_sentencepiece_tokenizer(const std::string& path);
std::unique_ptr<TokenizerImpl> make_bpe_tokenizer(const std::string& vocab_json,
                                                  const std::string& merges_txt);
std::unique_ptr<TokenizerImpl> make_wordpiece_tokenizer(const std::string& vocab_txt);
std::unique_ptr<TokenizerImpl> make_tokenizer_json(const std::string& path);

// ---- Pieces shared by the builders ----
struct BpeModelSpec {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  bool add_prefix_space = false;  // ByteLevel pre-tokenizer option
  std::string unk_token;          // "" when none
  std::string where;              // for error messages: file (and JSON path)
};
std::unique_ptr<TokenizerImpl> build_bpe(BpeModelSpec spec);

struct WordPieceSpec {
  std::unordered_map<std::string, int32_t> vocab;
  std::string unk_token = "[UNK]";
  std::string prefix = "##";
  int64_t max_chars_per_word = 100;
  // BERT's normalizer (a missing normalizer turns them all off).
  bool clean_text = true, chinese_chars = true, strip_accents = true, lowercase = true;
  std::string where;
};
std::unique_ptr<TokenizerImpl> build_wordpiece(WordPieceSpec spec);

// Special ids by conventional names (<s>/[CLS], ...), the pair layout by the model kind.
void assign_special_by_name(TokenizerImpl& t, bool bert_layout);
// Makes the special tokens found by name added tokens (matched in the text, as Hugging Face's
// RobertaTokenizer/BertTokenizer do for files without a tokenizer.json); <mask> swallows the
// whitespace before it when `mask_lstrip`.
void add_named_specials(TokenizerImpl& t, bool mask_lstrip);
// Marks the special ids (and added special tokens) in t.is_special.
void finish_special(TokenizerImpl& t);

// ---- Unicode (ICU) ----
// Code points of valid UTF-8.
std::vector<char32_t> utf8_decode(const std::string& s);
void utf8_append(char32_t c, std::string* out);
bool is_unicode_whitespace(char32_t c);   // White_Space (Rust's char::is_whitespace)
bool is_unicode_punctuation(char32_t c);  // general category P*
bool is_unicode_other(char32_t c);        // general category C* (Cc Cf Cn Co Cs)
bool is_unicode_nonspacing_mark(char32_t c);  // Mn
std::u32string nfd(const std::u32string& s);
void append_lowercase(char32_t c, std::u32string* out);  // full per-character lower-casing

}  // namespace lf
