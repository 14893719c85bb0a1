// Operands as kernels and products take them: an activation with the forms it exists in. The
// precision travels with the data (docs/design.md, "Precision travels with the operands").
#pragma once
#include <cstdint>

namespace lf {

// An activation as the kernels take it: its f32 values (f), its bfloat16 copy (h), or both.
// The precision travels with the data: bf16 training keeps some activations in bf16 only (f
// null), and a product running in bf16 reads h when there is one instead of rounding f again.
struct Act {
  float* f = nullptr;
  uint16_t* h = nullptr;
  Act() = default;
  Act(float* f32) : f(f32) {}  // NOLINT: an f32 activation alone converts
  Act(float* f32, uint16_t* bf16) : f(f32), h(bf16) {}
};
// The same, read only. A plain pointer converts: an f32 activation without a bf16 copy.
struct ActIn {
  const float* f = nullptr;
  const uint16_t* h = nullptr;
  ActIn() = default;
  ActIn(const float* f32) : f(f32) {}  // NOLINT: an f32 activation alone converts
  ActIn(const float* f32, const uint16_t* bf16) : f(f32), h(bf16) {}
  ActIn(const Act& a) : f(a.f), h(a.h) {}  // NOLINT
};

}  // namespace lf
