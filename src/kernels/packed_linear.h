// A linear map y = x W^T (+ bias) whose weight W [out, in] (torch.nn.Linear's layout) is
// packed once into the layout oneDNN's matmul prefers, in f32 or bf16. Inference uses it so
// that products neither re-pack B nor re-round it on every call, and fuses the bias, GELU
// or the residual sum into the product. One oneDNN primitive is built per row count,
// epilogue and threading context, on first use.
//
// bf16: W is rounded to bfloat16 once; each call rounds x to bfloat16 (round to nearest
// even) into per-thread scratch, and the product accumulates in f32 (AVX512-BF16).
//
// Callable from inside an OpenMP parallel region (each thread then runs its own product on
// one core) or from outside (the product uses every thread).
#pragma once
#include <cstdint>
#include <memory>

#include "linformer/compute_type.h"

namespace lf {

class PackedLinear {
 public:
  // What happens to x W^T + bias before it is stored in out.
  enum class Epilogue {
    store,       // out = x W^T + bias
    gelu,        // out = GELU(x W^T + bias), exact (erf) GELU
    accumulate,  // out += x W^T + bias
  };

  PackedLinear();
  ~PackedLinear();
  PackedLinear(PackedLinear&&) noexcept;
  PackedLinear& operator=(PackedLinear&&) noexcept;

  // Packs W [out_features, in_features] (row-major). W is copied; it may change afterwards.
  void pack(const float* W, int64_t out_features, int64_t in_features, ComputeType type);
  bool packed() const;
  ComputeType type() const;
  int64_t in_features() const;
  int64_t out_features() const;
  size_t bytes() const;  // packed weight storage
  // What bytes() will be after pack() with these arguments (oneDNN's layout may pad).
  static size_t packed_bytes(int64_t out_features, int64_t in_features, ComputeType type);

  // out [rows, out_features] (leading dimension out_features) from x [rows, in_features];
  // bias [out_features] or null.
  void apply(float* out, const float* x, int64_t rows, const float* bias, Epilogue e) const;

  // Rows a single product handles at most (a power of two); calls run in blocks of this many
  // rows, then of decreasing powers of two, so that oneDNN sees few distinct shapes.
  static constexpr int64_t kMaxRows = 1024;
  // Per-thread scratch bytes apply() may hold for inputs of in_features columns (bf16 copy
  // of the input block), beside oneDNN's own small scratchpad.
  static size_t scratch_bytes(int64_t in_features, ComputeType type);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lf
