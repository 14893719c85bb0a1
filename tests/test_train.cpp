// Pretraining input against hand-computed expectations: corpus input and UTF-8 checks, the
// tokenizer and the token cache. (Packing and masking: test_mlm_data.cpp; the schedule, AdamW
// and clipping: test_optim.cpp.)
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
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

}  // namespace
}  // namespace lf
