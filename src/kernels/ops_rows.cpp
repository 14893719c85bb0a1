// Row-wise kernels: softmax, dropout, embeddings and cross-entropy, forward and backward.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/dropout_mask.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "linformer/error.h"
#include "linformer/rng.h"

namespace lf {

namespace {
// One row of softmax_forward: y = softmax(scale * x) over unmasked keys, masked keys 0.
void softmax_row(float* y, const float* x, int64_t cols, float scale, const float* key_mask) {
  const float mx = vm::masked_scaled_max(x, key_mask, cols, scale);
  if (mx == -std::numeric_limits<float>::infinity()) {  // every key masked, or every visible
                                                        // score NaN (which stays NaN)
    for (int64_t j = 0; j < cols; ++j)
      y[j] = (!key_mask || key_mask[j] != 0.f) && std::isnan(x[j]) ? x[j] : 0.f;
    return;
  }
  // y = exp(scale * x - mx) (masked keys: 0), summed in the same pass.
  const float inv = 1.f / vm::exp_shifted_sum(y, x, key_mask, cols, scale, mx);
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) y[j] *= inv;
}
}  // namespace

void softmax_forward(float* out, const float* inp, int64_t rows, int64_t cols, float scale,
                     const float* key_mask) {
  LF_DCHECK(rows >= 0 && cols > 0, "softmax_forward: bad shape rows=", rows, " cols=", cols);
  PhaseScope ps(Phase::elementwise);
  parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      softmax_row(out + r * cols, inp + r * cols, cols, scale, key_mask);
  });
}

void softmax_backward(float* dinp, const float* p, const float* dout, int64_t rows, int64_t cols,
                      float scale, bool accumulate) {
  LF_DCHECK(rows >= 0 && cols > 0, "softmax_backward: bad shape rows=", rows, " cols=", cols);
  PhaseScope ps(Phase::elementwise);
  parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* pr = p + r * cols;
      const float* g = dout + r * cols;
      float* d = dinp + r * cols;
      float dot = 0.f;
      for (int64_t j = 0; j < cols; ++j) dot += g[j] * pr[j];
      if (accumulate)
        for (int64_t j = 0; j < cols; ++j) d[j] += scale * pr[j] * (g[j] - dot);
      else
        for (int64_t j = 0; j < cols; ++j) d[j] = scale * pr[j] * (g[j] - dot);
    }
  });
}

// The dropout kernels run the level's vector form (isa_kernels.h: dropout_*_n) on each chunk
// where it has one and the threshold fits its 16-bit compare; else the scalar loops below,
// whose bits those forms give.
namespace {
// Parallel chunks [i0, i1) of n elements under the mask of (p, seed, stream, first) and the
// scale 1 / (1 - p) of the kept elements: vec(i0, i1, mask, scale) where has_vec and the mask
// fits the vector forms, else scalar(i, keep, scale) for each element.
template <typename Vec, typename Scalar>
void dropout_chunks(int64_t n, float p, uint64_t seed, uint64_t stream, int64_t first, bool has_vec,
                    const Vec& vec, const Scalar& scalar) {
  const float keep_scale = 1.f / (1.f - p);
  const DropoutMask mask(p, seed, stream, first);
  const bool v = has_vec && mask.fits16();
  parallel_for(0, n, kGrainElems, [&](int64_t i0, int64_t i1) {
    if (v) return vec(i0, i1, mask, keep_scale);
    mask.for_range(i0, i1, [&](int64_t i, bool keep) { scalar(i, keep, keep_scale); });
  });
}
}  // namespace

void dropout_forward(float* out, const float* inp, int64_t n, float p, uint64_t seed,
                     uint64_t stream, int64_t first) {
  PhaseScope ps(Phase::elementwise);
  if (p <= 0.f) {
    if (out != inp) std::copy(inp, inp + n, out);
    return;
  }
  const auto vec = isa::kernels().dropout_forward_n;
  dropout_chunks(
      n, p, seed, stream, first, vec != nullptr,
      [&](int64_t i0, int64_t i1, const DropoutMask& mask, float keep_scale) {
        vec(out + i0, inp + i0, i1 - i0, mask.key, mask.index(i0), mask.threshold, keep_scale);
      },
      [&](int64_t i, bool keep, float keep_scale) { out[i] = keep ? inp[i] * keep_scale : 0.f; });
}

void dropout_backward(float* dinp, const float* dout, int64_t n, float p, uint64_t seed,
                      uint64_t stream, int64_t first, GradInto into) {
  PhaseScope ps(Phase::elementwise);
  const bool add = into == GradInto::add;
  if (p <= 0.f) {
    parallel_for(0, n, kGrainElems, [&](int64_t i0, int64_t i1) {
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) dinp[i] = (add ? dinp[i] : 0.f) + dout[i];
    });
    return;
  }
  const auto vec = isa::kernels().dropout_backward_n;
  dropout_chunks(
      n, p, seed, stream, first, vec != nullptr,
      [&](int64_t i0, int64_t i1, const DropoutMask& mask, float keep_scale) {
        vec(dinp + i0, dout + i0, i1 - i0, mask.key, mask.index(i0), mask.threshold, keep_scale,
            add);
      },
      [&](int64_t i, bool keep, float keep_scale) {
        const float base = add ? dinp[i] : 0.f;
        dinp[i] = keep ? base + dout[i] * keep_scale : base;
      });
}

void dropout_round(uint16_t* out16, const float* inp, float* g, int64_t n, float p, uint64_t seed,
                   uint64_t stream, int64_t first) {
  PhaseScope ps(Phase::elementwise);
  if (p <= 0.f) {
    vm::to_bf16_n(out16, inp, n);
    return;
  }
  const auto vec = isa::kernels().dropout_round_n;
  dropout_chunks(
      n, p, seed, stream, first, vec != nullptr,
      [&](int64_t i0, int64_t i1, const DropoutMask& mask, float keep_scale) {
        vec(out16 + i0, inp + i0, g ? g + i0 : nullptr, i1 - i0, mask.key, mask.index(i0),
            mask.threshold, keep_scale);
      },
      [&](int64_t i, bool keep, float keep_scale) {
        out16[i] = vm::bf16_round(keep ? inp[i] * keep_scale : 0.f);
        if (g) g[i] = keep ? g[i] * keep_scale : 0.f;
      });
}

namespace {
void check(const EmbedDims& d, const char* what) {
  LF_DCHECK(d.B > 0 && d.N > 0 && d.C > 0 && d.pos_offset >= 0, what, ": bad shape B=", d.B,
            " N=", d.N, " C=", d.C, " pos_offset=", d.pos_offset);
}
}  // namespace

void embedding_forward(float* out, const int32_t* ids, const float* word, const float* pos,
                       const float* type, const EmbedDims& d) {
  check(d, "embedding_forward");
  LF_DCHECK(out && ids && word && pos && type, "embedding_forward: null pointer");
  PhaseScope ps(Phase::elementwise);
  const int64_t N = d.N, C = d.C, pos_offset = d.pos_offset;
  const auto add3_n = isa::kernels().add3_n;
  parallel_for(0, d.B * N, row_grain(C), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      add3_n(out + r * C, word + static_cast<int64_t>(ids[r]) * C,
             pos + (r % N + pos_offset) * C, type, C);
  });
}

void embedding_backward(float* dword, float* dpos, float* dtype, const float* dout,
                        const int32_t* ids, const EmbedDims& d) {
  check(d, "embedding_backward");
  LF_DCHECK(dword && dpos && dtype && dout && ids, "embedding_backward: null pointer");
  PhaseScope ps(Phase::elementwise);
  const int64_t B = d.B, N = d.N, C = d.C, pos_offset = d.pos_offset;
  // Parallel over feature columns: each thread owns a slice of every row, so no races.
  parallel_for(0, C, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < B * N; ++r) {
      const float* g = dout + r * C;
      float* dw = dword + static_cast<int64_t>(ids[r]) * C;
      float* dp = dpos + (r % N + pos_offset) * C;
      for (int64_t c = c0; c < c1; ++c) {
        dw[c] += g[c];
        dp[c] += g[c];
        dtype[c] += g[c];
      }
    }
  });
}

double cross_entropy(float* dlogits, const float* logits, const int32_t* targets, int64_t rows,
                     int64_t V, float grad_scale, int64_t* count) {
  LF_DCHECK(rows >= 0 && V > 0, "cross_entropy: bad shape rows=", rows, " V=", V);
  LF_DCHECK(rows == 0 || (logits && targets), "cross_entropy: null logits or targets");
  PhaseScope ps(Phase::elementwise);
  const int nt = num_threads();
  std::vector<double> part(nt, 0.0);
  std::vector<int64_t> part_n(nt, 0);
  parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    const int t = thread_id();
    thread_local std::vector<float> work;  // exp(x - max) when there is no dlogits to hold it
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = logits + r * V;
      float* d = dlogits ? dlogits + r * V : nullptr;
      const int32_t y = targets[r];
      if (y < 0) {
        if (d) std::fill(d, d + V, 0.f);
        continue;
      }
      // max over the row (NaN logits are skipped here and poison the sum below).
      const float mx = vm::masked_scaled_max(x, nullptr, V, 1.f);
      const float xy = x[y];  // read before d (which may alias x) is written
      float* e = d;
      if (!e) {
        if (work.size() < static_cast<size_t>(V)) work.resize(V);
        e = work.data();
      }
      vm::masked_scaled_shift(e, x, nullptr, V, 1.f, mx);
      vm::exp_n(e, e, V);
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < V; ++j) sum += e[j];
      part[t] += static_cast<double>(mx) + std::log(static_cast<double>(sum)) - xy;
      part_n[t] += 1;
      if (d) {
        const float s = grad_scale / sum;
#pragma omp simd
        for (int64_t j = 0; j < V; ++j) d[j] *= s;
        d[y] -= grad_scale;
      }
    }
  });
  double total = 0.0;
  int64_t counted = 0;
  for (int t = 0; t < nt; ++t) {
    total += part[t];
    counted += part_n[t];
  }
  if (count) *count = counted;
  return total;
}
}  // namespace lf
