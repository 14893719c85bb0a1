// Subword tokenizers with the special tokens the model needs, read from the files models ship:
//   sentencepiece - a SentencePiece model (unigram or BPE), e.g. one `tokenizer train` wrote
//                   (ids 0 <s>, 1 <pad>, 2 </s>, 3 <unk>, 4 <mask>, then the pieces);
//   bpe           - byte-level BPE (GPT-2, RoBERTa): vocab.json + merges.txt, or a
//                   tokenizer.json with a BPE model and a ByteLevel pre-tokenizer;
//   wordpiece     - WordPiece (BERT): vocab.txt, or a tokenizer.json with a WordPiece model
//                   (and BERT's normalizer and pre-tokenizer).
// Each tokenizer has its own special ids (special()): RoBERTa <s> 0, <pad> 1, </s> 2, <unk> 3,
// <mask> 50264; BERT [CLS] 101, [SEP] 102, [MASK] 103, [PAD] 0, [UNK] 100.
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

// Special-token ids of one tokenizer (-1: the tokenizer has no such token).
struct SpecialIds {
  int32_t cls = -1;   // <s> / [CLS]: first token of every sequence
  int32_t sep = -1;   // </s> / [SEP]: end of each text
  int32_t pad = -1;   // <pad> / [PAD]
  int32_t unk = -1;   // <unk> / [UNK]
  int32_t mask = -1;  // <mask> / [MASK]: masked-LM input
  // Sequence layout: true for RoBERTa's pairs `<s> A </s></s> B </s>`, false for BERT's
  // `[CLS] A [SEP] B [SEP]` (single texts are `cls A sep` in both).
  bool pair_double_sep = true;
};

class TokenizerImpl;

class Tokenizer {
 public:
  // The layout of the SentencePiece tokenizers `train` writes (and only of those: every other
  // caller asks the tokenizer, special()).
  static constexpr int32_t kCls = 0, kPad = 1, kSep = 2, kUnk = 3, kMask = 4;
  static constexpr int32_t kNumSpecial = 5;

  // Trains on the lines of the given files/folders (UTF-8 checked) and writes `model_path`.
  static void train(const std::vector<std::string>& inputs, const std::string& model_path,
                    const TokenizerTrainOptions& opt);

  // `path`: a tokenizer file (tokenizer.json, vocab.txt, a SentencePiece model) or a folder
  // holding tokenizer.json, vocab.json + merges.txt, vocab.txt or tokenizer.model (looked for
  // in that order). Malformed files throw lf::Error naming the file and line or JSON path.
  explicit Tokenizer(const std::string& path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // The tokenizer files inside `dir` (as above), or {} when it holds none.
  static std::vector<std::string> files_in(const std::string& dir);

  int64_t vocab_size() const;  // largest id + 1
  // Ids of the text, no special tokens added (special tokens written in the text, e.g.
  // "<mask>", are recognised by tokenizer.json files as Hugging Face does). UTF-8 checked.
  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& ids) const;  // special tokens dropped
  std::string piece(int32_t id) const;                         // "" for an unknown id
  const std::string& path() const { return path_; }
  const SpecialIds& special() const { return special_; }
  const char* kind() const;  // "sentencepiece", "bpe", "wordpiece"
  bool is_special(int32_t id) const;
  // The files this tokenizer was read from (to copy it into a model folder: files_in() of a
  // folder holding copies finds the same tokenizer).
  const std::vector<std::string>& files() const;

 private:
  std::unique_ptr<TokenizerImpl> impl_;
  std::string path_;
  SpecialIds special_;
};

// Copies the tokenizer's files into `dir` under the names files_in() finds (tokenizer.model,
// tokenizer.json, vocab.json + merges.txt, vocab.txt), replacing what is there.
void copy_tokenizer_files(const Tokenizer& tok, const std::string& dir);

}  // namespace lf
