// Byte-level BPE (GPT-2, RoBERTa): text is cut by GPT-2's pattern (PCRE2 with Unicode
// properties), each piece's bytes are mapped to printable characters (bytes_to_unicode), and
// merges are applied lowest rank first (the leftmost pair among equals), as Hugging Face's
// tokenizers and OpenAI's encoder do.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <queue>
#include <sstream>

#include "core/limits.h"
#include "data/corpus.h"
#include "data/tokenizer_impl.h"
#include "io/json_read.h"
#include "linformer/error.h"
#include "linformer/file_util.h"

namespace lf {

namespace {

// GPT-2's pre-tokenizer pattern (encoder.py; Hugging Face's ByteLevel uses the same).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// bytes_to_unicode(): printable bytes map to themselves, the others to U+0100 onwards.
std::array<char32_t, 256> byte_chars() {
  std::array<char32_t, 256> m{};
  std::array<bool, 256> direct{};
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) m[b] = direct[b] ? static_cast<char32_t>(b) : next++;
  return m;
}

struct Pcre2Code {
  pcre2_code* code = nullptr;
  Pcre2Code() {
    int err = 0;
    PCRE2_SIZE off = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("tokenizer: cannot compile GPT-2's pattern: ", reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  }
  ~Pcre2Code() { pcre2_code_free(code); }
};

const Pcre2Code& gpt2_pattern() {
  static const Pcre2Code c;
  return c;
}

// Lossy UTF-8: invalid sequences become U+FFFD (as Hugging Face's decoders do).
std::string utf8_lossy(const std::string& s) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    const std::string rest = s.substr(pos);
    const int64_t bad = find_invalid_utf8(rest);
    if (bad < 0) {
      out += rest;
      break;
    }
    out += rest.substr(0, static_cast<size_t>(bad));
    out += "\xEF\xBF\xBD";
    pos += static_cast<size_t>(bad) + 1;
  }
  return out;
}

class BpeTokenizer : public TokenizerImpl {
 public:
  explicit BpeTokenizer(BpeModelSpec spec) : add_prefix_space_(spec.add_prefix_space) {
    const std::string& where = spec.where;
    int64_t n = 0;
    for (const auto& [tok, id] : spec.vocab) n = std::max<int64_t>(n, int64_t{id} + 1);
    pieces_.resize(static_cast<size_t>(n));
    for (const auto& [tok, id] : spec.vocab) pieces_[id] = tok;
    vocab_ = std::move(spec.vocab);
    const std::array<char32_t, 256> chars = byte_chars();
    for (int b = 0; b < 256; ++b) {
      std::string s;
      utf8_append(chars[b], &s);
      const auto it = vocab_.find(s);
      byte_id_[b] = it == vocab_.end() ? -1 : it->second;
      char_byte_[chars[b]] = static_cast<unsigned char>(b);
    }
    if (!spec.unk_token.empty()) {
      const auto it = vocab_.find(spec.unk_token);
      LF_CHECK(it != vocab_.end(), where, ": the unknown token '", spec.unk_token,
               "' is not in the vocabulary");
      unk_ = it->second;
    }
    merges_.reserve(spec.merges.size() * 2);
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      const auto& [a, b] = spec.merges[r];
      const auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(a + b);
      LF_CHECK(ia != vocab_.end() && ib != vocab_.end() && iab != vocab_.end(), where,
               ": merge ", r + 1, " ('", a, "' '", b, "'): ",
               ia == vocab_.end() ? a : ib == vocab_.end() ? b : a + b,
               " is not in the vocabulary");
      merges_.emplace(key(ia->second, ib->second),
                      Merge{static_cast<int32_t>(r), iab->second});  // the first rank wins
    }
  }

  const char* kind() const override { return "bpe"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  std::string piece(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? pieces_[id] : std::string();
  }
  int32_t find(const std::string& token) const override {
    const auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
  }

  void encode_plain(const std::string& text, std::vector<int32_t>* out) const override {
    std::string buf;
    const std::string* s = &text;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
      buf = " " + text;
      s = &buf;
    }
    if (s->empty()) return;
    struct MatchData {
      pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
      ~MatchData() { pcre2_match_data_free(md); }
    };
    thread_local MatchData m;
    const pcre2_code* code = gpt2_pattern().code;
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s->data());
    size_t pos = 0;
    while (pos < s->size()) {
      const int rc = pcre2_match(code, subject, s->size(), pos, PCRE2_NO_UTF_CHECK, m.md, nullptr);
      if (rc < 0) {  // no match: cannot happen (\s+ and [^\s\p{L}\p{N}]+ cover everything)
        bpe_word(s->data() + pos, s->size() - pos, out);
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
      if (ov[1] <= pos) break;  // an empty match would never advance
      bpe_word(s->data() + ov[0], ov[1] - ov[0], out);
      pos = ov[1];
    }
  }

  std::string decode_plain(const std::vector<int32_t>& ids) const override {
    std::string bytes;
    for (int32_t id : ids) {
      const std::vector<char32_t> cs = utf8_decode(pieces_[id]);
      for (char32_t c : cs) {
        const auto it = char_byte_.find(c);
        if (it != char_byte_.end())
          bytes.push_back(static_cast<char>(it->second));
        else
          utf8_append(c, &bytes);
      }
    }
    return utf8_lossy(bytes);
  }

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  // One pre-token: bytes -> symbols -> merges, lowest rank first, leftmost among equals.
  void bpe_word(const char* p, size_t n, std::vector<int32_t>* out) const {
    struct Sym {
      int32_t id;
      int32_t prev, next;
    };
    std::vector<Sym> sym;
    sym.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int32_t id = byte_id_[static_cast<unsigned char>(p[i])];
      if (id < 0) {
        if (unk_ >= 0) out->push_back(unk_);  // a byte the vocabulary lacks
        continue;
      }
      const int32_t k = static_cast<int32_t>(sym.size());
      sym.push_back({id, k - 1, k + 1});
    }
    if (sym.empty()) return;
    sym.back().next = -1;
    struct Cand {
      int32_t rank, pos, left, right;
      bool operator>(const Cand& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push = [&](int32_t i) {
      if (i < 0 || sym[i].next < 0) return;
      const auto it = merges_.find(key(sym[i].id, sym[sym[i].next].id));
      if (it != merges_.end()) heap.push({it->second.rank, i, sym[i].id, sym[sym[i].next].id});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      Sym& a = sym[c.pos];
      if (a.id != c.left || a.next < 0 || sym[a.next].id != c.right) continue;  // stale
      const int32_t b = a.next;
      a.id = merges_.at(key(c.left, c.right)).id;
      a.next = sym[b].next;
      if (a.next >= 0) sym[a.next].prev = c.pos;
      sym[b].id = -1;
      push(a.prev);
      push(c.pos);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
  }

  bool add_prefix_space_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> pieces_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<char32_t, unsigned char> char_byte_;
  int32_t unk_ = -1;
};

}  // namespace

std::unique_ptr<TokenizerImpl> build_bpe(BpeModelSpec spec) {
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

std::unique_ptr<TokenizerImpl> make_bpe_tokenizer(const std::string& vocab_json,
                                                  const std::string& merges_txt) {
  BpeModelSpec spec;
  spec.where = merges_txt;
  const nlohmann::json v = read_json_file(vocab_json);
  LF_CHECK(v.is_object(), vocab_json, ": expected a JSON object of token -> id, got ",
           json_excerpt(v));
  for (const auto& [tok, id] : v.items()) {
    LF_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 &&
                 id.get<int64_t>() < limits::kMaxVocab,
             vocab_json, ": the id of token ", json_excerpt(tok), " must be an integer in [0, ",
             limits::kMaxVocab, "), got ", json_excerpt(id));
    spec.vocab[tok] = static_cast<int32_t>(id.get<int64_t>());
  }
  LF_CHECK(!spec.vocab.empty(), vocab_json, ": the vocabulary is empty");
  const std::string text = read_file(merges_txt);
  std::istringstream in(text);
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    LF_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
                 line.find(' ', sp + 1) == std::string::npos,
             merges_txt, ":", lineno, ": expected two tokens separated by one space, got ",
             json_excerpt(nlohmann::json(line)));
    spec.merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  spec.where = merges_txt;
  auto t = build_bpe(std::move(spec));
  t->files = {vocab_json, merges_txt};
  assign_special_by_name(*t, /*bert_layout=*/false);
  add_named_specials(*t, /*mask_lstrip=*/true);
  finish_special(*t);
  return t;
}

}  // namespace lf
