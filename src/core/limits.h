// The documented upper bounds on every size a config, an option or a file may ask for
// (docs/config.md, "Limits"), overflow-safe arithmetic on sizes, and the up-front memory check:
// a request that cannot fit in this machine's memory is refused before anything is allocated,
// with the bytes it would need.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "linformer/error.h"

namespace lf {
namespace limits {

// Model configuration (Config::validate).
constexpr int64_t kMaxVocab = int64_t{1} << 24;           // token ids are int32
constexpr int64_t kMaxLen = int64_t{1} << 20;             // max_len (sequence positions)
constexpr int64_t kMaxDModel = int64_t{1} << 16;          // d_model
constexpr int64_t kMaxHeads = int64_t{1} << 10;           // n_heads
constexpr int64_t kMaxDFF = int64_t{1} << 18;             // d_ff
constexpr int64_t kMaxLayers = 1024;                      // n_layers
constexpr int64_t kMaxTypeVocab = int64_t{1} << 16;       // type_vocab_size
constexpr int64_t kMaxPositionOffset = int64_t{1} << 16;  // position_offset
constexpr int64_t kMaxClasses = int64_t{1} << 20;         // num_classes
constexpr int64_t kMaxParameters = int64_t{1} << 36;      // the whole parameter table
// Options of the commands and of PretrainOptions / FinetuneOptions.
constexpr int64_t kMaxBatch = int64_t{1} << 20;  // batch sizes, gradient accumulation
constexpr int64_t kMaxSteps = int64_t{1} << 40;  // step counts and intervals
// Tensors read from files: dimensions and element counts.
constexpr int64_t kMaxTensorRank = 64;
// JSON read from files (headers, configs, run files): nesting depth of arrays and objects.
constexpr int kMaxJsonDepth = 32;

}  // namespace limits

// a * b, or false when the product of two non-negative values does not fit in int64.
inline bool mul_fits(int64_t a, int64_t b, int64_t* out) {
  return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, out);
}
inline bool add_fits(int64_t a, int64_t b, int64_t* out) {
  return a >= 0 && b >= 0 && !__builtin_add_overflow(a, b, out);
}

// This machine's physical memory in bytes (MemTotal of /proc/meminfo; 0 when unknown).
// LINFORMER_MEMORY_LIMIT (bytes) overrides it, for tests and for sharing a machine.
uint64_t physical_memory_bytes();
// Throws lf::Error when `bytes` (a double: it cannot wrap) exceed the physical memory:
// "<what> needs N bytes (X GiB) but this machine has M bytes (Y GiB) of memory".
void require_memory(double bytes, const std::string& what);

// Throws lf::Error "<name> must be in [lo, hi], got v" unless lo <= v <= hi; NaN is never in
// range (every comparison with it is false, so the check is written to pass only for valid
// values). Options use their command-line names, e.g. check_range("--mask-prob", ...).
template <typename T>
void check_range(const char* name, T v, T lo, T hi) {
  LF_CHECK(v >= lo && v <= hi, name, " must be in [", lo, ", ", hi, "], got ", v);
}
// The same for an open upper end: lo <= v < hi.
template <typename T>
void check_below(const char* name, T v, T lo, T hi) {
  LF_CHECK(v >= lo && v < hi, name, " must be in [", lo, ", ", hi, "), got ", v);
}
// A positive finite number (learning rates, epsilons): 0 < v < inf.
inline void check_positive(const char* name, double v) {
  LF_CHECK(v > 0 && std::isfinite(v), name, " must be positive and finite, got ", v);
}

}  // namespace lf
