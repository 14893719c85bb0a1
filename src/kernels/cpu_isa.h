// The one place that decides which instruction-set level the engine's own kernels run
// (isa_kernels.h holds the levels and their tables). At start-up, once: the CPU's features
// from CPUID, and the OS's saved register state from XGETBV (a CPU with AVX-512 under an OS
// that does not save the ZMM registers cannot run it), give the best level this CPU runs;
// the environment variable LINFORMER_ISA (baseline, avx2, avx512, avx512bf16; auto or empty:
// the best) forces a lower one, and one the CPU lacks is refused with lf::Error naming the
// missing feature. oneDNN makes its own choice the same way for the matrix products
// (ONEDNN_MAX_CPU_ISA caps it).
#pragma once
#include <string>
#include <vector>

#include "kernels/isa_kernels.h"
#include "linformer/compute_type.h"

namespace lf::isa {

// What the levels need: CPUID feature bits, and (os_*) XCR0's saved state.
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512dq = false, avx512bw = false, avx512vl = false, avx512cd = false;
  bool avx512bf16 = false;
  bool amx_bf16 = false;  // AMX tiles with bf16 products (CPUID leaf 7 EDX bit 22)
  bool amd = false;       // vendor AuthenticAMD
  bool os_ymm = false;  // XCR0: SSE and AVX state (bits 1, 2)
  bool os_zmm = false;  // XCR0: opmask, ZMM_Hi256, Hi16_ZMM (bits 5, 6, 7) as well
  bool os_amx = false;  // XCR0: AMX tile configuration and data (bits 17, 18)
};

// `--precision auto` on a CPU with features f: bf16 where its products run faster than
// f32's (AMX tiles; AMD Zen 4/5, whose AVX512-BF16 does twice the multiply-adds of an FMA per
// instruction at the same rate), else f32 (an Intel CPU with AVX512-BF16 but no AMX runs bf16
// products at half the f32 rate; without AVX512-BF16 they are emulated). Never int8, which
// changes results beyond rounding: only asked for. why: the reason, one phrase.
ComputeType auto_precision(const CpuFeatures& f, std::string* why);

// This CPU's features (CPUID leaves 1 and 7, XGETBV only where CPUID says OSXSAVE).
CpuFeatures detect_cpu();
const CpuFeatures& this_cpu();  // detect_cpu(), once

const char* level_name(Level l);
// "baseline", "avx2", "avx512", "avx512bf16" -> the level; false for anything else.
bool parse_level(const std::string& name, Level* out);
// Whether a CPU with features f runs level l; missing_features: what it lacks, "" if nothing.
bool supports(const CpuFeatures& f, Level l);
std::string missing_features(const CpuFeatures& f, Level l);
// The highest level f runs (baseline always).
Level best_level(const CpuFeatures& f);
// The level to run on a CPU with features f when LINFORMER_ISA is `forced` (empty or "auto":
// the best). Throws lf::Error for an unknown name, or a level f lacks (naming what it lacks and
// the levels it runs). Never returns a level f lacks.
Level choose_level(const CpuFeatures& f, const std::string& forced);

// The active level (decided on first use from this_cpu() and LINFORMER_ISA) and whether
// LINFORMER_ISA chose it.
Level active_level();
bool active_level_forced();
// The levels this CPU runs, lowest first.
std::vector<Level> supported_levels();
// Tests: every level's table, and switching the active one (throws lf::Error, as
// LINFORMER_ISA does, for a level this CPU lacks). Not for use while kernels run.
const Kernels& kernels_for(Level l);
void set_active_level(Level l);

}  // namespace lf::isa
