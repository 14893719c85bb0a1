// Precision of the inference products (Model::set_compute_type).
#pragma once

namespace lf {

// f32: every product in f32. bf16: the encoder's linear maps take bfloat16 weights (rounded
// once) and bfloat16-rounded inputs, accumulating in f32 (AVX512-BF16); everything else
// (attention, softmax, LayerNorm, GELU, residuals, heads) stays f32.
enum class ComputeType { f32, bf16 };
inline const char* compute_type_name(ComputeType t) {
  return t == ComputeType::bf16 ? "bf16" : "f32";
}

}  // namespace lf
