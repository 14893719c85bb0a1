// The instruction-set dispatcher (kernels/cpu_isa.h): on every combination of the CPUID and
// XCR0 bits it reads (a CPUID mask), the level it chooses is one that CPU runs, LINFORMER_ISA
// forces exactly the level it names when the CPU has it and is refused with the missing
// feature otherwise; on this CPU every level's table is its own, switching to a level the CPU
// lacks is refused, and the program prints and obeys the choice.
//
// Also here: LF_TEST_ISA=<level> runs the whole test binary with that level active (ctest's
// isa_<level>.* entries: the op harness and the inference paths on every level below the
// best), or skips everything when this CPU lacks it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "isa_util.h"
#include "kernels/cpu_isa.h"
#include "linformer/cpu.h"
#include "test_util.h"

namespace lf {
namespace {

using isa::CpuFeatures;
using isa::Level;

// Features from the low 12 bits of m, one per field.
CpuFeatures from_mask(unsigned m) {
  CpuFeatures f;
  bool* bits[] = {&f.avx,      &f.avx2,     &f.fma,      &f.avx512f, &f.avx512dq, &f.avx512bw,
                  &f.avx512vl, &f.avx512cd, &f.avx512bf16, &f.os_ymm, &f.os_zmm};
  for (unsigned i = 0; i < sizeof(bits) / sizeof(bits[0]); ++i) *bits[i] = (m >> i) & 1u;
  return f;
}

TEST(CpuIsa, ChoiceNeverExceedsTheCpu) {
  for (unsigned m = 0; m < (1u << 11); ++m) {
    const CpuFeatures f = from_mask(m);
    SCOPED_TRACE("feature mask " + std::to_string(m));
    const Level best = isa::choose_level(f, "");
    ASSERT_TRUE(isa::supports(f, best));
    ASSERT_EQ(isa::choose_level(f, "auto"), best);
    // The best is the highest level f runs, and every level below a supported one is supported.
    for (const Level l : test::all_isa_levels()) {
      const bool ok = isa::supports(f, l);
      ASSERT_EQ(ok, static_cast<int>(l) <= static_cast<int>(best)) << isa::level_name(l);
      if (ok) {
        ASSERT_EQ(isa::choose_level(f, isa::level_name(l)), l);
        ASSERT_TRUE(isa::missing_features(f, l).empty());
      } else {
        test::expect_error([&] { isa::choose_level(f, isa::level_name(l)); },
                           {"LINFORMER_ISA", isa::level_name(l), "lacks",
                            isa::missing_features(f, l)});
      }
    }
  }
  // The levels' requirements, one feature at a time.
  CpuFeatures all = from_mask((1u << 11) - 1);
  ASSERT_EQ(isa::best_level(all), Level::avx512bf16);
  all.avx512bf16 = false;
  ASSERT_EQ(isa::best_level(all), Level::avx512);
  all.os_zmm = false;  // AVX-512 in the CPU, but the OS does not save its registers
  ASSERT_EQ(isa::best_level(all), Level::avx2);
  all.fma = false;
  ASSERT_EQ(isa::best_level(all), Level::baseline);
  test::expect_error([&] { isa::choose_level(all, "avx3"); }, {"avx3", "unknown", "baseline"});
}

TEST(CpuIsa, ThisCpuRunsOnlyWhatItHas) {
  const CpuFeatures& f = isa::this_cpu();
  const Level before = isa::active_level();
  ASSERT_TRUE(isa::supports(f, before));
  for (const Level l : test::all_isa_levels()) {
    SCOPED_TRACE(isa::level_name(l));
    ASSERT_EQ(isa::kernels_for(l).level, l);
    if (isa::supports(f, l)) {
      test::IsaScope scope(l);
      ASSERT_EQ(isa::active_level(), l);
      ASSERT_EQ(isa::kernels().level, l);
    } else {
      test::expect_error([&] { isa::set_active_level(l); }, {"lacks"});
      ASSERT_EQ(isa::active_level(), before);
    }
  }
  ASSERT_EQ(isa::active_level(), before);
  const CpuPaths p = cpu_paths();
  ASSERT_FALSE(p.supported.empty());
  EXPECT_EQ(p.supported.front(), "baseline");
}

// --precision auto: bf16 only where its products are faster (AMX tiles the OS saves; AMD's
// AVX512-BF16), f32 on every other CPU, Intel's AVX512-BF16 without AMX included; never int8.
TEST(CpuIsa, AutoPrecisionPicksBf16OnlyWhereItIsFaster) {
  CpuFeatures intel = from_mask((1u << 11) - 1);  // every level, AVX512-BF16, no AMX
  std::string why;
  EXPECT_EQ(isa::auto_precision(intel, &why), ComputeType::f32);
  EXPECT_NE(why.find("half the f32 rate"), std::string::npos) << why;
  CpuFeatures amx = intel;
  amx.amx_bf16 = true;
  EXPECT_EQ(isa::auto_precision(amx, &why), ComputeType::f32) << "AMX the OS does not save";
  amx.os_amx = true;
  EXPECT_EQ(isa::auto_precision(amx, &why), ComputeType::bf16);
  EXPECT_NE(why.find("AMX"), std::string::npos) << why;
  amx.os_zmm = false;  // no AVX-512 state: no bf16 path at all
  EXPECT_EQ(isa::auto_precision(amx, nullptr), ComputeType::f32);
  CpuFeatures amd = intel;
  amd.amd = true;
  EXPECT_EQ(isa::auto_precision(amd, &why), ComputeType::bf16);
  EXPECT_NE(why.find("AMD"), std::string::npos) << why;
  amd.avx512bf16 = false;  // Zen 2/3: AVX2 only
  amd.avx512f = false;
  EXPECT_EQ(isa::auto_precision(amd, &why), ComputeType::f32);
  EXPECT_NE(why.find("no bf16"), std::string::npos) << why;
  for (unsigned m = 0; m < (1u << 11); ++m)  // Intel without AMX: f32 whatever else it has
    ASSERT_EQ(isa::auto_precision(from_mask(m), nullptr), ComputeType::f32) << m;
  EXPECT_EQ(resolve_precision("auto"), auto_precision().precision);
  EXPECT_EQ(resolve_precision("int8"), ComputeType::int8);
  test::expect_error([] { resolve_precision("fp16"); }, {"fp16", "auto", "f32", "bf16", "int8"});
}

// oneDNN capped below the CPU's bf16 units (ONEDNN_MAX_CPU_ISA=AVX2 on an AMX or Zen 4 CPU)
// runs no fast bf16 products: auto is f32 there and says why, and int8 keeps attention's
// products in f32 instead of asking oneDNN for bf16 ones it cannot build.
TEST(CpuIsa, AutoPrecisionFollowsACappedOneDnn) {
  if (auto_precision().precision != ComputeType::bf16)
    GTEST_SKIP() << "auto runs f32 on this CPU already";
  const std::string dir = test::temp_dir("cpu_isa");
  test::CliRun r = test::run_cli(dir, "info", "", "ONEDNN_MAX_CPU_ISA=AVX2");
  ASSERT_EQ(r.code, 0) << test::show(r);
  EXPECT_NE(r.out.find("--precision auto runs f32 (oneDNN is capped at avx2"), std::string::npos)
      << r.out;
  r = test::run_cli(dir, "init --set max_len=512 --set d_model=64 --set n_heads=2 --set d_ff=128 "
                         "--set n_layers=1 --set attention=standard --out " + dir + "/m");
  ASSERT_EQ(r.code, 0) << test::show(r);
  for (const char* p : {"auto", "int8"}) {
    r = test::run_cli(dir,
                      std::string("forward --model ") + dir + "/m --random-batch 4 512 --out " +
                          dir + "/out.safetensors --no-logits --precision " + p,
                      "", "ONEDNN_MAX_CPU_ISA=AVX2");
    EXPECT_EQ(r.code, 0) << p << ": " << test::show(r);
  }
}

// The program: `info` names the level, LINFORMER_ISA forces every level this CPU has, and an
// unknown or missing one fails with the reason before anything runs.
TEST(CpuIsa, ProgramPrintsAndObeysTheChoice) {
  const std::string dir = test::temp_dir("cpu_isa");
  test::CliRun r = test::run_cli(dir, "info");
  ASSERT_EQ(r.code, 0) << test::show(r);
  EXPECT_NE(r.out.find("cpu: kernels"), std::string::npos) << r.out;
  r = test::run_cli(dir, "--version");
  ASSERT_EQ(r.code, 0) << test::show(r);
  EXPECT_NE(r.out.find("kernels "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("oneDNN"), std::string::npos) << r.out;
  // --peaks: a measured peak for every precision this CPU runs, none for one it lacks.
  r = test::run_cli(dir, "info --peaks");
  ASSERT_EQ(r.code, 0) << test::show(r);
  for (ComputeType t : {ComputeType::f32, ComputeType::bf16, ComputeType::int8}) {
    const std::string key = std::string("cpu: product peak ") + compute_type_name(t) + " ";
    const size_t at = r.out.find(key);
    ASSERT_EQ(at != std::string::npos, compute_type_supported(t)) << r.out;
    if (at != std::string::npos) EXPECT_GT(std::atof(r.out.c_str() + at + key.size()), 0.0) << r.out;
  }
  for (const Level l : test::all_isa_levels()) {
    const std::string name = isa::level_name(l);
    r = test::run_cli(dir, "info", "", "LINFORMER_ISA=" + name);
    if (isa::supports(isa::this_cpu(), l)) {
      ASSERT_EQ(r.code, 0) << name << "\n" << test::show(r);
      EXPECT_NE(r.out.find("cpu: kernels " + name + " (forced by LINFORMER_ISA)"),
                std::string::npos)
          << r.out;
    } else {
      ASSERT_EQ(r.code, 1) << name << "\n" << test::show(r);
      EXPECT_NE(r.err.find("lacks"), std::string::npos) << r.err;
    }
  }
  r = test::run_cli(dir, "--help", "", "LINFORMER_ISA=avx1024");
  EXPECT_EQ(r.code, 1) << test::show(r);
  EXPECT_NE(r.err.find("LINFORMER_ISA=avx1024: unknown"), std::string::npos) << r.err;
}

// LF_TEST_ISA: the whole binary on one level (see the file's comment).
class ForcedLevel : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* env = std::getenv("LF_TEST_ISA");
    if (!env || !*env) return;
    Level l;
    ASSERT_TRUE(isa::parse_level(env, &l)) << "LF_TEST_ISA=" << env << ": unknown level";
    if (!isa::supports(isa::this_cpu(), l))
      GTEST_SKIP() << "LF_TEST_ISA=" << env << ": this CPU lacks "
                   << isa::missing_features(isa::this_cpu(), l);
    isa::set_active_level(l);
  }
};
const auto* const g_forced_level = ::testing::AddGlobalTestEnvironment(new ForcedLevel);

}  // namespace
}  // namespace lf
