// Which code paths this CPU runs: the engine's own kernels (chosen once at start-up from
// CPUID and the OS's saved register state, LINFORMER_ISA forces a lower one) and oneDNN's
// (its JIT, for the matrix products). `linformer info` and `linformer --version` print them.
#pragma once
#include <string>
#include <vector>

#include "linformer/compute_type.h"

namespace lf {

struct CpuPaths {
  std::string kernels;                 // the level the kernels run: baseline, avx2, avx512, avx512bf16
  std::vector<std::string> supported;  // every level this CPU runs, lowest first
  bool forced = false;                 // chosen by LINFORMER_ISA rather than the best one
  std::string onednn;                  // oneDNN's instruction set for this CPU, e.g. avx512_core_bf16
};

// Decides the kernels' level if nothing has yet; throws lf::Error when LINFORMER_ISA names an
// unknown level or one this CPU lacks. Programs call it first, so that the refusal comes
// before any work.
CpuPaths cpu_paths();
// `--precision auto`: the precision whose products this CPU runs fastest, bf16 (AMX; AMD Zen
// 4/5) or f32 (everything else, Intel's AVX512-BF16 without AMX included: half the f32 rate
// there); never int8, which is only used when asked for. reason: why, one phrase.
struct AutoPrecision {
  ComputeType precision = ComputeType::f32;
  std::string reason;
};
AutoPrecision auto_precision();
// Each precision this CPU runs (compute_type_supported) with its measured product peak: a
// 2048 x 3072 x 768 product of the encoder's linear-map kind (f32 sgemm; bf16 and int8 packed
// weights, int8's quantize and dequantize included), the fastest of `reps` after a warm-up, in
// GFLOP/s (int8: GOP/s) on the current OpenMP thread count. Takes about a second.
struct ProductPeak {
  ComputeType precision = ComputeType::f32;
  double gflops = 0;
};
std::vector<ProductPeak> product_peaks(int reps = 3);

// "f32", "bf16", "int8" -> that precision; "auto" -> auto_precision(); throws lf::Error
// naming the choices for anything else.
ComputeType resolve_precision(const std::string& name);

// One line: "kernels avx512bf16 (this CPU runs baseline, avx2, avx512, avx512bf16); oneDNN
// avx512_core_bf16".
std::string cpu_paths_summary();

}  // namespace lf
