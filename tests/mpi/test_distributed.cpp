// Data-parallel training (docs/distributed.md), end to end with the `linformer`
// program: `mpirun -np 2` (one thread per rank, TCP on loopback) against one process, without
// mpirun, that runs twice the per-rank batch with the same seed. Each of 20+ steps must give
// the same training loss (relative 1e-5) and the final weights must agree (1e-5), for
// pretraining and finetuning, with dropout and gradient accumulation. A rank killed mid-run
// ends the job with a non-zero status and a message, leaves the last checkpoint intact, and
// one process then continues the run to the same end as an uninterrupted 2-rank run.
// Built and registered only when linformer is built with MPI and mpirun exists.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "linformer/config.h"
#include "linformer/rng.h"
#include "linformer/safetensors.h"
#include "linformer/tokenizer.h"
#include "../process_util.h"


namespace lf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kBin = std::string(LF_BINARY_DIR) + "/linformer";
const std::string kMpirun = LF_MPIRUN;
constexpr double kTol = 1e-5;

std::string temp_dir(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path p = fs::temp_directory_path() /
                     ("lf_test_" + std::string(info->test_suite_name()) + "_" + info->name() +
                      "_" + tag);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `mpirun ... -np N linformer` as argv: one thread per rank (OMP_NUM_THREADS is passed on),
// TCP on loopback only, no core binding (ctest may run two jobs at once on a small machine).
// bucket_kb > 0: gradient buckets of that size (LINFORMER_GRAD_BUCKET_KB), so that the tiny
// model's gradients go in many buckets instead of one.
std::vector<std::string> mpirun(int np, int bucket_kb = 0) {
  std::vector<std::string> a = {kMpirun};
  if (::geteuid() == 0) a.push_back("--allow-run-as-root");
  for (const char* s : {"--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", "--mca",
                        "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", "-x",
                        "OMP_NUM_THREADS=1", "-x", "OMP_WAIT_POLICY=PASSIVE"})
    a.push_back(s);
  if (bucket_kb > 0) {
    a.push_back("-x");
    a.push_back("LINFORMER_GRAD_BUCKET_KB=" + std::to_string(bucket_kb));
  }
  a.push_back("-np");
  a.push_back(std::to_string(np));
  a.push_back(kBin);
  return a;
}

std::vector<std::string> one_process() { return {kBin}; }

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Starts argv with one thread, stdout and stderr into log.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  return test::spawn_logged(args, log, 1);
}
using test::wait_status;

bool run_ok(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = spawn(args, log);
  if (pid < 0) return false;
  const int st = wait_status(pid);
  const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  EXPECT_TRUE(ok) << "failed: " << args[0] << " ...; log " << log << ":\n" << slurp(log);
  return ok;
}

// metrics.jsonl records of a split (complete lines only).
std::vector<json> records(const std::string& run, const std::string& split) {
  std::vector<json> out;
  std::ifstream in(run + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;
    try {
      json r = json::parse(line);
      if (r.value("split", "") == split) out.push_back(r);
    } catch (const json::exception&) {
      break;
    }
  }
  return out;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

// The training loss of every step (log every step) and the other splits' losses agree; a's
// training records name expect_ranks_a ranks (0: not checked).
void expect_same_losses(const std::string& a, const std::string& b, int64_t steps,
                        const std::string& eval_split, int expect_ranks_a) {
  const std::vector<json> ta = records(a, "train"), tb = records(b, "train");
  ASSERT_EQ(static_cast<int64_t>(ta.size()), steps) << a;
  ASSERT_EQ(static_cast<int64_t>(tb.size()), steps) << b;
  double worst = 0;
  for (int64_t i = 0; i < steps; ++i) {
    ASSERT_EQ(ta[i]["step"], tb[i]["step"]);
    const double la = ta[i]["loss"].get<double>(), lb = tb[i]["loss"].get<double>();
    EXPECT_LE(rel(la, lb), kTol) << "step " << ta[i]["step"] << ": " << la << " vs " << lb;
    worst = std::max(worst, rel(la, lb));
    if (expect_ranks_a > 0) {
      EXPECT_EQ(ta[i].value("ranks", 1), expect_ranks_a) << ta[i].dump();
    }
  }
  // Every step's loss moved: the comparison is not of constants.
  EXPECT_NE(ta.front()["loss"].get<double>(), ta.back()["loss"].get<double>());
  const std::vector<json> ea = records(a, eval_split), eb = records(b, eval_split);
  ASSERT_EQ(ea.size(), eb.size());
  ASSERT_FALSE(ea.empty());
  for (size_t i = 0; i < ea.size(); ++i)
    EXPECT_LE(rel(ea[i]["loss"].get<double>(), eb[i]["loss"].get<double>()), kTol)
        << ea[i].dump() << " vs " << eb[i].dump();
  std::printf("%lld steps: largest relative difference of the training losses %.2e\n",
              static_cast<long long>(steps), worst);
}

// Every tensor of two weight files agrees within kTol (relative to max(1, |w|)).
void expect_same_weights(const std::string& a, const std::string& b) {
  const SafeTensorsReader ra(a), rb(b);
  ASSERT_EQ(ra.names(), rb.names());
  double worst = 0;
  size_t n = 0;
  for (const std::string& name : ra.names()) {
    const std::vector<float> x = ra.read_f32(name), y = rb.read_f32(name);
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = std::abs(double(x[i]) - y[i]) / std::max(1.0, std::abs(double(y[i])));
      if (!(d <= kTol)) {
        ADD_FAILURE() << name << "[" << i << "]: " << x[i] << " vs " << y[i];
        return;
      }
      worst = std::max(worst, d);
    }
    n += x.size();
  }
  std::printf("%zu weights: largest difference %.2e\n", n, worst);
}

// Files of a run folder (relative paths), without the token cache.
std::set<std::string> files_of(const std::string& run) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(run)) {
    const std::string rel_path = fs::relative(e.path(), run).string();
    if (rel_path.rfind("cache", 0) != 0) out.insert(rel_path);
  }
  return out;
}

// The generated corpus (sentences of a small vocabulary), its tokenizer and model config.
struct Fixture {
  std::string dir, corpus, tok, config;
};

Fixture make_fixture(const std::string& dir, float dropout) {
  static const char* words[] = {"river", "house", "road", "garden", "train", "village", "window",
                                "bread", "letter", "mountain", "market", "morning", "evening",
                                "old", "young", "small", "quiet", "long", "red", "blue",
                                "walked", "found", "opened", "watched", "carried", "the", "a",
                                "and", "but", "with", "after", "before", "to", "of", "in"};
  constexpr size_t kWords = sizeof words / sizeof *words;
  Fixture f{dir, dir + "/corpus.txt", dir + "/tok.model", dir + "/config.json"};
  {
    std::ofstream out(f.corpus);
    for (uint64_t i = 0; i < 700; ++i) {
      const int64_t len = 4 + static_cast<int64_t>(rng_bits(5, i, 0) % 14);
      for (int64_t w = 0; w < len; ++w) out << (w ? " " : "") << words[rng_bits(5, i, w + 1) % kWords];
      out << ".\n";
    }
  }
  TokenizerTrainOptions to;
  to.vocab_size = 100;
  Tokenizer::train({f.corpus}, f.tok, to);
  Config cfg = Config::from_json(R"({"max_len": 64, "d_model": 32, "n_heads": 4, "d_ff": 64,
      "n_layers": 3, "attention": "linformer", "k": 16})");
  cfg.dropout = cfg.attention_dropout = dropout;
  cfg.save(f.config);
  return f;
}

std::vector<std::string> pretrain_args(const Fixture& f, const std::string& run, int64_t steps,
                                       int64_t batch, int64_t accum, int64_t eval_every = 8) {
  return {"pretrain", "--train", f.corpus, "--tokenizer", f.tok, "--config", f.config, "--out",
          run, "--steps", std::to_string(steps), "--batch-size", std::to_string(batch),
          "--grad-accum", std::to_string(accum), "--lr", "2e-3", "--warmup-steps", "4",
          "--log-every", "1", "--eval-every", std::to_string(eval_every), "--eval-batches", "3",
          "--checkpoint-every", "10", "--seed", "11"};
}

void pretrain_two_ranks_against_one(float dropout, int64_t accum, int bucket_kb) {
  const std::string d = temp_dir("p");
  const Fixture f = make_fixture(d, dropout);
  const int64_t steps = 24;
  ASSERT_TRUE(run_ok(mpirun(2, bucket_kb) + pretrain_args(f, d + "/two", steps, 2, accum),
                     d + "/two.log"));
  ASSERT_TRUE(run_ok(one_process() + pretrain_args(f, d + "/one", steps, 4, accum),
                     d + "/one.log"));
  const std::string log = slurp(d + "/two.log");
  EXPECT_NE(log.find("data-parallel on 2 ranks"), std::string::npos) << log;
  EXPECT_NE(log.find("comm wait"), std::string::npos) << log;
  expect_same_losses(d + "/two", d + "/one", steps, "valid", 2);
  expect_same_weights(d + "/two/model/model.safetensors", d + "/one/model/model.safetensors");
  expect_same_weights(d + "/two/checkpoints/step-00000024/optimizer.safetensors",
                      d + "/one/checkpoints/step-00000024/optimizer.safetensors");
  // Rank 0 alone wrote the run folder, the same files as one process writes.
  EXPECT_EQ(files_of(d + "/two"), files_of(d + "/one"));
  // Progress lines come from rank 0 only: one line per step.
  size_t lines = 0;
  for (size_t p = log.find("step 1/"); p != std::string::npos; p = log.find("step 1/", p + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << log;
}

TEST(Distributed, PretrainTwoRanksEqualOneRank) { pretrain_two_ranks_against_one(0.f, 1, 0); }

// Dropout on (its masks are drawn by global sample index), two micro-batches per step (the
// gradients are summed over the ranks once, during the second backward), and buckets of
// 16 KB: one per encoder layer, started as backward completes each.
TEST(Distributed, PretrainDropoutGradAccumTwoRanksEqualOneRank) {
  pretrain_two_ranks_against_one(0.1f, 2, 16);
}

// Finetuning from scratch with dropout: 39 examples in micro-batches of 6 (2 ranks x 3), so
// each epoch's last micro-batch holds 3 examples and rank 1's slice of it is empty.
TEST(Distributed, FinetuneTwoRanksEqualOneRank) {
  const std::string d = temp_dir("f");
  const Fixture f = make_fixture(d, 0.f);
  auto tsv = [&](const std::string& path, uint64_t seed, int n) {
    std::ofstream out(path);
    out << "sentence\tlabel\n";
    static const char* words[] = {"river", "house", "red", "blue", "old", "quiet", "garden",
                                  "bread", "walked", "the", "a", "market", "letter"};
    for (int i = 0; i < n; ++i) {
      const int len = 2 + static_cast<int>(rng_bits(seed, i, 0) % 12);
      bool red = false;
      for (int w = 0; w < len; ++w) {
        const char* word = words[rng_bits(seed, i, w + 1) % 13];
        red = red || std::strcmp(word, "red") == 0;
        out << (w ? " " : "") << word;
      }
      out << "\t" << (red ? 1 : 0) << "\n";
    }
  };
  tsv(d + "/train.tsv", 21, 39);
  tsv(d + "/dev.tsv", 22, 17);
  auto args = [&](const std::string& run, int64_t batch) {
    return std::vector<std::string>{
        "finetune", "--train", d + "/train.tsv", "--dev", d + "/dev.tsv", "--config", f.config,
        "--tokenizer", f.tok, "--out", run, "--epochs", "3", "--batch-size",
        std::to_string(batch), "--max-len", "32", "--lr", "1e-3", "--dropout", "0.1",
        "--log-every", "1", "--eval-batch-size", "5", "--seed", "4"};
  };
  ASSERT_TRUE(run_ok(mpirun(2) + args(d + "/two", 3), d + "/two.log"));
  ASSERT_TRUE(run_ok(one_process() + args(d + "/one", 6), d + "/one.log"));
  expect_same_losses(d + "/two", d + "/one", 21, "dev", 2);
  const std::vector<json> da = records(d + "/two", "dev"), db = records(d + "/one", "dev");
  for (size_t i = 0; i < da.size(); ++i) EXPECT_EQ(da[i]["accuracy"], db[i]["accuracy"]);
  expect_same_weights(d + "/two/model/model.safetensors", d + "/one/model/model.safetensors");
  EXPECT_EQ(files_of(d + "/two"), files_of(d + "/one"));
}

// Process ids of the job's ranks (children of mpirun), by rank.
std::vector<pid_t> ranks_of(pid_t mpirun_pid, int np) {
  std::vector<pid_t> out(np, -1);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(e.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2 || ppid != mpirun_pid)
      continue;
    const std::string env = slurp(e.path().string() + "/environ");
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    const size_t at = env.find(key);
    if (at == std::string::npos) continue;
    const int r = std::atoi(env.c_str() + at + key.size());
    if (r >= 0 && r < np) out[r] = std::stoi(name);
  }
  return out;
}

int64_t last_train_step(const std::string& run) {
  const std::vector<json> t = records(run, "train");
  return t.empty() ? 0 : t.back()["step"].get<int64_t>();
}

// kill -9 of rank 1 after the first checkpoint: the job ends (non-zero status, a message
// naming the killed rank), the latest checkpoint is complete and loads, and one process
// resumes the run to the same end as an uninterrupted 2-rank run.
TEST(Distributed, KilledRankEndsJobAndOneProcessResumes) {
  const std::string d = temp_dir("k");
  const Fixture f = make_fixture(d, 0.1f);
  const int64_t steps = 600;
  auto args = [&](const std::string& run) { return pretrain_args(f, run, steps, 2, 1, 100); };
  ASSERT_TRUE(run_ok(mpirun(2) + args(d + "/ref"), d + "/ref.log"));

  const std::string run = d + "/run";
  const pid_t job = spawn(mpirun(2) + args(run), d + "/job.log");
  ASSERT_GT(job, 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> ranks;
  while (true) {
    int st = 0;
    ASSERT_NE(::waitpid(job, &st, WNOHANG), job)
        << "the job ended before the kill:\n" << slurp(d + "/job.log");
    if (fs::exists(run + "/checkpoints/latest")) {
      ranks = ranks_of(job, 2);
      if (ranks[1] > 0) break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > 120) {
      ::kill(-job, SIGKILL);
      wait_status(job);
      FAIL() << "no checkpoint within 120 s:\n" << slurp(d + "/job.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(::kill(ranks[1], SIGKILL), 0);
  const int st = wait_status(job);
  const std::string log = slurp(d + "/job.log");
  std::printf("killed rank 1 (pid %d) after step %lld; mpirun's status %d\n", ranks[1],
              static_cast<long long>(last_train_step(run)), st);
  EXPECT_TRUE(!WIFEXITED(st) || WEXITSTATUS(st) != 0) << log;
  EXPECT_LT(last_train_step(run), steps) << "the run finished before the kill";
  // Open MPI's message names the rank that died.
  EXPECT_NE(log.find("rank 1"), std::string::npos) << log;
  EXPECT_NE(log.find("signal 9"), std::string::npos) << log;
  // The latest checkpoint is complete; nothing half-written replaced it.
  const std::string latest = slurp(run + "/checkpoints/latest");
  const std::string ck = run + "/checkpoints/" + latest.substr(0, latest.find('\n'));
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json",
                           "config.json"})
    EXPECT_TRUE(fs::exists(ck + "/" + file)) << ck << "/" << file;
  // It loads: `linformer info` reads the weights.
  ASSERT_TRUE(run_ok({kBin, "info", "--model", ck}, d + "/info.log"));

  // One process: the run's micro-batch of 2 ranks x 2 sequences, all on one rank.
  ASSERT_TRUE(run_ok(one_process() + std::vector<std::string>{"pretrain", "--out", run,
                                                              "--resume"},
                     d + "/resume.log"));
  const std::string rlog = slurp(d + "/resume.log");
  EXPECT_NE(rlog.find("split over 1 rank(s) x 4"), std::string::npos) << rlog;
  EXPECT_NE(rlog.find("resume: continuing from"), std::string::npos) << rlog;
  ASSERT_EQ(last_train_step(run), steps);
  expect_same_losses(run, d + "/ref", steps, "valid", 0);
  expect_same_weights(run + "/model/model.safetensors", d + "/ref/model/model.safetensors");
}

// A run resumed on a number of ranks that does not divide its micro-batch is refused.
TEST(Distributed, ResumeOnRanksThatDoNotDivideTheBatchIsRefused) {
  const std::string d = temp_dir("r");
  const Fixture f = make_fixture(d, 0.f);
  ASSERT_TRUE(run_ok(one_process() + pretrain_args(f, d + "/run", 10, 3, 1), d + "/a.log"));
  const pid_t pid =
      spawn(mpirun(2) + std::vector<std::string>{"pretrain", "--out", d + "/run", "--resume"},
            d + "/b.log");
  const int st = wait_status(pid);
  const std::string log = slurp(d + "/b.log");
  EXPECT_TRUE(!WIFEXITED(st) || WEXITSTATUS(st) != 0) << log;
  EXPECT_NE(log.find("cannot be split evenly over 2 ranks"), std::string::npos) << log;
}

}  // namespace
}  // namespace lf
