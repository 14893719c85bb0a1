// The server's pieces that need no HTTP: padded lengths of the batcher, base64 and the float
// printing of the answers, the request parser's reading of TEI's input forms. (The server
// itself is tested over real HTTP by tests/serve/test_serve.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "api.h"
#include "batcher.h"
#include "linformer/checkpoint.h"
#include "server.h"
#include "test_util.h"

namespace lf::serve {
namespace {

TEST(ServeBatcher, PaddedLengthWastesAtMostAnEighthAboveEight) {
  for (int64_t max_len : {64, 512, 4096, 5000}) {
    int64_t prev = 0;
    for (int64_t L = 1; L <= max_len; ++L) {
      const int64_t P = padded_length(L, max_len);
      ASSERT_GE(P, L);
      ASSERT_LE(P, max_len);
      ASSERT_GE(P, prev) << "not monotonic at " << L;
      ASSERT_LE(P - L, std::max<int64_t>(7, L / 4)) << L;  // grid step <= max(8, L/4)
      prev = P;
    }
  }
  EXPECT_EQ(padded_length(23, 512), 24);
  EXPECT_EQ(padded_length(300, 512), 320);
  EXPECT_EQ(padded_length(3000, 4096), 3072);
  EXPECT_EQ(padded_length(500, 500), 500);
}

TEST(ServeApi, Base64MatchesRfc4648) {
  const char* cases[][2] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                            {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                            {"foobar", "Zm9vYmFy"}};
  for (auto& c : cases) EXPECT_EQ(base64_encode(c[0], std::strlen(c[0])), c[1]) << c[0];
  const unsigned char bytes[] = {0xff, 0xfe, 0x00, 0x80};
  EXPECT_EQ(base64_encode(bytes, 4), "//4AgA==");
}

TEST(ServeApi, FloatsReadBackExactly) {
  std::mt19937 g(3);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> v;
  while (v.size() < 2000) {
    const uint32_t b = bits(g);
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isfinite(f)) v.push_back(f);
  }
  v.push_back(0.f);
  v.push_back(-0.f);
  v.push_back(1e-45f);
  std::string s;
  append_floats(&s, v.data(), static_cast<int64_t>(v.size()));
  ASSERT_EQ(nlohmann::json::parse(s).size(), v.size());  // valid JSON
  const char* p = s.c_str() + 1;
  for (size_t i = 0; i < v.size(); ++i) {  // each number read back as a float: the same bits
    char* end = nullptr;
    const float back = std::strtof(p, &end);
    ASSERT_EQ(std::memcmp(&back, &v[i], 4), 0) << std::string(p, static_cast<const char*>(end)) << " for " << v[i];
    p = end + 1;
  }
  const float bad[] = {NAN, INFINITY};
  s.clear();
  append_floats(&s, bad, 2);
  EXPECT_EQ(s, "[null,null]");  // JSON has neither
}

TEST(ServeApi, PredictInputFormsOfTei) {
  ParseLimits single, pairs;
  pairs.model_pairs = true;
  PredictRequest r = parse_predict(R"({"inputs": "a"})", single);
  EXPECT_FALSE(r.batched);
  ASSERT_EQ(r.inputs.size(), 1u);
  r = parse_predict(R"({"inputs": ["a", "b"]})", pairs);  // one pair
  EXPECT_FALSE(r.batched);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_TRUE(r.inputs[0].pair);
  EXPECT_EQ(r.inputs[0].b, "b");
  r = parse_predict(R"({"inputs": ["a", "b", "c"]})", single);  // texts, for a single model
  EXPECT_TRUE(r.batched);
  EXPECT_EQ(r.inputs.size(), 3u);
  r = parse_predict(R"({"inputs": [["a", "b"], ["c", "d"]], "raw_scores": true})", pairs);
  EXPECT_TRUE(r.batched && r.raw_scores);
  EXPECT_EQ(r.inputs[1].a, "c");
  EXPECT_THROW(parse_predict(R"({"inputs": ["a", "b", "c"]})", pairs), ApiError);
  EXPECT_THROW(parse_predict(R"({"inputs": [["a"], "b"]})", single), ApiError);
  EXPECT_THROW(parse_predict(R"({"inputs": [["a", "b"]]})", single), ApiError);
}

TEST(ServeApi, TruncationDefaultsToTheServersSetting) {
  ParseLimits lim;
  lim.auto_truncate = true;
  EmbedRequest r = parse_embed(R"({"inputs": "x"})", lim);
  EXPECT_TRUE(r.truncate);
  EXPECT_FALSE(r.truncate_left);
  r = parse_embed(R"({"inputs": "x", "truncate": false, "truncation_direction": "Left"})", lim);
  EXPECT_FALSE(r.truncate);
  EXPECT_TRUE(r.truncate_left);
  try {
    parse_embed(R"({"inputs": ["x", "y", "z"]})", ParseLimits{2});
    FAIL() << "three inputs over a limit of two";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 422);
    EXPECT_NE(std::string(e.what()).find("at most 2"), std::string::npos) << e.what();
  }
}

TEST(ServeRerank, RelevantClassRule) {
  EXPECT_EQ(relevant_class({"entailment", "not_entailment"}, ""), 0);  // QNLI
  EXPECT_EQ(relevant_class({"not_entailment", "Entailment"}, ""), 1);  // case aside
  EXPECT_EQ(relevant_class({"0", "1"}, ""), 1);                        // QQP, MRPC
  EXPECT_EQ(relevant_class({"yes", "no"}, ""), 0);
  EXPECT_EQ(relevant_class({"negative", "positive"}, ""), 1);
  EXPECT_EQ(relevant_class({"a", "b"}, ""), 1);       // two classes: the second
  EXPECT_EQ(relevant_class({"score"}, ""), 0);        // one output: its sigmoid
  EXPECT_EQ(relevant_class({"a", "b", "c"}, ""), -1);  // no rule applies
  EXPECT_EQ(relevant_class({"a", "b", "c"}, "c"), 2);  // --rerank-label
  EXPECT_EQ(relevant_class({"0", "1"}, "0"), 0);
  EXPECT_EQ(relevant_class({"0", "1"}, "2"), -1);
}

TEST(ServeRerank, ParsesQueryAndTextsIntoPairs) {
  ParseLimits lim;
  lim.max_client_batch_size = 3;
  const RerankRequest r =
      parse_rerank(R"({"query": "q", "texts": ["a", "b"], "return_text": true})", lim);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_TRUE(r.inputs[1].pair);
  EXPECT_EQ(r.inputs[1].a, "q");
  EXPECT_EQ(r.inputs[1].b, "b");
  EXPECT_TRUE(r.return_text);
  EXPECT_FALSE(r.raw_scores);
  EXPECT_THROW(parse_rerank(R"({"query": "q", "texts": ["a", "b", "c", "d"]})", lim), ApiError);
  EXPECT_THROW(parse_rerank(R"({"query": "q", "texts": "a"})", lim), ApiError);
}

TEST(ServeDecode, IdsWithinTheVocabulary) {
  ParseLimits lim;
  const DecodeRequest one = parse_decode(R"({"ids": [0, 5, 2]})", lim, 10);
  ASSERT_EQ(one.ids.size(), 1u);
  EXPECT_EQ(one.ids[0], (std::vector<int32_t>{0, 5, 2}));
  EXPECT_TRUE(one.skip_special_tokens);
  const DecodeRequest two = parse_decode(R"({"ids": [[1], [2, 3]], "skip_special_tokens": false})",
                                         lim, 10);
  EXPECT_EQ(two.ids.size(), 2u);
  EXPECT_FALSE(two.skip_special_tokens);
  for (const char* bad : {R"({"ids": [10]})", R"({"ids": [-1]})", R"({"ids": [1.0]})",
                          R"({"ids": [18446744073709551615]})", R"({"ids": [[1], 2]})"}) {
    try {
      parse_decode(bad, lim, 10);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 422) << bad;
    }
  }
}

TEST(ModelFolders, RunFolderGivesBestElseLast) {
  namespace fs = std::filesystem;
  lf::test::TempDir d;
  auto touch = [](const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p.string()) << "x";
  };
  const std::string run = (fs::path(d.path()) / "run").string();
  fs::create_directories(run);
  std::string chosen = "stale";
  EXPECT_EQ(resolve_model_folder(run, &chosen), run);  // nothing to serve yet: unchanged
  EXPECT_EQ(chosen, "");
  touch(fs::path(run) / "model" / "model.safetensors");
  EXPECT_EQ(resolve_model_folder(run, &chosen), (fs::path(run) / "model").string());
  EXPECT_EQ(chosen, "last model");
  touch(fs::path(run) / "best" / "model.safetensors");
  EXPECT_EQ(resolve_model_folder(run, &chosen), (fs::path(run) / "best").string());
  EXPECT_EQ(chosen, "best model");
  const std::string best = (fs::path(run) / "best").string();
  EXPECT_EQ(resolve_model_folder(best, &chosen), best);  // a model folder is itself
  EXPECT_EQ(chosen, "");
  EXPECT_EQ(resolve_model_folder(run + "/missing", &chosen), run + "/missing");
}

}  // namespace
}  // namespace lf::serve
