// WordPiece (BERT): BERT's normaliser (control characters removed, whitespace made a space,
// spaces around CJK ideographs, accents stripped by NFD minus Mn, lower-casing), BERT's
// pre-tokeniser (split on whitespace, every punctuation character alone) and greedy
// longest-match-first pieces with the "##" continuation prefix, as Hugging Face's tokenizers
// (and Google's original tokenization.py) do.
#include <algorithm>
#include <sstream>

#include "core/limits.h"
#include "data/corpus.h"
#include "data/tokenizer_impl.h"
#include "linformer/error.h"
#include "linformer/file_util.h"

namespace lf {

namespace {

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_bert_whitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || is_unicode_whitespace(c);
}

bool is_bert_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return is_unicode_other(c);
}

bool is_bert_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  return c >= 0x80 && is_unicode_punctuation(c);
}

class WordPieceTokenizer : public TokenizerImpl {
 public:
  explicit WordPieceTokenizer(WordPieceSpec spec) : spec_(std::move(spec)) {
    int64_t n = 0;
    for (const auto& [tok, id] : spec_.vocab) n = std::max<int64_t>(n, int64_t{id} + 1);
    pieces_.resize(static_cast<size_t>(n));
    for (const auto& [tok, id] : spec_.vocab) pieces_[id] = tok;
    const auto it = spec_.vocab.find(spec_.unk_token);
    LF_CHECK(it != spec_.vocab.end(), spec_.where, ": the unknown token '", spec_.unk_token,
             "' is not in the vocabulary");
    unk_ = it->second;
    for (const auto& [tok, id] : spec_.vocab) max_piece_ = std::max(max_piece_, tok.size());
  }

  const char* kind() const override { return "wordpiece"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  std::string piece(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? pieces_[id] : std::string();
  }
  int32_t find(const std::string& token) const override {
    const auto it = spec_.vocab.find(token);
    return it == spec_.vocab.end() ? -1 : it->second;
  }

  void encode_plain(const std::string& text, std::vector<int32_t>* out) const override {
    const std::u32string norm = normalize(text);
    // Pre-tokenise: whitespace separates, punctuation stands alone.
    std::u32string word;
    auto flush = [&] {
      if (!word.empty()) wordpiece(word, out);
      word.clear();
    };
    for (char32_t c : norm) {
      if (is_bert_whitespace(c)) {
        flush();
      } else if (is_bert_punctuation(c)) {
        flush();
        word.push_back(c);
        flush();
      } else {
        word.push_back(c);
      }
    }
    flush();
  }

  std::string decode_plain(const std::vector<int32_t>& ids) const override {
    // Hugging Face's WordPiece decoder: a piece with the prefix glues to the one before, the
    // others follow a space; each piece then gets the tokenization-space clean-up.
    static const std::pair<const char*, const char*> kCleanup[] = {
        {" .", "."},     {" ?", "?"},     {" !", "!"},           {" ,", ","},   {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"},
        {" 're", "'re"}};
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string p = pieces_[ids[i]];
      if (!spec_.prefix.empty() && p.rfind(spec_.prefix, 0) == 0) {
        p = p.substr(spec_.prefix.size());
      } else if (i > 0) {
        p = " " + p;
      }
      for (const auto& [from, to] : kCleanup) {
        const std::string f = from, t = to;
        for (size_t q = p.find(f); q != std::string::npos; q = p.find(f, q + t.size()))
          p.replace(q, f.size(), t);
      }
      s += p;
    }
    return s;
  }

 private:
  std::u32string normalize(const std::string& text) const {
    const std::vector<char32_t> cps = utf8_decode(text);
    std::u32string s;
    s.reserve(cps.size());
    bool ascii = true;
    for (char32_t c : cps) {
      if (spec_.clean_text) {
        if (c == 0 || c == 0xFFFD || is_bert_control(c)) continue;
        if (is_bert_whitespace(c)) c = ' ';
      }
      if (spec_.chinese_chars && is_chinese_char(c)) {
        ascii = false;  // compatibility ideographs (U+F900...) decompose
        s.push_back(' ');
        s.push_back(c);
        s.push_back(' ');
        continue;
      }
      ascii = ascii && c < 0x80;
      s.push_back(c);
    }
    if (spec_.strip_accents && !ascii) {
      std::u32string d = nfd(s);
      d.erase(std::remove_if(d.begin(), d.end(), is_unicode_nonspacing_mark), d.end());
      s = std::move(d);
    }
    if (spec_.lowercase) {
      std::u32string l;
      l.reserve(s.size());
      for (char32_t c : s) append_lowercase(c, &l);
      s = std::move(l);
    }
    return s;
  }

  // Greedy longest match; a word with a part no piece covers becomes [UNK].
  void wordpiece(const std::u32string& word, std::vector<int32_t>* out) const {
    if (static_cast<int64_t>(word.size()) > spec_.max_chars_per_word) {
      out->push_back(unk_);
      return;
    }
    std::vector<size_t> offs;  // byte offset of each character in w
    std::string w;
    for (char32_t c : word) {
      offs.push_back(w.size());
      utf8_append(c, &w);
    }
    offs.push_back(w.size());
    const size_t before = out->size();
    size_t start = 0;  // character index
    std::string cand;
    while (start < word.size()) {
      size_t end = word.size();
      int32_t found = -1;
      while (end > start) {
        const size_t len = offs[end] - offs[start];
        if (len + (start ? spec_.prefix.size() : 0) <= max_piece_) {
          cand.assign(start ? spec_.prefix : std::string());
          cand.append(w, offs[start], len);
          const auto it = spec_.vocab.find(cand);
          if (it != spec_.vocab.end()) {
            found = it->second;
            break;
          }
        }
        --end;
      }
      if (found < 0) {
        out->resize(before);
        out->push_back(unk_);
        return;
      }
      out->push_back(found);
      start = end;
    }
  }

  WordPieceSpec spec_;
  std::vector<std::string> pieces_;
  int32_t unk_ = -1;
  size_t max_piece_ = 0;
};

}  // namespace

std::unique_ptr<TokenizerImpl> build_wordpiece(WordPieceSpec spec) {
  return std::make_unique<WordPieceTokenizer>(std::move(spec));
}

std::unique_ptr<TokenizerImpl> make_wordpiece_tokenizer(const std::string& vocab_txt) {
  WordPieceSpec spec;
  spec.where = vocab_txt;
  const std::string text = read_file(vocab_txt);
  std::istringstream in(text);
  std::string line;
  int32_t id = 0;
  while (std::getline(in, line)) {
    // As Hugging Face reads it: line i is id i, trailing whitespace trimmed, a repeated
    // token takes its last id.
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    LF_CHECK(id < limits::kMaxVocab, vocab_txt, ": more than ", limits::kMaxVocab, " tokens");
    LF_CHECK(find_invalid_utf8(line) < 0, vocab_txt, ":", id + 1, ": not valid UTF-8");
    spec.vocab[line] = id;
    ++id;
  }
  LF_CHECK(id > 0, vocab_txt, ": the vocabulary is empty");
  auto t = build_wordpiece(std::move(spec));
  t->files = {vocab_txt};
  assign_special_by_name(*t, /*bert_layout=*/true);
  add_named_specials(*t, /*mask_lstrip=*/false);
  finish_special(*t);
  return t;
}

}  // namespace lf
