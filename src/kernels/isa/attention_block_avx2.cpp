// Exact attention's streaming kernel (attention_block.h), AVX2 + FMA form: the kernel of
// attention_block_common.h on eight-lane vectors (strips of 16 queries, 6-row tiles, f32
// operands), compiled on the avx2 level only (the other levels compile this file to nothing;
// the AVX-512 form is attention_block_avx512.cpp, baseline has none: its callers use gemm). The
// level's table (vec_kernels.cpp) points at attend_head, work_floats and has_bf16 here;
// attention_block.cpp checks the arguments and dispatches.
#include "kernels/isa/attention_block_common.h"

namespace lf::attn_block::LF_ISA_NS {

#if defined(LF_VM_AVX2)

namespace {

// The vector width's operations (simd_math.h) and its register tile.
struct Avx2 : vm::V8 {
  static constexpr int kTile = 6;  // keys (scores) or value columns (accumulate) per tile
};

}  // namespace

bool has_bf16() { return false; }

int64_t work_floats(int64_t rows, int64_t Dh, int64_t kb) {
  return Layout<Avx2, F32<Avx2>>::floats(rows, Dh, kb);
}

void attend_head(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
                 int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale,
                 float* work) {
  attend<Avx2, F32<Avx2>>(ctx, ldc, in, key_mask, rows, keys, Dh, kb, first_query, scale, work);
}

#endif

}  // namespace lf::attn_block::LF_ISA_NS
