// Parameter initialisation: every value is a function of (seed, parameter name, index).
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "linformer/rng.h"
#include "model/model_impl.h"

namespace lf {

namespace {

// Stable 64-bit hash of a parameter name (FNV-1a): names key the init random streams.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void Model::Impl::init_param(const ParamInfo& p, uint64_t s) {
  float* w = params.data() + p.offset;
  const uint64_t stream = name_hash(p.name);
  // Values are functions of (seed, name, index), so filling in parallel changes nothing.
  auto fill_normal = [&](float std) {
    parallel_for(0, static_cast<int64_t>(p.numel), 1 << 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        w[i] = std * rng_normal(s, stream, static_cast<uint64_t>(i));
    });
  };
  switch (p.init) {
    case Init::normal:
      fill_normal(cfg.init_std);
      break;
    case Init::proj_normal:
      fill_normal(1.f / std::sqrt(static_cast<float>(cfg.max_len)));
      break;
    case Init::proj_mean: {
      // [heads,] k x n: row j averages window [j n / k, (j+1) n / k), plus noise.
      const int64_t n = p.shape.back(), k = p.shape[p.shape.size() - 2];
      fill_normal(cfg.projection_init_noise / std::sqrt(static_cast<float>(n)));
      for (size_t m = 0; m < p.numel / static_cast<size_t>(k * n); ++m)
        for (int64_t j = 0; j < k; ++j) {
          const int64_t t0 = j * n / k, t1 = (j + 1) * n / k;
          float* row = w + (m * k + j) * n;
          for (int64_t t = t0; t < t1; ++t) row[t] += 1.f / static_cast<float>(t1 - t0);
        }
      break;
    }
    case Init::conv_mean: {
      const size_t win = static_cast<size_t>(p.shape.back());
      for (size_t i = 0; i < p.numel; ++i) w[i] = 1.f / static_cast<float>(win);
      break;
    }
    case Init::zeros:
      std::fill(w, w + p.numel, 0.f);
      break;
    case Init::ones:
      std::fill(w, w + p.numel, 1.f);
      break;
  }
}

}  // namespace lf
