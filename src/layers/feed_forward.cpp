#include "layers/feed_forward.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/profile.h"
#include "kernels/ops.h"

namespace lf {

void FeedForward::forward(float* y, TensorIn x, int64_t R, const FfnActs& a) const {
  const LinearDims first{/*rows=*/R, /*in=*/D, /*out=*/F}, second{/*rows=*/R, /*in=*/F, /*out=*/D};
  linear_forward(a.h, x, Weight(inter.w, wt(inter)), inter.b, first, t);
  gelu_forward(a.g, a.h, R * F);
  linear_forward(y, a.g, Weight(out.w, wt(out)), out.b, second, t);
}

void FeedForward::backward(float* dx, TensorIn dy, TensorIn x, int64_t R, const FfnActs& a,
                           Tensor dG, const GradMap& grad, GradInto into) const {
  const LinearDims first{/*rows=*/R, /*in=*/D, /*out=*/F}, second{/*rows=*/R, /*in=*/F, /*out=*/D};
  LF_DCHECK(dG.dtype == a.h.dtype && dG.dtype == a.g.dtype,
            "FeedForward: the hidden gradient in another dtype than the activations");
  // d(g) = dy W2, in dG's dtype (bf16: dy rounded once, b2's and W2's gradients first).
  linear_backward(LinearGrads{dG, grad(out.w), grad(out.b), GradInto::overwrite}, dy, a.g,
                  Weight(out.w, wt(out)), second, t);
  // d(h) = d(g) GELU'(h), in place. bf16: b1's gradient summed in the same pass, as the
  // rounded gradient's products take it.
  gelu_backward_inplace(dG, a.h, R, F, grad(inter.b));
  linear_backward(LinearGrads{dx, grad(inter.w), grad(inter.b), into}, dG, x,
                  Weight(inter.w, wt(inter)), first, t);
}

void FeedForward::infer_rows(float* y, const float* base, float* hidden, const float* x,
                             int64_t rows) const {
  using Epi = PackedLinear::Epilogue;
  // y = base + b2, then y += GELU(x W1^T + b1) W2^T: residual and bias folded into the second
  // product's C.
  const auto residual = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = y + r * D;
      const float* br = base + r * D;
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) o[c] = br[c] + out.b[c];
    }
  };
  if (inter.packed.type() == ComputeType::int8 && out.packed.type() == ComputeType::int8 &&
      F >= 4) {
    // Both products in int8: the hidden activation goes from the first product's epilogue to
    // the second quantized (u8 [m, F] and a scale per row, in hidden's space), never in f32,
    // kFusedRows rows at a time so that it and the int32 blocks stay in the core's L2.
    // u8 [mm, F] then mm scales: within hidden's rows * F floats (F >= 4; a narrower FFN,
    // only seen in tests, takes the path below through an f32 hidden activation).
    const int64_t mm = std::min(kFusedRows, rows);
    const Tensor h(reinterpret_cast<uint8_t*>(hidden), hidden + (mm * F + 3) / 4);
    for (int64_t r0 = 0; r0 < rows; r0 += kFusedRows) {
      const int64_t m = std::min(kFusedRows, rows - r0);
      inter.packed.apply(h, x + r0 * D, m, inter.b, Epi::gelu);
      residual(r0, r0 + m);
      out.packed.apply(y + r0 * D, h, m, nullptr, Epi::accumulate);
    }
    return;
  }
  inter.packed.apply(hidden, x, rows, inter.b, Epi::gelu);
  residual(0, rows);
  out.packed.apply(y, hidden, rows, nullptr, Epi::accumulate);
}

}  // namespace lf
