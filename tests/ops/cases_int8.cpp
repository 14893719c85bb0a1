// Op cases of int8 inference's kernels (kernels/quantize.h, the int8 PackedLinear) against naive
// references in double: quantizing rows (rounding half to even, the largest value to qmax,
// zero and tiny rows, leading dimensions, the unsigned form), dequantizing (every epilogue, with
// and without bias and column offsets), the GELU epilogue that quantizes its output, and the
// int8 product within the bound its quantization allows. Each has an element rule of its own
// (OpCase::check); the properties between kernels (bitwise equalities, row independence, the
// refusals) are tests/test_int8.cpp.
#include <limits>

#include "kernels/matmul.h"
#include "kernels/quantize.h"
#include "ops/harness.h"

namespace lf::ops {
namespace {

// The naive quantization of one row: scale = max|x| / qmax, q = x / scale rounded half to even,
// in double.
void naive_quantize(const float* x, int64_t n, int qmax, double* q, double& scale) {
  double amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(double(x[i])));
  scale = amax / qmax;
  for (int64_t i = 0; i < n; ++i) {
    q[i] = 0;
    if (amax == 0) continue;
    const double v = double(x[i]) / scale;
    double r = std::floor(v + 0.5);
    if (r - v == 0.5 && std::fmod(r, 2.0) != 0) r -= 1;  // a tie goes to the even neighbour
    q[i] = r;
  }
}

std::string at(const char* what, int64_t r, int64_t c) {
  return std::string(what) + " at " + std::to_string(r) + "," + std::to_string(c);
}

// Quantized rows [rows, cols] (stride ldq) against the naive ones: within one step, at most one
// element a row a step off (the kernel multiplies by qmax / amax in f32, so a value within f32
// rounding of a tie may take the other neighbour), never beyond qmax, padding untouched; a row
// whose scale is 0 all zeros; scales within 1e-6 (rel_scale) of the naive ones.
std::string check_quantized(const float* q, const double* want, const float* s, const double* ws,
                            int64_t rows, int64_t cols, int64_t ldq, int qmax, float pad,
                            double rel_scale, double abs_scale) {
  for (int64_t r = 0; r < rows; ++r) {
    if (!(std::abs(s[r] - ws[r]) <= rel_scale * ws[r] + abs_scale))
      return at("scale", r, 0) + ": " + std::to_string(s[r]) + " vs " + std::to_string(ws[r]);
    int off_by_one = 0;
    for (int64_t c = 0; c < ldq; ++c) {
      const float got = q[r * ldq + c];
      if (c >= cols) {
        if (got != pad) return at("padding written", r, c);
        continue;
      }
      const double w = want[r * ldq + c];
      if (std::abs(got) > qmax || std::abs(got - w) > 1) return at("off by more than a step", r, c);
      if (ws[r] == 0 && got != 0) return at("nonzero in a zero row", r, c);
      off_by_one += got != w;
    }
    if (off_by_one > 1) return at("more than one element a step off", r, 0);
  }
  return "";
}

// quantize_rows and quantize_rows_u8 (its values shifted by 128, the same scales) over rows
// with leading dimensions, a zero row and a tiny one. out = [q, scales, q_u8 - 128, scales_u8].
OpCase quantize_case(int qmax) {
  const int64_t rows = 37, cols = 45, ldx = 50, ldq = 48, nq = rows * ldq;
  std::vector<float> x = rnd(rows * ldx, 3, 2.f);
  for (int64_t c = 0; c < cols; ++c) x[5 * ldx + c] = 0.f;      // a zero row
  for (int64_t c = 0; c < cols; ++c) x[9 * ldx + c] *= 1e-30f;  // a tiny one
  OpCase o = new_case("quantize_rows_q" + std::to_string(qmax), ComputeType::int8, false,
                      dims({rows, cols}), {{"x", x, false}}, 2 * (nq + rows));
  o.min_err = 0;
  o.bytes = 5.0 * rows * cols;
  const float pad8 = 99.f, pad_u8 = 7.f - 128.f;
  o.run = [=](const Inputs& in, float* out) {
    std::vector<int8_t> q(nq, 99);
    std::vector<uint8_t> u(nq, 7);
    quantize_rows(q.data(), ldq, out + nq, ptr(in, 0), rows, cols, ldx, qmax);
    quantize_rows_u8(u.data(), ldq, out + 2 * nq + rows, ptr(in, 0), rows, cols, ldx, qmax);
    for (int64_t i = 0; i < nq; ++i) out[i] = q[i], out[nq + rows + i] = float(u[i]) - 128.f;
  };
  o.reference = [=](const Inputs& in, double* out) {
    for (int half = 0; half < 2; ++half) {
      double* q = out + half * (nq + rows);
      for (int64_t r = 0; r < rows; ++r) {
        naive_quantize(ptr(in, 0) + r * ldx, cols, qmax, q + r * ldq, q[nq + r]);
        for (int64_t c = cols; c < ldq; ++c) q[r * ldq + c] = half ? pad_u8 : pad8;
      }
    }
  };
  o.check = [=](const Inputs&, const std::vector<float>& out, const std::vector<double>& ref) {
    const std::string e = check_quantized(out.data(), ref.data(), out.data() + nq, ref.data() + nq,
                                          rows, cols, ldq, qmax, pad8, 1e-6, 0);
    if (!e.empty()) return "int8: " + e;
    // The unsigned form: the same values shifted by 128 and the same scales, bit for bit.
    for (int64_t i = 0; i < rows * ldq; ++i) {
      const int64_t r = i / ldq, c = i % ldq;
      if (out[nq + rows + i] != (c < cols ? out[i] : pad_u8)) return at("u8: not q + 128", r, c);
    }
    for (int64_t r = 0; r < rows; ++r)
      if (out[2 * nq + rows + r] != out[nq + r]) return at("u8: another scale", r, 0);
    return std::string();
  };
  return o;
}
OpCase quantize_127(bool) { return quantize_case(127); }
OpCase quantize_63(bool) { return quantize_case(63); }

// int32 sums as floats (exact below 2^24), with per-row and per-column scales, column offsets,
// a bias and the values the accumulate epilogue adds to.
constexpr int64_t kDqRows = 9, kDqN = 21;
Inputs dequant_inputs(uint64_t mult, uint64_t mod, int64_t off_mult, uint64_t seed) {
  std::vector<float> acc(kDqRows * kDqN), off(kDqN);
  for (int64_t i = 0; i < kDqRows * kDqN; ++i)
    acc[i] = float(int64_t((i * mult) % mod) - int64_t(mod / 2));
  for (int64_t n = 0; n < kDqN; ++n) off[n] = float(n * off_mult - 9000);
  return {{"acc", acc, false},
          {"row_scale", rnd(kDqRows, seed, 1e-3f), false},
          {"col_scale", rnd(kDqN, seed + 1, 1e-2f), false},
          {"bias", rnd(kDqN, seed + 2), false},
          {"start", rnd(kDqRows * kDqN, seed + 3), false},
          {"offset", off, false}};
}
std::vector<int32_t> ints(const Input& in) { return {in.v.begin(), in.v.end()}; }
double dequant_ref(const Inputs& in, int64_t m, int64_t n, bool bias, bool offset) {
  const double a = double(in[0].v[m * kDqN + n]) - (offset ? in[5].v[n] : 0);
  return a * in[1].v[m] * in[2].v[n] + (bias ? in[3].v[n] : 0.0);
}

// dequantize_rows: every epilogue, with and without bias and column offsets, one after another.
OpCase dequantize_case(bool) {
  const int64_t each = kDqRows * kDqN;
  OpCase o = new_case("dequantize_rows", ComputeType::int8, false, dims({kDqRows, kDqN}),
                      dequant_inputs(7919, 20001, 977, 4), 12 * each);
  o.min_err = 0;
  const DequantOp ops[] = {DequantOp::store, DequantOp::gelu, DequantOp::accumulate};
  o.run = [=](const Inputs& in, float* out) {
    const std::vector<int32_t> acc = ints(in[0]), off = ints(in[5]);
    for (DequantOp op : ops)
      for (bool bias : {false, true})
        for (bool offset : {false, true}) {
          std::copy(in[4].v.begin(), in[4].v.end(), out);
          dequantize_rows(out, acc.data(), kDqRows, kDqN, ptr(in, 1), ptr(in, 2),
                          offset ? off.data() : nullptr, bias ? ptr(in, 3) : nullptr, op);
          out += each;
        }
  };
  o.reference = [=](const Inputs& in, double* out) {
    for (DequantOp op : ops)
      for (bool bias : {false, true})
        for (bool offset : {false, true}) {
          for (int64_t i = 0; i < each; ++i) {
            double v = dequant_ref(in, i / kDqN, i % kDqN, bias, offset);
            if (op == DequantOp::gelu) v = gelu_ref(v);
            if (op == DequantOp::accumulate) v += in[4].v[i];
            out[i] = v;
          }
          out += each;
        }
  };
  o.check = [](const Inputs&, const std::vector<float>& out, const std::vector<double>& ref) {
    for (size_t i = 0; i < out.size(); ++i)
      if (!(std::abs(out[i] - ref[i]) <= 1e-5 * (1 + std::abs(ref[i]))))
        return "variant " + std::to_string(i / (kDqRows * kDqN)) + ", element " +
               std::to_string(i % (kDqRows * kDqN)) + ": " + std::to_string(out[i]) + " vs " +
               std::to_string(ref[i]);
    return std::string();
  };
  return o;
}

// The GELU epilogue quantizing its output for the next product (dequantize_gelu_quantize_rows),
// with bias and offsets and without (a zero row then has scale 0), against dequantize, erf GELU
// and quantize in double: within one quantization step. out = [q - 128, scales] per variant.
OpCase gelu_quantize_case(bool) {
  const int64_t rows = 7, N = 53, each = rows * N + rows;
  std::vector<float> acc(rows * N), off(N);
  for (int64_t i = 0; i < rows * N; ++i) acc[i] = float(int64_t((i * 6007) % 30011) - 15000);
  for (int64_t n = 0; n < N; ++n) acc[3 * N + n] = 0;  // with no bias and offset: a zero row
  for (int64_t n = 0; n < N; ++n) off[n] = float(n * 331 - 8000);
  const Inputs in = {{"acc", acc, false},
                     {"row_scale", rnd(rows, 8, 1e-3f), false},
                     {"col_scale", rnd(N, 9, 1e-2f), false},
                     {"bias", rnd(N, 10), false},
                     {"offset", off, false}};
  OpCase o = new_case("dequantize_gelu_quantize_rows", ComputeType::int8, false, dims({rows, N}),
                      in, 2 * each);
  o.min_err = 0;
  o.run = [=](const Inputs& in, float* out) {
    const std::vector<int32_t> acc = ints(in[0]), off = ints(in[4]);
    for (bool with_bias : {false, true}) {
      std::vector<uint8_t> q(rows * N, 1);
      dequantize_gelu_quantize_rows(q.data(), out + rows * N, acc.data(), rows, N, ptr(in, 1),
                                    ptr(in, 2), with_bias ? off.data() : nullptr,
                                    with_bias ? ptr(in, 3) : nullptr);
      for (int64_t i = 0; i < rows * N; ++i) out[i] = float(q[i]) - 128.f;
      out += each;
    }
  };
  o.reference = [=](const Inputs& in, double* out) {
    for (bool with_bias : {false, true}) {
      for (int64_t m = 0; m < rows; ++m) {
        std::vector<float> v(N);
        for (int64_t n = 0; n < N; ++n) {
          const double a = double(in[0].v[m * N + n]) - (with_bias ? in[4].v[n] : 0);
          v[n] = float(gelu_ref(a * in[1].v[m] * in[2].v[n] + (with_bias ? in[3].v[n] : 0.0)));
        }
        naive_quantize(v.data(), N, 127, out + m * N, out[rows * N + m]);
      }
      out += each;
    }
  };
  o.check = [=](const Inputs&, const std::vector<float>& out, const std::vector<double>& ref) {
    for (int64_t half = 0; half < 2; ++half) {
      const float* q = out.data() + half * each;
      const double* w = ref.data() + half * each;
      for (int64_t m = 0; m < rows; ++m) {
        const double s = q[rows * N + m], ws = w[rows * N + m];
        if (!(std::abs(s - ws) <= 1e-5 * ws + 1e-30)) return at("scale", m, 0);
        for (int64_t n = 0; n < N; ++n)
          if (std::abs(q[m * N + n] - w[m * N + n]) > 1) return at("off by more than a step", m, n);
      }
      if (half == 0 && q[rows * N + 3] != 0.f) return std::string("the zero row's scale is not 0");
    }
    return std::string();
  };
  return o;
}

// The packed int8 product: every element within the bound the quantization allows,
// |y - x.w| <= sum_k (|x_k| sw / 2 + |w_k| sx / 2 + sx sw / 4), sx = max|x| / 127 per row,
// sw = max|w| / qmax per output channel, against the double product; a zero row gives the bias
// exactly. Row counts from one to past a block.
OpCase packed_int8_bound(bool) {
  const int64_t K = 200, N = 70;
  const int64_t row_counts[] = {1, 5, 300, 1100};
  Inputs in = {{"W", rnd(N * K, 11), false}, {"b", rnd(N, 12), false}};
  int64_t total = 0;
  for (int64_t rows : row_counts) {
    std::vector<float> x = rnd(rows * K, 13 + rows, 3.f);
    if (rows > 2)
      for (int64_t k = 0; k < K; ++k) x[2 * K + k] = 0.f;  // a zero row gives the bias
    in.push_back({"x" + std::to_string(rows), x, false});
    total += rows * N;
  }
  OpCase o =
      new_case("packed_linear_int8_bound", ComputeType::int8, true, dims({1100, K, N}), in, total);
  o.flops = 2.0 * total * K;
  o.unavailable = [] {
    return compute_type_supported(ComputeType::int8)
               ? std::string()
               : std::string("this CPU has no int8 matmul in oneDNN (int8 needs AVX2)");
  };
  o.run = [=](const Inputs& in, float* out) {
    PackedLinear p;
    p.pack(ptr(in, 0), N, K, ComputeType::int8);
    const bool ok = p.type() == ComputeType::int8 && p.bytes() >= static_cast<size_t>(N * K);
    for (size_t i = 0; i < 4; ++i) {
      const int64_t rows = row_counts[i];
      p.apply(out, ptr(in, 2 + i), rows, ptr(in, 1), PackedLinear::Epilogue::store);
      if (!ok) std::fill(out, out + rows * N, std::numeric_limits<float>::quiet_NaN());
      out += rows * N;
    }
  };
  o.reference = [=](const Inputs& in, double* out) {
    for (size_t i = 0; i < 4; ++i) {
      ref_linear(out, ptr(in, 2 + i), ptr(in, 0), ptr(in, 1), row_counts[i], K, N);
      out += row_counts[i] * N;
    }
  };
  const int qw = int8_weight_max();
  o.check = [=](const Inputs& in, const std::vector<float>& out, const std::vector<double>& ref) {
    size_t o_at = 0;
    for (size_t i = 0; i < 4; ++i) {
      const int64_t rows = row_counts[i];
      const float *x = ptr(in, 2 + i), *W = ptr(in, 0);
      for (int64_t m = 0; m < rows; ++m) {
        double ax = 0;
        for (int64_t k = 0; k < K; ++k) ax = std::max(ax, std::fabs(double(x[m * K + k])));
        const double sx = ax / 127;
        for (int64_t n = 0; n < N; ++n, ++o_at) {
          double aw = 0, bound = 0;
          for (int64_t k = 0; k < K; ++k) aw = std::max(aw, std::fabs(double(W[n * K + k])));
          const double sw = aw / qw;
          for (int64_t k = 0; k < K; ++k)
            bound += std::fabs(double(x[m * K + k])) * sw / 2 +
                     std::fabs(double(W[n * K + k])) * sx / 2 + sx * sw / 4;
          if (!(std::fabs(out[o_at] - ref[o_at]) <= bound * 1.001 + 1e-5))
            return "rows " + std::to_string(rows) + at(": past the bound", m, n);
          if (m == 2 && rows > 2 && out[o_at] != in[1].v[n])
            return "rows " + std::to_string(rows) + at(": a zero row is not the bias", m, n);
        }
      }
    }
    return std::string();
  };
  return o;
}

}  // namespace

std::vector<CaseMaker> int8_cases() {
  // int8 only: these kernels exist for int8 inference alone.
  std::vector<CaseMaker> v;
  for (auto f : {quantize_127, quantize_63, dequantize_case, gelu_quantize_case, packed_int8_bound})
    v.push_back(f);
  return v;
}

}  // namespace lf::ops
