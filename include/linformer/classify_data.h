// Text-classification data: readers for the formats people already have (chosen by the
// columns a file holds, never by its name), label maps, and the encoding of examples into
// token sequences and padded batches.
//
// Formats (the header row decides; column names are matched case-insensitively, in any order):
//   sst2    - GLUE SST-2: `sentence` and `label` (0/1 -> negative/positive); test files have
//             `index sentence`. A text column named `content`, `text` or `review` with a
//             0/1 `label` and nothing else counts as the generic format below.
//   qnli    - GLUE QNLI: `index question sentence label`, labels entailment/not_entailment.
//   qqp     - GLUE QQP: `id qid1 qid2 question1 question2 is_duplicate` (0/1 ->
//             not_duplicate/duplicate); test files have `id question1 question2`.
//   tsv     - generic: a `label` column and a text column (`text`, `sentence`, `content`,
//             `review`), or two text columns (`text_a`/`text_b`, `sentence1`/`sentence2`) for
//             pairs; other columns are ignored. Labels are whatever strings the column holds.
//   aclimdb - the aclImdb folder layout: SPLIT/pos/*.txt and SPLIT/neg/*.txt (one review per
//             file). A path to the root (holding train/ and test/) selects the split named by
//             ReadOptions::split.
// Without a label column a file is unlabelled (for prediction). Line ends may be LF or CRLF.
// `<br />` tags (IMDB) are replaced by a space.
#pragma once
#include <cstdint>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/tokenizer.h"

namespace lf {

enum class BadRows { stop, skip };

// One example: a text, or a pair of texts, and its label as written in the file (for the
// known formats: the canonical label name, e.g. "positive" for SST-2's "1").
struct ClassifyExample {
  std::string a, b;   // b is empty for single-text tasks
  std::string label;  // "" when the file has no label column
  std::string id;     // the `id`/`index` column when present
  int32_t file = 0;   // index into ClassifyData::files
  int64_t line = 0;   // 1-based line number (0 for one-file-per-example folders)
};

struct ClassifyData {
  std::string format;  // sst2, qnli, qqp, tsv, aclimdb, lines
  bool pairs = false;
  bool labelled = false;
  std::vector<std::string> files;
  std::vector<ClassifyExample> examples;
  int64_t bad_rows = 0;                   // rows skipped (BadRows::skip)
  std::vector<std::string> bad_messages;  // the first few "FILE:LINE: reason" messages

  std::string where(const ClassifyExample& e) const;  // "FILE:LINE" or the file
};

struct ReadOptions {
  BadRows bad_rows = BadRows::stop;
  std::string split = "train";  // aclImdb root folders: which split to read
  int64_t max_examples = 0;     // 0: all; else an evenly spread subset of this many
  size_t max_messages = 10;     // bad-row messages kept
  bool require_labels = false;  // an unlabelled file is an error
};

// Reads a TSV file with a header, or an aclImdb folder (see above). With BadRows::stop the
// first bad row (wrong column count, empty text, invalid UTF-8, unknown label for a known
// format) throws lf::Error "FILE:LINE: reason"; with skip it is counted and left out.
ClassifyData read_classify_data(const std::string& path, const ReadOptions& opt = {});

// The columns of a TSV header: which format and where the fields are (-1: absent).
struct TsvSchema {
  std::string format;
  int text_a = -1, text_b = -1, label = -1, id = -1;
  size_t columns = 0;
  std::vector<std::string> names;
};
// Recognises a header line (CR stripped); false if it names no known text column.
bool detect_tsv_schema(const std::string& header, TsvSchema* out);
// Parses one data line with the schema into ex (a, b, label, id). Returns "" or the reason the
// row is bad (without the file:line prefix).
std::string parse_tsv_row(const TsvSchema& s, const std::string& line, ClassifyExample* ex);

// Class ids <-> label names. Each class has a name (printed) and aliases (other spellings
// accepted in data files, e.g. "1" for SST-2's "positive"). Saved as labels.json.
struct LabelMap {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> aliases;
  int32_t positive = -1;  // the positive class of binary F1 (class 1 for two classes)

  int64_t size() const { return static_cast<int64_t>(names.size()); }
  int32_t find(const std::string& label) const;  // -1 if unknown
  nlohmann::json to_json() const;
  static LabelMap from_json(const nlohmann::json& j);
};

// The label map of a data set: the fixed classes of a known format (SST-2, QNLI, QQP,
// aclImdb: every class even if absent from the data), else the distinct labels, in numeric
// order when they are all integers and in string order otherwise.
LabelMap build_label_map(const ClassifyData& data);

// Class ids of the examples under `map`. An unknown label is a bad row (file:line in the
// message): with BadRows::stop it throws, with skip the example is dropped from data.examples
// and counted in data.bad_rows. Returns the ids of the kept examples.
std::vector<int32_t> assign_labels(ClassifyData& data, const LabelMap& map, BadRows policy,
                                   size_t max_messages = 10);

// Texts to classify or embed, read from a stream chunk by chunk (stdin works): a TSV with a
// header (format "tsv", or "auto" when the first line is a recognised header; labels and
// other columns are read but not needed) or one text per line ("lines"; with pairs, the two
// texts of a line are separated by a tab). Bad rows (invalid UTF-8, empty text, a wrong column
// count, a pair line without a tab) stop or are skipped and counted.
class TextInput {
 public:
  TextInput(std::istream& in, std::string name, const std::string& format, bool pairs,
            BadRows policy);
  // Clears out->examples and appends up to max examples; false once the input is exhausted
  // and nothing was read.
  bool next(size_t max, ClassifyData* out);
  bool is_tsv() const { return tsv_; }
  const TsvSchema& schema() const { return schema_; }
  int64_t bad_rows() const { return bad_rows_; }
  const std::vector<std::string>& bad_messages() const { return bad_messages_; }

 private:
  std::istream& in_;
  std::string name_, format_;
  bool pairs_ = false, tsv_ = false, started_ = false;
  BadRows policy_;
  TsvSchema schema_;
  int64_t lineno_ = 0, bad_rows_ = 0;
  std::vector<std::string> bad_messages_;
  std::string pending_;  // first data line read while detecting the format
  bool has_pending_ = false;
  void bad(const std::string& why);
};

// ---- Encoding ----
// Which tokens survive when a text is too long:
//   head      - the first tokens (the end is cut)
//   tail      - the last tokens (the beginning is cut)
//   head_tail - the first quarter and the last three quarters of the budget
enum class Truncate { head, tail, head_tail };
Truncate parse_truncate(const std::string& s);  // "head", "tail", "head+tail"
const char* to_string(Truncate t);

// Keeps `budget` tokens of ids according to the policy.
std::vector<int32_t> truncate_tokens(const std::vector<int32_t>& ids, int64_t budget, Truncate t);

// The tokenizer's layout (SpecialIds): single `cls A sep`; pair `<s> A </s></s> B </s>`
// (RoBERTa, pair_double_sep) or `[CLS] A [SEP] B [SEP]` (BERT). The result has at most max_len
// tokens: a pair shortens the longer text first (one token at a time, so the budget is shared
// as evenly as the lengths allow), each text cut by the policy.
std::vector<int32_t> encode_tokens(const SpecialIds& sp, const std::vector<int32_t>& a,
                                   const std::vector<int32_t>* b, int64_t max_len, Truncate t);
// ASCII letters A-Z lowercased; other bytes (UTF-8 included) unchanged.
std::string lower_ascii(std::string s);

// lowercase: ASCII letters are lowercased first (for an uncased tokenizer, e.g. one trained on
// lowercased text such as PTB).
std::vector<int32_t> encode_example(const Tokenizer& tok, const std::string& a,
                                    const std::string& b, bool pair, int64_t max_len, Truncate t,
                                    bool lowercase = false);

// Encodes every example (in parallel); seqs[i] belongs to data.examples[i].
std::vector<std::vector<int32_t>> encode_all(const Tokenizer& tok, const ClassifyData& data,
                                             int64_t max_len, Truncate t, bool lowercase = false);

// A padded batch: ids and mask [B, N], N = the longest sequence (or pad_to when larger).
struct PaddedBatch {
  std::vector<int32_t> ids;
  std::vector<float> mask;
  int64_t B = 0, N = 0;
};
void make_padded_batch(const std::vector<std::vector<int32_t>>& seqs,
                       const std::vector<int64_t>& which, int32_t pad_id, int64_t pad_to,
                       PaddedBatch* out);

// The batches of one training epoch, a pure function of (count, seed, epoch): a shuffled order
// cut into batches of batch_size; with `bucket`, examples are sorted by length within pools of
// 50 batches before being cut (less padding), and the batches are shuffled.
std::vector<std::vector<int64_t>> epoch_batches(const std::vector<int64_t>& lengths,
                                                int64_t batch_size, bool bucket, uint64_t seed,
                                                int64_t epoch);

// Batches for inference: sorted by length (longest first) when sort is true, else in order.
std::vector<std::vector<int64_t>> inference_batches(const std::vector<int64_t>& lengths,
                                                    int64_t batch_size, bool sort);

}  // namespace lf
