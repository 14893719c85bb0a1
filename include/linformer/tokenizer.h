// Subword tokenizer (SentencePiece unigram or BPE) with the special tokens the model needs.
// Ids: 0 <s> (cls/bos), 1 <pad>, 2 </s> (sep/eos), 3 <unk>, 4 <mask>, then the pieces.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lf {

struct TokenizerTrainOptions {
  int64_t vocab_size = 8192;
  std::string model_type = "unigram";  // "unigram" or "bpe"
  int64_t max_sentences = 1000000;     // sentences sampled for training
  float character_coverage = 0.9995f;
  uint64_t seed = 0;
};

class Tokenizer {
 public:
  static constexpr int32_t kCls = 0, kPad = 1, kSep = 2, kUnk = 3, kMask = 4;
  static constexpr int32_t kNumSpecial = 5;

  // Trains on the lines of the given files/folders (UTF-8 checked) and writes `model_path`.
  static void train(const std::vector<std::string>& inputs, const std::string& model_path,
                    const TokenizerTrainOptions& opt);

  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  int64_t vocab_size() const;
  std::vector<int32_t> encode(const std::string& text) const;  // no special tokens added
  std::string decode(const std::vector<int32_t>& ids) const;   // special tokens dropped
  std::string piece(int32_t id) const;
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

}  // namespace lf
