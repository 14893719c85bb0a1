// Precision of the inference products (Model::set_compute_type).
#pragma once

#include <string>

namespace lf {

// f32: every product in f32. bf16: the encoder's linear maps take bfloat16 weights (rounded
// once) and bfloat16-rounded inputs, accumulating in f32 (AVX512-BF16); where the CPU has
// AVX512-BF16, inference also runs the products between activations (attention's scores and
// weighted values, Linformer's sequence projection) on bfloat16 operands with f32 sums;
// softmax, LayerNorm, GELU, residuals and the heads stay f32. Training runs in either.
// int8 (inference only): the encoder's linear maps take int8 weights (symmetric, one scale per
// output channel, quantized once) and int8 inputs quantized per row (token) at run time,
// accumulating in int32 (AVX512-VNNI, or AVX2); attention and the sequence projection run as
// in bf16 where the CPU has AVX512-BF16, else in f32; LayerNorm, embeddings and the heads stay
// f32 (docs/int8.md).
enum class ComputeType { f32, bf16, int8 };
inline const char* compute_type_name(ComputeType t) {
  return t == ComputeType::bf16 ? "bf16" : t == ComputeType::int8 ? "int8" : "f32";
}

// "f32", "bf16" or "int8" (the values of --precision and of train_args.json's "precision");
// throws lf::Error naming the choices for anything else.
ComputeType parse_compute_type(const std::string& name);

// Whether this CPU runs products of type t: f32 always; bf16 only where oneDNN has a bf16
// matmul (AVX-512 and newer: AVX512-BF16 or AMX natively, plain AVX-512 through its own
// conversion); int8 where oneDNN has an int8 matmul (AVX2 and newer). Model::set_compute_type
// and set_train_compute_type refuse a type this is false for, with a message that says so
// (require_compute_type).
bool compute_type_supported(ComputeType t);
// Whether training can run its products in t: f32 and bf16 (int8 is for inference only).
bool compute_type_trains(ComputeType t);
// Throws lf::Error naming the CPU's missing feature when compute_type_supported(t) is false.
void require_compute_type(ComputeType t);
// Throws lf::Error saying t is for inference only when compute_type_trains(t) is false.
void require_trains(ComputeType t);

}  // namespace lf
