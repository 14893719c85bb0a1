#include "layers/feed_forward.h"

#include <cstring>

#include "core/profile.h"
#include "kernels/ops.h"

namespace lf {

void FeedForward::forward(float* y, float* h, float* g, const float* x, int64_t R,
                          const uint16_t* x16, uint16_t* g16) const {
  linear_forward(h, x, inter.w, inter.b, LinearDims{/*rows=*/R, /*in=*/D, /*out=*/F}, t,
                 w16(inter), x16);
  gelu_forward(g, h, R * F, g16);
  linear_forward(y, g, out.w, out.b, LinearDims{/*rows=*/R, /*in=*/F, /*out=*/D}, t, w16(out),
                 g16);
}

void FeedForward::backward(float* dx, float* dG, const float* dy, const float* x,
                           const float* h, const float* g, int64_t R, const GradMap& grad,
                           const uint16_t* x16, const uint16_t* g16, GradInto into,
                           uint16_t* dG16) const {
  linear_backward(dG, grad(out.w), grad(out.b), dy, g, out.w,
                  LinearDims{/*rows=*/R, /*in=*/F, /*out=*/D}, t, w16(out), g16,
                  GradInto::overwrite);
  const LinearDims first{/*rows=*/R, /*in=*/D, /*out=*/F};
  if (dG16 && linear_backward_runs_bf16(t, first)) {  // d(h) in bf16 only, bias summed
    gelu_backward_round(dG16, grad(inter.b), dG, h, R, F);
    linear_backward(dx, grad(inter.w), nullptr, nullptr, x, inter.w, first, t, w16(inter), x16,
                    into, dG16);
    return;
  }
  gelu_backward_inplace(dG, h, R * F);  // dG becomes d(h)
  linear_backward(dx, grad(inter.w), grad(inter.b), dG, x, inter.w, first, t, w16(inter), x16,
                  into);
}

void FeedForward::infer_rows(float* y, const float* base, float* hidden, const float* x,
                             int64_t rows) const {
  using Epi = PackedLinear::Epilogue;
  inter.packed.apply(hidden, x, rows, inter.b, Epi::gelu);
  // y = base + b2, then y += hidden W2^T: residual and bias folded into the product's C.
  for (int64_t r = 0; r < rows; ++r) {
    float* o = y + r * D;
    const float* br = base + r * D;
#pragma omp simd
    for (int64_t c = 0; c < D; ++c) o[c] = br[c] + out.b[c];
  }
  out.packed.apply(y, hidden, rows, nullptr, Epi::accumulate);
}

}  // namespace lf
