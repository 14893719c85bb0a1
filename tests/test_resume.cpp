// Exact resume after kill -9: a pretraining run killed between checkpoints and continued with
// `pretrain --resume` has the same loss trajectory (bitwise: the doubles printed in
// metrics.jsonl), the same validation losses and the same final weights and optimiser state
// as the uninterrupted run; a run killed before its first checkpoint starts over cleanly; and
// a progress line averaging several steps across the interruption averages the same steps.
// The runs are separate `linformer` processes with OMP_NUM_THREADS=2.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "linformer/config.h"
#include "linformer/file_util.h"
#include "linformer/rng.h"
#include "linformer/tokenizer.h"
#include "process_util.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kBin = std::string(LF_BINARY_DIR) + "/linformer";

// Starts `linformer args...` with 2 threads, stdout+stderr into log.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {kBin};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::spawn_logged(argv, log, 2);
}
using test::wait_status;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs to completion; returns true on exit status 0.
bool run_to_end(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = spawn(args, log);
  if (pid < 0) return false;
  const int st = wait_status(pid);
  const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  EXPECT_TRUE(ok) << "linformer failed; log " << log << ":\n" << slurp(log);
  return ok;
}

// Records of metrics.jsonl (complete lines only: a killed run may leave a torn last line).
std::vector<json> metrics(const std::string& run) {
  std::vector<json> out;
  std::ifstream in(run + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: possibly torn
    try {
      out.push_back(json::parse(line));
    } catch (const json::exception&) {
      break;
    }
  }
  return out;
}

int64_t last_train_step(const std::string& run) {
  int64_t s = 0;
  for (const json& r : metrics(run))
    if (r.value("split", "") == "train") s = std::max<int64_t>(s, r["step"].get<int64_t>());
  return s;
}

// Starts a run and kills it (SIGKILL) as soon as ready(run) holds. Returns false (with a
// failure) if the run ended by itself first or did not get there within the time limit.
template <typename Ready>
bool start_and_kill(const std::vector<std::string>& args, const std::string& run,
                    const std::string& log, Ready ready, double limit_s = 60) {
  const pid_t pid = spawn(args, log);
  EXPECT_GT(pid, 0);
  if (pid <= 0) return false;
  const auto t0 = std::chrono::steady_clock::now();
  while (true) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      ADD_FAILURE() << "the run ended before it could be killed (too fast?):\n" << slurp(log);
      return false;
    }
    if (ready(run)) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit_s) {
      ::kill(pid, SIGKILL);
      wait_status(pid);
      ADD_FAILURE() << "the run did not reach the kill point in " << limit_s << " s:\n"
                    << slurp(log);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ::kill(pid, SIGKILL);
  const int st = wait_status(pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status " << st;
  return true;
}

struct Trajectory {
  std::map<int64_t, json> train, valid;  // step -> record
};

Trajectory trajectory(const std::string& run) {
  Trajectory t;
  for (const json& r : metrics(run)) {
    const int64_t step = r.at("step").get<int64_t>();
    auto& m = r.value("split", "") == "valid" ? t.valid : t.train;
    EXPECT_EQ(m.count(step), 0u) << run << ": step " << step << " logged twice";
    m[step] = r;
  }
  return t;
}

// Exact equality of the numbers that must not depend on the interruption.
void expect_same_trajectory(const std::string& ref_run, const std::string& run, int64_t steps) {
  const Trajectory a = trajectory(ref_run), b = trajectory(run);
  ASSERT_EQ(a.train.size(), static_cast<size_t>(steps));
  ASSERT_EQ(b.train.size(), static_cast<size_t>(steps)) << run;
  for (int64_t s = 1; s <= steps; ++s) {
    ASSERT_TRUE(a.train.count(s) && b.train.count(s)) << "step " << s;
    const json &x = a.train.at(s), &y = b.train.at(s);
    // Doubles printed by nlohmann::json round-trip exactly, so == is bitwise equality.
    EXPECT_EQ(x.at("loss").get<double>(), y.at("loss").get<double>()) << "train loss, step " << s;
    EXPECT_EQ(x.at("loss").dump(), y.at("loss").dump()) << "step " << s;
    EXPECT_EQ(x.at("lr").get<double>(), y.at("lr").get<double>()) << "lr, step " << s;
    EXPECT_EQ(x.at("grad_norm").get<double>(), y.at("grad_norm").get<double>())
        << "grad norm, step " << s;
  }
  ASSERT_EQ(a.valid.size(), b.valid.size());
  for (const auto& [s, x] : a.valid) {
    ASSERT_TRUE(b.valid.count(s)) << "validation at step " << s << " missing";
    EXPECT_EQ(x.at("loss").get<double>(), b.valid.at(s).at("loss").get<double>())
        << "validation loss, step " << s;
  }
  // The final model and the final checkpoint's optimiser state: byte for byte.
  EXPECT_EQ(slurp(ref_run + "/model/model.safetensors"), slurp(run + "/model/model.safetensors"))
      << "final weights differ";
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(steps));
  const std::string ck = std::string("/checkpoints/") + name;
  EXPECT_EQ(slurp(ref_run + ck + "/optimizer.safetensors"), slurp(run + ck + "/optimizer.safetensors"))
      << "final optimiser state differs";
  EXPECT_EQ(slurp(run + "/checkpoints/latest"), std::string(name) + "\n");
}

TEST(Resume, KillNineThenResumeEqualsUninterruptedRun) {
  const auto t_start = std::chrono::steady_clock::now();
  ASSERT_TRUE(fs::exists(kBin)) << kBin << " is missing: build the `linformer` target first";
  const std::string d = test::temp_dir("r");

  // Corpus: 900 lines of generated sentences; a tokenizer trained once and given to every run
  // (so the runs differ only in their interruption).
  {
    static const char* words[] = {"river", "house", "road", "garden", "train", "village", "window",
                                  "bread", "letter", "mountain", "market", "morning", "evening",
                                  "old", "young", "small", "quiet", "long", "red", "blue",
                                  "walked", "found", "opened", "watched", "carried", "the", "a",
                                  "and", "but", "with", "after", "before", "to", "of", "in"};
    std::ofstream out(d + "/corpus.txt");
    for (uint64_t i = 0; i < 900; ++i) {
      const int64_t len = 5 + static_cast<int64_t>(rng_bits(1, i, 0) % 12);
      for (int64_t w = 0; w < len; ++w)
        out << (w ? " " : "") << words[rng_bits(1, i, w + 1) % (sizeof words / sizeof *words)];
      out << ".\n";
    }
  }
  TokenizerTrainOptions to;
  to.vocab_size = 120;
  Tokenizer::train({d + "/corpus.txt"}, d + "/tok.model", to);
  // Dropout on: its random stream must resume too.
  test::write_text(d + "/config.json", R"({"max_len": 128, "d_model": 64, "n_heads": 4, "d_ff": 128,
      "n_layers": 2, "k": 32, "dropout": 0.1, "attention_dropout": 0.1})");

  const int64_t steps = 30;
  auto args = [&](const std::string& run) {
    return std::vector<std::string>{
        "pretrain", "--train", d + "/corpus.txt", "--tokenizer", d + "/tok.model", "--config",
        d + "/config.json", "--out", run, "--steps", std::to_string(steps), "--batch-size", "2",
        "--grad-accum", "2", "--lr", "1e-3", "--warmup-steps", "5", "--log-every", "1",
        "--checkpoint-every", "5", "--eval-every", "10", "--eval-batches", "2", "--seed", "3"};
  };
  const std::vector<std::string> resume_args_a = {"pretrain", "--out", d + "/run_a", "--resume"};
  const std::vector<std::string> resume_args_b = {"pretrain", "--out", d + "/run_b", "--resume"};

  // 1. The uninterrupted reference.
  ASSERT_TRUE(run_to_end(args(d + "/ref"), d + "/ref.log"));
  ASSERT_EQ(last_train_step(d + "/ref"), steps);
  // The summary line gives the time with its unit.
  EXPECT_TRUE(std::regex_search(slurp(d + "/ref.log"),
                                std::regex("pretrain: 30 steps in [0-9]+\\.[0-9] s, [0-9]+ tokens/s, "
                                           "validation loss [0-9.]+, perplexity [0-9.]+\n")))
      << slurp(d + "/ref.log");
  // Resuming a finished run runs nothing, says so, and leaves the model as it was (no
  // validation figures: none were measured).
  {
    const std::string model_before = slurp(d + "/ref/model/model.safetensors");
    ASSERT_TRUE(run_to_end({"pretrain", "--out", d + "/ref", "--resume"}, d + "/ref2.log"));
    const std::string log = slurp(d + "/ref2.log");
    EXPECT_NE(log.find("had already finished its 30 steps; nothing ran"), std::string::npos) << log;
    EXPECT_EQ(log.find("validation loss"), std::string::npos) << log;
    EXPECT_EQ(slurp(d + "/ref/model/model.safetensors"), model_before);
    EXPECT_EQ(last_train_step(d + "/ref"), steps);
  }

  // 2. Killed between checkpoints (after the step-5 checkpoint, at step >= 7), then resumed.
  const std::string run_a = d + "/run_a";
  ASSERT_TRUE(start_and_kill(args(run_a), run_a, d + "/a1.log", [&](const std::string& run) {
    return fs::exists(run + "/checkpoints/latest") && last_train_step(run) >= 7;
  }));
  const int64_t killed_at = last_train_step(run_a);
  const std::string latest = slurp(run_a + "/checkpoints/latest");
  std::printf("run_a killed after step %lld (latest checkpoint %s)\n",
              static_cast<long long>(killed_at), latest.c_str());
  EXPECT_LT(killed_at, steps) << "the run finished before the kill";
  ASSERT_TRUE(run_to_end(resume_args_a, d + "/a2.log"));
  EXPECT_NE(slurp(d + "/a2.log").find("resume: continuing from"), std::string::npos)
      << slurp(d + "/a2.log");
  expect_same_trajectory(d + "/ref", run_a, steps);

  // 3. Killed before its first checkpoint: --resume starts over from step 0. The kill has to
  // land in the few steps before the step-5 checkpoint; if a busy machine delays it past the
  // checkpoint, the attempt is repeated in a fresh folder.
  const std::string run_b = d + "/run_b";
  bool before_checkpoint = false;
  for (int attempt = 0; attempt < 3 && !before_checkpoint; ++attempt) {
    fs::remove_all(run_b);
    ASSERT_TRUE(start_and_kill(args(run_b), run_b, d + "/b1.log", [&](const std::string& run) {
      return last_train_step(run) >= 1;
    }));
    before_checkpoint = !fs::exists(run_b + "/checkpoints/latest");
  }
  ASSERT_TRUE(before_checkpoint) << "could not kill the run before its first checkpoint";
  ASSERT_TRUE(fs::exists(run_b + "/train_args.json"));
  ASSERT_TRUE(run_to_end(resume_args_b, d + "/b2.log"));
  EXPECT_NE(slurp(d + "/b2.log").find("no checkpoint yet"), std::string::npos)
      << slurp(d + "/b2.log");
  expect_same_trajectory(d + "/ref", run_b, steps);

  // 4. Progress lines averaged over several steps (--log-every 10) with a checkpoint inside the
  // window (every 5): killed after the step-5 checkpoint, resumed; each logged loss must still
  // be the mean of its 10 steps, summed in step order as the trainer does, taken from the
  // per-step losses of the reference (where --log-every 1 logs each step's loss itself).
  const std::string run_c = d + "/run_c";
  std::vector<std::string> args_c = args(run_c);
  for (size_t i = 0; i + 1 < args_c.size(); ++i)
    if (args_c[i] == "--log-every") args_c[i + 1] = "10";
  ASSERT_TRUE(start_and_kill(args_c, run_c, d + "/c1.log", [&](const std::string& run) {
    return fs::exists(run + "/checkpoints/latest");
  }));
  ASSERT_TRUE(run_to_end({"pretrain", "--out", run_c, "--resume"}, d + "/c2.log"));
  {
    const Trajectory ref = trajectory(d + "/ref"), got = trajectory(run_c);
    ASSERT_EQ(got.train.size(), 3u);
    for (int64_t end = 10; end <= steps; end += 10) {
      double sum = 0;
      for (int64_t s = end - 9; s <= end; ++s) sum += ref.train.at(s).at("loss").get<double>();
      ASSERT_TRUE(got.train.count(end)) << "no record for step " << end;
      EXPECT_EQ(got.train.at(end).at("loss").get<double>(), sum / 10)
          << "mean train loss logged at step " << end << " after a resume at step 5";
    }
    for (const auto& [s, x] : ref.valid)
      EXPECT_EQ(x.at("loss").get<double>(), got.valid.at(s).at("loss").get<double>());
    EXPECT_EQ(slurp(d + "/ref/model/model.safetensors"), slurp(run_c + "/model/model.safetensors"));
  }

  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("resume test took %.1f s\n", secs);
}

// A tiny pretraining in folder d (its corpus and config written there): the arguments of its
// first call, which writes into run and ends after `steps` steps.
std::vector<std::string> tiny_pretraining(const std::string& d, const std::string& run, int steps) {
  {
    std::ofstream out(d + "/corpus.txt");
    for (int i = 0; i < 200; ++i)
      out << "the river ran past the old mill and the " << i << " houses.\n";
  }
  test::write_text(d + "/config.json", R"({"max_len": 32, "d_model": 16, "n_heads": 2, "d_ff": 32,
      "n_layers": 1, "k": 8})");
  return {"pretrain",
          "--train",
          d + "/corpus.txt",
          "--vocab-size",
          "60",
          "--config",
          d + "/config.json",
          "--out",
          run,
          "--steps",
          std::to_string(steps),
          "--batch-size",
          "2",
          "--log-every",
          "1",
          "--eval-every",
          "0"};
}

// --time-limit is the call's: a run stopped by a tiny limit, resumed without one, runs to the
// end; resumed with one, it stops on it.
TEST(Resume, ATimeLimitIsTheCallsNotTheStoredOne) {
  ASSERT_TRUE(fs::exists(kBin));
  const std::string d = test::temp_dir("r");
  const std::string run = d + "/run";
  std::vector<std::string> first = tiny_pretraining(d, run, 6);
  first.insert(first.end(), {"--time-limit", "1e-9"});
  ASSERT_TRUE(run_to_end(first, d + "/log1"));
  EXPECT_EQ(last_train_step(run), 1) << slurp(d + "/log1");
  ASSERT_TRUE(
      run_to_end({"pretrain", "--out", run, "--resume", "--time-limit", "1e-9"}, d + "/log2"));
  EXPECT_EQ(last_train_step(run), 2) << slurp(d + "/log2");
  ASSERT_TRUE(run_to_end({"pretrain", "--out", run, "--resume"}, d + "/log3"));
  EXPECT_EQ(last_train_step(run), 6) << slurp(d + "/log3");
}

// A precision given to --resume holds for that call: a run begun in f32 and resumed with
// --bf16 continues in bf16 (different weights, said on stderr); resumed with --precision f32
// or with none, it is the same run bit for bit.
TEST(Resume, APrecisionGivenToResumeHoldsForThatCall) {
  ASSERT_TRUE(fs::exists(kBin));
  LF_REQUIRE_BF16();
  const std::string d = test::temp_dir("r");
  std::vector<std::string> first = tiny_pretraining(d, d + "/run", 5);
  first.insert(first.end(), {"--precision", "f32", "--time-limit", "1e-9"});
  ASSERT_TRUE(run_to_end(first, d + "/log0"));
  ASSERT_EQ(last_train_step(d + "/run"), 1);
  const std::vector<std::pair<std::string, std::vector<std::string>>> calls = {
      {"none", {}}, {"f32", {"--precision", "f32"}}, {"bf16", {"--bf16"}}};
  std::map<std::string, std::string> weights, logs;
  for (const auto& [name, extra] : calls) {
    const std::string run = d + "/" + name;
    fs::copy(d + "/run", run, fs::copy_options::recursive);
    std::vector<std::string> args = {"pretrain", "--out", run, "--resume"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(run_to_end(args, d + "/" + name + ".log"));
    EXPECT_EQ(last_train_step(run), 5);
    weights[name] = slurp(run + "/model/model.safetensors");
    logs[name] = slurp(d + "/" + name + ".log");
    ASSERT_FALSE(weights[name].empty()) << run;
  }
  EXPECT_TRUE(weights["none"] == weights["f32"]) << "a resume given f32 is not the plain resume";
  EXPECT_FALSE(weights["none"] == weights["bf16"]) << "a resume given --bf16 trained in f32";
  EXPECT_NE(logs["bf16"].find("this call trains in bf16 (the run began in f32)"), std::string::npos)
      << logs["bf16"];
  EXPECT_EQ(logs["none"].find("this call trains in"), std::string::npos) << logs["none"];
}

// SIGTERM and SIGINT stop a run after the current step with a checkpoint at that step, said on
// stderr with the resume command, exit 128 + the signal; --resume continues from there.
TEST(Resume, ASignalStopsAfterTheStepWithACheckpoint) {
  ASSERT_TRUE(fs::exists(kBin));
  for (const int sig : {SIGTERM, SIGINT}) {
    const std::string d = test::temp_dir(sig == SIGTERM ? "term" : "int"), run = d + "/run";
    const pid_t pid = spawn(tiny_pretraining(d, run, 1000000), d + "/log");
    ASSERT_GT(pid, 0);
    const auto t0 = std::chrono::steady_clock::now();
    while (last_train_step(run) < 3 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(pid, sig);
    int st = 0;  // the run must end by itself within 60 s; else it is killed and fails
    const auto t1 = std::chrono::steady_clock::now();
    while (::waitpid(pid, &st, WNOHANG) != pid) {
      if (std::chrono::steady_clock::now() - t1 > std::chrono::seconds(60)) {
        ::kill(pid, SIGKILL);
        wait_status(pid);
        FAIL() << "the run went on after the signal:\n" << slurp(d + "/log");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const std::string log = slurp(d + "/log");
    ASSERT_TRUE(WIFEXITED(st)) << "status " << st << "\n" << log;
    EXPECT_EQ(WEXITSTATUS(st), 128 + sig) << log;
    const int64_t step = last_train_step(run);
    ASSERT_GE(step, 3) << log;
    char name[32];
    std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
    EXPECT_EQ(slurp(run + "/checkpoints/latest").substr(0, 13), name) << log;
    EXPECT_NE(log.find(std::string("stopped by ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                       " at step " + std::to_string(step) + " with a checkpoint"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("linformer pretrain --out " + run + " --resume"), std::string::npos) << log;
    ASSERT_TRUE(
        run_to_end({"pretrain", "--out", run, "--resume", "--time-limit", "1e-9"}, d + "/log2"));
    EXPECT_EQ(last_train_step(run), step + 1) << slurp(d + "/log2");
  }
}

TEST(Resume, ResumeWithoutARunFolderIsAClearError) {
  ASSERT_TRUE(fs::exists(kBin));
  const std::string d = test::temp_dir("r");
  const pid_t pid = spawn({"pretrain", "--out", d + "/nothing", "--resume"}, d + "/log");
  ASSERT_GT(pid, 0);
  const int st = wait_status(pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_NE(WEXITSTATUS(st), 0);
  EXPECT_NE(slurp(d + "/log").find("train_args.json"), std::string::npos) << slurp(d + "/log");
}

}  // namespace
}  // namespace lf
