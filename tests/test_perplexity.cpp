// `linformer perplexity` / mlm_perplexity: checked against the pretraining run's own validation
// loss (same seed, same text) and against a cross-entropy computed here from the model's MLM
// logits; the score does not depend on the batch size; bad input is refused with its reason.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/mlm_data.h"
#include "linformer/checkpoint.h"
#include "linformer/perplexity.h"
#include "linformer/pretrain.h"
#include "linformer/rng.h"
#include "linformer/tokenizer.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

void write_corpus(const std::string& path, uint64_t seed, int lines) {
  static const char* words[] = {"river", "house",  "road",   "garden", "train", "village",
                                "bread", "letter", "market", "old",    "young", "small",
                                "red",   "walked", "found",  "the",    "a",     "and"};
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) {
    const int64_t len = 4 + static_cast<int64_t>(rng_bits(seed, i, 0) % 10);
    for (int64_t w = 0; w < len; ++w)
      out << (w ? " " : "") << words[rng_bits(seed, i, w + 1) % (sizeof words / sizeof *words)];
    out << ".\n";
  }
}

class Perplexity : public ::testing::Test {
 protected:
  static std::string dir_;
  static PretrainResult run_;
  static void SetUpTestSuite() {
    // One folder per process: ctest runs the tests of this suite in parallel processes.
    dir_ =
        (fs::temp_directory_path() / ("lf_test_Perplexity_" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_corpus(dir_ + "/train.txt", 1, 600);
    write_corpus(dir_ + "/valid.txt", 2, 120);
    Config cfg = test::tiny_config();
    cfg.max_len = 64;
    cfg.k = {16};
    cfg.dropout = 0.f;
    cfg.attention_dropout = 0.f;
    cfg.save(dir_ + "/config.json");
    PretrainOptions o;
    o.train = {dir_ + "/train.txt"};
    o.valid = {dir_ + "/valid.txt"};
    o.config = dir_ + "/config.json";
    o.out = dir_ + "/run";
    o.vocab_size = 100;
    o.steps = 20;
    o.batch_size = 4;
    o.eval_every = 20;
    o.eval_batches = 1000;  // every validation sequence
    o.checkpoint_every = 20;
    o.optim.lr = 1e-3f;
    o.seed = 7;
    o.quiet = true;
    run_ = pretrain(o, false);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
};
std::string Perplexity::dir_;
PretrainResult Perplexity::run_;

TEST_F(Perplexity, ReproducesThePretrainingValidationLoss) {
  PerplexityOptions p;
  p.text = {dir_ + "/valid.txt"};
  p.seed = 7;  // the run's seed: the same evaluation masks
  p.quiet = true;
  const PerplexityResult r = mlm_perplexity(dir_ + "/run/model", p);
  EXPECT_EQ(r.seq_len, 64);
  EXPECT_GT(r.masked, 100);
  EXPECT_NEAR(r.loss, run_.final_valid_loss, 1e-5 * run_.final_valid_loss);
  EXPECT_NEAR(r.ppl, std::exp(r.loss), 1e-9 * r.ppl);
  // Another mask draw scores other positions: a different (but close) loss.
  p.seed = 8;
  const PerplexityResult r8 = mlm_perplexity(dir_ + "/run/model", p);
  EXPECT_NE(r8.loss, r.loss);
  EXPECT_NEAR(r8.loss, r.loss, 0.5);
}

// The mean cross-entropy over the masked positions, from the model's logits, in double.
TEST_F(Perplexity, EqualsCrossEntropyOfTheLogitsAtEveryBatchSize) {
  std::unique_ptr<Model> model = load_model(dir_ + "/run/model");
  const Tokenizer tok(dir_ + "/run/model/tokenizer.model");
  PerplexityOptions p;
  p.text = {dir_ + "/valid.txt"};
  p.seq_len = 32;
  p.seed = 3;
  p.max_sequences = 7;
  p.quiet = true;

  // Reference: the same packing and masks, one sequence at a time, softmax in double.
  std::vector<int32_t> tokens;
  {
    std::ifstream in(dir_ + "/valid.txt");
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      for (int32_t id : tok.encode(line)) tokens.push_back(id);
      tokens.push_back(Tokenizer::kSep);
    }
  }
  const TokenStream stream = TokenStream::from_tokens(tokens);
  const PackedSequences seqs{&stream, 0, stream.size(), 32};
  MaskingOptions mo;
  mo.vocab_size = model->config().vocab_size;
  double total = 0;
  int64_t count = 0;
  const int64_t V = model->config().vocab_size;
  for (int64_t s = 0; s < 7; ++s) {
    MlmBatch b;
    make_mlm_batch(seqs, {s}, {-1}, mo, 3, &b);
    model->forward(Batch{b.ids.data(), b.mask.data(), 1, 32}, false);
    std::vector<float> logits(32 * V);
    model->mlm_logits(logits.data());
    for (int64_t t = 0; t < 32; ++t) {
      if (b.labels[t] < 0) continue;
      const float* z = logits.data() + t * V;
      double mx = z[0], sum = 0;
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(z[v]));
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
      total += std::log(sum) + mx - z[b.labels[t]];
      ++count;
    }
  }
  ASSERT_GT(count, 0);
  for (int64_t bs : {1, 3, 7, 16}) {
    p.batch_size = bs;
    const PerplexityResult r = mlm_perplexity(*model, tok, p);
    EXPECT_EQ(r.sequences, 7);
    EXPECT_EQ(r.masked, count) << "batch " << bs;
    EXPECT_NEAR(r.loss, total / count, 1e-4 * (total / count)) << "batch " << bs;
  }
}

// The command prints the same figures as the library, as JSON.
TEST_F(Perplexity, CommandLineJson) {
  const std::string out = dir_ + "/cli.json";
  const test::CliRun r =
      test::run_cli(dir_, "perplexity --model '" + dir_ + "/run/model' --text '" + dir_ +
                              "/valid.txt' --seed 7 --quiet --json-out '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_NEAR(j.at("loss").get<double>(), run_.final_valid_loss, 1e-5 * run_.final_valid_loss);
  EXPECT_EQ(j.at("seed"), 7);
  EXPECT_EQ(j.at("precision"), "f32");
  EXPECT_GT(j.at("masked").get<int64_t>(), 100);
  // --precision int8: the same positions, a loss within 2% of f32's (and not equal to it).
  if (compute_type_supported(ComputeType::int8)) {
    const test::CliRun q =
        test::run_cli(dir_, "perplexity --model '" + dir_ + "/run/model' --text '" + dir_ +
                                "/valid.txt' --seed 7 --quiet --json --precision int8");
    ASSERT_EQ(q.code, 0) << q.err;
    const nlohmann::json jq = nlohmann::json::parse(q.out);
    EXPECT_EQ(jq.at("precision"), "int8");
    EXPECT_EQ(jq.at("masked"), j.at("masked"));
    const double lf32 = j.at("loss").get<double>(), l8 = jq.at("loss").get<double>();
    EXPECT_NEAR(l8, lf32, 0.02 * lf32);
    EXPECT_NE(l8, lf32);
  }
  // A missing model folder: non-zero exit and the folder named on stderr.
  const test::CliRun bad =
      test::run_cli(dir_, "perplexity --model '" + dir_ + "/nope' --text '" + dir_ + "/valid.txt'");
  EXPECT_NE(bad.code, 0);
  EXPECT_FALSE(bad.crashed);
  EXPECT_NE(bad.err.find("nope"), std::string::npos) << bad.err;
}

TEST_F(Perplexity, BadInputIsRefusedWithTheReason) {
  PerplexityOptions p;
  p.quiet = true;
  p.text = {dir_ + "/valid.txt"};
  p.seq_len = 65;
  EXPECT_ERROR_MENTIONS(mlm_perplexity(dir_ + "/run/model", p), "exceeds the model's max_len 64");
  p.seq_len = 0;
  p.text = {dir_ + "/missing.txt"};
  EXPECT_ERROR_MENTIONS(mlm_perplexity(dir_ + "/run/model", p), "missing.txt");
  test::write_text(dir_ + "/empty.txt", "\n\n");
  p.text = {dir_ + "/empty.txt"};
  EXPECT_ERROR_MENTIONS(mlm_perplexity(dir_ + "/run/model", p), "no documents");
  p.text = {dir_ + "/valid.txt"};
  p.mask_prob = 0;
  EXPECT_ERROR_MENTIONS(mlm_perplexity(dir_ + "/run/model", p), "--mask-prob");
  p.mask_prob = 0.15;
  // A folder without its tokenizer.
  fs::create_directories(dir_ + "/notok");
  fs::copy_file(dir_ + "/run/model/config.json", dir_ + "/notok/config.json");
  fs::copy_file(dir_ + "/run/model/model.safetensors", dir_ + "/notok/model.safetensors");
  EXPECT_ERROR_MENTIONS(mlm_perplexity(dir_ + "/notok", p), "has no tokenizer (tokenizer.model");
}

}  // namespace
}  // namespace lf
