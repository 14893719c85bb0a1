// The benchmarks follow the registry of attention kinds and the list of precisions: `linformer
// bench` and the micro-benchmark's encoder layer (bench/microbench.cpp) run on a tiny
// configuration for every attention choice (bench::attention_choices(): every kind, standard
// attention once per inference way) in every precision (bench::precisions()), and their outputs
// name each one. A precision that the CPU or the kind does not run is reported as refused or
// skipped with the reason, never dropped; every other pair runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "layers/attention_path.h"
#include "linformer/bench.h"
#include "test_util.h"

namespace lf {
namespace {

using nlohmann::json;

// Whether the model runs `choice` in precision t on this CPU (else it must say why).
bool runs(const bench::AttentionChoice& choice, ComputeType t) {
  Config c;
  c.k = {16};
  bench::set_attention(c, choice, "layerwise", "linear");
  return compute_type_supported(t) && attention_path(c).runs_precision(t, false);
}

std::string name_of(const bench::AttentionChoice& a, ComputeType t) {
  return a.name + " " + compute_type_name(t);
}

TEST(BenchKinds, InferenceBenchRunsEveryKindInEveryPrecision) {
  const std::string dir = test::temp_dir("bench_kinds");
  std::string precisions;
  for (ComputeType t : bench::precisions()) precisions += std::string(" ") + compute_type_name(t);
  const test::CliRun r = test::run_cli(
      dir,
      "bench --layers 1 --d-model 32 --heads 2 --d-ff 64 --vocab 50 --n 64 --k 16 --reps 1 "
      "--compare-precision" +
          precisions + " --out-dir '" + dir + "/out'");
  ASSERT_EQ(r.code, 0) << test::show(r);
  const json doc = json::parse(read_file(dir + "/out/bench.json"));
  for (const bench::AttentionChoice& a : bench::attention_choices()) {
    // The run table names every choice, and the grids have a column for every efficient kind.
    EXPECT_NE(r.out.find("| " + a.name + " ("), std::string::npos) << a.name << "\n" << r.out;
    if (a.attention != AttentionKind::standard && !a.projected) {
      EXPECT_NE(r.out.find(" " + a.name + " |"), std::string::npos) << a.name << "\n" << r.out;
    }
    for (ComputeType t : bench::precisions()) {
      const json* run = nullptr;
      for (const json& x : doc.at("runs"))
        if (x.value("attention", "") == a.name && x.value("compute", "") == compute_type_name(t))
          run = &x;
      ASSERT_NE(run, nullptr) << name_of(a, t) << " did not run";
      if (runs(a, t)) {
        EXPECT_EQ(run->value("status", ""), "ok") << name_of(a, t) << ": " << run->dump();
      } else {
        EXPECT_EQ(run->value("status", ""), "refused") << name_of(a, t) << ": " << run->dump();
        EXPECT_FALSE(run->value("error", "").empty()) << name_of(a, t);
      }
    }
  }
}

TEST(BenchKinds, MicrobenchRunsEveryKindInEveryPrecision) {
  const std::string bin = std::string(LF_BINARY_DIR) + "/bench/linformer_microbench";
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << bin << " is not built (LINFORMER_BENCH=OFF)";
  const std::string dir = test::temp_dir("microbench_kinds"), out = dir + "/out.json";
  const std::string cmd = "'" + bin +
                          "' --tiny --benchmark_filter='^EncoderLayer/' "
                          "--benchmark_min_time=0.01 --benchmark_format=json > '" +
                          out + "' 2> '" + dir + "/err.txt'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(dir + "/err.txt");
  const json doc = json::parse(read_file(out));
  for (const bench::AttentionChoice& a : bench::attention_choices())
    for (ComputeType t : bench::precisions()) {
      const std::string prefix = "EncoderLayer/" + a.name + "/" + compute_type_name(t) + "/";
      const json* b = nullptr;
      for (const json& x : doc.at("benchmarks"))
        if (x.value("name", "").rfind(prefix, 0) == 0) b = &x;
      ASSERT_NE(b, nullptr) << prefix << " is missing";
      if (runs(a, t)) {
        EXPECT_FALSE(b->value("error_occurred", false)) << b->dump();
        EXPECT_GT(b->value("iterations", 0), 0) << b->dump();
      } else {
        EXPECT_TRUE(b->value("error_occurred", false)) << b->dump();
        EXPECT_FALSE(b->value("error_message", "").empty()) << b->dump();
      }
    }
}

}  // namespace
}  // namespace lf
