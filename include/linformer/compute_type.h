// Precision of the inference products (Model::set_compute_type).
#pragma once

#include <string>

namespace lf {

// f32: every product in f32. bf16: the encoder's linear maps take bfloat16 weights (rounded
// once) and bfloat16-rounded inputs, accumulating in f32 (AVX512-BF16); everything else
// (attention, softmax, LayerNorm, GELU, residuals, heads) stays f32.
enum class ComputeType { f32, bf16 };
inline const char* compute_type_name(ComputeType t) {
  return t == ComputeType::bf16 ? "bf16" : "f32";
}

// "f32" or "bf16" (the values of --precision and of train_args.json's "precision"); throws
// lf::Error naming the choices for anything else.
ComputeType parse_compute_type(const std::string& name);

// Whether this CPU runs products of type t: f32 always; bf16 only where oneDNN has a bf16
// matmul (AVX-512 and newer: AVX512-BF16 or AMX natively, plain AVX-512 through its own
// conversion). Model::set_compute_type and set_train_compute_type refuse a type this is false
// for, with a message that says so (require_compute_type).
bool compute_type_supported(ComputeType t);
// Throws lf::Error naming the CPU's missing feature when compute_type_supported(t) is false.
void require_compute_type(ComputeType t);

}  // namespace lf
