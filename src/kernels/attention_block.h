// Exact attention of one head for a block of query rows, streaming over blocks of keys (the
// online softmax), as one register-blocked f32 kernel of the engine's own. It works on the
// transposed problem: queries run along the vector lanes, in strips of 16, so that
//   scores      S^T [keys, 16] = K Q^T   6 keys x 16 queries a tile, the block's max per
//                                        query found in the tile's epilogue
//   softmax     per query lane: the exp and sum run down the strip's key rows, no horizontal
//               reductions, no pass over a score row
//   accumulate  O^T [Dh, 16] += V^T P^T  6 value columns x 16 queries a tile
// The queries are transposed once per head (Q^T, [Dh, 16] a strip) and each key block's keys
// and values copied densely once; per block, each strip's scores, weights and output stay in
// L1 while the block's keys and values (kb x Dh each) stay in L2 for every strip.
// The gemm path it replaces ran each key block as two sgemm calls (a [rows, 256] score block
// from Dh-long dot products, then a [rows, Dh] context update) with a row-by-row softmax
// between them, two passes over every score row; on AVX2 this kernel runs the model's
// streaming layer 1.14x (n = 4096) to 1.22x (n = 16384) faster (docs/design.md).
// Built for AVX2 + FMA (strips of 16, 6-row tiles, f32) and for AVX-512 (strips of 32, 8-row
// tiles, f32 or, with AVX512-BF16, bf16 operands: VDPBF16PS multiplies and sums pairs of
// bfloat16 into f32, twice the multiply-adds of an f32 FMA; Operands::bf16). On a 2-core
// AMD Zen 4 the AVX-512 kernel runs BM_Attention (12 heads of 64, n = 8192) 1.17x faster
// than the sgemm path in f32 and 1.25x faster than the bf16 gemm path in bf16, and 1.6x
// faster in bf16 than in f32. Each form is compiled in the object of its instruction-set
// level (isa/attention_block.cpp) and the level chosen at start-up runs (isa_kernels.h); on
// the baseline level available() is false and the caller uses gemm().
// Numbers: each score is one in-order FMA chain over the head dimension, each output an
// in-order chain over the keys of a block, rescaled between blocks as in the gemm path; the
// result equals it to f32 rounding (bf16: the queries, keys and values rounded once to
// bfloat16, the weights once per key block, as the bf16 gemm path rounds its operands), and
// a query's result does not depend on the other queries of its block (batch invariance).
#pragma once
#include <cstdint>

#include "kernels/operand.h"

namespace lf::attn_block {

// The products' operands: f32, or bf16 (inputs and weights rounded to bfloat16, f32 sums).
enum class Operands { f32, bf16 };

// Whether the active instruction-set level has the kernel for these operands and it is enabled
// (it is unless set_enabled(false): the tests and the micro-benchmark compare it with the gemm
// path in one process).
bool available(Operands o = Operands::f32);
// Whether the active level's kernel has bf16 operands (AVX512-BF16), enabled or not.
bool has_bf16();
void set_enabled(bool on);

// Workspace of attend_head for a block of `rows` queries, head size Dh, key block kb.
int64_t work_floats(int64_t rows, int64_t Dh, int64_t kb);

// Where a head's operands are: rows ld apart (the head's Dh columns of [*, D] activations, or
// a head-major head's own rows), each f32 or bf16 (rounded to nearest even, as the kernel
// rounds an f32 one: a bf16 operand is the same operand rounded once by its owner).
struct HeadIn {
  TensorIn q;  // [rows, Dh], rows ldq apart
  TensorIn k;  // [keys, Dh], rows ldkv apart
  TensorIn v;  // [keys, Dh]
  int64_t ldq = 0, ldkv = 0;
};
// The operands the kernel multiplies for these inputs: bf16 when any of them is bf16.
inline Operands operands_of(const HeadIn& in) {
  const bool h = in.q.is(DataType::bf16) || in.k.is(DataType::bf16) || in.v.is(DataType::bf16);
  return h ? Operands::bf16 : Operands::f32;
}

// ctx[r * ldc + c] = sum_j softmax_j(scale * q_r . k_j) v_j[c] for r < rows, c < Dh, over the
// keys j < keys with key_mask[j] != 0 (null: all) and, when first_query >= 0 (causal), j <=
// first_query + r. A query with no visible key gives 0; a NaN among its visible scores gives
// NaN. Keys run in blocks of kb; a block with every key masked is skipped. The products run
// on operands_of(in): in bf16 each f32 operand is rounded as it is laid out (the queries per
// element, bf16_round; each key row with vm::to_bf16_n; the values in hardware, VCVTNE2PS2BF16,
// which flushes denormals) and a bf16 one is read as it is.
void attend_head(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
                 int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale,
                 float* work);

}  // namespace lf::attn_block
