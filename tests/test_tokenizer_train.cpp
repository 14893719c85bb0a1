// `tokenizer train` on corpora whose documents are long lines (a whole book per line).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "linformer/tokenizer.h"
#include "test_util.h"

namespace lf {
namespace {

// A document of many words drawn from a small made-up vocabulary, on ONE line far longer than
// SentencePiece's 4192-byte sentence limit.
std::string long_line(int words) {
  static const char* kWords[] = {"zorblax", "quintessa", "mervolian", "trask", "ombrelle",
                                 "vintaro", "pelugrine", "stoad", "harmakis", "dulcivet"};
  std::string s;
  uint32_t x = 12345;
  for (int i = 0; i < words; ++i) {
    x = x * 1103515245u + 12345u;
    if (i) s += ' ';
    s += kWords[(x >> 16) % 10];
  }
  return s;
}

TEST(TokenizerTrain, LearnsFromLinesLongerThanSentencePiecesLimit) {
  const std::string dir = test::temp_dir("tok");
  {
    std::ofstream f(dir + "/corpus.txt");
    f << long_line(40000) << "\n";  // ~330 KB on one line, nothing else
  }
  TokenizerTrainOptions to;
  to.vocab_size = 64;
  Tokenizer::train({dir + "/corpus.txt"}, dir + "/tok.model", to);
  Tokenizer tok(dir + "/tok.model");
  // The made-up words are frequent in the long line only: a tokenizer that saw it encodes
  // each with few pieces and no unknown id.
  for (const char* w : {"zorblax", "mervolian", "harmakis"}) {
    const std::vector<int32_t> ids = tok.encode(w);
    ASSERT_FALSE(ids.empty()) << w;
    EXPECT_LE(ids.size(), 3u) << w;
    for (int32_t id : ids) EXPECT_NE(id, tok.special().unk) << w;
  }
}

}  // namespace
}  // namespace lf
