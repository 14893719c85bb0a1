// Masked-language-model data: a cached token stream packed into fixed-length sequences,
// and dynamic masking that is a pure function of (seed, epoch, sequence).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "linformer/file_util.h"
#include "linformer/tokenizer.h"

namespace lf {


// A tokenised corpus: documents (non-empty lines) as token ids, each followed by </s>.
// Stored on disk as "LFTOKv02" + 8 reserved bytes + int32 ids + a trailer (count, checksum,
// "LFTOKEND"), and memory-mapped; a cache that does not match its trailer is rebuilt.
class TokenStream {
 public:
  // Tokenises `files` into `cache_dir` unless a cache for the same files (path, size, mtime)
  // and tokenizer already exists there; then maps it. Streams: memory stays small.
  // may_build = false (the ranks other than 0 of a data-parallel run, after rank 0 built it):
  // the cache must exist; its absence is an error saying the folder must be shared.
  static TokenStream build(const std::vector<std::string>& files, const Tokenizer& tok,
                           const std::string& cache_dir, bool verbose, bool may_build = true);
  static TokenStream open(const std::string& path);
  // An in-memory stream (tests).
  static TokenStream from_tokens(std::vector<int32_t> tokens);

  int64_t size() const { return size_; }
  const int32_t* data() const { return data_; }
  const std::string& path() const { return path_; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::shared_ptr<std::vector<int32_t>> mem_;
  const int32_t* data_ = nullptr;
  int64_t size_ = 0;
  std::string path_;
};

// The stream cut into sequences of n tokens: <s> + up to n-2 stream tokens + </s>,
// the last one padded. Sequence i covers stream tokens [begin + i*(n-2), ...).
struct PackedSequences {
  const TokenStream* stream = nullptr;
  int64_t begin = 0, end = 0;  // stream token range used
  int64_t n = 0;
  int32_t cls = 0, sep = 2, pad = 1;  // the tokenizer's frame and padding (set_frame)
  int64_t count() const;
  void set_frame(const SpecialIds& sp);
  // Writes ids [n] and mask [n] (1 real / 0 pad) of sequence i.
  void get(int64_t i, int32_t* ids, float* mask) const;
};

// Splits a stream into train and validation sequence sets: the last `valid_fraction` of the
// stream (rounded to whole sequences, at least one) is held out.
void split_stream(const TokenStream& s, int64_t n, double valid_fraction, PackedSequences* train,
                  PackedSequences* valid);

struct MaskingOptions {
  double mask_prob = 0.15;  // share of real, non-special tokens chosen
  double replace_mask = 0.8, replace_random = 0.1;  // of the chosen; the rest stay unchanged
  int32_t mask_id = 4;
  int32_t first_normal_id = 5;  // random replacements come from [first_normal_id, vocab)
  int64_t vocab_size = 0;
  // Ids never chosen nor drawn as random replacements (indexed by id; empty: none beyond
  // [0, first_normal_id)). A draw that hits one leaves the token unchanged.
  std::vector<char> special;
};

// The masking options of a tokenizer: its mask id, its special ids, and first_normal_id the
// end of the run of special ids that starts at 0 (5 for `tokenizer train`'s, 4 for RoBERTa's,
// 1 for BERT's).
MaskingOptions masking_for(const Tokenizer& tok, double mask_prob, int64_t vocab_size);

// Chooses round(mask_prob * m) (at least 1) of the m maskable positions (real tokens other
// than ids < first_normal_id), sets labels there (-100 elsewhere) and replaces ids in place.
// Random numbers come from (seed, stream) only. Returns the number of chosen positions.
int64_t apply_mlm_mask(int32_t* ids, int32_t* labels, const float* mask, int64_t n,
                       const MaskingOptions& opt, uint64_t seed, uint64_t stream);

// A batch of B masked sequences of n tokens: ids (masked), labels (-100 where not chosen) and
// mask (1 real / 0 padding), each [B, n].
struct MlmBatch {
  std::vector<int32_t> ids, labels;
  std::vector<float> mask;
  int64_t real_tokens = 0;
  void resize(int64_t B, int64_t n);
};

// Sequences which[b] of seqs, masked with the draw of epochs[b]: the chosen positions are a
// pure function of (seed, epoch, sequence index) and the sequence. Evaluation uses epoch -1,
// so every evaluation (and `linformer perplexity` with the same seed) masks the same positions.
void make_mlm_batch(const PackedSequences& seqs, const std::vector<int64_t>& which,
                    const std::vector<int64_t>& epochs, const MaskingOptions& mo, uint64_t seed,
                    MlmBatch* out);

// A deterministic permutation of [0, count) for an epoch.
std::vector<int64_t> epoch_order(int64_t count, uint64_t seed, int64_t epoch);

}  // namespace lf
