// Bitwise op cases of the dropout kernels (kernels/ops.h): dropout_forward (out of place and in
// place), dropout_backward (GradInto::overwrite and ::add) in f32, dropout_round (g null and
// given) in bf16, against a naive scalar loop written here: the mask element by element from
// DropoutMask::keep_scalar, the products inp * (1 / (1 - p)) in float, bf16 rounding written
// out from the format. On the AVX-512 levels the kernels run their vector forms
// (isa/dropout_kernels.cpp), elsewhere their scalar loops; both must give these bits, so the
// cases run on every level (tests/CMakeLists.txt, isa_<level>.Registry/Ops.*).
// Each result is written as its bit pattern in two 16-bit halves (a bf16 as one), integers a
// float holds exactly, so the harness's comparison with tolerance 0 is a bitwise one, NaN
// payloads included. Sizes from 1 to past two parallel chunks, mask offsets `first` of every
// residue modulo 4 and not multiples of 32, and inputs with NaN (quiet, signalling, negative),
// infinities, denormals, -0, FLT_MAX and bf16 rounding ties among the random values.
#include <cstdio>

#include "kernels/dropout_mask.h"
#include "ops/harness.h"

namespace lf::ops {
namespace {

constexpr uint64_t kSeed = 17, kStream = 23;
const int64_t kFirsts[] = {0, 1, 2, 3, 5, 37};
// p = 0.5: scale 2, exact, so a bf16 tie stays a tie; 0.99999: threshold 65535, the largest
// the vector compare takes; 0.999995: threshold 65536 (nothing kept), the scalar loop's.
const float kPs[] = {0.1f, 0.5f, 0.99999f, 0.999995f};
constexpr size_t kRuns = sizeof(kFirsts) / sizeof(kFirsts[0]) * (sizeof(kPs) / sizeof(kPs[0]));

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The special values, as bit patterns: NaNs (whose low half would carry into the high half if
// rounded as a number: 0x7FFFFFFF would become -0), infinities, denormals, zeros, FLT_MAX (to
// inf when scaled, and in bf16), the smallest normal, bf16 ties (low half 0x8000: to even, down
// and up), a value that rounds up into the next binade.
const uint32_t kSpecials[] = {0x7FC00000u, 0xFFC12345u, 0x7F800001u, 0xFFA00005u, 0x7FFFFFFFu,
                              0xFFC0FFFFu, 0x7FA0C000u, 0x7FC18000u, 0x7F800000u, 0xFF800000u,
                              0x00000001u, 0x007FFFFFu, 0x80400000u, 0x80000000u, 0x00000000u,
                              0x7F7FFFFFu, 0xFF7FFFFFu, 0x00800000u, 0x3F808000u, 0x3F818000u,
                              0xBF008000u, 0x3F7FFFFFu, 0x00018000u, 0x00028000u};
constexpr int kNumSpecials = sizeof(kSpecials) / sizeof(kSpecials[0]);

// Random values with every third element (from `phase`) a special one.
std::vector<float> with_specials(int64_t n, uint64_t seed, int phase) {
  std::vector<float> v = rnd(n, seed);
  for (int64_t i = phase; i < n; i += 3) v[i] = from_bits(kSpecials[(i / 3 + seed) % kNumSpecials]);
  return v;
}

// bf16 of f from the format: the high half, plus one where the low half is above half a step
// or exactly half with the high half odd (round to nearest even); a NaN keeps its sign and top
// payload bits and is made quiet (bit 6 of the high half).
uint16_t bf16_ref(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t hi = static_cast<uint16_t>(u >> 16);
  const uint32_t lo = u & 0xFFFFu;
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
    return static_cast<uint16_t>(hi | 0x40u);
  return static_cast<uint16_t>(hi + ((lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) ? 1 : 0));
}

// One float as two outputs (high and low half of its bits); one bf16 as one.
void put(double*& o, float f) {
  *o++ = bits_of(f) >> 16;
  *o++ = bits_of(f) & 0xFFFFu;
}
void put(double*& o, uint16_t h) { *o++ = h; }
void put(float*& o, float f) {
  *o++ = float(bits_of(f) >> 16);
  *o++ = float(bits_of(f) & 0xFFFFu);
}
void put(float*& o, uint16_t h) { *o++ = float(h); }

// The product of the reference, its own rounding step (never fused with a following add).
float times(float a, float b) {
  volatile float r = a * b;
  return r;
}

// f32: per (p, first): forward out of place, forward in place, backward overwriting a NaN
// buffer, backward adding into `base` (whose specials sit where dout's do not: which NaN a
// NaN + NaN keeps is the compiler's choice of operand order, not specified). 8 outputs an
// element. bf16: dropout_round with g null (out16), then with g (out16, g): 4 outputs.
OpCase dropout_bits(ComputeType t, int64_t n) {
  const bool f32 = t == ComputeType::f32;
  Inputs in = {{"x", with_specials(n, 51, 0), false},
               {"dout", with_specials(n, 52, 1), false},
               {"base", with_specials(n, 53, 2), false},
               {"g", with_specials(n, 54, 0), false}};
  OpCase c = new_case("dropout_bits_n" + std::to_string(n), t, false, dims({n}), std::move(in),
                      kRuns * (f32 ? 8 : 4) * n);
  c.tol = 0;  // bitwise
  c.run = [=](const Inputs& in, float* o) {
    std::vector<float> a(n), b(n);
    std::vector<uint16_t> h(n);
    for (float p : kPs)
      for (int64_t first : kFirsts) {
        if (f32) {
          dropout_forward(a.data(), ptr(in, 0), n, p, kSeed, kStream, first);
          b = in[0].v;
          dropout_forward(b.data(), b.data(), n, p, kSeed, kStream, first);
          for (int64_t i = 0; i < n; ++i) put(o, a[i]), put(o, b[i]);
          a.assign(n, from_bits(0x7FC0DEADu));
          dropout_backward(a.data(), ptr(in, 1), n, p, kSeed, kStream, first, GradInto::overwrite);
          b = in[2].v;
          dropout_backward(b.data(), ptr(in, 1), n, p, kSeed, kStream, first, GradInto::add);
          for (int64_t i = 0; i < n; ++i) put(o, a[i]), put(o, b[i]);
        } else {
          dropout_round(h.data(), ptr(in, 0), nullptr, n, p, kSeed, kStream, first);
          for (int64_t i = 0; i < n; ++i) put(o, h[i]);
          a = in[3].v;
          h.assign(n, 0xDEADu);
          dropout_round(h.data(), ptr(in, 0), a.data(), n, p, kSeed, kStream, first);
          for (int64_t i = 0; i < n; ++i) put(o, h[i]), put(o, a[i]);
        }
      }
  };
  c.reference = [=](const Inputs& in, double* o) {
    const std::vector<float>&x = in[0].v, &dout = in[1].v, &base = in[2].v, &g = in[3].v;
    for (float p : kPs)
      for (int64_t first : kFirsts) {
        const DropoutMask mask(p, kSeed, kStream, first);
        const float s = 1.f / (1.f - p);
        std::vector<bool> keep(n);
        for (int64_t i = 0; i < n; ++i)
          keep[i] = mask.keep_scalar(static_cast<uint64_t>(first + i));
        if (f32) {
          for (int64_t i = 0; i < n; ++i) {
            const float y = keep[i] ? times(x[i], s) : 0.f;
            put(o, y), put(o, y);
          }
          for (int64_t i = 0; i < n; ++i) {
            put(o, keep[i] ? times(dout[i], s) + 0.f : 0.f);
            put(o, keep[i] ? times(dout[i], s) + base[i] : base[i]);
          }
        } else {
          for (int64_t i = 0; i < n; ++i) put(o, bf16_ref(keep[i] ? times(x[i], s) : 0.f));
          for (int64_t i = 0; i < n; ++i) {
            put(o, bf16_ref(keep[i] ? times(x[i], s) : 0.f));
            put(o, keep[i] ? times(g[i], s) : 0.f);
          }
        }
      }
  };
  // Where the first difference is: the run's p and first, the element, which result.
  c.check = [=](const Inputs&, const std::vector<float>& out, const std::vector<double>& ref) {
    const size_t per = (f32 ? 8 : 4) * n, nf = sizeof(kFirsts) / sizeof(kFirsts[0]);
    for (size_t k = 0; k < out.size(); ++k) {
      if (double(out[k]) == ref[k]) continue;
      const size_t run = k / per, r = k % per;
      size_t elem;
      const char* what;
      if (f32) {
        const bool bwd = r >= 4 * size_t(n);
        const size_t q = bwd ? r - 4 * n : r;
        elem = q / 4;
        const bool second = q % 4 >= 2;
        what = bwd ? (second ? "backward add" : "backward overwrite")
                   : (second ? "forward in place" : "forward");
      } else {
        const bool with_g = r >= size_t(n);
        elem = with_g ? (r - n) / 3 : r;
        what = !with_g ? "out16, g null" : (r - n) % 3 == 0 ? "out16, g given" : "g";
      }
      char buf[200];
      std::snprintf(buf, sizeof buf, "p %g first %lld element %zu (%s): bits %.0f vs %.0f",
                    double(kPs[run / nf]), static_cast<long long>(kFirsts[run % nf]), elem, what,
                    double(out[k]), ref[k]);
      return std::string(buf);
    }
    return std::string();
  };
  return c;
}

}  // namespace

std::vector<CaseMaker> dropout_cases() {
  std::vector<CaseMaker> v;
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{31}, int64_t{33}, int64_t{100}, int64_t{1037},
                    3 * kGrainElems + 77})
    add_per_dtype(v, kF32Bf16, [n](ComputeType t, bool) { return dropout_bits(t, n); });
  return v;
}

}  // namespace lf::ops
