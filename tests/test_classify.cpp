// Text classification: readers for every format (header variants, CRLF, bad rows, the aclImdb
// folder), label maps, pair encoding and truncation, batching and metrics. Every fixture is
// created by the tests. (Predictions, finetuning runs and the CLI: test_classify_train.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test::error_of;
using test::write_text;

// Each example as "a|b|label|id": a read compared as a whole.
std::vector<std::string> rows(const ClassifyData& d) {
  std::vector<std::string> v;
  for (const ClassifyExample& e : d.examples) v.push_back(e.a + "|" + e.b + "|" + e.label + "|" + e.id);
  return v;
}
using Rows = std::vector<std::string>;

// Writes `text` as `path` and reads it back, which must give a file of sentence pairs in
// `format` whose examples are `expected`.
ClassifyData read_pairs(const std::string& path, const std::string& text, const char* format,
                        const Rows& expected) {
  write_text(path, text);
  ClassifyData d = read_classify_data(path);
  EXPECT_EQ(d.format, format) << path;
  EXPECT_TRUE(d.pairs) << path;
  EXPECT_EQ(rows(d), expected) << path;
  return d;
}

ReadOptions skip_opts() {
  ReadOptions o;
  o.bad_rows = BadRows::skip;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------------

TEST(ClassifyRead, Sst2EitherColumnOrderAndCrlf) {
  const std::string dir = test::temp_dir("sst2");
  write_text(dir + "/a.tsv", "sentence\tlabel\r\nit is great\t1\r\na dull mess\t0\r\n\r\n");
  write_text(dir + "/b.tsv", "label\tsentence\n1\tit is great\n0\ta dull mess\n");
  for (const char* f : {"/a.tsv", "/b.tsv"}) {
    const ClassifyData d = read_classify_data(dir + f);
    EXPECT_EQ(d.format, "sst2") << f;
    EXPECT_TRUE(d.labelled);
    EXPECT_FALSE(d.pairs);
    EXPECT_EQ(rows(d), (Rows{"it is great||positive|", "a dull mess||negative|"})) << f;  // no CR
    ASSERT_EQ(d.examples.size(), 2u) << f;
    EXPECT_EQ(d.examples[1].line, 3);
    EXPECT_EQ(d.where(d.examples[1]), dir + f + ":3");
  }
  // Header names are case-insensitive; a BOM is ignored.
  write_text(dir + "/c.tsv", "\xEF\xBB\xBFLabel\tSentence\n0\tfine\n");
  EXPECT_EQ(read_classify_data(dir + "/c.tsv").format, "sst2");
}

TEST(ClassifyRead, QnliPairsLabelsAndIds) {
  const std::string dir = test::temp_dir("qnli");
  const ClassifyData d = read_pairs(
      dir + "/dev.tsv",
      "index\tquestion\tsentence\tlabel\n"
      "0\tWhat is it?\tIt is a cat.\tentailment\n"
      "1\tWho came?\tNobody knows where.\tnot_entailment\n",
      "qnli",
      {"What is it?|It is a cat.|entailment|0", "Who came?|Nobody knows where.|not_entailment|1"});
  const LabelMap m = build_label_map(d);
  EXPECT_EQ(m.names, (std::vector<std::string>{"entailment", "not_entailment"}));
  EXPECT_EQ(m.positive, 1);
  // Column order does not matter.
  read_pairs(dir + "/shuffled.tsv", "label\tsentence\tindex\tquestion\nentailment\tB.\t7\tA?\n",
             "qnli", {"A?|B.|entailment|7"});
}

TEST(ClassifyRead, QqpTrainAndUnlabelledTestFile) {
  const std::string dir = test::temp_dir("qqp");
  const ClassifyData d = read_pairs(dir + "/train.tsv",
                                    "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                                    "5\t1\t2\tHow do I cook rice?\tHow to cook rice?\t1\n"
                                    "6\t3\t4\tWhat is AI?\tWhere is Rome?\t0\n",
                                    "qqp",
                                    {"How do I cook rice?|How to cook rice?|duplicate|5",
                                     "What is AI?|Where is Rome?|not_duplicate|6"});
  EXPECT_EQ(build_label_map(d).names, (std::vector<std::string>{"not_duplicate", "duplicate"}));
  const ClassifyData t =
      read_pairs(dir + "/test.tsv", "id\tquestion1\tquestion2\n9\tA?\tB?\n", "qqp", {"A?|B?||9"});
  EXPECT_FALSE(t.labelled);
  ReadOptions need;
  need.require_labels = true;
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/test.tsv", need), "no label column");
}

TEST(ClassifyRead, GenericTsvSelectsColumnsByName) {
  const std::string dir = test::temp_dir("generic");
  // IMDB-like: extra columns are ignored, `<br />` becomes a space.
  write_text(dir + "/imdb.tsv",
             "label\trating\tsrc\ttext\n"
             "0\t3\tneg/0_3\tBad film.<br /><br />Really bad.\n"
             "1\t9\tpos/1_9\tLoved it\n");
  const ClassifyData d = read_classify_data(dir + "/imdb.tsv");
  EXPECT_EQ(d.format, "tsv");
  EXPECT_EQ(rows(d), (Rows{"Bad film.  Really bad.||0|", "Loved it||1|"}));
  // Integer labels are ordered numerically, other labels as strings.
  write_text(dir + "/ints.tsv", "text\tlabel\na\t10\nb\t2\nc\t1\n");
  EXPECT_EQ(build_label_map(read_classify_data(dir + "/ints.tsv")).names,
            (std::vector<std::string>{"1", "2", "10"}));
  write_text(dir + "/names.tsv", "content\tlabel\na\tsports\nb\tarts\nc\tsports\n");
  const LabelMap m = build_label_map(read_classify_data(dir + "/names.tsv"));
  EXPECT_EQ(m.names, (std::vector<std::string>{"arts", "sports"}));
  // Generic pairs.
  write_text(dir + "/pairs.tsv", "sentence1\tsentence2\tlabel\nx\ty\tyes\n");
  const ClassifyData p = read_classify_data(dir + "/pairs.tsv");
  EXPECT_TRUE(p.pairs);
  EXPECT_EQ(p.examples[0].b, "y");
  // A header naming no text column is an error that lists the columns.
  write_text(dir + "/unknown.tsv", "foo\tbar\n1\t2\n");
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/unknown.tsv"), "foo, bar");
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/missing.tsv"), "does not exist");
  write_text(dir + "/empty.tsv", "");
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/empty.tsv"), "empty");
}

TEST(ClassifyRead, UnlabelledSst2TestFile) {
  const std::string dir = test::temp_dir("sst2test");
  write_text(dir + "/test.tsv", "index\tsentence\n0\tfirst one\n1\tsecond one\n");
  const ClassifyData d = read_classify_data(dir + "/test.tsv");
  EXPECT_EQ(d.format, "sst2");
  EXPECT_FALSE(d.labelled);
  EXPECT_EQ(rows(d), (Rows{"first one|||0", "second one|||1"}));
}

// Wrong column count, unknown label, invalid UTF-8 and empty text: stop names file:line,
// skip counts them and keeps the good rows.
TEST(ClassifyRead, BadRowsStopWithFileLineOrSkipWithCount) {
  const std::string dir = test::temp_dir("bad");
  const std::string f = dir + "/train.tsv";
  write_text(f,
             "sentence\tlabel\r\n"
             "good row\t1\r\n"
             "too\tmany\tcolumns\r\n"  // line 3
             "unknown label\t7\r\n"    // line 4
             "bad \xC3\x28 bytes\t0\r\n"  // line 5
             "\t1\r\n"                   // line 6: empty text
             "another good row\t0\r\n");
  const std::string msg = error_of([&] { read_classify_data(f); });
  EXPECT_NE(msg.find(f + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--bad-rows skip"), std::string::npos) << msg;

  const ClassifyData d = read_classify_data(f, skip_opts());
  EXPECT_EQ(d.bad_rows, 4);
  EXPECT_EQ(rows(d), (Rows{"good row||positive|", "another good row||negative|"}));
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[1].line, 7);
  ASSERT_EQ(d.bad_messages.size(), 4u);
  EXPECT_NE(d.bad_messages[0].find(f + ":3: expected 2"), std::string::npos) << d.bad_messages[0];
  EXPECT_NE(d.bad_messages[1].find(f + ":4: unknown label '7'"), std::string::npos)
      << d.bad_messages[1];
  EXPECT_NE(d.bad_messages[2].find(f + ":5: invalid UTF-8 at byte 5"), std::string::npos)
      << d.bad_messages[2];
  EXPECT_NE(d.bad_messages[3].find(f + ":6: empty text"), std::string::npos) << d.bad_messages[3];

  // The first bad row of each kind stops the read with its own message.
  write_text(dir + "/label.tsv", "label\tsentence\n1\tok\n2\tnope\n");
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/label.tsv"), dir + "/label.tsv:3: unknown label");
  write_text(dir + "/utf.tsv", "label\tsentence\n1\t\xFF\n");
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/utf.tsv"), dir + "/utf.tsv:2: invalid UTF-8");
  // A file whose every row is bad has no examples.
  write_text(dir + "/allbad.tsv", "label\tsentence\n1\n");
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/allbad.tsv", skip_opts()), "every row was bad");
}

TEST(ClassifyRead, AclImdbFolderLayout) {
  const std::string dir = test::temp_dir("aclimdb");
  const std::string root = dir + "/aclImdb";
  write_text(root + "/train/pos/10_9.txt", "A wonderful film.<br />Loved it.\n");
  write_text(root + "/train/pos/2_8.txt", "Great acting.");
  write_text(root + "/train/neg/0_1.txt", "Terrible.");
  write_text(root + "/train/neg/1_2.txt", "Broken \xE2\x82 text");  // invalid UTF-8
  write_text(root + "/train/unsup/5_0.txt", "ignored");
  write_text(root + "/train/urls_pos.txt", "not a review");
  write_text(root + "/test/pos/0_10.txt", "Fine.");
  write_text(root + "/test/neg/0_4.txt", "Meh.");

  EXPECT_ERROR_MENTIONS(read_classify_data(root + "/train"), "1_2.txt: invalid UTF-8");
  const ClassifyData d = read_classify_data(root + "/train", skip_opts());
  EXPECT_EQ(d.format, "aclimdb");
  EXPECT_TRUE(d.labelled);
  EXPECT_EQ(d.bad_rows, 1);
  // pos files in numeric id order: 2_8 before 10_9.
  EXPECT_EQ(rows(d), (Rows{"Terrible.||negative|0_1", "Great acting.||positive|2_8",
                           "A wonderful film. Loved it.||positive|10_9"}));
  ASSERT_EQ(d.examples.size(), 3u);
  EXPECT_NE(d.where(d.examples[2]).find("10_9.txt"), std::string::npos);

  // The root selects the split given in the options.
  ReadOptions test_split = skip_opts();
  test_split.split = "test";
  const ClassifyData t = read_classify_data(root, test_split);
  EXPECT_EQ(rows(t), (Rows{"Meh.||negative|0_4", "Fine.||positive|0_10"}));
  EXPECT_EQ(read_classify_data(root, skip_opts()).examples.size(), 3u);  // default: train
  // aclImdb labels map onto a sentiment model's classes.
  EXPECT_EQ(build_label_map(d).names, (std::vector<std::string>{"negative", "positive"}));
  fs::create_directories(dir + "/other/x");
  EXPECT_ERROR_MENTIONS(read_classify_data(dir + "/other"), "not an aclImdb folder");
}

TEST(ClassifyRead, SubsetIsEvenlySpread) {
  const std::string dir = test::temp_dir("subset");
  std::string text = "text\tlabel\n";
  for (int i = 0; i < 100; ++i) text += "t" + std::to_string(i) + "\t" + std::to_string(i % 2) + "\n";
  write_text(dir + "/d.tsv", text);
  ReadOptions o;
  o.max_examples = 10;
  const ClassifyData d = read_classify_data(dir + "/d.tsv", o);
  ASSERT_EQ(d.examples.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(d.examples[i].a, "t" + std::to_string(i * 10));
}

TEST(ClassifyLabels, AssignUnknownLabelStopOrSkipAndJsonRoundTrip) {
  const std::string dir = test::temp_dir("labels");
  write_text(dir + "/train.tsv", "text\tlabel\na\tcat\nb\tdog\n");
  write_text(dir + "/dev.tsv", "text\tlabel\nc\tdog\nd\tbird\ne\tcat\n");
  ClassifyData train = read_classify_data(dir + "/train.tsv");
  const LabelMap m = build_label_map(train);
  EXPECT_EQ(assign_labels(train, m, BadRows::stop), (std::vector<int32_t>{0, 1}));
  ClassifyData dev = read_classify_data(dir + "/dev.tsv");
  EXPECT_ERROR_MENTIONS(assign_labels(dev, m, BadRows::stop), dir + "/dev.tsv:3: unknown label 'bird'");
  ClassifyData dev2 = read_classify_data(dir + "/dev.tsv");
  EXPECT_EQ(assign_labels(dev2, m, BadRows::skip), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(dev2.bad_rows, 1);
  EXPECT_EQ(dev2.examples.size(), 2u);

  // A sentiment map accepts the spellings of SST-2 ("0"/"1") and aclImdb ("neg"/"pos").
  LabelMap s;
  s.names = {"negative", "positive"};
  s.aliases = {{"0", "neg"}, {"1", "pos"}};
  s.positive = 1;
  const LabelMap r = LabelMap::from_json(s.to_json());
  EXPECT_EQ(r.names, s.names);
  EXPECT_EQ(r.find("pos"), 1);
  EXPECT_EQ(r.find("0"), 0);
  EXPECT_EQ(r.find("negative"), 0);
  EXPECT_EQ(r.find("2"), -1);
  EXPECT_EQ(r.positive, 1);
  // Only one class in the training data is an error.
  write_text(dir + "/one.tsv", "text\tlabel\na\tx\nb\tx\n");
  EXPECT_ERROR_MENTIONS(build_label_map(read_classify_data(dir + "/one.tsv")), "at least two");
}

TEST(ClassifyInput, AutoDetectsTsvOrLinesPairsAndChunks) {
  // Reads `text` in chunks of at most `chunk` examples: whether it was read as TSV, and the
  // texts (with their line numbers) of each chunk.
  const auto chunks = [](const std::string& text, int64_t chunk) {
    std::istringstream in(text);
    TextInput r(in, "stdin", "auto", false, BadRows::stop);
    std::vector<std::vector<std::pair<std::string, int64_t>>> out;
    ClassifyData c;
    while (r.next(chunk, &c)) {
      out.emplace_back();
      for (const auto& e : c.examples) out.back().emplace_back(e.a, e.line);
    }
    return std::make_pair(r.is_tsv(), out);
  };
  using Chunk = std::vector<std::pair<std::string, int64_t>>;
  const auto tsv = chunks("label\tsentence\r\n1\tfirst\r\n0\tsecond\r\n\r\n1\tthird\r\n", 2);
  EXPECT_TRUE(tsv.first);
  ASSERT_EQ(tsv.second.size(), 2u);
  EXPECT_EQ(tsv.second[0], (Chunk{{"first", 2}, {"second", 3}}));
  EXPECT_EQ(tsv.second[1], (Chunk{{"third", 5}}));
  // Plain lines: the first line is a text, not a header.
  const auto lines = chunks("a fine day\r\n\r\nanother\tline with a tab\n", 10);
  EXPECT_FALSE(lines.first);
  ASSERT_EQ(lines.second.size(), 1u);
  EXPECT_EQ(lines.second[0], (Chunk{{"a fine day", 1}, {"another line with a tab", 3}}));
}

// ---------------------------------------------------------------------------------------------
// Encoding and batching
// ---------------------------------------------------------------------------------------------

std::vector<int32_t> range_ids(int32_t from, int32_t n) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// The layout of `tokenizer train`'s tokenizers (RoBERTa's: <s> 0, <pad> 1, </s> 2).
const SpecialIds kRoberta{0, 2, 1, 3, 4, true};

TEST(ClassifyEncode, SingleAndPairLayout) {
  const int32_t S = Tokenizer::kCls, E = Tokenizer::kSep;
  const std::vector<int32_t> a = {10, 11, 12}, b = {20, 21};
  EXPECT_EQ(encode_tokens(kRoberta, a, nullptr, 16, Truncate::head),
            (std::vector<int32_t>{S, 10, 11, 12, E}));
  EXPECT_EQ(encode_tokens(kRoberta, a, &b, 16, Truncate::head),
            (std::vector<int32_t>{S, 10, 11, 12, E, E, 20, 21, E}));
  EXPECT_ERROR_MENTIONS(encode_tokens(kRoberta, a, nullptr, 2, Truncate::head), "too small");
  EXPECT_ERROR_MENTIONS(encode_tokens(kRoberta, a, &b, 5, Truncate::head), "too small");
  // BERT's: [CLS] 101 A [SEP] 102 B [SEP], one separator between the texts.
  const SpecialIds bert{101, 102, 0, 100, 103, false};
  EXPECT_EQ(encode_tokens(bert, a, &b, 16, Truncate::head),
            (std::vector<int32_t>{101, 10, 11, 12, 102, 20, 21, 102}));
  EXPECT_EQ(encode_tokens(bert, a, &b, 6, Truncate::head),
            (std::vector<int32_t>{101, 10, 11, 102, 20, 102}));
  EXPECT_ERROR_MENTIONS(encode_tokens(bert, a, &b, 4, Truncate::head), "[CLS] A [SEP] B [SEP]");
  EXPECT_ERROR_MENTIONS(encode_tokens(SpecialIds{}, a, nullptr, 16, Truncate::head),
                        "no cls/sep tokens");
}

TEST(ClassifyEncode, TruncationPolicies) {
  const std::vector<int32_t> ids = range_ids(100, 20);
  EXPECT_EQ(truncate_tokens(ids, 8, Truncate::head), range_ids(100, 8));
  EXPECT_EQ(truncate_tokens(ids, 8, Truncate::tail), range_ids(112, 8));
  std::vector<int32_t> ht = {100, 101};
  for (int32_t i = 114; i < 120; ++i) ht.push_back(i);
  EXPECT_EQ(truncate_tokens(ids, 8, Truncate::head_tail), ht);
  EXPECT_EQ(truncate_tokens(ids, 30, Truncate::tail), ids);  // short enough: unchanged
  // Through encode_tokens: max_len 10 leaves 8 text tokens.
  const std::vector<int32_t> enc = encode_tokens(kRoberta, ids, nullptr, 10, Truncate::tail);
  ASSERT_EQ(enc.size(), 10u);
  EXPECT_EQ(enc.front(), Tokenizer::kCls);
  EXPECT_EQ(enc[1], 112);
  EXPECT_EQ(enc.back(), Tokenizer::kSep);
  EXPECT_EQ(parse_truncate("head+tail"), Truncate::head_tail);
  EXPECT_STREQ(to_string(Truncate::head_tail), "head+tail");
  EXPECT_ERROR_MENTIONS(parse_truncate("middle"), "head, tail or head+tail");
}

TEST(ClassifyEncode, PairTruncationShortensTheLongerTextFirst) {
  const std::vector<int32_t> a = range_ids(100, 10), b = range_ids(200, 3);
  // max_len 12: 8 text tokens; b keeps its 3, a keeps 5 (head).
  std::vector<int32_t> enc = encode_tokens(kRoberta, a, &b, 12, Truncate::head);
  ASSERT_EQ(enc.size(), 12u);
  std::vector<int32_t> want = {Tokenizer::kCls};
  for (int32_t i = 100; i < 105; ++i) want.push_back(i);
  want.insert(want.end(), {Tokenizer::kSep, Tokenizer::kSep, 200, 201, 202, Tokenizer::kSep});
  EXPECT_EQ(enc, want);
  // Both long: the budget is shared evenly; tail keeps the ends.
  const std::vector<int32_t> c = range_ids(300, 10);
  enc = encode_tokens(kRoberta, a, &c, 10, Truncate::tail);
  EXPECT_EQ(enc, (std::vector<int32_t>{Tokenizer::kCls, 107, 108, 109, Tokenizer::kSep,
                                        Tokenizer::kSep, 307, 308, 309, Tokenizer::kSep}));
  EXPECT_EQ(static_cast<int64_t>(encode_tokens(kRoberta, c, &a, 9, Truncate::head).size()), 9);
}

TEST(ClassifyEncode, PaddedBatchesAndEpochPlans) {
  const std::vector<std::vector<int32_t>> seqs = {{0, 5, 2}, {0, 5, 6, 7, 2}, {0, 2}};
  PaddedBatch pb;
  make_padded_batch(seqs, {0, 1, 2}, 1, 0, &pb);
  EXPECT_EQ(pb.B, 3);
  EXPECT_EQ(pb.N, 5);
  EXPECT_EQ(pb.ids, (std::vector<int32_t>{0, 5, 2, 1, 1, 0, 5, 6, 7, 2, 0, 2, 1, 1, 1}));
  EXPECT_EQ(pb.mask, (std::vector<float>{1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}));
  make_padded_batch(seqs, {2}, 1, 8, &pb);  // pad_to
  EXPECT_EQ(pb.N, 8);

  std::vector<int64_t> lengths;
  for (int i = 0; i < 1000; ++i) lengths.push_back(2 + static_cast<int64_t>(rng_bits(3, 1, i) % 200));
  for (bool bucket : {false, true}) {
    const auto plan = epoch_batches(lengths, 16, bucket, 7, 0);
    std::vector<int64_t> all;
    for (const auto& b : plan) all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), 1000u);
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(all[i], i);  // every example once
    EXPECT_EQ(plan, epoch_batches(lengths, 16, bucket, 7, 0));  // deterministic
    EXPECT_NE(plan, epoch_batches(lengths, 16, bucket, 7, 1));  // differs per epoch
  }
  auto padding = [&](const std::vector<std::vector<int64_t>>& plan) {
    int64_t pad = 0;
    for (const auto& b : plan) {
      int64_t mx = 0;
      for (int64_t i : b) mx = std::max(mx, lengths[i]);
      for (int64_t i : b) pad += mx - lengths[i];
    }
    return pad;
  };
  EXPECT_LT(padding(epoch_batches(lengths, 16, true, 7, 0)) * 5,
            padding(epoch_batches(lengths, 16, false, 7, 0)));
  const auto inf = inference_batches(lengths, 100, true);
  ASSERT_EQ(inf.size(), 10u);
  for (size_t i = 1; i < inf[0].size(); ++i) EXPECT_GE(lengths[inf[0][i - 1]], lengths[inf[0][i]]);
}

TEST(ClassifyMetrics, AccuracyF1AndConfusionByHand) {
  // gold: 1 1 1 0 0 0 0 ; predicted: 1 1 0 1 0 0 0
  const std::vector<int32_t> gold = {1, 1, 1, 0, 0, 0, 0};
  const std::vector<int32_t> pred = {1, 1, 0, 1, 0, 0, 0};
  std::vector<float> probs;
  for (int32_t p : pred) {
    probs.push_back(p == 0 ? 0.8f : 0.2f);
    probs.push_back(p == 1 ? 0.8f : 0.2f);
  }
  const ClassifyMetrics m = compute_metrics(probs, gold, 2, 1);
  EXPECT_EQ(m.count, 7);
  EXPECT_NEAR(m.accuracy, 5.0 / 7, 1e-12);
  EXPECT_NEAR(m.precision, 2.0 / 3, 1e-12);
  EXPECT_NEAR(m.recall, 2.0 / 3, 1e-12);
  EXPECT_NEAR(m.f1, 2.0 / 3, 1e-12);
  EXPECT_EQ(m.confusion, (std::vector<std::vector<int64_t>>{{3, 1}, {1, 2}}));
  EXPECT_NEAR(m.loss, -std::log(0.8) * 5 / 7 - std::log(0.2) * 2 / 7, 1e-6);
  // Three classes: macro F1.
  const std::vector<float> p3 = {1, 0, 0, 0, 1, 0, 0, 1, 0};
  const ClassifyMetrics m3 = compute_metrics(p3, {0, 1, 2}, 3, -1);
  EXPECT_NEAR(m3.f1, (1.0 + 2.0 / 3 + 0.0) / 3, 1e-12);
  LabelMap l;
  l.names = {"a", "b", "c"};
  l.aliases.resize(3);
  const json j = m3.to_json(l);
  EXPECT_EQ(j["f1_kind"], "macro");
  EXPECT_EQ(j["confusion"][2][1], 1);
}

}  // namespace
}  // namespace lf
