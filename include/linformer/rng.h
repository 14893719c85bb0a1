// Counter-based random numbers: every value is a pure function of (seed, stream, index),
// so dropout masks and initial weights do not depend on thread count or call order.
#pragma once
#include <cmath>
#include <cstdint>

namespace lf {

// SplitMix64 finaliser: a strong 64-bit mixing function.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// rng_bits(seed, stream, i) == rng_bits_keyed(rng_key(seed, stream), i): hoist the key out of
// hot loops.
inline uint64_t rng_key(uint64_t seed, uint64_t stream) { return mix64(seed ^ mix64(stream)); }
inline uint64_t rng_bits_keyed(uint64_t key, uint64_t index) { return mix64(key + index); }
inline uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  return rng_bits_keyed(rng_key(seed, stream), index);
}

// Uniform in [0, 1) with 24 bits of precision.
inline float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(rng_bits(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal (Box-Muller on two independent uniforms).
inline float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t b = rng_bits(seed, stream, index);
  const double u1 = (static_cast<double>(b >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  const double u2 = static_cast<double>(rng_bits(seed, stream ^ 0x5bd1e995ull, index) >> 11) *
                    (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Stream ids name what the numbers are for, so two uses never share numbers.
inline uint64_t rng_stream(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
  return mix64(mix64(mix64(a) ^ b) ^ mix64(c + 0x632BE59BD9B4E019ull) ^ (d << 1));
}

}  // namespace lf
