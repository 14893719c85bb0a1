#include "layers/projection.h"

#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/matmul.h"

namespace lf {

int Projections::add(const ParamInfo* param, int64_t heads, int64_t k) {
  ProjectionSlot s;
  s.heads = heads;
  s.k = k;
  s.window = cfg_.max_len / k;
  s.param = param;
  if (cfg_.projection == Projection::mean_pool || cfg_.projection == Projection::conv) {
    s.eff.resize(heads * k * cfg_.max_len);
    s.eff.zero();
    if (cfg_.projection == Projection::conv) {
      s.deff.resize(heads * k * cfg_.max_len);
      s.deff.zero();
    }
    if (cfg_.projection == Projection::mean_pool)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < k; ++j)
          for (int64_t u = 0; u < s.window; ++u)
            s.eff[(h * k + j) * cfg_.max_len + j * s.window + u] = 1.f / s.window;
  }
  slots_.push_back(std::move(s));
  return static_cast<int>(slots_.size() - 1);
}

const float* Projections::E(int i) const {
  const ProjectionSlot& s = slots_[i];
  if (cfg_.projection == Projection::linear) return params_ + s.param->offset;
  return s.eff.data();
}

float* Projections::dE(int i, float* grads) {
  ProjectionSlot& s = slots_[i];
  if (cfg_.projection == Projection::linear) return grads + s.param->offset;
  if (cfg_.projection == Projection::conv) return s.deff.data();
  return nullptr;
}

void Projections::refresh() {
  PhaseScope ps(Phase::attention);
  if (cfg_.projection != Projection::conv) return;
  for (ProjectionSlot& s : slots_) {
    const float* c = params_ + s.param->offset;  // kernels [heads, window]
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t j = 0; j < s.k; ++j)
        for (int64_t u = 0; u < s.window; ++u)
          s.eff[(h * s.k + j) * cfg_.max_len + j * s.window + u] = c[h * s.window + u];
  }
}

void Projections::reduce_grad(int i, float* grads) {
  PhaseScope ps(Phase::attention);
  if (cfg_.projection != Projection::conv) return;
  ProjectionSlot& s = slots_[i];
  float* dc = grads + s.param->offset;
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t j = 0; j < s.k; ++j)
      for (int64_t u = 0; u < s.window; ++u)
        dc[h * s.window + u] += s.deff[(h * s.k + j) * cfg_.max_len + j * s.window + u];
  s.deff.zero();
}

size_t Projections::bytes() const {
  size_t b = 0;
  for (const auto& s : slots_) b += (s.eff.size() + s.deff.size()) * sizeof(float);
  return b;
}

void Projections::check(int i, const ProjShape& s, const char* what) const {
  LF_DCHECK(i >= 0 && i < static_cast<int>(slots_.size()), what, ": no projection slot ", i);
  LF_DCHECK(s.B > 0 && s.N > 0 && s.N <= cfg_.max_len && s.K == slots_[i].k && s.rows > 0 &&
                s.rows <= s.K,
            what, ": shape B=", s.B, " N=", s.N, " K=", s.K, " rows=", s.rows,
            " does not fit slot ", i,
            " (k=", slots_[i].k, ", max_len=", cfg_.max_len, ")");
}

void Projections::heads_forward(int i, float* kp, const float* x, const ProjShape& s,
                                ComputeType prec) const {
  check(i, s, "heads_forward");
  LF_DCHECK(kp && x, "heads_forward: null pointer");
  PhaseScope ps(Phase::attention);
  const int64_t B = s.B, N = s.N, K = s.K, rows = s.rows;
  const int64_t D = cfg_.d_model, H = cfg_.n_heads, Dh = cfg_.d_head(), n = cfg_.max_len;
  const float* E0 = E(i);
  const bool per_head = slots_[i].heads > 1;
  parallel_for(0, B * H, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* Eh = E0 + (per_head ? h * K * n : 0);
      gemm(prec, false, false, rows, Dh, N, 1.f, Eh, n, x + b * N * D + h * Dh, D, 0.f,
           kp + b * rows * D + h * Dh, D);
    }
  });
}

void Projections::heads_backward(int i, float* dx, float* dE, const float* dkp, const float* x,
                                 const ProjShape& s, ComputeType prec) const {
  check(i, s, "heads_backward");
  LF_DCHECK(dx && dkp && (!dE || x), "heads_backward: null pointer");
  PhaseScope ps(Phase::attention);
  const int64_t B = s.B, N = s.N, K = s.K, rows = s.rows;
  const int64_t D = cfg_.d_model, H = cfg_.n_heads, Dh = cfg_.d_head(), n = cfg_.max_len;
  const float* E0 = E(i);
  const bool per_head = slots_[i].heads > 1;
  // Parallel over heads; batch elements in sequence, since they share dE_h.
  parallel_for(0, H, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t eo = per_head ? h * K * n : 0;
      for (int64_t b = 0; b < B; ++b) {
        const float* g = dkp + b * rows * D + h * Dh;
        gemm(prec, true, false, N, Dh, rows, 1.f, E0 + eo, n, g, D, 1.f, dx + b * N * D + h * Dh,
             D);
        if (dE)
          gemm(prec, false, true, rows, N, Dh, 1.f, g, D, x + b * N * D + h * Dh, D, 1.f, dE + eo,
               n);
      }
    }
  });
}

}  // namespace lf
