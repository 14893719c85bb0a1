// Pretraining building blocks against hand-computed expectations: corpus input and UTF-8
// checks, the tokenizer, packing, the token cache, MLM masking, the learning-rate schedule,
// AdamW and gradient clipping.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/mlm_data.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "linformer/tokenizer.h"
#include "test_util.h"
#include "train/optim.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

using test::error_of;
using test::write_text;

// ---------------------------------------------------------------------------------------------
// A generated English-like corpus (varied sentences from word lists; a few accented words).
// ---------------------------------------------------------------------------------------------

std::string make_sentence(uint64_t i) {
  static const std::vector<std::string> subj = {
      "the old man", "a young woman", "my neighbour", "the teacher", "our dog",
      "the children", "a small bird", "the captain", "her brother", "the farmer",
      "every student", "the café owner", "nobody", "the doctor", "his mother"};
  static const std::vector<std::string> verb = {
      "walked to", "looked at", "talked about", "remembered", "carried", "painted",
      "found", "forgot", "visited", "described", "wanted", "built", "opened", "watched"};
  static const std::vector<std::string> obj = {
      "the river", "a red house", "the long road", "an empty box", "the garden",
      "three apples", "the morning train", "a quiet village", "the broken window",
      "some fresh bread", "the naïve plan", "a letter", "the blue mountains", "the market"};
  static const std::vector<std::string> tail = {
      "yesterday", "in the evening", "before dinner", "with great care", "after the rain",
      "without a word", "at noon", "for the first time", "again and again", "last winter"};
  static const std::vector<std::string> joiner = {", and then ", ", but ", " because ",
                                                  " while ", ". Later, "};
  auto pick = [&](const std::vector<std::string>& v, uint64_t k) {
    return v[rng_bits(77, i, k) % v.size()];
  };
  std::string s = pick(subj, 0) + " " + pick(verb, 1) + " " + pick(obj, 2);
  if (rng_bits(77, i, 3) % 2) s += " " + pick(tail, 4);
  if (rng_bits(77, i, 5) % 3 == 0)
    s += pick(joiner, 6) + pick(subj, 7) + " " + pick(verb, 8) + " " + pick(obj, 9);
  if (rng_bits(77, i, 10) % 5 == 0) s += " " + std::to_string(rng_bits(77, i, 11) % 2000);
  s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  s += rng_bits(77, i, 12) % 7 == 0 ? "?" : ".";
  return s;
}

std::vector<std::string> make_lines(int count, uint64_t offset = 0) {
  std::vector<std::string> v;
  for (int i = 0; i < count; ++i) v.push_back(make_sentence(offset + i));
  return v;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Corpus
// ---------------------------------------------------------------------------------------------

TEST(Corpus, ListsFilesAndFoldersSortedSkippingHidden) {
  const std::string d = test::temp_dir("c");
  write_text(d + "/in/z.txt", "z\n");
  write_text(d + "/in/a.txt", "a\n");
  write_text(d + "/in/sub/deeper/c.txt", "c\n");
  write_text(d + "/in/sub/b.txt", "b\n");
  write_text(d + "/in/.hidden.txt", "h\n");
  write_text(d + "/in/.git/d.txt", "d\n");
  write_text(d + "/single.txt", "s\n");
  const std::vector<std::string> got = list_corpus_files({d + "/single.txt", d + "/in"});
  const std::vector<std::string> want = {d + "/single.txt", d + "/in/a.txt", d + "/in/sub/b.txt",
                                         d + "/in/sub/deeper/c.txt", d + "/in/z.txt"};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(fs::path(got[i]).lexically_normal(), fs::path(want[i]).lexically_normal()) << i;
}

TEST(Corpus, MissingPathAndEmptyFolderAreErrors) {
  const std::string d = test::temp_dir("c");
  EXPECT_ERROR_MENTIONS(list_corpus_files({d + "/nope.txt"}), "does not exist");
  EXPECT_ERROR_MENTIONS(list_corpus_files({d + "/nope.txt"}), "nope.txt");
  fs::create_directories(d + "/empty");
  EXPECT_ERROR_MENTIONS(list_corpus_files({d + "/empty"}), "holds no files");
  write_text(d + "/onlyhidden/.x.txt", "x\n");
  EXPECT_ERROR_MENTIONS(list_corpus_files({d + "/onlyhidden"}), "holds no files");
  EXPECT_ERROR_MENTIONS(list_corpus_files({}), "no corpus");
}

TEST(Corpus, Utf8ValidTextIncludingMultiByteAndBoundaries) {
  EXPECT_EQ(find_invalid_utf8(""), -1);
  EXPECT_EQ(find_invalid_utf8("plain ascii"), -1);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80"), -1);
  EXPECT_EQ(find_invalid_utf8("\xC2\x80"), -1);          // U+0080, smallest 2-byte
  EXPECT_EQ(find_invalid_utf8("\xDF\xBF"), -1);          // U+07FF
  EXPECT_EQ(find_invalid_utf8("\xE0\xA0\x80"), -1);      // U+0800, smallest 3-byte
  EXPECT_EQ(find_invalid_utf8("\xED\x9F\xBF"), -1);      // U+D7FF, just below the surrogates
  EXPECT_EQ(find_invalid_utf8("\xEE\x80\x80"), -1);      // U+E000, just above
  EXPECT_EQ(find_invalid_utf8("\xEF\xBF\xBF"), -1);      // U+FFFF
  EXPECT_EQ(find_invalid_utf8("\xF0\x90\x80\x80"), -1);  // U+10000, smallest 4-byte
  EXPECT_EQ(find_invalid_utf8("\xF4\x8F\xBF\xBF"), -1);  // U+10FFFF, the largest
}

TEST(Corpus, Utf8EachInvalidKindIsFoundAtItsOffset) {
  // Stray continuation bytes.
  EXPECT_EQ(find_invalid_utf8("ab\x80" "c"), 2);
  EXPECT_EQ(find_invalid_utf8("\xBF"), 0);
  EXPECT_EQ(find_invalid_utf8("\xC3\xA9\xA9"), 2);  // one continuation too many
  // Truncated sequences: at the end, and followed by a non-continuation byte.
  EXPECT_EQ(find_invalid_utf8("ab\xC3"), 2);
  EXPECT_EQ(find_invalid_utf8("ab\xE6\x97"), 2);
  EXPECT_EQ(find_invalid_utf8("x\xF0\x9F\x98"), 1);
  EXPECT_EQ(find_invalid_utf8("\xE6\x97x"), 0);
  EXPECT_EQ(find_invalid_utf8("\xC3(ok"), 0);
  // Overlong encodings.
  EXPECT_EQ(find_invalid_utf8("a\xC0\xAF"), 1);          // '/' in 2 bytes
  EXPECT_EQ(find_invalid_utf8("\xC1\xBF"), 0);           // U+007F in 2 bytes
  EXPECT_EQ(find_invalid_utf8("\xE0\x80\xAF"), 0);       // '/' in 3 bytes
  EXPECT_EQ(find_invalid_utf8("\xE0\x9F\xBF"), 0);       // U+07FF in 3 bytes
  EXPECT_EQ(find_invalid_utf8("\xF0\x8F\xBF\xBF"), 0);   // U+FFFF in 4 bytes
  // Surrogates.
  EXPECT_EQ(find_invalid_utf8("ok \xED\xA0\x80"), 3);    // U+D800
  EXPECT_EQ(find_invalid_utf8("\xED\xBF\xBF"), 0);       // U+DFFF
  // Beyond U+10FFFF, and bytes that never start a sequence.
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0);   // U+110000
  EXPECT_EQ(find_invalid_utf8("\xF7\xBF\xBF\xBF"), 0);
  EXPECT_EQ(find_invalid_utf8("\xF8\x88\x80\x80\x80"), 0);
  EXPECT_EQ(find_invalid_utf8("abc\xFF"), 3);
  EXPECT_EQ(find_invalid_utf8("\xFE"), 0);
}

TEST(Corpus, ForEachLineStripsCrSkipsEmptyAndReportsFileLine) {
  const std::string d = test::temp_dir("c");
  write_text(d + "/one.txt", "first\r\n\r\nsecond\n\n\nthird");  // no final newline
  write_text(d + "/two.txt", "x y\n");
  std::vector<std::string> got;
  for_each_line({d + "/one.txt", d + "/two.txt"}, [&](const std::string& l) {
    got.push_back(l);
    return true;
  });
  EXPECT_EQ(got, (std::vector<std::string>{"first", "second", "third", "x y"}));

  // fn returning false stops the iteration.
  got.clear();
  for_each_line({d + "/one.txt", d + "/two.txt"}, [&](const std::string& l) {
    got.push_back(l);
    return got.size() < 2;
  });
  EXPECT_EQ(got.size(), 2u);

  // Invalid bytes: file and line (counting empty lines) are named; nothing is dropped silently.
  write_text(d + "/bad.txt", "fine\n\ncaf\xC3\xA9 ok\nbad \xC3( here\nnever reached\n");
  got.clear();
  const std::string msg = error_of([&] {
    for_each_line({d + "/bad.txt"}, [&](const std::string& l) {
      got.push_back(l);
      return true;
    });
  });
  EXPECT_NE(msg.find(d + "/bad.txt:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte 5"), std::string::npos) << msg;
  EXPECT_EQ(got, (std::vector<std::string>{"fine", "caf\xC3\xA9 ok"}));
  EXPECT_ERROR_MENTIONS(for_each_line({d + "/absent.txt"}, [](const std::string&) { return true; }),
                        "absent.txt");
}

// ---------------------------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------------------------

std::string train_tokenizer(const std::string& dir, const std::string& type, int64_t vocab,
                            int lines = 400) {
  write_text(dir + "/corpus.txt", join_lines(make_lines(lines)));
  TokenizerTrainOptions o;
  o.vocab_size = vocab;
  o.model_type = type;
  const std::string path = dir + "/tok-" + type + ".model";
  Tokenizer::train({dir + "/corpus.txt"}, path, o);
  return path;
}

// The model type stored in a SentencePiece model file (TrainerSpec.model_type: 1 unigram,
// 2 bpe), read from the serialized ModelProto with a minimal protobuf walk (no .pb.h is
// installed): ModelProto field 2 is trainer_spec, TrainerSpec field 3 is model_type.
int proto_field_varint(const std::string& msg, int want_field, int want_sub_field) {
  size_t i = 0;
  auto varint = [&](const std::string& b, size_t& k) {
    uint64_t v = 0;
    for (int shift = 0; k < b.size(); shift += 7) {
      const unsigned char c = static_cast<unsigned char>(b[k++]);
      v |= static_cast<uint64_t>(c & 0x7F) << shift;
      if (!(c & 0x80)) break;
    }
    return v;
  };
  while (i < msg.size()) {
    const uint64_t tag = varint(msg, i);
    const int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
    if (wire == 0) {
      const uint64_t v = varint(msg, i);
      if (field == want_field && want_sub_field < 0) return static_cast<int>(v);
    } else if (wire == 1) {
      i += 8;
    } else if (wire == 5) {
      i += 4;
    } else if (wire == 2) {
      const uint64_t len = varint(msg, i);
      if (field == want_field && want_sub_field >= 0)
        return proto_field_varint(msg.substr(i, len), want_sub_field, -1);
      i += len;
    } else {
      return -1;
    }
  }
  return -1;
}

int model_type_of(const std::string& path) {
  sentencepiece::SentencePieceProcessor sp;
  EXPECT_TRUE(sp.Load(path).ok());
  return proto_field_varint(sp.serialized_model_proto(), 2, 3);
}

void check_tokenizer(const std::string& path, int64_t vocab) {
  Tokenizer tok(path);
  EXPECT_EQ(tok.vocab_size(), vocab);
  EXPECT_EQ(tok.piece(0), "<s>");
  EXPECT_EQ(tok.piece(1), "<pad>");
  EXPECT_EQ(tok.piece(2), "</s>");
  EXPECT_EQ(tok.piece(3), "<unk>");
  EXPECT_EQ(tok.piece(4), "<mask>");
  EXPECT_EQ(Tokenizer::kCls, 0);
  EXPECT_EQ(Tokenizer::kPad, 1);
  EXPECT_EQ(Tokenizer::kSep, 2);
  EXPECT_EQ(Tokenizer::kUnk, 3);
  EXPECT_EQ(Tokenizer::kMask, 4);
  // Round trip on corpus lines and on unseen sentences of the same language.
  std::vector<std::string> lines = make_lines(400);
  for (const std::string& l : make_lines(100, 100000)) lines.push_back(l);
  size_t total_ids = 0;
  for (const std::string& l : lines) {
    const std::vector<int32_t> ids = tok.encode(l);
    ASSERT_FALSE(ids.empty()) << l;
    for (int32_t id : ids) {
      ASSERT_GE(id, Tokenizer::kNumSpecial) << "special or unknown id in \"" << l << "\"";
      ASSERT_LT(id, vocab);
    }
    EXPECT_EQ(tok.decode(ids), l);
    total_ids += ids.size();
  }
  // Subwords, not characters: the pieces are longer than one byte on average.
  size_t total_bytes = 0;
  for (const std::string& l : lines) total_bytes += l.size();
  EXPECT_LT(total_ids * 2, total_bytes);
}

TEST(Tokenizer, UnigramSpecialIdsRoundTripVocabSize) {
  const std::string d = test::temp_dir("t");
  const std::string path = train_tokenizer(d, "unigram", 150);
  check_tokenizer(path, 150);
  EXPECT_EQ(model_type_of(path), 1) << "not a unigram model";
}

TEST(Tokenizer, BpeSpecialIdsRoundTripVocabSize) {
  const std::string d = test::temp_dir("t");
  const std::string path = train_tokenizer(d, "bpe", 150);
  check_tokenizer(path, 150);
  EXPECT_EQ(model_type_of(path), 2) << "not a BPE model";
}

TEST(Tokenizer, DecodeDropsSpecialIds) {
  const std::string d = test::temp_dir("t");
  Tokenizer tok(train_tokenizer(d, "unigram", 150));
  const std::string text = "The old man walked to the river.";
  std::vector<int32_t> ids = {Tokenizer::kCls, Tokenizer::kMask};
  for (int32_t id : tok.encode(text)) ids.push_back(id);
  ids.push_back(Tokenizer::kUnk);
  ids.push_back(Tokenizer::kSep);
  ids.push_back(Tokenizer::kPad);
  ids.push_back(Tokenizer::kPad);
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(Tokenizer, RejectsFilesWithoutTheSpecialLayoutAndBadOptions) {
  const std::string d = test::temp_dir("t");
  write_text(d + "/corpus.txt", join_lines(make_lines(300)));
  // A SentencePiece model with the library's default ids (<unk> 0, <s> 1, </s> 2, no pad).
  const auto st = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + d + "/corpus.txt --model_prefix=" + d +
      "/plain --vocab_size=100 --minloglevel=2 --num_threads=1");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_ERROR_MENTIONS(Tokenizer(d + "/plain.model"), "special-token layout");
  EXPECT_ERROR_MENTIONS(Tokenizer(d + "/absent.model"), "does not exist");
  write_text(d + "/garbage.model", "this is not a sentencepiece model");
  EXPECT_FALSE(error_of([&] { Tokenizer t(d + "/garbage.model"); }).empty());
  TokenizerTrainOptions o;
  o.vocab_size = 100;
  o.model_type = "wordpiece";
  EXPECT_ERROR_MENTIONS(Tokenizer::train({d + "/corpus.txt"}, d + "/x.model", o), "unigram or bpe");
  write_text(d + "/bad.txt", "good line\nbad \xFF line\n");
  o.model_type = "bpe";
  EXPECT_ERROR_MENTIONS(Tokenizer::train({d + "/bad.txt"}, d + "/x.model", o), "bad.txt:2:");
}

// ---------------------------------------------------------------------------------------------
// Packing
// ---------------------------------------------------------------------------------------------

// Stream: "documents" of ids >= 5, each followed by </s> (2), as TokenStream::build writes.
std::vector<int32_t> make_stream(int64_t approx, uint64_t seed) {
  std::vector<int32_t> s;
  while (static_cast<int64_t>(s.size()) < approx) {
    const int64_t len = 1 + static_cast<int64_t>(rng_bits(seed, 1, s.size()) % 30);
    for (int64_t i = 0; i < len; ++i)
      s.push_back(5 + static_cast<int32_t>(rng_bits(seed, 2, s.size()) % 1000));
    s.push_back(2);
  }
  return s;
}

// Checks the layout of every sequence and returns the stream tokens they hold, in order.
std::vector<int32_t> unpack(const PackedSequences& ps, int64_t* partial) {
  std::vector<int32_t> got;
  std::vector<int32_t> ids(ps.n);
  std::vector<float> mask(ps.n);
  *partial = 0;
  for (int64_t i = 0; i < ps.count(); ++i) {
    std::fill(ids.begin(), ids.end(), -7);
    std::fill(mask.begin(), mask.end(), -7.f);
    ps.get(i, ids.data(), mask.data());
    int64_t real = 0;
    while (real < ps.n && mask[real] == 1.f) ++real;
    for (int64_t t = real; t < ps.n; ++t) {
      EXPECT_EQ(mask[t], 0.f) << "sequence " << i << " position " << t;
      EXPECT_EQ(ids[t], 1) << "padding of sequence " << i << " at " << t;
    }
    EXPECT_GE(real, 3) << "sequence " << i;
    EXPECT_EQ(ids[0], 0) << "sequence " << i << " must start with <s>";
    EXPECT_EQ(ids[real - 1], 2) << "sequence " << i << " must end its real part with </s>";
    if (real < ps.n) ++*partial;
    got.insert(got.end(), ids.begin() + 1, ids.begin() + real - 1);
  }
  return got;
}

TEST(MlmPacking, EveryTokenOnceInOrderWithValidationTail) {
  const std::vector<int32_t> tokens = make_stream(10007, 5);
  const TokenStream s = TokenStream::from_tokens(tokens);
  const int64_t n = 32, body = n - 2;
  PackedSequences train, valid;
  split_stream(s, n, 0.1, &train, &valid);
  const int64_t total = (s.size() + body - 1) / body;  // sequences the stream fills
  const int64_t nv = static_cast<int64_t>(std::ceil(0.1 * total));
  EXPECT_EQ(valid.count(), nv);
  EXPECT_EQ(train.count(), total - nv);
  int64_t partial_train = 0, partial_valid = 0;
  std::vector<int32_t> got = unpack(train, &partial_train);
  const size_t train_tokens = got.size();
  const std::vector<int32_t> v = unpack(valid, &partial_valid);
  got.insert(got.end(), v.begin(), v.end());
  EXPECT_EQ(got, tokens);  // every token exactly once, in order
  // The validation set is the last share of the stream, train sequences are all full.
  EXPECT_EQ(train_tokens, static_cast<size_t>((total - nv) * body));
  EXPECT_EQ(partial_train, 0);
  EXPECT_EQ(partial_valid, s.size() % body == 0 ? 0 : 1);
  EXPECT_EQ(std::vector<int32_t>(tokens.end() - v.size(), tokens.end()), v);

  // At least one validation sequence, at least one training sequence.
  PackedSequences t2, v2;
  split_stream(s, n, 0.0, &t2, &v2);
  EXPECT_EQ(v2.count(), 1);
  split_stream(s, n, 1.0, &t2, &v2);
  EXPECT_EQ(t2.count(), 1);
  EXPECT_EQ(v2.count(), total - 1);
}

TEST(MlmPacking, ExactMultipleAndTooSmallStreams) {
  const int64_t n = 10, body = n - 2;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4 * body; ++i) tokens.push_back(5 + i);
  const TokenStream s = TokenStream::from_tokens(tokens);
  PackedSequences train, valid;
  split_stream(s, n, 0.25, &train, &valid);
  EXPECT_EQ(train.count(), 3);
  EXPECT_EQ(valid.count(), 1);
  int64_t partial = 0;
  std::vector<int32_t> got = unpack(train, &partial);
  const std::vector<int32_t> v = unpack(valid, &partial);
  EXPECT_EQ(partial, 0);
  got.insert(got.end(), v.begin(), v.end());
  EXPECT_EQ(got, tokens);

  const TokenStream tiny = TokenStream::from_tokens({5, 6, 7, 2, 8, 9, 2});
  EXPECT_ERROR_MENTIONS(split_stream(tiny, n, 0.1, &train, &valid), "too small");
  EXPECT_ERROR_MENTIONS(split_stream(s, 2, 0.1, &train, &valid), "at least 3");
}

// ---------------------------------------------------------------------------------------------
// Token cache
// ---------------------------------------------------------------------------------------------

TEST(MlmTokenCache, BuildWritesReusesAndRebuildsOnChange) {
  const std::string d = test::temp_dir("k");
  const std::string tok_path = train_tokenizer(d, "unigram", 150);
  Tokenizer tok(tok_path);
  const std::vector<std::string> a = make_lines(50, 500), b = make_lines(30, 900);
  write_text(d + "/data/a.txt", join_lines(a) + "\n\n");
  write_text(d + "/data/b.txt", join_lines(b));
  const std::vector<std::string> files = list_corpus_files({d + "/data"});

  const TokenStream s1 = TokenStream::build(files, tok, d + "/cache", false);
  ASSERT_TRUE(fs::exists(s1.path()));
  EXPECT_EQ(fs::path(s1.path()).parent_path(), fs::path(d + "/cache"));
  // The content: every line's ids followed by </s>, files in order.
  std::vector<int32_t> want;
  for (const auto* lines : {&a, &b})
    for (const std::string& l : *lines) {
      for (int32_t id : tok.encode(l)) want.push_back(id);
      want.push_back(Tokenizer::kSep);
    }
  ASSERT_EQ(s1.size(), static_cast<int64_t>(want.size()));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), s1.data()));

  // Second build: the same file, not rewritten (write_file_atomic would give a new inode and
  // a new mtime; push the old mtime back to make a rewrite detectable at any clock resolution).
  const auto old_time = fs::last_write_time(s1.path()) - std::chrono::hours(1);
  fs::last_write_time(s1.path(), old_time);
  const std::string first_path = s1.path();
  {
    const TokenStream s2 = TokenStream::build(files, tok, d + "/cache", false);
    EXPECT_EQ(s2.path(), first_path);
    EXPECT_EQ(fs::last_write_time(first_path), old_time) << "the cache was rewritten";
    EXPECT_EQ(s2.size(), s1.size());
  }

  // A changed corpus file (one more line) gives a new cache, even with its old mtime restored
  // (size alone differs).
  const auto b_time = fs::last_write_time(d + "/data/b.txt");
  write_text(d + "/data/b.txt", join_lines(b) + "One more line.\n");
  fs::last_write_time(d + "/data/b.txt", b_time);
  const TokenStream s3 = TokenStream::build(files, tok, d + "/cache", false);
  EXPECT_NE(s3.path(), first_path);
  EXPECT_EQ(s3.size(), s1.size() + static_cast<int64_t>(tok.encode("One more line.").size()) + 1);

  // Same size, mtime one whole second later (same sub-second part): also a new cache (the
  // content may have changed).
  const auto s3_time = fs::last_write_time(d + "/data/b.txt");
  write_text(d + "/data/b.txt", join_lines(b) + "One more line!\n");
  fs::last_write_time(d + "/data/b.txt", s3_time + std::chrono::seconds(1));
  const TokenStream s4 = TokenStream::build(files, tok, d + "/cache", false);
  EXPECT_NE(s4.path(), s3.path());
  EXPECT_NE(s4.path(), first_path);
  EXPECT_EQ(s4.data()[s4.size() - 2], tok.encode("One more line!").back());
}

TEST(MlmTokenCache, CorruptCacheFilesAreRejected) {
  const std::string d = test::temp_dir("k");
  write_text(d + "/wrong_magic.bin", std::string("NOTTOKEN") + std::string(8, '\0') + "abcd");
  EXPECT_ERROR_MENTIONS(TokenStream::open(d + "/wrong_magic.bin"), "not a token cache");
  write_text(d + "/short.bin", "LFTOK");
  EXPECT_ERROR_MENTIONS(TokenStream::open(d + "/short.bin"), "not a token cache");
  write_text(d + "/truncated.bin", std::string("LFTOKv02") + std::string(8, '\0') + "abcdef");
  EXPECT_ERROR_MENTIONS(TokenStream::open(d + "/truncated.bin"), "cut short");
  EXPECT_FALSE(error_of([&] { TokenStream::open(d + "/absent.bin"); }).empty());
  // A well-formed file opens with its ids: header, ids, count, FNV-1a of the ids, end magic.
  std::string ok = std::string("LFTOKv02") + std::string(8, '\0');
  const int32_t v[3] = {7, 2, 9};
  ok.append(reinterpret_cast<const char*>(v), sizeof v);
  uint64_t trailer[2] = {3, 1469598103934665603ull};
  for (int32_t x : v) trailer[1] = (trailer[1] ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  ok.append(reinterpret_cast<const char*>(trailer), sizeof trailer);
  write_text(d + "/ok.bin", ok + "LFTOKEND");
  // The same file with one id changed, or one token fewer in the count, is refused.
  std::string flipped = ok + "LFTOKEND";
  flipped[16] = 8;
  write_text(d + "/flipped.bin", flipped);
  EXPECT_ERROR_MENTIONS(TokenStream::open(d + "/flipped.bin"), "checksum");
  std::string miscounted = ok + "LFTOKEND";
  miscounted[16 + sizeof v] = 2;
  write_text(d + "/miscounted.bin", miscounted);
  EXPECT_ERROR_MENTIONS(TokenStream::open(d + "/miscounted.bin"), "trailer says 2 tokens");
  const TokenStream s = TokenStream::open(d + "/ok.bin");
  ASSERT_EQ(s.size(), 3);
  EXPECT_EQ(s.data()[0], 7);
  EXPECT_EQ(s.data()[2], 9);
}

// A cache cut short (a full disk, a killed copy) or changed in place no longer matches its
// trailer: the next build says so and tokenises again, never training on a part of the corpus.
TEST(MlmTokenCache, CacheCutShortOrChangedIsRebuilt) {
  const std::string d = test::temp_dir("k");
  Tokenizer tok(train_tokenizer(d, "unigram", 150));
  const std::vector<std::string> files = {d + "/corpus.txt"};
  const TokenStream s1 = TokenStream::build(files, tok, d + "/cache", false);
  const std::vector<int32_t> want(s1.data(), s1.data() + s1.size());
  const std::string path = s1.path();
  ASSERT_GT(want.size(), 100u);
  // Cut to a whole number of ids (what the old format accepted), then rebuilt.
  fs::resize_file(path, 16 + 4 * 50);
  const TokenStream s2 = TokenStream::build(files, tok, d + "/cache", false);
  EXPECT_EQ(s2.path(), path);
  ASSERT_EQ(s2.size(), static_cast<int64_t>(want.size()));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), s2.data()));
  // One id changed in place: the checksum no longer matches, so it is rebuilt as well.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16 + 4 * 7);
    const int32_t bogus = 3;
    f.write(reinterpret_cast<const char*>(&bogus), 4);
  }
  const TokenStream s3 = TokenStream::build(files, tok, d + "/cache", false);
  ASSERT_EQ(s3.size(), static_cast<int64_t>(want.size()));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), s3.data()));
}

// ---------------------------------------------------------------------------------------------
// Masking
// ---------------------------------------------------------------------------------------------

MaskingOptions mask_opts(int64_t vocab) {
  MaskingOptions mo;
  mo.mask_prob = 0.15;
  mo.vocab_size = vocab;
  mo.mask_id = 4;
  mo.first_normal_id = 5;
  return mo;
}

// A packed-looking sequence: <s>, normal tokens with some </s> and <unk> inside, </s>, padding.
void make_sequence(uint64_t i, int64_t n, int64_t vocab, std::vector<int32_t>* ids,
                   std::vector<float>* mask) {
  ids->assign(n, 1);
  mask->assign(n, 0.f);
  const int64_t len = 3 + static_cast<int64_t>(rng_bits(9, i, 0) % (n - 2));  // 3 .. n
  for (int64_t t = 0; t < len; ++t) {
    (*mask)[t] = 1.f;
    const uint64_t r = rng_bits(9, i, t + 1);
    int32_t id = 5 + static_cast<int32_t>(r % (vocab - 5));
    if (r % 23 == 0) id = 2;
    if (r % 29 == 0) id = 3;
    (*ids)[t] = t == 0 ? 0 : t == len - 1 ? 2 : id;
  }
}

TEST(MlmMasking, ChosenShareProportionsSpecialsAndLabels) {
  const int64_t n = 64, V = 1000;
  const MaskingOptions mo = mask_opts(V);
  int64_t chosen = 0, masked = 0, random = 0, kept = 0;
  std::vector<int32_t> ids, orig, labels(n);
  std::vector<float> mask;
  for (uint64_t i = 0; i < 6000; ++i) {
    make_sequence(i, n, V, &ids, &mask);
    orig = ids;
    int64_t m = 0;
    for (int64_t t = 0; t < n; ++t) m += mask[t] == 1.f && orig[t] >= 5;
    const int64_t k = apply_mlm_mask(ids.data(), labels.data(), mask.data(), n, mo, 17, i);
    const int64_t expect_k = m == 0 ? 0 : std::max<int64_t>(1, std::llround(0.15 * m));
    ASSERT_EQ(k, expect_k) << "sequence " << i << " with " << m << " maskable tokens";
    int64_t labelled = 0;
    for (int64_t t = 0; t < n; ++t) {
      if (labels[t] == -100) {
        ASSERT_EQ(ids[t], orig[t]) << "unchosen token changed, sequence " << i << " pos " << t;
        continue;
      }
      ++labelled;
      ASSERT_EQ(labels[t], orig[t]);
      ASSERT_EQ(mask[t], 1.f) << "padding chosen";
      ASSERT_GE(orig[t], 5) << "special token " << orig[t] << " chosen";
      if (ids[t] == 4) {
        ++masked;
      } else if (ids[t] == orig[t]) {
        ++kept;
      } else {
        ++random;
        ASSERT_GE(ids[t], 5) << "random replacement is a special id";
        ASSERT_LT(ids[t], V);
      }
    }
    ASSERT_EQ(labelled, k);
    chosen += k;
  }
  ASSERT_GE(chosen, 20000);
  // A random replacement equal to the original (probability 1/995) counts as kept: +0.01%.
  const double fm = double(masked) / chosen, fr = double(random) / chosen,
               fk = double(kept) / chosen;
  std::printf("chosen %lld: mask %.4f random %.4f unchanged %.4f\n",
              static_cast<long long>(chosen), fm, fr, fk);
  EXPECT_NEAR(fm, 0.80, 0.02);
  EXPECT_NEAR(fr, 0.10, 0.02);
  EXPECT_NEAR(fk, 0.10, 0.02);
}

TEST(MlmMasking, EveryPositionEquallyLikelyAndAtLeastOne) {
  const int64_t n = 40, V = 500;
  const MaskingOptions mo = mask_opts(V);
  std::vector<int64_t> hits(n, 0);
  std::vector<int32_t> ids(n), labels(n);
  std::vector<float> mask(n, 1.f);
  const int64_t trials = 6000;
  for (int64_t i = 0; i < trials; ++i) {
    for (int64_t t = 0; t < n; ++t) ids[t] = 5 + static_cast<int32_t>((t * 7 + i) % (V - 5));
    ASSERT_EQ(apply_mlm_mask(ids.data(), labels.data(), mask.data(), n, mo, 3, i), 6);  // 0.15*40
    for (int64_t t = 0; t < n; ++t) hits[t] += labels[t] != -100;
  }
  // Each position is chosen with probability 6/40 = 0.15 (std over 6000 trials: 0.0046).
  for (int64_t t = 0; t < n; ++t)
    EXPECT_NEAR(double(hits[t]) / trials, 0.15, 0.025) << "position " << t;

  // Few maskable tokens: at least one chosen; none: nothing chosen.
  std::vector<int32_t> few = {0, 9, 2, 1, 1};
  std::vector<float> fm = {1, 1, 1, 0, 0};
  std::vector<int32_t> lab(5);
  EXPECT_EQ(apply_mlm_mask(few.data(), lab.data(), fm.data(), 5, mo, 1, 1), 1);
  EXPECT_EQ(lab[1], 9);
  std::vector<int32_t> none = {0, 3, 2, 1, 1};
  EXPECT_EQ(apply_mlm_mask(none.data(), lab.data(), fm.data(), 5, mo, 1, 1), 0);
  EXPECT_EQ(none, (std::vector<int32_t>{0, 3, 2, 1, 1}));
  for (int32_t l : lab) EXPECT_EQ(l, -100);
  // Real-looking ids under padding are never chosen.
  std::vector<int32_t> padded = {0, 50, 2, 60, 70};
  std::vector<float> pm = {1, 1, 1, 0, 0};
  for (uint64_t s = 0; s < 50; ++s) {
    std::vector<int32_t> p = padded;
    apply_mlm_mask(p.data(), lab.data(), pm.data(), 5, mo, s, 0);
    EXPECT_EQ(lab[3], -100);
    EXPECT_EQ(lab[4], -100);
    EXPECT_EQ(lab[1], 50);
  }
}

TEST(MlmMasking, DeterministicPerSeedAndStream) {
  const int64_t n = 64, V = 1000;
  const MaskingOptions mo = mask_opts(V);
  std::vector<int32_t> base;
  std::vector<float> mask;
  make_sequence(123, n, V, &base, &mask);
  auto run = [&](uint64_t seed, uint64_t stream) {
    std::vector<int32_t> ids = base, labels(n);
    apply_mlm_mask(ids.data(), labels.data(), mask.data(), n, mo, seed, stream);
    ids.insert(ids.end(), labels.begin(), labels.end());
    return ids;
  };
  EXPECT_EQ(run(5, 1), run(5, 1));
  EXPECT_NE(run(5, 1), run(5, 2));  // another epoch: other masks
  EXPECT_NE(run(5, 1), run(6, 1));  // another seed
}

TEST(MlmMasking, EpochOrderIsAPermutationDifferentPerEpoch) {
  const int64_t count = 1000;
  const std::vector<int64_t> e0 = epoch_order(count, 7, 0), e1 = epoch_order(count, 7, 1);
  for (const auto* e : {&e0, &e1}) {
    std::vector<int64_t> sorted = *e;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> iota(count);
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(sorted, iota);
  }
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, epoch_order(count, 7, 0));
  EXPECT_NE(e0, epoch_order(count, 8, 0));
  std::vector<int64_t> iota(count);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_NE(e0, iota);  // actually shuffled
  int64_t fixed = 0;
  for (int64_t i = 0; i < count; ++i) fixed += e0[i] == i;
  EXPECT_LT(fixed, 10);  // a random permutation has ~1 fixed point
  EXPECT_EQ(epoch_order(1, 7, 3), (std::vector<int64_t>{0}));
}

// ---------------------------------------------------------------------------------------------
// Schedule
// ---------------------------------------------------------------------------------------------

TEST(Schedule, WarmupThenLinearDecay) {
  OptimOptions o;
  o.lr = 1e-3f;
  o.warmup_steps = 4;
  o.total_steps = 20;
  // Warm-up: lr * (step + 1) / 4.
  EXPECT_FLOAT_EQ(lr_at(o, 0), 2.5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 1), 5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 3), 1e-3f);  // end of warm-up: the peak
  // Decay: lr * (1 - (step - 4) / 16), reaching 0 at step 20.
  EXPECT_FLOAT_EQ(lr_at(o, 4), 1e-3f);
  EXPECT_FLOAT_EQ(lr_at(o, 12), 5e-4f);  // middle of the decay
  EXPECT_FLOAT_EQ(lr_at(o, 16), 2.5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 19), 6.25e-5f);  // the last step
  EXPECT_EQ(lr_at(o, 20), 0.f);
  EXPECT_EQ(lr_at(o, 25), 0.f);  // never negative
  // Monotone up, then monotone down.
  for (int64_t s = 1; s < 4; ++s) EXPECT_GT(lr_at(o, s), lr_at(o, s - 1));
  for (int64_t s = 5; s <= 20; ++s) EXPECT_LT(lr_at(o, s), lr_at(o, s - 1));

  // No warm-up: decay from the peak at step 0.
  o.warmup_steps = 0;
  o.total_steps = 10;
  EXPECT_FLOAT_EQ(lr_at(o, 0), 1e-3f);
  EXPECT_FLOAT_EQ(lr_at(o, 5), 5e-4f);
  EXPECT_FLOAT_EQ(lr_at(o, 9), 1e-4f);
}

// ---------------------------------------------------------------------------------------------
// AdamW and clipping
// ---------------------------------------------------------------------------------------------

bool is_no_decay_name(const std::string& n) {
  return (n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0) ||
         n.find("LayerNorm.") != std::string::npos || n.find("layer_norm.") != std::string::npos;
}

// PyTorch's AdamW, in double: w -= lr*wd*w; m, v moments; bias-corrected step.
struct HandAdamW {
  double lr_wd, b1, b2, eps;
  std::vector<double> w, m, v;
  int t = 0;
  void step(const std::vector<float>& g, const std::vector<bool>& decay, double lr) {
    ++t;
    for (size_t i = 0; i < w.size(); ++i) {
      if (decay[i]) w[i] -= lr * lr_wd * w[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * double(g[i]) * g[i];
      const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
      w[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
};

TEST(AdamW, TwoStepsMatchHandWrittenAdamWWithDecayGroups) {
  Config cfg = test::tiny_config();
  Model model(cfg);
  model.init(4);
  const auto& params = model.params();
  // Decay flags: on for weights/embeddings/projections, off for biases and LayerNorm.
  int with = 0, without = 0;
  for (const ParamInfo& p : params) {
    EXPECT_EQ(p.decay, !is_no_decay_name(p.name)) << p.name;
    (p.decay ? with : without)++;
  }
  ASSERT_GT(with, 0);
  ASSERT_GT(without, 0);
  // Nonzero biases so that a wrongly applied decay on them would show.
  for (const ParamInfo& p : params)
    for (size_t i = 0; i < p.numel; ++i) model.param_data()[p.offset + i] += 0.3f * rng_normal(8, p.offset, i);

  OptimOptions o;
  o.lr = 1e-2f;
  o.beta1 = 0.9f;
  o.beta2 = 0.98f;
  o.eps = 1e-6f;
  o.weight_decay = 0.1f;  // large, so that decay on a wrong tensor is far above rounding
  AdamW adam(model, o);
  HandAdamW hand{0.1, 0.9, 0.98, 1e-6, {}, {}, {}};
  std::vector<bool> decay;
  for (const ParamInfo& p : params)
    for (size_t i = 0; i < p.numel; ++i) {
      hand.w.push_back(model.param_data()[p.offset + i]);
      decay.push_back(p.decay);
    }
  hand.m.assign(hand.w.size(), 0);
  hand.v.assign(hand.w.size(), 0);
  std::vector<double> gmax(hand.w.size(), 0);  // largest |gradient| so far, per element

  const float lrs[2] = {1e-2f, 4e-3f};
  for (int step = 0; step < 2; ++step) {
    model.zero_grad();
    std::vector<float> g;
    for (size_t k = 0; k < params.size(); ++k) {
      const ParamInfo& p = params[k];
      for (size_t i = 0; i < p.numel; ++i) {
        // Mixed scales, and one tensor with zero gradient (decay only).
        float x = (k % 3 == 0 ? 1e-3f : 0.5f) * rng_normal(100 + step, p.offset, i);
        if (p.name == "classifier.out_proj.weight") x = 0.f;
        model.grad_data()[p.offset + i] = x;
        g.push_back(x);
      }
    }
    adam.step(lrs[step]);
    hand.step(g, decay, lrs[step]);
    for (size_t j = 0; j < g.size(); ++j) gmax[j] = std::max(gmax[j], double(std::abs(g[j])));
    EXPECT_EQ(adam.steps_done(), step + 1);
    size_t j = 0;
    double worst = 0;
    for (const ParamInfo& p : params)
      for (size_t i = 0; i < p.numel; ++i, ++j) {
        const double ours = model.param_data()[p.offset + i];
        // float32 arithmetic on weights up to ~1.5: a few ulp.
        const double tol = 1e-6 * std::max(1.0, std::abs(hand.w[j]));
        worst = std::max(worst, std::abs(ours - hand.w[j]));
        ASSERT_NEAR(ours, hand.w[j], tol) << p.name << "[" << i << "] after step " << step + 1;
        // Moments: float32 (1 - beta) and sums of terms of either sign, so the bound is
        // relative to the gradients that went in, not to the (possibly cancelled) moment.
        ASSERT_NEAR(adam.m_data()[p.offset + i], hand.m[j], 1e-6 * gmax[j] + 1e-15)
            << p.name << "[" << i << "] m after step " << step + 1;
        ASSERT_NEAR(adam.v_data()[p.offset + i], hand.v[j], 1e-6 * gmax[j] * gmax[j] + 1e-20)
            << p.name << "[" << i << "] v after step " << step + 1;
      }
    std::printf("AdamW step %d: max |w - hand| = %.3g\n", step + 1, worst);
  }
}

TEST(AdamW, ClipGradNormScalesToMaxAndReturnsPreClipNorm) {
  Model model(test::tiny_config());
  model.init(1);
  auto fill = [&](uint64_t seed) {
    model.zero_grad();
    for (const ParamInfo& p : model.params())
      for (size_t i = 0; i < p.numel; ++i)
        model.grad_data()[p.offset + i] = rng_normal(seed, p.offset, i);
  };
  auto grads = [&] {
    std::vector<float> g;
    for (const ParamInfo& p : model.params())
      g.insert(g.end(), model.grad_data() + p.offset, model.grad_data() + p.offset + p.numel);
    return g;
  };
  fill(3);
  const std::vector<float> g0 = grads();
  double sq = 0;
  for (float x : g0) sq += double(x) * x;
  const double norm = std::sqrt(sq);
  ASSERT_GT(norm, 10.0);

  // Above the limit: scaled down to max_norm, direction kept.
  const float max_norm = static_cast<float>(norm / 4);
  EXPECT_NEAR(clip_grad_norm(model, max_norm), norm, 1e-6 * norm);
  const std::vector<float> g1 = grads();
  double sq1 = 0;
  for (float x : g1) sq1 += double(x) * x;
  EXPECT_NEAR(std::sqrt(sq1), max_norm, 1e-5 * max_norm);
  for (size_t i = 0; i < g0.size(); ++i) ASSERT_NEAR(g1[i], g0[i] * 0.25f, 1e-5f * std::abs(g0[i]) + 1e-7f);

  // Below the limit, or clipping off: unchanged, norm still returned.
  fill(3);
  EXPECT_NEAR(clip_grad_norm(model, static_cast<float>(2 * norm)), norm, 1e-6 * norm);
  EXPECT_EQ(grads(), g0);
  EXPECT_NEAR(clip_grad_norm(model, 0.f), norm, 1e-6 * norm);
  EXPECT_EQ(grads(), g0);
}

}  // namespace
}  // namespace lf
