// lf::Tokenizer: picks the implementation by what the path holds, splits out added tokens,
// and wraps SentencePiece (training and the models it writes). Byte-level BPE is in
// tokenizer_bpe.cpp, WordPiece in tokenizer_wordpiece.cpp, tokenizer.json in tokenizer_json.cpp.
#include "linformer/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string_view>
#include <utility>

#include "data/corpus.h"
#include "data/tokenizer_impl.h"
#include "linformer/error.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

// Feeds the corpus lines to SentencePiece's trainer; UTF-8 errors surface as lf::Error.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::vector<std::string> lines) : lines_(std::move(lines)) {}
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> lines_;
  size_t i_ = 0;
};

class SentencePieceTokenizer : public TokenizerImpl {
 public:
  explicit SentencePieceTokenizer(const std::string& path) {
    const auto st = sp_.Load(path);
    LF_CHECK(st.ok(), "cannot load tokenizer ", path, ": ", st.ToString());
    special.cls = sp_.bos_id();
    special.sep = sp_.eos_id();
    special.pad = sp_.pad_id();
    special.unk = sp_.unk_id();
    const int mask = sp_.PieceToId("<mask>");
    special.mask = (mask != sp_.unk_id() && sp_.IdToPiece(mask) == "<mask>") ? mask : -1;
    LF_CHECK(special.cls >= 0 && special.sep >= 0 && special.pad >= 0 && special.unk >= 0 &&
                 special.mask >= 0,
             "tokenizer ", path,
             " does not have the special-token layout this program needs (<s>, <pad>, </s>, "
             "<unk> and <mask>); train it with `linformer tokenizer train`");
    files = {path};
  }
  const char* kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  void encode_plain(const std::string& text, std::vector<int32_t>* out) const override {
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    LF_CHECK(st.ok(), "tokenizer: cannot encode text: ", st.ToString());
    out->insert(out->end(), ids.begin(), ids.end());
  }
  std::string decode_plain(const std::vector<int32_t>& ids) const override {
    std::string out;
    const auto st = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &out);
    LF_CHECK(st.ok(), "tokenizer: cannot decode: ", st.ToString());
    return out;
  }
  std::string piece(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? sp_.IdToPiece(id) : std::string();
  }
  int32_t find(const std::string& token) const override {
    const int id = sp_.PieceToId(token);
    return sp_.IdToPiece(id) == token ? id : -1;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::unique_ptr<TokenizerImpl> make_sentencepiece_tokenizer(const std::string& path) {
  auto t = std::make_unique<SentencePieceTokenizer>(path);
  finish_special(*t);
  return t;
}

void TokenizerImpl::encode(const std::string& text, std::vector<int32_t>* out) const {
  // Earliest match, longest at that position; lstrip/rstrip swallow the whitespace beside it.
  // next[i]: where added token i occurs next at or after pos (npos: nowhere), kept across
  // matches so that the text is searched once per token.
  std::vector<size_t> next(added.size());
  for (size_t i = 0; i < added.size(); ++i)
    next[i] = added[i].content.empty() ? std::string::npos : text.find(added[i].content);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string::npos;
    const Added* hit = nullptr;
    for (size_t i = 0; i < added.size(); ++i) {
      const Added& a = added[i];
      if (next[i] != std::string::npos && next[i] < pos) next[i] = text.find(a.content, pos);
      const size_t p = next[i];
      if (p == std::string::npos) continue;
      if (p < best || (p == best && a.content.size() > hit->content.size())) best = p, hit = &a;
    }
    if (!hit) break;
    size_t seg_end = best;
    if (hit->lstrip)
      while (seg_end > pos && is_ascii_space(text[seg_end - 1])) --seg_end;
    if (seg_end > pos) encode_plain(text.substr(pos, seg_end - pos), out);
    out->push_back(hit->id);
    pos = best + hit->content.size();
    if (hit->rstrip)
      while (pos < text.size() && is_ascii_space(text[pos])) ++pos;
  }
  if (pos < text.size()) encode_plain(pos ? text.substr(pos) : text, out);
}

int64_t TokenizerImpl::total_vocab() const {
  int64_t n = vocab_size();
  for (const Added& a : added) n = std::max<int64_t>(n, int64_t{a.id} + 1);
  return n;
}

const TokenizerImpl::Added* TokenizerImpl::added_token(int32_t id) const {
  for (const Added& a : added)
    if (a.id == id) return &a;
  return nullptr;
}

int32_t TokenizerImpl::lookup(const std::string& tok) const {
  for (const Added& a : added)
    if (a.content == tok) return a.id;
  return find(tok);
}

std::string TokenizerImpl::token(int32_t id) const {
  if (const Added* a = added_token(id)) return a->content;
  return piece(id);
}

void assign_special_by_name(TokenizerImpl& t, bool bert_layout) {
  auto first = [&](std::initializer_list<const char*> names) {
    for (const char* n : names) {
      const int32_t id = t.lookup(n);
      if (id >= 0) return id;
    }
    return int32_t{-1};
  };
  SpecialIds& s = t.special;
  s.cls = first({"<s>", "[CLS]", "<|endoftext|>"});
  s.sep = first({"</s>", "[SEP]", "<|endoftext|>"});
  s.pad = first({"<pad>", "[PAD]"});
  s.unk = first({"<unk>", "[UNK]", "<|endoftext|>"});
  s.mask = first({"<mask>", "[MASK]"});
  s.pair_double_sep = !bert_layout;
}

void add_named_specials(TokenizerImpl& t, bool mask_lstrip) {
  const SpecialIds& s = t.special;
  for (int32_t id : {s.cls, s.sep, s.pad, s.unk, s.mask}) {
    if (id < 0 || t.added_token(id)) continue;
    TokenizerImpl::Added a;
    a.id = id;
    a.content = t.piece(id);
    a.special = true;
    a.lstrip = mask_lstrip && id == s.mask;
    if (!a.content.empty()) t.added.push_back(std::move(a));
  }
}

void finish_special(TokenizerImpl& t) {
  t.is_special.assign(static_cast<size_t>(t.total_vocab()), 0);
  auto mark = [&](int32_t id) {
    if (id >= 0 && id < static_cast<int64_t>(t.is_special.size())) t.is_special[id] = 1;
  };
  const SpecialIds& s = t.special;
  for (int32_t id : {s.cls, s.sep, s.pad, s.unk, s.mask}) mark(id);
  for (const auto& a : t.added)
    if (a.special) mark(a.id);
}

void Tokenizer::train(const std::vector<std::string>& inputs, const std::string& model_path,
                      const TokenizerTrainOptions& opt) {
  LF_CHECK(opt.model_type == "unigram" || opt.model_type == "bpe",
           "tokenizer: model type must be unigram or bpe, got ", opt.model_type);
  LF_CHECK(opt.vocab_size > kNumSpecial + 10, "tokenizer: vocab_size ", opt.vocab_size,
           " is too small");
  const std::vector<std::string> files = list_corpus_files(inputs);
  // SentencePiece skips any training sentence over max_sentence_length (4192 bytes): a corpus
  // of whole books, one per line, would teach it nothing from the books. So each line is cut
  // into pieces of at most kPiece bytes at spaces (a line without a space that long is cut at
  // a UTF-8 character boundary), and the sample is taken over the pieces: a long document
  // then weighs by its length, as in the token stream the model trains on.
  constexpr size_t kPiece = 2048;
  auto for_each_piece = [&](const std::function<void(std::string_view)>& fn) {
    for_each_line(files, [&](const std::string& line) {
      std::string_view rest(line);
      while (rest.size() > kPiece) {
        size_t cut = rest.rfind(' ', kPiece);
        if (cut == std::string_view::npos || cut == 0) {
          cut = kPiece;
          while (cut > 0 && (static_cast<unsigned char>(rest[cut]) & 0xC0) == 0x80) --cut;
          if (cut == 0) cut = kPiece;
        }
        fn(rest.substr(0, cut));
        rest.remove_prefix(cut);
        while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      }
      if (!rest.empty()) fn(rest);
      return true;
    });
  };
  // Evenly spaced sample of at most max_sentences pieces (deterministic).
  std::vector<std::string> lines;
  int64_t total = 0;
  for_each_piece([&](std::string_view) { ++total; });
  LF_CHECK(total > 0, "tokenizer: the corpus has no non-empty lines");
  const int64_t stride = std::max<int64_t>(1, (total + opt.max_sentences - 1) / opt.max_sentences);
  int64_t idx = 0;
  for_each_piece([&](std::string_view piece) {
    if (idx++ % stride == 0) lines.emplace_back(piece);
  });
  std::string prefix = model_path;
  if (prefix.size() > 6 && prefix.substr(prefix.size() - 6) == ".model")
    prefix = prefix.substr(0, prefix.size() - 6);
  const std::string args =
      "--model_prefix=" + prefix + " --vocab_size=" + std::to_string(opt.vocab_size) +
      " --model_type=" + opt.model_type + " --bos_id=0 --pad_id=1 --eos_id=2 --unk_id=3" +
      " --bos_piece=<s> --pad_piece=<pad> --eos_piece=</s> --unk_piece=<unk>" +
      " --user_defined_symbols=<mask> --character_coverage=" +
      std::to_string(opt.character_coverage) +
      " --minloglevel=2 --num_threads=2 --hard_vocab_limit=false";
  LineIterator it(std::move(lines));
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it);
  LF_CHECK(st.ok(), "tokenizer training failed: ", st.ToString());
  if (prefix + ".model" != model_path) std::filesystem::rename(prefix + ".model", model_path);
  std::error_code ec;
  std::filesystem::remove(prefix + ".vocab", ec);
}

std::vector<std::string> Tokenizer::files_in(const std::string& dir) {
  const fs::path d(dir);
  auto has = [&](const char* f) { return fs::is_regular_file(d / f); };
  if (has("tokenizer.json")) return {(d / "tokenizer.json").string()};
  if (has("vocab.json") && has("merges.txt"))
    return {(d / "vocab.json").string(), (d / "merges.txt").string()};
  if (has("vocab.txt")) return {(d / "vocab.txt").string()};
  if (has("tokenizer.model")) return {(d / "tokenizer.model").string()};
  return {};
}

Tokenizer::Tokenizer(const std::string& path) : path_(path) {
  LF_CHECK(fs::exists(path), "tokenizer ", path, " does not exist");
  std::vector<std::string> files = {path};
  if (fs::is_directory(path)) {
    files = files_in(path);
    LF_CHECK(!files.empty(), "tokenizer: the folder ", path,
             " holds no tokenizer (tokenizer.json, vocab.json + merges.txt, vocab.txt or "
             "tokenizer.model)");
  }
  const std::string name = fs::path(files[0]).filename().string();
  const std::string ext = fs::path(files[0]).extension().string();
  if (files.size() == 1 && name == "vocab.json") {  // GPT-2's pair: merges.txt beside it
    const fs::path merges = fs::path(files[0]).parent_path() / "merges.txt";
    LF_CHECK(fs::is_regular_file(merges), "tokenizer: ", files[0],
             " is a BPE vocabulary without merges.txt beside it");
    files.push_back(merges.string());
  }
  if (files.size() == 2) {
    impl_ = make_bpe_tokenizer(files[0], files[1]);
  } else if (ext == ".json") {
    impl_ = make_tokenizer_json(files[0]);
  } else if (ext == ".txt") {
    impl_ = make_wordpiece_tokenizer(files[0]);
  } else {
    impl_ = make_sentencepiece_tokenizer(files[0]);
  }
  special_ = impl_->special;
  // A special id given by the file (a post-processor's [token, id], an added token) must be a
  // token of the vocabulary: framing, padding and masking write these ids into batches.
  const int64_t n = impl_->total_vocab();
  const std::pair<const char*, int32_t> named[] = {{"cls", special_.cls}, {"sep", special_.sep},
                                                   {"pad", special_.pad}, {"unk", special_.unk},
                                                   {"mask", special_.mask}};
  for (const auto& [what, id] : named)
    LF_CHECK(id >= -1 && id < n, "tokenizer ", path, ": the ", what, " token's id ", id,
             " is outside its vocabulary of ", n, " tokens");
}

Tokenizer::~Tokenizer() = default;

int64_t Tokenizer::vocab_size() const { return impl_->total_vocab(); }

const char* Tokenizer::kind() const { return impl_->kind(); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < static_cast<int64_t>(impl_->is_special.size()) && impl_->is_special[id];
}

const std::vector<std::string>& Tokenizer::files() const { return impl_->files; }

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  const int64_t bad = find_invalid_utf8(text);
  LF_CHECK(bad < 0, "tokenizer: the text is not valid UTF-8 (byte ", bad, ")");
  std::vector<int32_t> ids;
  impl_->encode(text, &ids);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  // Runs of model ids are decoded together; added (non-special) tokens are their text.
  std::string out;
  std::vector<int32_t> run;
  const int64_t model_vocab = impl_->vocab_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || is_special(id)) continue;
    const TokenizerImpl::Added* a = impl_->added_token(id);
    if (!a && id < model_vocab) {
      run.push_back(id);
      continue;
    }
    if (!run.empty()) out += impl_->decode_plain(run);
    run.clear();
    if (a) out += a->content;
  }
  if (!run.empty()) out += impl_->decode_plain(run);
  return out;
}

std::string Tokenizer::piece(int32_t id) const { return impl_->token(id); }

void copy_tokenizer_files(const Tokenizer& tok, const std::string& dir) {
  fs::create_directories(dir);
  // The names files_in() looks for, whatever the source files are called (e.g. my.model).
  const std::vector<std::string>& files = tok.files();
  const std::string ext = fs::path(files[0]).extension().string();
  const std::vector<std::string> names =
      files.size() == 2 ? std::vector<std::string>{"vocab.json", "merges.txt"}
      : ext == ".json"  ? std::vector<std::string>{"tokenizer.json"}
      : ext == ".txt"   ? std::vector<std::string>{"vocab.txt"}
                        : std::vector<std::string>{"tokenizer.model"};
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& f = files[i];
    // Under a temporary name, then renamed: a killed copy never leaves a torn file.
    const fs::path to = fs::path(dir) / names[i];
    const fs::path tmp = fs::path(dir) / (names[i] + ".tmp");
    std::error_code ec;
    if (fs::exists(to) && fs::equivalent(f, to, ec)) continue;
    fs::copy_file(f, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, to, ec);
    LF_CHECK(!ec, "cannot copy tokenizer file ", f, " to ", dir, ": ", ec.message());
  }
}

}  // namespace lf
