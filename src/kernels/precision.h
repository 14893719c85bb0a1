// What each precision means to a product, in one table: the matrix-product module (gemm,
// gemm_batched, PackedLinear) reads its row instead of testing the type (docs/design.md,
// "Precisions"). A new precision is a new row here plus its input and weight conversions.
#pragma once
#include <cstdint>

#include "linformer/compute_type.h"

namespace lf {

struct Precision {
  ComputeType type;
  // Training may run its products in it (int8 is for inference only).
  bool trains;
  // Products between two activations (gemm, gemm_batched: attention, the sequence projection,
  // training's gradients) run in `plain` when they have at least min_work multiply-adds
  // (M * N * K), and in f32 when smaller: conversion would cost more than it saves.
  ComputeType plain;
  int64_t min_work;
  // A packed weight (PackedLinear) in this precision: how W is stored, how each call prepares
  // its input rows, and what the product accumulates into.
  enum class Weights { f32, bf16, int8_per_channel } weights;
  enum class Input { as_is, round_bf16, quantize_per_row } input;
  enum class Accumulator { f32, s32_dequantized } accumulator;
  // Rows a packed product handles in one block when its input needs a prepared copy (the
  // copy and, for int8, the int32 block stay in per-thread scratch).
  int64_t max_rows;
};

// The row of t.
const Precision& precision(ComputeType t);

}  // namespace lf
