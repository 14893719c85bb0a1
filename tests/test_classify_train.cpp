// Text classification end to end: predictions independent of batching and padding, a
// finetuning run on a tiny separable data set (full accuracy, exact resume, starting from a
// pretrained folder) and the CLI commands evaluate / predict / embed on the model it trains.
// Every fixture is created by the tests. (Readers, labels, encoding and metrics:
// test_classify.cpp.)
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/finetune.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "linformer/safetensors.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test::write_text;

// ---------------------------------------------------------------------------------------------
// Batch-independent predictions
// ---------------------------------------------------------------------------------------------

std::vector<int32_t> random_seq(int64_t len, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> s(len);
  s[0] = Tokenizer::kCls;
  for (int64_t t = 1; t + 1 < len; ++t)
    s[t] = static_cast<int32_t>(Tokenizer::kNumSpecial +
                                rng_bits(seed, 5, t) % (vocab - Tokenizer::kNumSpecial));
  s[len - 1] = Tokenizer::kSep;
  return s;
}

class ClassifyPredict : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassifyPredict, ProbabilitiesDoNotDependOnBatchOrPadding) {
  Config c = test::tiny_config();
  c.max_len = 32;
  c.k = {8};
  const std::string kind = GetParam();
  if (kind == "standard") c.attention = AttentionKind::standard;
  if (kind == "linformer-none") c.sharing = Sharing::none;
  if (kind == "linformer-mean") c.projection = Projection::mean_pool;
  c.validate();
  Model model(c);
  model.init(5);
  const std::vector<int32_t> text = random_seq(6, c.vocab_size, 1);
  const std::vector<float> alone = predict_probs(model, {text}, 8);
  // In a batch with longer texts (padded to 32), in either order and batch size.
  std::vector<std::vector<int32_t>> batch = {random_seq(32, c.vocab_size, 2), text,
                                             random_seq(19, c.vocab_size, 3)};
  for (bool sort : {false, true})
    for (int64_t bs : {1, 2, 3}) {
      const std::vector<float> p = predict_probs(model, batch, bs, sort);
      for (int64_t k = 0; k < c.num_classes; ++k)
        EXPECT_NEAR(p[1 * c.num_classes + k], alone[k], 1e-5)
            << kind << " batch size " << bs << " sort " << sort;
    }
  double sum = 0;
  for (float v : alone) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  // Embeddings likewise.
  std::vector<float> cls1, mean1, cls3, mean3;
  embed_sequences(model, {text}, 4, &cls1, &mean1);
  embed_sequences(model, batch, 3, &cls3, &mean3);
  const int64_t D = c.d_model;
  for (int64_t j = 0; j < D; ++j) {
    EXPECT_NEAR(cls3[D + j], cls1[j], 1e-5);
    EXPECT_NEAR(mean3[D + j], mean1[j], 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Attention, ClassifyPredict,
                         ::testing::Values("standard", "linformer", "linformer-none",
                                           "linformer-mean"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// ---------------------------------------------------------------------------------------------
// Finetuning on a tiny separable data set
// ---------------------------------------------------------------------------------------------

// Sentences of filler words with exactly one of "good" / "bad": the label.
std::string separable_tsv(int n, uint64_t seed, bool crlf) {
  static const std::vector<std::string> filler = {"the",  "movie", "was",    "very", "and",
                                                  "plot", "it",    "acting", "film", "really"};
  std::string s = std::string("label\tsentence") + (crlf ? "\r\n" : "\n");
  for (int i = 0; i < n; ++i) {
    const int y = static_cast<int>(rng_bits(seed, 1, i) % 2);
    const int len = 2 + static_cast<int>(rng_bits(seed, 2, i) % 6);
    const int at = static_cast<int>(rng_bits(seed, 3, i) % (len + 1));
    std::string text;
    for (int w = 0; w <= len; ++w) {
      const std::string word =
          w == at ? (y ? "good" : "bad") : filler[rng_bits(seed, 4, i * 16 + w) % filler.size()];
      text += (text.empty() ? "" : " ") + word;
    }
    s += std::to_string(y) + "\t" + text + (crlf ? "\r\n" : "\n");
  }
  return s;
}

FinetuneOptions tiny_run(const std::string& dir, const std::string& out) {
  FinetuneOptions o;
  o.train = dir + "/train.tsv";
  o.dev = dir + "/dev.tsv";
  o.out = out;
  o.sets = {"d_model=32", "n_heads=2",  "d_ff=64",   "n_layers=2",         "max_len=32",
            "k=8",        "sharing=kv", "dropout=0", "attention_dropout=0"};
  o.vocab_size = 40;
  o.batch_size = 16;
  o.epochs = 12;
  o.optim.lr = 3e-3f;
  o.seed = 3;
  o.quiet = true;
  return o;
}

// The train records of a run's metrics.jsonl: {step, loss, accuracy} each.
std::vector<std::vector<double>> train_lines(const std::string& path) {
  std::vector<std::vector<double>> v;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const json r = json::parse(line);
    if (r["split"] == "train")
      v.push_back({r["step"].get<double>(), r["loss"].get<double>(), r["accuracy"].get<double>()});
  }
  return v;
}

class ClassifyTrain : public ::testing::Test {
 protected:
  static std::string dir_;
  static FinetuneResult result_;
  static int threads_;
  // One thread: a model this small gains nothing from more, and runs stay bit-identical
  // (the resume test compares weights exactly) and fast on a loaded machine.
  static void TearDownTestSuite() {
    omp_set_num_threads(threads_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  static void SetUpTestSuite() {
    namespace fs = std::filesystem;
    threads_ = omp_get_max_threads();
    omp_set_num_threads(1);
    // One folder per process: ctest runs the tests of this suite in parallel processes.
    dir_ = (fs::temp_directory_path() / ("lf_test_ClassifyTrain_" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_text(dir_ + "/train.tsv", separable_tsv(320, 11, true));
    write_text(dir_ + "/dev.tsv", separable_tsv(64, 12, false));
    result_ = finetune(tiny_run(dir_, dir_ + "/run"), false);
  }
};
std::string ClassifyTrain::dir_;
int ClassifyTrain::threads_ = 1;
FinetuneResult ClassifyTrain::result_;

TEST_F(ClassifyTrain, TinySeparableDataReachesFullAccuracy) {
  EXPECT_EQ(result_.best_metric, 1.0) << "best dev accuracy " << result_.best_metric;
  EXPECT_EQ(result_.steps_done, result_.total_steps);
  EXPECT_EQ(result_.total_steps, 20 * 12);
  for (const char* f :
       {"best/config.json", "best/model.safetensors", "best/tokenizer.model", "best/labels.json",
        "best/eval.json", "model/model.safetensors", "labels.json", "train_args.json",
        "metrics.jsonl", "loss.svg", "checkpoints/latest"})
    EXPECT_TRUE(fs::exists(dir_ + "/run/" + f)) << f;
  // The saved best model reproduces its dev accuracy and names its labels.
  ClassifierBundle cb = load_classifier(dir_ + "/run/best", true);
  EXPECT_EQ(cb.labels.names, (std::vector<std::string>{"negative", "positive"}));
  EXPECT_EQ(cb.task.max_len, 32);
  EXPECT_EQ(cb.model->config().num_classes, 2);
  ClassifyData dev = read_classify_data(dir_ + "/dev.tsv");
  const std::vector<int32_t> gold = assign_labels(dev, cb.labels, BadRows::stop);
  const auto seqs =
      encode_all(*cb.tokenizer, dev, cb.task.max_len, cb.task.truncate, cb.task.lowercase);
  const ClassifyMetrics m =
      compute_metrics(predict_probs(*cb.model, seqs, 7), gold, 2, cb.labels.positive);
  EXPECT_EQ(m.accuracy, 1.0);
  // --lowercase: ASCII letters are lowercased before tokenizing.
  EXPECT_EQ(encode_example(*cb.tokenizer, "The GOOD Film", "", false, 32, Truncate::head, true),
            encode_example(*cb.tokenizer, "the good film", "", false, 32, Truncate::head));
  EXPECT_NE(encode_example(*cb.tokenizer, "The GOOD Film", "", false, 32, Truncate::head),
            encode_example(*cb.tokenizer, "the good film", "", false, 32, Truncate::head));
  // The metrics log has train and dev records for every epoch.
  int dev_records = 0;
  std::ifstream in(dir_ + "/run/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) dev_records += json::parse(line)["split"] == "dev";
  EXPECT_EQ(dev_records, 12);
}

TEST_F(ClassifyTrain, ATimeLimitIsTheCallsNotTheStoredOne) {
  // The first call stops on its time limit after one step; a resume given no limit runs to the
  // end (it does not inherit the stored limit), and one given a limit stops on it.
  FinetuneOptions o = tiny_run(dir_, dir_ + "/limited");
  o.time_limit = 1e-9;
  const FinetuneResult first = finetune(o, false);
  EXPECT_EQ(first.steps_done, 1);
  FinetuneOptions r;
  r.out = dir_ + "/limited";
  r.quiet = true;
  r.time_limit = 1e-9;
  EXPECT_EQ(finetune(r, true).steps_done, 2);
  r.time_limit = 0;
  const FinetuneResult last = finetune(r, true);
  EXPECT_EQ(last.steps_done, last.total_steps);
  EXPECT_GT(last.total_steps, 2);
}

TEST_F(ClassifyTrain, ResumeAfterStopIsExact) {
  // Same run, stopped after 30 steps, then resumed: the final weights are identical.
  FinetuneOptions o = tiny_run(dir_, dir_ + "/resumed");
  o.stop_after = 30;
  const FinetuneResult first = finetune(o, false);
  EXPECT_EQ(first.steps_done, 30);
  EXPECT_FALSE(fs::exists(dir_ + "/resumed/model"));
  FinetuneOptions r;
  r.out = dir_ + "/resumed";
  r.quiet = true;
  const FinetuneResult second = finetune(r, true);
  EXPECT_EQ(second.steps_done, second.total_steps);
  SafeTensorsReader a(dir_ + "/run/model/model.safetensors");
  SafeTensorsReader b(dir_ + "/resumed/model/model.safetensors");
  for (const std::string& name : a.names()) {
    const std::vector<float> x = a.read_f32(name), y = b.read_f32(name);
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << name << "[" << i << "]";
  }
  EXPECT_EQ(second.best_metric, result_.best_metric);
  // The progress window in flight at the stop (steps 21-30; lines at 20 and 40) is saved in
  // the checkpoint: every train line, the first after the resume too, equals the
  // uninterrupted run's.
  const auto uninterrupted = train_lines(dir_ + "/run/metrics.jsonl");
  EXPECT_EQ(train_lines(dir_ + "/resumed/metrics.jsonl"), uninterrupted);
  EXPECT_GT(uninterrupted.size(), 3u);
}

TEST_F(ClassifyTrain, Bf16RunsCloseToF32AndResumesInBf16) {
  LF_REQUIRE_BF16();
  // Padded to max_len, so that the products are large enough to run in bf16.
  auto run = [&](const std::string& name, bool bf16, int64_t stop_after) {
    FinetuneOptions o = tiny_run(dir_, dir_ + "/" + name);
    o.pad_to_max = true;
    o.epochs = 2;
    o.log_every = 5;
    o.precision = bf16 ? ComputeType::bf16 : ComputeType::f32;
    o.stop_after = stop_after;
    return finetune(o, false);
  };
  run("f32", false, 0);
  run("bf16", true, 0);
  const auto f = train_lines(dir_ + "/f32/metrics.jsonl");
  const auto b = train_lines(dir_ + "/bf16/metrics.jsonl");
  ASSERT_EQ(f.size(), b.size());
  ASSERT_GE(f.size(), 6u);
  EXPECT_NE(f, b) << "--bf16 changed nothing: no product ran in bf16";
  for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(b[i][1], f[i][1], 0.05 * f[i][1] + 0.02) << i;
  EXPECT_EQ(json::parse(std::ifstream(dir_ + "/bf16/train_args.json"))["precision"], "bf16");
  // Stopped and resumed, the run stays in bf16: its losses are the uninterrupted bf16 run's.
  run("bf16-resumed", true, 12);
  FinetuneOptions r;
  r.out = dir_ + "/bf16-resumed";
  r.quiet = true;
  finetune(r, true);
  EXPECT_EQ(train_lines(dir_ + "/bf16-resumed/metrics.jsonl"), b);
}

TEST_F(ClassifyTrain, InitFromPretrainedFolderReinitialisesClassifier) {
  // The finetuned folder serves as a "pretrained" model for a 3-class task.
  write_text(dir_ + "/three.tsv",
             "text\tlabel\ngood film\ta\nbad film\tb\nthe plot\tc\n"
             "good plot\ta\nbad plot\tb\nthe film\tc\n");
  FinetuneOptions o;
  o.train = dir_ + "/three.tsv";
  o.out = dir_ + "/three";
  o.init_from = dir_ + "/run/best";
  o.epochs = 1;
  o.batch_size = 4;
  o.quiet = true;
  const FinetuneResult r = finetune(o, false);
  EXPECT_EQ(r.best_metric, -1);  // no dev set
  ClassifierBundle cb = load_classifier(dir_ + "/three/best", true);
  EXPECT_EQ(cb.model->config().num_classes, 3);
  EXPECT_EQ(cb.labels.names, (std::vector<std::string>{"a", "b", "c"}));
  // The encoder came from the pretrained folder (before one epoch changed it a little).
  ClassifierBundle src = load_classifier(dir_ + "/run/best", true);
  const float* w0 = src.model->param("roberta.embeddings.word_embeddings.weight");
  const float* w1 = cb.model->param("roberta.embeddings.word_embeddings.weight");
  const size_t n = src.model->find("roberta.embeddings.word_embeddings.weight")->numel;
  EXPECT_LT(test::rel_error(w1, w0, n), 0.2);
  // --max-len beyond the model's max_len is refused.
  o.out = dir_ + "/toolong";
  o.max_len = 64;
  EXPECT_ERROR_MENTIONS(finetune(o, false), "exceeds the model's max_len");
}

// ---------------------------------------------------------------------------------------------
// The command line: evaluate, predict, embed on the trained model
// ---------------------------------------------------------------------------------------------

using test::CliRun;
using test::run_cli;

TEST_F(ClassifyTrain, CliEvaluatePredictEmbed) {
  const std::string dir = test::temp_dir("cli");
  const std::string model = dir_ + "/run/best";
  CliRun r = run_cli(dir, "evaluate --model " + model + " --data " + dir_ + "/dev.tsv");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["accuracy"], 1.0);
  EXPECT_EQ(j["f1"], 1.0);
  EXPECT_EQ(j["count"], 64);
  EXPECT_EQ(j["confusion"].size(), 2u);
  EXPECT_NE(r.err.find("true\\pred"), std::string::npos) << r.err;
  r = run_cli(dir, "evaluate --model " + model + " --data " + dir_ + "/dev.tsv --json " + dir +
                       "/eval.json --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(read_file(dir + "/eval.json"))["accuracy"], 1.0);
  // bf16 inference classifies the separable set as well, and says so in the report; a CPU
  // without bf16 refuses it with a message that says why.
  r = run_cli(dir, "evaluate --model " + model + " --data " + dir_ + "/dev.tsv --bf16 --quiet");
  if (compute_type_supported(ComputeType::bf16)) {
    ASSERT_EQ(r.code, 0) << r.err;
    j = json::parse(r.out);
    EXPECT_EQ(j["accuracy"], 1.0);
    EXPECT_EQ(j["compute"], "bf16");
  } else {
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("bf16 needs AVX-512"), std::string::npos) << r.err;
  }

  // predict from stdin (plain lines) keeps the input order.
  r = run_cli(dir, "predict --model " + model + " --batch-size 2",
              "the movie was good\nbad plot and acting really\nit was very good film\n");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(lines, line)) {
    const json p = json::parse(line);
    labels.push_back(p["label"]);
    EXPECT_NEAR(p["probs"]["negative"].get<double>() + p["probs"]["positive"].get<double>(), 1.0,
                1e-5);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"positive", "negative", "positive"}));
  // predict from a TSV file with an id column.
  write_text(dir + "/test.tsv", "index\tsentence\n17\tbad film\n18\tgood film\n");
  r = run_cli(dir, "predict --model " + model + " --input " + dir + "/test.tsv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"id\":\"17\",\"label\":\"negative\""), std::string::npos) << r.out;

  // embed: JSON lines and safetensors.
  r = run_cli(dir, "embed --model " + model + " --pool both", "good film\nbad film\n");
  ASSERT_EQ(r.code, 0) << r.err;
  const json e = json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_EQ(e["cls"].size(), 32u);
  EXPECT_EQ(e["mean"].size(), 32u);
  r = run_cli(dir, "embed --model " + model + " --input " + dir + "/test.tsv --out " + dir +
                       "/e.safetensors --pool mean");
  ASSERT_EQ(r.code, 0) << r.err;
  SafeTensorsReader st(dir + "/e.safetensors");
  std::vector<int64_t> shape;
  st.read_f32("mean", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 32}));
  EXPECT_FALSE(st.has("cls"));

  // Errors name the problem.
  write_text(dir + "/bad.tsv", "label\tsentence\n1\tgood\n5\tbad\n");
  r = run_cli(dir, "evaluate --model " + model + " --data " + dir + "/bad.tsv");
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.err.find(dir + "/bad.tsv:3"), std::string::npos) << r.err;
  r = run_cli(dir, "evaluate --model " + model + " --data " + dir + "/bad.tsv --bad-rows skip");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("skipped 1 bad row"), std::string::npos) << r.err;
  r = run_cli(dir, "predict --model " + dir_ + "/nope");
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;
  r = run_cli(dir, "finetune --help");
  EXPECT_EQ(r.code, 0);
  for (const char* w : {"--init-from", "--train", "--dev", "--bad-rows", "--truncate", "--max-len",
                        "--epochs", "--resume", "head+tail"})
    EXPECT_NE(r.out.find(w), std::string::npos) << w;
}

// --precision int8 on every inference command: evaluate, predict and embed agree with f32 on
// the trained model (same labels, probabilities and embeddings close), --float-layers with
// every layer gives f32's embeddings exactly, a layer the model lacks is refused, and the
// training commands refuse int8 before anything runs.
TEST_F(ClassifyTrain, CliInt8OnEveryInferenceCommand) {
  LF_REQUIRE_INT8();
  const std::string dir = test::temp_dir("int8");
  const std::string model = dir_ + "/run/best";
  CliRun r = run_cli(dir, "evaluate --model " + model + " --data " + dir_ + "/dev.tsv --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const json f32 = json::parse(r.out);
  r = run_cli(dir, "evaluate --model " + model + " --data " + dir_ + "/dev.tsv --quiet "
                   "--precision int8");
  ASSERT_EQ(r.code, 0) << r.err;
  const json q = json::parse(r.out);
  EXPECT_EQ(q["compute"], "int8");
  EXPECT_EQ(q["accuracy"], f32["accuracy"]);
  EXPECT_NEAR(q["loss"].get<double>(), f32["loss"].get<double>(), 0.02);
  EXPECT_NE(q["loss"].get<double>(), f32["loss"].get<double>()) << "int8 had no effect";

  const std::string texts = "the movie was good\nbad plot and acting really\nit was very good film\n";
  const CliRun pf = run_cli(dir, "predict --model " + model, texts);
  const CliRun pq = run_cli(dir, "predict --model " + model + " --precision int8", texts);
  ASSERT_EQ(pf.code, 0) << pf.err;
  ASSERT_EQ(pq.code, 0) << pq.err;
  std::istringstream lf32(pf.out), lq(pq.out);
  std::string a, b;
  int lines = 0;
  while (std::getline(lf32, a) && std::getline(lq, b)) {
    const json ja = json::parse(a), jb = json::parse(b);
    EXPECT_EQ(ja["label"], jb["label"]);
    EXPECT_NEAR(ja["probs"]["positive"].get<double>(), jb["probs"]["positive"].get<double>(),
                0.02);
    ++lines;
  }
  EXPECT_EQ(lines, 3);

  auto embed = [&](const std::string& opts) {
    const CliRun e = run_cli(dir, "embed --model " + model + " --pool mean " + opts, texts);
    EXPECT_EQ(e.code, 0) << e.err;
    std::vector<std::vector<double>> v;
    std::istringstream in(e.out);
    std::string line;
    while (std::getline(in, line)) v.push_back(json::parse(line)["mean"].get<std::vector<double>>());
    return v;
  };
  const auto ef = embed(""), eq = embed("--precision int8"),
             eall = embed("--precision int8 --float-layers 0 1");
  ASSERT_EQ(ef.size(), 3u);
  ASSERT_EQ(eq.size(), 3u);
  EXPECT_EQ(eall, ef);
  for (size_t i = 0; i < ef.size(); ++i) {
    double dot = 0, na = 0, nb = 0;
    for (size_t j = 0; j < ef[i].size(); ++j)
      dot += ef[i][j] * eq[i][j], na += ef[i][j] * ef[i][j], nb += eq[i][j] * eq[i][j];
    EXPECT_GT(dot / std::sqrt(na * nb), 0.99) << i;
    EXPECT_NE(ef[i], eq[i]) << i;
  }
  r = run_cli(dir, "embed --model " + model + " --precision int8 --float-layers 7", texts);
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.err.find("layer 7"), std::string::npos) << r.err;

  for (const char* cmd : {"finetune --train x.tsv --out o", "pretrain --train x.txt --out o"}) {
    r = run_cli(dir, std::string(cmd) + " --precision int8");
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.err.find("int8"), std::string::npos) << cmd << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir + "/o")) << cmd;
  }
}

}  // namespace
}  // namespace lf
