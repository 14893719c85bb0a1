#include "layers/feed_forward.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/profile.h"
#include "kernels/ops.h"

namespace lf {

void FeedForward::forward(float* y, const float* x, const uint16_t* x16, int64_t R,
                          const FfnActs& a) const {
  const LinearDims first{/*rows=*/R, /*in=*/D, /*out=*/F}, second{/*rows=*/R, /*in=*/F, /*out=*/D};
  if (a.h16) {  // every product in bf16, on the packed weights
    LF_DCHECK(x16 && a.g16 && wt(inter).forward,
              "FeedForward: bf16 activations without bf16 operands");
    wt(inter).forward->apply_bf16(a.h16, x16, R, inter.b);
    gelu_forward_bf16(a.g16, a.h16, R * F);
    linear_forward(y, ActIn(nullptr, a.g16), Weight(out.w, wt(out)), out.b, second, t);
    return;
  }
  linear_forward(a.h, ActIn(x, x16), Weight(inter.w, wt(inter)), inter.b, first, t);
  gelu_forward(a.g, a.h, R * F);
  linear_forward(y, a.g, Weight(out.w, wt(out)), out.b, second, t);
}

void FeedForward::backward(float* dx, const float* dy, const float* x, const uint16_t* x16,
                           int64_t R, const FfnActs& a, const FfnScratch& s, const GradMap& grad,
                           GradInto into) const {
  const LinearDims first{/*rows=*/R, /*in=*/D, /*out=*/F}, second{/*rows=*/R, /*in=*/F, /*out=*/D};
  if (a.h16) {
    LF_DCHECK(s.dG16 && s.dy16 && wt(out).backward, "FeedForward: no bf16 scratch");
    // d(g) = dy W2 written in bf16 (dy rounded once, b2's and W2's gradients first; dy null:
    // s.dy16 came rounded, with b2's gradient, from the LayerNorm's backward).
    linear_backward_bf16_input(s.dG16, grad(out.w), grad(out.b), dy, a.g16, second, wt(out),
                               s.dy16);
    // d(h) = d(g) GELU'(h), in place in bf16, b1's gradient summed in the same pass.
    gelu_backward_round(s.dG16, grad(inter.b), s.dG16, a.h16, R, F);
    linear_backward(LinearGrads{dx, grad(inter.w), nullptr, into}, ActIn(nullptr, s.dG16),
                    ActIn(x, x16), Weight(inter.w, wt(inter)), first, t);
    return;
  }
  linear_backward(LinearGrads{s.dG, grad(out.w), grad(out.b), GradInto::overwrite}, dy, a.g,
                  Weight(out.w, wt(out)), second, t);
  gelu_backward_inplace(s.dG, a.h, R * F);  // dG becomes d(h)
  linear_backward(LinearGrads{dx, grad(inter.w), grad(inter.b), into}, s.dG, ActIn(x, x16),
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
    PackedLinear::QuantizedRows h;
    h.q = reinterpret_cast<uint8_t*>(hidden);
    h.scale = hidden + (mm * F + 3) / 4;
    for (int64_t r0 = 0; r0 < rows; r0 += kFusedRows) {
      const int64_t m = std::min(kFusedRows, rows - r0);
      inter.packed.apply_gelu_quantized(h, x + r0 * D, m, inter.b);
      residual(r0, r0 + m);
      out.packed.apply_quantized(y + r0 * D, h, m, nullptr, Epi::accumulate);
    }
    return;
  }
  inter.packed.apply(hidden, x, rows, inter.b, Epi::gelu);
  residual(0, rows);
  out.packed.apply(y, hidden, rows, nullptr, Epi::accumulate);
}

}  // namespace lf
