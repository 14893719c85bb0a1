// `linformer bench --train` on a tiny configuration (figures sane, FLOPs equal to a count made
// here from the shapes, outputs that parse), and the attribution rules of the phase timers.
// No wall-clock assertions: only lower bounds that hold however slow the machine is.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/profile.h"
#include "layers/attention_path.h"
#include "linformer/bench.h"
#include "test_util.h"

namespace lf {
namespace {

using nlohmann::json;

// The configuration of the runs below.
constexpr int64_t kL = 2, kD = 32, kH = 2, kF = 48, kV = 101, kN = 32, kK = 8, kB = 2;
const std::string kArgs =
    "bench --train --layers 2 --d-model 32 --heads 2 --d-ff 48 --vocab 101 --n 32 --k 8 "
    "--batch 2 --warmup 1 --reps 2 --attention standard linformer --sharing headwise";

// Labelled rows per step: round(15%) of the n - 2 inner positions of every sequence.
double masked_per_step() { return static_cast<double>(kB * std::lround(0.15 * (kN - 2))); }

// Matrix-product FLOPs of one step, counted from the shapes: per layer and sequence the Q and
// output maps and the FFN on n rows; standard: K/V maps on n rows, scores and weighted values
// n x n; Linformer headwise: E X and F X (k x n by n x D), K/V maps on k rows, n x k attention.
// The MLM head (dense D x D, output D x V) on the labelled rows. Backward: 2x the forward.
double expected_step_flops(bool linformer) {
  const double D = kD, F = kF, n = kN, k = kK;
  double layer = 2 * (2 * n * D * D) + 2 * (2 * n * D * F);
  if (linformer)
    layer += 2 * (2 * k * n * D) + 2 * (2 * k * D * D) + 2 * (2 * n * k * D);
  else
    layer += 2 * (2 * n * D * D) + 2 * (2 * n * n * D);
  const double head = 2 * D * D + 2 * D * kV;
  return 3 * (kB * kL * layer + masked_per_step() * head);
}

// The model bench --train builds from kArgs, as a config file would say it.
int64_t expected_params(bool linformer) {
  return Config::from_json(R"({"vocab_size": 101, "max_len": 32, "d_model": 32, "n_heads": 2,
                               "d_ff": 48, "n_layers": 2, "position_offset": 2, "k": [8],
                               "sharing": "headwise", "attention": ")" +
                           std::string(linformer ? "linformer" : "standard") + "\"}")
      .num_parameters();
}

size_t count(const std::string& s, char c) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), c));
}

TEST(BenchTrain, TinyConfigFiguresParseAndAreSane) {
  const std::string dir = test::temp_dir("bench");
  const test::CliRun r = test::run_cli(dir, kArgs + " --out-dir '" + dir + "/out'");
  ASSERT_EQ(r.code, 0) << test::show(r);
  const json doc = json::parse(read_file(dir + "/out/bench_train.json"));
  const json& meta = doc.at("meta");
  EXPECT_EQ(meta.at("mode"), "train");
  EXPECT_GT(meta.at("peak_gflops").get<double>(), 0.0);
  EXPECT_GE(meta.at("threads").get<int>(), 1);
  ASSERT_EQ(doc.at("runs").size(), 2u);
  for (const json& run : doc.at("runs")) {
    const bool lin = run.at("attention") == "linformer";
    SCOPED_TRACE(run.dump(1));
    ASSERT_EQ(run.at("status"), "ok");
    EXPECT_EQ(run.at("n").get<int64_t>(), kN);
    EXPECT_EQ(run.at("tokens_per_step").get<int64_t>(), kB * kN);
    EXPECT_EQ(run.at("params").get<int64_t>(), expected_params(lin));
    const double step = run.at("seconds_per_step").get<double>();
    EXPECT_GT(step, 0.0);
    EXPECT_GT(run.at("tokens_per_second").get<double>(), 0.0);
    EXPECT_NEAR(run.at("tokens_per_second").get<double>() * step, kB * kN, 1e-6 * kB * kN);
    ASSERT_EQ(run.at("step_seconds").size(), 2u);
    for (const json& s : run.at("step_seconds")) EXPECT_GT(s.get<double>(), 0.0);
    EXPECT_EQ(run.at("masked_per_step").get<double>(), masked_per_step());
    // The FLOP count equals the one made here, and the product timers saw exactly as many.
    EXPECT_DOUBLE_EQ(run.at("flops_per_step").get<double>(), expected_step_flops(lin));
    EXPECT_DOUBLE_EQ(run.at("matmul_flops_counted").get<double>(), expected_step_flops(lin));
    EXPECT_NEAR(run.at("gflops").get<double>(), expected_step_flops(lin) / step / 1e9,
                1e-9 * run.at("gflops").get<double>());
    EXPECT_GT(run.at("peak_gflops_now").get<double>(), 0.0);
    EXPECT_GT(run.at("peak_rss_bytes").get<double>(), 0.0);
    EXPECT_GT(run.at("engine_bytes").get<double>(), 0.0);
    // An untrained model predicts about uniformly: loss near ln V.
    EXPECT_NEAR(run.at("final_loss").get<double>(), std::log(static_cast<double>(kV)), 0.5);
    // Phases: all present, none negative, together no more than the step.
    const json& ph = run.at("phases");
    double named = 0;
    for (const char* p : {"matmul", "attention", "elementwise", "optimizer", "data"}) {
      ASSERT_TRUE(ph.contains(p)) << p;
      EXPECT_GE(ph[p].at("seconds").get<double>(), 0.0) << p;
      EXPECT_GT(ph[p].at("calls").get<double>(), 0.0) << p;
      named += ph[p].at("seconds").get<double>();
    }
    EXPECT_LE(named, step * (1 + 1e-9));
    ASSERT_TRUE(ph.contains("other"));
    EXPECT_NEAR(named + ph["other"].at("seconds").get<double>(), step, 1e-9 + 1e-9 * step);
  }
  // Markdown on stdout, the same in bench_train.md, and again from the JSON alone.
  for (const char* phrase : {"# Training speed", "| standard | 32 | - | 2 |",
                             "| linformer | 32 | 8 | 2 |", "## Where the time goes"})
    EXPECT_NE(r.out.find(phrase), std::string::npos) << phrase << "\n" << r.out;
  EXPECT_EQ(read_file(dir + "/out/bench_train.md"), r.out);
  const test::CliRun again =
      test::run_cli(dir, "bench --from-json '" + dir + "/out/bench_train.json'");
  ASSERT_EQ(again.code, 0) << test::show(again);
  EXPECT_EQ(again.out, r.out);
  // CSV: a header and a row per run, with as many fields.
  std::istringstream csv(read_file(dir + "/out/bench_train.csv"));
  std::string header, line;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_EQ(header.rfind("attention,n,k,", 0), 0u) << header;
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    EXPECT_EQ(count(line, ','), count(header, ',')) << line;
    EXPECT_NE(line.find(",ok"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, 2);
}

TEST(BenchTrain, RefusesOptionsOfTheOtherMode) {
  const std::string dir = test::temp_dir("bench");
  test::CliRun r = test::run_cli(dir, "bench --train --attention tiled --n 32 --k 8");
  EXPECT_NE(r.code, 0) << test::show(r);
  EXPECT_NE(r.err.find("inference variant"), std::string::npos) << test::show(r);
  r = test::run_cli(dir, "bench --train --quick");
  EXPECT_NE(r.code, 0) << test::show(r);
  EXPECT_NE(r.err.find("--quick"), std::string::npos) << test::show(r);
  r = test::run_cli(dir, "bench --batch 4 --n 512");
  EXPECT_NE(r.code, 0) << test::show(r);
  EXPECT_NE(r.err.find("--train"), std::string::npos) << test::show(r);
}

// bench's attention choices come from the registry: every inference way of every kind is a
// choice that selects that way, and every variant of a projected kind is reachable through
// --attention, --sharing and --projection.
TEST(BenchAttention, ChoicesAreTheRegistrysKindsAndWays) {
  size_t ways = 0;
  for (const AttentionVariant& v : attention_variants(Config{})) {
    const AttentionPath& p = attention_path(v.cfg);
    for (const InferenceWay& w : p.inference_ways()) {
      const std::string name = *w.name ? w.name : to_string(v.cfg.attention);
      const bench::AttentionChoice& c = bench::attention_choice(name);
      EXPECT_EQ(c.attention, v.cfg.attention) << name;
      EXPECT_EQ(c.exact, w.exact) << name;
      EXPECT_EQ(&attention_path(v.cfg, c.exact), &p.inference_variant(w.exact)) << name;
      ++ways;
    }
    const bench::AttentionChoice& c = bench::attention_choice(to_string(v.cfg.attention));
    EXPECT_TRUE(c.trains()) << v.name;
    EXPECT_EQ(c.projected, p.projected_length(v.cfg, 0) > 0) << v.name;
    Config cfg;
    bench::set_attention(cfg, c, to_string(v.cfg.sharing), to_string(v.cfg.projection));
    EXPECT_EQ(&attention_path(cfg), &p) << v.name;
    if (c.projected) {
      EXPECT_EQ(cfg.projection, v.cfg.projection) << v.name;
    }
  }
  EXPECT_GE(ways, bench::attention_choices().size());
  for (const char* name : {"standard", "tiled", "streaming", "linformer"})
    EXPECT_NO_THROW(bench::attention_choice(name)) << name;
  EXPECT_THROW(bench::attention_choice("nope"), Error);
  EXPECT_THROW(bench::attention_choice("tiled", /*training=*/true), Error);
}

// The inference benchmark runs every choice, here with a kind other than the default
// (max pooling without sharing), and says which in its records and its table.
TEST(BenchAttention, RunsEveryChoiceWithTheGivenSharingAndProjection) {
  const std::string dir = test::temp_dir("bench_kinds");
  const test::CliRun r = test::run_cli(
      dir, "bench --no-fork --layers 1 --d-model 32 --heads 2 --d-ff 64 --vocab 50 --n 64 "
           "--k 16 --reps 1 --batch-tokens 64 --sharing none --projection max_pool --json");
  ASSERT_EQ(r.code, 0) << test::show(r);
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["meta"].value("projection", ""), "max_pool");
  EXPECT_EQ(doc["meta"].value("sharing", ""), "none");
  std::vector<std::string> seen;
  for (const json& run : doc["runs"]) {
    EXPECT_EQ(run.value("status", ""), "ok") << run.dump();
    seen.push_back(run.value("attention", ""));
  }
  EXPECT_EQ(seen, bench::attention_choice_names());
}

// Spins until at least `seconds` of steady-clock time have passed.
void spin(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

TEST(PhaseTimers, ProductsAreTheirOwnPhaseOtherwiseTheOuterPhaseKeepsTheTime) {
  profile::set_enabled(false);
  profile::reset();
  { PhaseScope off(Phase::matmul, 5.0); }  // disabled: nothing recorded
  EXPECT_EQ(profile::totals().calls[static_cast<int>(Phase::matmul)], 0);

  profile::reset();
  profile::set_enabled(true);
  const auto t0 = std::chrono::steady_clock::now();
  {
    PhaseScope a(Phase::attention);
    spin(0.002);
    {
      PhaseScope e(Phase::elementwise);  // inside attention: attention's time
      spin(0.002);
    }
    {
      PhaseScope m(Phase::matmul, 100.0);  // a product: its own phase
      spin(0.002);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile::set_enabled(false);
  const profile::Totals t = profile::totals();
  auto sec = [&](Phase p) { return t.seconds[static_cast<int>(p)]; };
  auto calls = [&](Phase p) { return t.calls[static_cast<int>(p)]; };
  EXPECT_EQ(calls(Phase::attention), 1);
  EXPECT_EQ(calls(Phase::elementwise), 0);
  EXPECT_EQ(calls(Phase::matmul), 1);
  EXPECT_EQ(t.matmul_flops, 100.0);
  EXPECT_EQ(sec(Phase::elementwise), 0.0);
  EXPECT_GE(sec(Phase::attention), 0.004);
  EXPECT_GE(sec(Phase::matmul), 0.002);
  EXPECT_LE(sec(Phase::attention) + sec(Phase::matmul), wall + 1e-6);
}

TEST(PhaseTimers, ProductsInsideAParallelRegionMoveTheirShareFromTheOuterPhase) {
  profile::reset();
  profile::set_enabled(true);
  int threads = 1;
  const auto t0 = std::chrono::steady_clock::now();
  {
    PhaseScope a(Phase::attention);
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      threads = omp_get_num_threads();
      PhaseScope m(Phase::matmul, 10.0);
      PhaseScope e(Phase::elementwise);  // not timed inside a region
      spin(0.002);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile::set_enabled(false);
  const profile::Totals t = profile::totals();
  const int mm = static_cast<int>(Phase::matmul), at = static_cast<int>(Phase::attention);
  EXPECT_EQ(t.calls[mm], threads);
  EXPECT_EQ(t.matmul_flops, 10.0 * threads);
  EXPECT_EQ(t.calls[static_cast<int>(Phase::elementwise)], 0);
  EXPECT_GE(t.seconds[mm], 0.002 - 1e-8);  // every thread spun 2 ms: 2 ms of wall time
  EXPECT_GE(t.seconds[at], 0.0);
  EXPECT_LE(t.seconds[at] + t.seconds[mm], wall + 1e-6);
}

}  // namespace
}  // namespace lf
