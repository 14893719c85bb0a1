// oneDNN helpers shared by the matrix-product kernels.
#pragma once
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

namespace lf {

// The CPU engine every oneDNN primitive of the library runs on.
const dnnl::engine& cpu_engine();

// Round-to-nearest-even f32 -> bf16 of a rows x cols block with leading dimension ld, packed
// densely (leading dimension cols). Parallel over rows outside an OpenMP parallel region.
void to_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t cols, int64_t ld);

}  // namespace lf
