#include "linformer/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>

#include "data/corpus.h"
#include "linformer/error.h"

namespace lf {

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

}  // namespace

struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

void Tokenizer::train(const std::vector<std::string>& inputs, const std::string& model_path,
                      const TokenizerTrainOptions& opt) {
  LF_CHECK(opt.model_type == "unigram" || opt.model_type == "bpe",
           "tokenizer: model type must be unigram or bpe, got ", opt.model_type);
  LF_CHECK(opt.vocab_size > kNumSpecial + 10, "tokenizer: vocab_size ", opt.vocab_size,
           " is too small");
  const std::vector<std::string> files = list_corpus_files(inputs);
  // Evenly spaced sample of at most max_sentences lines (deterministic).
  std::vector<std::string> lines;
  int64_t total = 0;
  for_each_line(files, [&](const std::string&) {
    ++total;
    return true;
  });
  LF_CHECK(total > 0, "tokenizer: the corpus has no non-empty lines");
  const int64_t stride = std::max<int64_t>(1, (total + opt.max_sentences - 1) / opt.max_sentences);
  int64_t idx = 0;
  for_each_line(files, [&](const std::string& l) {
    if (idx++ % stride == 0) lines.push_back(l);
    return true;
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

Tokenizer::Tokenizer(const std::string& model_path)
    : impl_(std::make_unique<Impl>()), path_(model_path) {
  LF_CHECK(std::filesystem::exists(model_path), "tokenizer model ", model_path,
           " does not exist");
  const auto st = impl_->sp.Load(model_path);
  LF_CHECK(st.ok(), "cannot load tokenizer ", model_path, ": ", st.ToString());
  LF_CHECK(impl_->sp.PieceToId("<mask>") == kMask && impl_->sp.pad_id() == kPad &&
               impl_->sp.bos_id() == kCls && impl_->sp.eos_id() == kSep &&
               impl_->sp.unk_id() == kUnk,
           "tokenizer ", model_path,
           " does not have the special-token layout this program needs (<s> 0, <pad> 1, </s> 2, "
           "<unk> 3, <mask> 4); train it with `linformer tokenizer train`");
}

Tokenizer::~Tokenizer() = default;

int64_t Tokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto st = impl_->sp.Encode(text, &ids);
  LF_CHECK(st.ok(), "tokenizer: cannot encode text: ", st.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> v;
  for (int32_t id : ids)
    if (id >= kNumSpecial && id < vocab_size()) v.push_back(id);
  std::string out;
  const auto st = impl_->sp.Decode(v, &out);
  LF_CHECK(st.ok(), "tokenizer: cannot decode: ", st.ToString());
  return out;
}

std::string Tokenizer::piece(int32_t id) const { return impl_->sp.IdToPiece(id); }

}  // namespace lf
