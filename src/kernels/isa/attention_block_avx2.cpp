// Exact attention's streaming kernel (attention_block.h), AVX2 + FMA form, compiled on the
// avx2 level only (the other levels compile this file to nothing; the AVX-512 form is
// attention_block_avx512.cpp, baseline has none: its callers use gemm). The level's table
// (vec_kernels.cpp) points at attend_head, work_floats and has_bf16 here; attention_block.cpp
// checks the arguments and dispatches. No std algorithm is instantiated here (plain loops
// instead of std::fill): an out-of-line copy of a library template compiled with this level's
// flags could be the one the linker keeps for baseline code.
#include "kernels/isa/attention_block_common.h"

namespace lf::attn_block::LF_ISA_NS {

#if defined(LF_VM_AVX2)

namespace {

constexpr int64_t kLanes = 16;  // queries per strip: two vectors
constexpr int kTile = 6;        // keys (scores) or value columns (accumulate) per tile

inline int64_t strips(int64_t rows) { return (rows + kLanes - 1) / kLanes; }

// Pins a loaded vector in a register. Without it GCC 12 folds the two shared loads of a tile
// step into each of its twelve FMAs (18 loads per 12 FMAs instead of 8): load-bound at ~70%
// of the FMA rate on this CPU.
[[gnu::always_inline]] inline void in_register(__m256& v) { asm("" : "+x"(v)); }

// The register tile of both products: acc[r] += sum_t A[r * sa + t * st] * B[t][0..16] for
// r < R, t < steps (B's rows 16 apart), one broadcast of A per row and step.
template <int R>
[[gnu::always_inline]] inline void fma_tile(__m256 (&acc)[R][2], const float* A, int64_t sa,
                                            int64_t st, const float* B, int64_t steps) {
  for (int64_t t = 0; t < steps; ++t) {
    __m256 b0 = _mm256_loadu_ps(B + t * kLanes), b1 = _mm256_loadu_ps(B + t * kLanes + 8);
    in_register(b0);
    in_register(b1);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(A + r * sa + t * st);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
}

// St[r][0..16] = sum_c K[r][c] Qt[c][0..16] for the tile's R keys (rows ldk apart).
// With mx (not causal): also mx[0..16] = max(mx, scale * St[r]) over the tile's keys r that
// the mask (offset to the tile's first key, or null) counts, as softmax_strip's max pass would.
template <int R>
[[gnu::always_inline]] inline void scores_tile(float* St, const float* K, int64_t ldk,
                                               const float* Qt, int64_t Dh, const float* mask,
                                               float scale, float* mx) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  fma_tile<R>(acc, K, ldk, 1, Qt, Dh);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(St + r * kLanes, acc[r][0]);
    _mm256_storeu_ps(St + r * kLanes + 8, acc[r][1]);
  }
  if (!mx) return;
  const __m256 vs = _mm256_set1_ps(scale);
  __m256 m0 = _mm256_loadu_ps(mx), m1 = _mm256_loadu_ps(mx + 8);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    if (mask && mask[r] == 0.f) continue;
    m0 = _mm256_max_ps(_mm256_mul_ps(acc[r][0], vs), m0);
    m1 = _mm256_max_ps(_mm256_mul_ps(acc[r][1], vs), m1);
  }
  _mm256_storeu_ps(mx, m0);
  _mm256_storeu_ps(mx + 8, m1);
}

// Ot[r][0..16] += sum_j V[j][r] Pt[j][0..16] for the tile's R value columns.
template <int R>
[[gnu::always_inline]] inline void accumulate_tile(float* Ot, const float* V, int64_t ldv,
                                                   const float* Pt, int64_t cols) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm256_loadu_ps(Ot + r * kLanes);
    acc[r][1] = _mm256_loadu_ps(Ot + r * kLanes + 8);
  }
  fma_tile<R>(acc, V, 1, ldv, Pt, cols);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(Ot + r * kLanes, acc[r][0]);
    _mm256_storeu_ps(Ot + r * kLanes + 8, acc[r][1]);
  }
}

// One strip's scores St [cols][16] become its weights for this key block, in place, and its
// running state (max m, sum l [16]; output Ot [Dh][16]) is rescaled to the new max. mask: the
// block's key mask or null. Causal when q0 >= 0: lane t (query q0 + t) sees key j0 + j only
// if j0 + j <= q0 + t.
// premax (not causal): the block's max per lane, found by the scores tiles; else (causal) the
// max pass runs here.
void softmax_strip(float* St, int64_t cols, const float* mask, int64_t q0, int64_t j0, float scale,
                   const float* premax, float* m, float* l, float* Ot, int64_t Dh) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const __m256 ninf = _mm256_set1_ps(kNegInf), vs = _mm256_set1_ps(scale),
               zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const bool causal = q0 >= 0;
  // Lanes of half h that see key j (causal): t + 8h >= j0 + j - q0.
  const auto sees = [&](int64_t j, int h) {
    const auto lim = static_cast<int>(j0 + j - q0 - 8 * h - 1);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(iota, _mm256_set1_epi32(lim)));
  };
  // The block's max of scale * score per lane over the keys it sees. maxps returns its second
  // operand when either is NaN: NaN scores are skipped here (and poison the sum below).
  __m256 mx[2] = {ninf, ninf};
  if (premax) {
    mx[0] = _mm256_loadu_ps(premax);
    mx[1] = _mm256_loadu_ps(premax + 8);
  } else {
    for (int64_t j = 0; j < cols; ++j) {
      if (mask && mask[j] == 0.f) continue;
      for (int h = 0; h < 2; ++h) {
        __m256 s = _mm256_mul_ps(_mm256_loadu_ps(St + j * kLanes + 8 * h), vs);
        if (causal) s = _mm256_blendv_ps(ninf, s, sees(j, h));
        mx[h] = _mm256_max_ps(s, mx[h]);
      }
    }
  }
  __m256 shift[2], alpha[2];
  for (int h = 0; h < 2; ++h) {
    const __m256 mold = _mm256_loadu_ps(m + 8 * h), mnew = _mm256_max_ps(mx[h], mold);
    // A lane that has seen no number yet shifts by 0 (its visible scores are NaN or -inf);
    // an unchanged max rescales by exactly 1.
    shift[h] = _mm256_blendv_ps(mnew, zero, _mm256_cmp_ps(mnew, ninf, _CMP_EQ_OQ));
    alpha[h] = _mm256_blendv_ps(vm::exp8(_mm256_sub_ps(mold, mnew)), one,
                                _mm256_cmp_ps(mold, mnew, _CMP_EQ_OQ));
    _mm256_storeu_ps(m + 8 * h, mnew);
  }
  __m256 sum[2] = {zero, zero};
  for (int64_t j = 0; j < cols; ++j) {
    float* s = St + j * kLanes;
    if (mask && mask[j] == 0.f) {
      _mm256_storeu_ps(s, zero);
      _mm256_storeu_ps(s + 8, zero);
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      __m256 e = vm::exp8(_mm256_fmsub_ps(_mm256_loadu_ps(s + 8 * h), vs, shift[h]));
      if (causal) e = _mm256_and_ps(e, sees(j, h));
      _mm256_storeu_ps(s + 8 * h, e);
      sum[h] = _mm256_add_ps(sum[h], e);
    }
  }
  for (int h = 0; h < 2; ++h)
    _mm256_storeu_ps(l + 8 * h, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * h), alpha[h], sum[h]));
  for (int64_t c = 0; c < Dh; ++c)
    for (int h = 0; h < 2; ++h) {
      float* o = Ot + c * kLanes + 8 * h;
      _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_loadu_ps(o), alpha[h]));
    }
}

}  // namespace

bool has_bf16() { return false; }

int64_t work_floats(int64_t rows, int64_t Dh, int64_t kb) {
  const int64_t lanes = strips(rows) * kLanes;
  // Qt, Ot; St; m, l; Kb, Vb; bmax
  return 2 * lanes * Dh + kb * kLanes + 2 * lanes + 2 * kb * Dh + kLanes;
}

void attend_head(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
                 int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale,
                 float* work, Operands o) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t ns = strips(rows), lanes = ns * kLanes;
  float* Qt = work;             // [strip][Dh][16] queries, transposed (0 past rows)
  float* Ot = Qt + lanes * Dh;  // [strip][Dh][16] output, transposed
  float* St = Ot + lanes * Dh;  // [kb][16] one strip's scores, then weights
  float* m = St + kb * kLanes;  // [lanes] running max of scale * score
  float* l = m + lanes;         // [lanes] running sum of weights
  float* Kb = l + lanes;        // [kb][Dh] the block's keys, dense
  float* Vb = Kb + kb * Dh;     // [kb][Dh] and values
  float* bmax = Vb + kb * Dh;   // [16] a strip's max over the block
  for (int64_t s = 0; s < ns; ++s)
    for (int64_t t = 0; t < kLanes; ++t) {
      const int64_t r = s * kLanes + t;
      float* dst = Qt + s * Dh * kLanes + t;
      for (int64_t c = 0; c < Dh; ++c) dst[c * kLanes] = r < rows ? in.q[r * in.ldq + c] : 0.f;
    }
  fill(Ot, lanes * Dh, 0.f);
  fill(m, lanes, kNegInf);
  fill(l, lanes, 0.f);
  const bool causal = first_query >= 0;
  const int64_t key_end = causal ? (keys < first_query + rows ? keys : first_query + rows) : keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += kb) {
    const int64_t cols = (kb < key_end - j0 ? kb : key_end - j0);
    const float* mj = key_mask ? key_mask + j0 : nullptr;
    if (mj && all_zero(mj, cols))
      continue;  // a fully padded key block contributes nothing
    // The block's keys and values copied densely: read in place, rows ldkv apart, every strip
    // ran slower (the model's n = 4096 layer 1.09x faster than sgemm's path in place, 1.14x
    // copied, alternating in one process).
    vm::copy_rows(Kb, Dh, in.k + j0 * in.ldkv, in.ldkv, cols, Dh);
    vm::copy_rows(Vb, Dh, in.v + j0 * in.ldkv, in.ldkv, cols, Dh);
    for (int64_t s = 0; s < ns; ++s) {
      const int64_t q0 = first_query + s * kLanes;
      if (causal && j0 > q0 + kLanes - 1) continue;  // no query of this strip sees the block
      float* Os = Ot + s * Dh * kLanes;
      float* mx = causal ? nullptr : bmax;
      if (mx) fill(mx, kLanes, kNegInf);
      in_tiles<kTile>(cols, [&](int64_t i, auto R) {
        scores_tile<decltype(R)::value>(St + i * kLanes, Kb + i * Dh, Dh, Qt + s * Dh * kLanes, Dh,
                                        mj ? mj + i : nullptr, scale, mx);
      });
      softmax_strip(St, cols, mj, causal ? q0 : -1, j0, scale, mx, m + s * kLanes, l + s * kLanes,
                    Os, Dh);
      in_tiles<kTile>(Dh, [&](int64_t i, auto R) {
        accumulate_tile<decltype(R)::value>(Os + i * kLanes, Vb + i, Dh, St, cols);
      });
    }
  }
  write_context(ctx, ldc, Ot, l, rows, Dh, kLanes);
}

#endif

}  // namespace lf::attn_block::LF_ISA_NS
