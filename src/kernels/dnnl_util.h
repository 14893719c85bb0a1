// oneDNN helpers shared by the matrix-product kernels.
#pragma once
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

namespace lf {

// The CPU engine every oneDNN primitive of the library runs on.
const dnnl::engine& cpu_engine();

}  // namespace lf
