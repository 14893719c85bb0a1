// The sequence-axis projections of Linformer's keys and values: E (linear, conv) and the
// windowed max pool, forward and backward.
#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "layers/attention.h"
#include "linformer/error.h"

namespace lf {

namespace {

// Shape checks at kernel entry (LF_DCHECK: debug and LINFORMER_CHECKS builds).
void check(const SeqProjDims& d, const char* what) {
  LF_DCHECK(
      d.B > 0 && d.N > 0 && d.K > 0 && d.C > 0 && d.ldE >= d.N && d.ldx >= d.C && d.ldo >= d.C,
      what, ": inconsistent dims B=", d.B, " N=", d.N, " K=", d.K, " C=", d.C, " ldE=", d.ldE,
      " ldx=", d.ldx, " ldo=", d.ldo);
}
void check(const PoolDims& d, const char* what) {
  LF_DCHECK(d.B > 0 && d.N > 0 && d.K > 0 && d.w > 0 && d.C > 0 && d.K * d.w >= d.N, what,
            ": inconsistent dims B=", d.B, " N=", d.N, " K=", d.K, " w=", d.w, " C=", d.C,
            " (K windows of w must cover N)");
}

}  // namespace

void seq_project_forward_lowmem(float* out, float* em, const float* E, const float* x,
                                const float* mask, const SeqProjDims& dims, float* scratch,
                                int64_t tchunk, ComputeType prec) {
  check(dims, "seq_project_forward_lowmem");
  LF_DCHECK(out && E && x && (!mask || (scratch && tchunk > 0)),
            "seq_project_forward_lowmem: null pointer, or no scratch / tchunk=", tchunk,
            " for a mask");
  PhaseScope ps(Phase::attention);
  const int64_t B = dims.B, N = dims.N, K = dims.K, C = dims.C;
  const int64_t ldE = dims.ldE, ldx = dims.ldx, ldo = dims.ldo;
  if (!mask) {
    seq_project_forward(out, em, nullptr, E, x, nullptr, dims, prec);
    return;
  }
  for (int64_t b = 0; b < B; ++b) {
    const float* m = mask + b * N;
    float* ob = out + b * K * ldo;
    for (int64_t j = 0; j < K; ++j) std::fill(ob + j * ldo, ob + j * ldo + C, 0.f);
    if (em) std::fill(em + b * K, em + (b + 1) * K, 0.f);
    for (int64_t t0 = 0; t0 < N; t0 += tchunk) {
      const int64_t tc = std::min(tchunk, N - t0);
      bool any = false;
      for (int64_t t = t0; t < t0 + tc && !any; ++t) any = m[t] != 0.f;
      if (!any) continue;
      parallel_for(0, K, 16, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          const float* e = E + j * ldE + t0;
          float* sj = scratch + j * tc;
          float s = 0.f;
          for (int64_t t = 0; t < tc; ++t) {
            sj[t] = e[t] * m[t0 + t];
            s += sj[t];
          }
          if (em) em[b * K + j] += s;
        }
      });
      gemm(prec, false, false, K, C, tc, 1.f, scratch, tc, x + (b * N + t0) * ldx, ldx, 1.f, ob,
           ldo);
    }
  }
}

void seq_project_forward(float* out, float* em, float* Ebm, const float* E, const float* x,
                         const float* mask, const SeqProjDims& dims, ComputeType prec) {
  check(dims, "seq_project_forward");
  LF_DCHECK(out && E && x && (!mask || Ebm),
            "seq_project_forward: null output, E or input, or no Ebm for a mask");
  PhaseScope ps(Phase::attention);
  const int64_t B = dims.B, N = dims.N, K = dims.K, C = dims.C;
  const int64_t ldE = dims.ldE, ldx = dims.ldx, ldo = dims.ldo;
  // A_b = E diag(m_b): E itself, shared by the batch, or with a mask Ebm_b.
  const float* A = E;
  BatchLayout la{/*sb=*/0, /*sh=*/0, /*ld=*/ldE};
  if (mask) {
    parallel_for(0, B * K, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* m = mask + r / K * N;
        const float* e = E + r % K * ldE;
        for (int64_t t = 0; t < N; ++t) Ebm[r * N + t] = e[t] * m[t];
      }
    });
    A = Ebm;
    la = BatchLayout{/*sb=*/K * N, /*sh=*/0, /*ld=*/N};
  }
  if (em) {
    parallel_for(0, B * K, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* a = A + r / K * la.sb + r % K * la.ld;
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t t = 0; t < N; ++t) s += a[t];
        em[r] = s;
      }
    });
  }
  gemm_batched(prec, B, 1, false, false, K, C, N, 1.f, A, la, x, BatchLayout{N * ldx, 0, ldx}, 0.f,
               out, BatchLayout{K * ldo, 0, ldo});
}

void seq_project_backward(float* dx, float* dE, const float* dout, const float* dem,
                          const float* Ebm, const float* E, const float* x, const float* mask,
                          const SeqProjDims& dims, float* scratch, ComputeType prec) {
  check(dims, "seq_project_backward");
  LF_DCHECK(dout && (mask ? Ebm != nullptr : E != nullptr) && (!dE || (x && scratch)),
            "seq_project_backward: null output gradient, E (Ebm with a mask), input or scratch");
  PhaseScope ps(Phase::attention);
  const int64_t B = dims.B, N = dims.N, K = dims.K, C = dims.C;
  const int64_t ldE = dims.ldE, ldx = dims.ldx, ldo = dims.ldo;
  const BatchLayout lout{K * ldo, 0, ldo}, lx{N * ldx, 0, ldx};
  // dout is an operand of both products: in bf16 it is rounded once, and read so by each
  // product that runs in bf16 (one that runs in f32 reads dout itself).
  thread_local Buffer<uint16_t> dout_buf;
  const uint16_t* dout16 = dx && dE && gemm_batched_runs_bf16(prec, B, 1, N, C, K)
                               ? round_batch_bf16(dout_buf, B, 1, K, C, lout, dout)
                               : nullptr;
  const auto dout_as = [&](bool bf16, int64_t offset) {
    return dout16 && bf16 ? TensorIn(dout16 + offset) : TensorIn(dout + offset);
  };
  if (dx)
    gemm_batched(prec, B, 1, true, false, N, C, K, 1.f, mask ? Ebm : E,
                 mask ? BatchLayout{K * N, 0, N} : BatchLayout{0, 0, ldE}, dout_as(true, 0), lout,
                 1.f, dx, lx);
  if (!dE) return;
  if (!mask) {
    // dE[:, :N] += sum_b dout_b x_b^T + (sum_b dem_b) 1^T: the products accumulate into one
    // dense K x N block of scratch (in cache), then one pass adds it to dE. (gemm takes the
    // rounded operands when they are dense.)
    for (int64_t b = 0; b < B; ++b)
      gemm(prec, false, true, K, N, C, 1.f,
           dout_as(ldo == C && gemm_runs_bf16(prec, K, N, C), b * lout.sb), ldo, x + b * lx.sb, ldx,
           b ? 1.f : 0.f, scratch, N);
    parallel_for(0, K, 4, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        float e = 0.f;
        if (dem)
          for (int64_t b = 0; b < B; ++b) e += dem[b * K + j];
        float* g = dE + j * ldE;
        const float* s = scratch + j * N;
#pragma omp simd
        for (int64_t t = 0; t < N; ++t) g[t] += s[t] + e;
      }
    });
    return;
  }
  // dout_b x_b^T of every sequence into scratch [B,K,N], then summed over the batch.
  gemm_batched(prec, B, 1, false, true, K, N, C, 1.f,
               dout_as(gemm_batched_runs_bf16(prec, B, 1, K, N, C), 0), lout, x, lx, 0.f, scratch,
               BatchLayout{K * N, 0, N});
  parallel_for(0, K, 4, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      float* g = dE + j * ldE;
      for (int64_t b = 0; b < B; ++b) {
        const float* s = scratch + (b * K + j) * N;
        const float e = dem ? dem[b * K + j] : 0.f;
        const float* m = mask ? mask + b * N : nullptr;
        if (m) {
#pragma omp simd
          for (int64_t t = 0; t < N; ++t) g[t] += (s[t] + e) * m[t];
        } else {
#pragma omp simd
          for (int64_t t = 0; t < N; ++t) g[t] += s[t] + e;
        }
      }
    }
  });
}

void max_pool_forward(float* out, int32_t* arg, const float* x, const float* mask,
                      const PoolDims& d) {
  check(d, "max_pool_forward");
  LF_DCHECK(out && arg && x, "max_pool_forward: null pointer");
  PhaseScope ps(Phase::attention);
  const int64_t N = d.N, K = d.K, w = d.w, C = d.C;
  parallel_for(0, d.B * K, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / K, j = r % K;
      float* o = out + r * C;
      int32_t* a = arg + r * C;
      std::fill(o, o + C, -std::numeric_limits<float>::infinity());
      std::fill(a, a + C, -1);
      const int64_t t1 = std::min((j + 1) * w, N);
      for (int64_t t = j * w; t < t1; ++t) {
        if (mask && mask[b * N + t] == 0.f) continue;
        const float* xr = x + (b * N + t) * C;
        for (int64_t c = 0; c < C; ++c)
          if (a[c] < 0 || xr[c] > o[c] || std::isnan(xr[c])) {  // NaN wins (propagates)
            o[c] = xr[c];
            a[c] = static_cast<int32_t>(t);
          }
      }
      for (int64_t c = 0; c < C; ++c)
        if (a[c] < 0) o[c] = 0.f;
    }
  });
}

void max_pool_backward(float* dx, const float* dout, const int32_t* arg, const PoolDims& d) {
  check(d, "max_pool_backward");
  LF_DCHECK(dx && dout && arg, "max_pool_backward: null pointer");
  PhaseScope ps(Phase::attention);
  const int64_t B = d.B, N = d.N, K = d.K, C = d.C;
  parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t j = 0; j < K; ++j) {
        const int64_t r = b * K + j;
        for (int64_t c = 0; c < C; ++c) {
          const int32_t t = arg[r * C + c];
          if (t >= 0) dx[(b * N + t) * C + c] += dout[r * C + c];
        }
      }
  });
}

}  // namespace lf
