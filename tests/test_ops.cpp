// A registry of op cases in the style of ggml's test-backend-ops. Every case names a kernel
// with small random inputs and is checked three ways:
//   Ops.MatchesReference         the kernel against a naive formulation written here (plain
//                                loops, double accumulation), independent of the kernel code
//   Ops.GradientMatchesFiniteDifferences
//                                backward against central finite differences of
//                                L = sum(out * r) for a fixed random r, on sampled entries
//   Ops.Perf                     with LF_OPS_PERF=1 in the environment, prints microseconds
//                                per call and GFLOP/s (best of 20); skipped otherwise; never
//                                asserts on time.
// Adding an op: append a case to op_cases().
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "layers/attention.h"
#include "test_util.h"

namespace lf {
namespace {

struct Input {
  std::string name;
  std::vector<float> v;
  bool diff = true;  // differentiated (false: masks, fixed operands)
};
using Inputs = std::vector<Input>;
using Grads = std::vector<std::vector<float>>;  // one per input, same sizes

struct OpCase {
  std::string name;
  Inputs in;
  size_t out_size = 0;
  double flops = 0;       // per call, for the perf mode
  double fwd_tol = 1e-5;  // relative (Frobenius) error against the reference
  double fd_eps = 1e-2;   // finite-difference step
  // The kernel under test: out [out_size] from the inputs.
  std::function<void(const Inputs&, float* out)> run;
  // The naive formulation, in double.
  std::function<void(const Inputs&, double* out)> reference;
  // The kernel's backward: from dout, accumulates d(input) into g[i] (zeroed by the caller).
  // Null for forward-only (inference) kernels.
  std::function<void(const Inputs&, const float* dout, Grads& g)> backward;
};
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

std::vector<float> rnd(size_t n, uint64_t seed) { return test::random_vec(n, seed); }
// A padding mask [B, N]: row b keeps its first N - b*step positions.
std::vector<float> pad_mask(int64_t B, int64_t N, int64_t step) {
  std::vector<float> m(B * N);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < N; ++t) m[b * N + t] = t < N - b * step ? 1.f : 0.f;
  return m;
}

// q [B,N,D], k and v [B,Lk,D], and a key mask [B,Lk] keeping Lk - b * mask_step keys of row b.
Inputs attention_inputs(const AttnDims& d, uint64_t seed, int64_t mask_step) {
  return {{"q", rnd(d.B * d.N * d.D, seed)},
          {"k", rnd(d.B * d.Lk * d.D, seed + 1)},
          {"v", rnd(d.B * d.Lk * d.D, seed + 2)},
          {"mask", pad_mask(d.B, d.Lk, mask_step), false}};
}

// Naive row-major y = x W^T + b in double.
void naive_linear(double* y, const float* x, const float* W, const float* b, int64_t rows,
                  int64_t in, int64_t out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? b[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += double(x[r * in + i]) * W[o * in + i];
      y[r * out + o] = s;
    }
}

// Naive softmax attention for every (b, h): ctx = softmax(scale q k^T, masked keys) v.
void naive_attention(double* ctx, const float* q, const float* k, const float* v,
                     const float* key_mask, const AttnDims& d, float scale) {
  std::vector<double> p(d.Lk);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t i = 0; i < d.N; ++i) {
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j < d.Lk; ++j) {
          const bool seen = (!key_mask || key_mask[b * d.Lk + j] != 0.f) && (!d.causal || j <= i);
          double s = 0;
          for (int64_t c = 0; c < d.Dh; ++c)
            s += double(q[(b * d.N + i) * d.D + h * d.Dh + c]) *
                 k[(b * d.Lk + j) * d.D + h * d.Dh + c];
          p[j] = seen ? scale * s : -INFINITY;
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < d.Lk; ++j) z += p[j] = std::isinf(p[j]) ? 0.0 : std::exp(p[j] - mx);
        for (int64_t c = 0; c < d.Dh; ++c) {
          double s = 0;
          for (int64_t j = 0; j < d.Lk; ++j) s += p[j] * v[(b * d.Lk + j) * d.D + h * d.Dh + c];
          ctx[(b * d.N + i) * d.D + h * d.Dh + c] = z > 0 ? s / z : 0.0;
        }
      }
}

// An attention case with its inputs, sizes and naive reference (scale 0.5); the caller adds
// the kernel and its backward.
OpCase attention_case(const std::string& name, const AttnDims& d, uint64_t seed, int64_t mask_step,
                      bool masked) {
  OpCase c;
  c.name = name;
  c.in = attention_inputs(d, seed, mask_step);
  c.out_size = d.B * d.N * d.D;
  c.flops = 4.0 * d.B * d.N * d.Lk * d.D;
  c.reference = [=](const Inputs& in, double* ctx) {
    naive_attention(ctx, in[0].v.data(), in[1].v.data(), in[2].v.data(),
                    masked ? in[3].v.data() : nullptr, d, 0.5f);
  };
  return c;
}

std::vector<OpCase> op_cases() {
  std::vector<OpCase> v;
  {  // linear: y = x W^T + b
    const int64_t R = 7, I = 12, O = 9;
    OpCase c;
    c.name = "linear";
    c.in = {{"x", rnd(R * I, 1)}, {"W", rnd(O * I, 2)}, {"b", rnd(O, 3)}};
    c.out_size = R * O;
    c.flops = 2.0 * R * I * O;
    const LinearDims d{/*rows=*/R, /*in=*/I, /*out=*/O};
    c.run = [=](const Inputs& in, float* y) {
      linear_forward(y, in[0].v.data(), in[1].v.data(), in[2].v.data(), d);
    };
    c.reference = [=](const Inputs& in, double* y) {
      naive_linear(y, in[0].v.data(), in[1].v.data(), in[2].v.data(), R, I, O);
    };
    c.backward = [=](const Inputs& in, const float* dy, Grads& g) {
      linear_backward(g[0].data(), g[1].data(), g[2].data(), dy, in[0].v.data(), in[1].v.data(), d);
    };
    v.push_back(c);
  }
  {  // packed linear (inference), f32: the same function through packed weights
    const int64_t R = 37, I = 24, O = 40;
    OpCase c;
    c.name = "packed_linear_f32";
    c.in = {{"x", rnd(R * I, 4)}, {"W", rnd(O * I, 5), false}, {"b", rnd(O, 6), false}};
    c.out_size = R * O;
    c.flops = 2.0 * R * I * O;
    c.run = [=](const Inputs& in, float* y) {
      PackedLinear p;
      p.pack(in[1].v.data(), O, I, ComputeType::f32);
      p.apply(y, in[0].v.data(), R, in[2].v.data(), PackedLinear::Epilogue::store);
    };
    c.reference = [=](const Inputs& in, double* y) {
      naive_linear(y, in[0].v.data(), in[1].v.data(), in[2].v.data(), R, I, O);
    };
    v.push_back(c);
  }
  {  // layernorm over rows of C
    const int64_t R = 5, C = 16;
    const float eps = 1e-5f;
    OpCase c;
    c.name = "layernorm";
    c.in = {{"x", rnd(R * C, 7)}, {"w", rnd(C, 8)}, {"b", rnd(C, 9)}};
    c.out_size = R * C;
    c.flops = 8.0 * R * C;
    c.run = [=](const Inputs& in, float* y) {
      std::vector<float> mean(R), rstd(R);
      layernorm_forward(y, mean.data(), rstd.data(), in[0].v.data(), in[1].v.data(), in[2].v.data(),
                        R, C, eps);
    };
    c.reference = [=](const Inputs& in, double* y) {
      for (int64_t r = 0; r < R; ++r) {
        double m = 0, var = 0;
        for (int64_t j = 0; j < C; ++j) m += in[0].v[r * C + j] / double(C);
        for (int64_t j = 0; j < C; ++j) var += std::pow(in[0].v[r * C + j] - m, 2) / double(C);
        for (int64_t j = 0; j < C; ++j)
          y[r * C + j] = (in[0].v[r * C + j] - m) / std::sqrt(var + eps) * in[1].v[j] + in[2].v[j];
      }
    };
    c.backward = [=](const Inputs& in, const float* dy, Grads& g) {
      std::vector<float> y(R * C), mean(R), rstd(R);
      layernorm_forward(y.data(), mean.data(), rstd.data(), in[0].v.data(), in[1].v.data(),
                        in[2].v.data(), R, C, eps);
      layernorm_backward(g[0].data(), g[1].data(), g[2].data(), dy, in[0].v.data(), in[1].v.data(),
                         mean.data(), rstd.data(), R, C);
    };
    v.push_back(c);
  }
  {  // exact GELU
    const int64_t n = 50;
    OpCase c;
    c.name = "gelu";
    c.in = {{"x", rnd(n, 10)}};
    c.out_size = n;
    c.run = [=](const Inputs& in, float* y) { gelu_forward(y, in[0].v.data(), n); };
    c.reference = [=](const Inputs& in, double* y) {
      for (int64_t i = 0; i < n; ++i)
        y[i] = 0.5 * in[0].v[i] * (1.0 + std::erf(in[0].v[i] / std::sqrt(2.0)));
    };
    c.backward = [=](const Inputs& in, const float* dy, Grads& g) {
      gelu_backward(g[0].data(), in[0].v.data(), dy, n);
    };
    v.push_back(c);
  }
  for (bool masked : {false, true}) {  // attention with probabilities kept (training form)
    const AttnDims d{/*B=*/2,           /*N=*/6, /*Lk=*/masked ? 5 : 6,
                     /*D=*/8,           /*H=*/2, /*Dh=*/4,
                     /*causal=*/!masked};
    const float scale = 0.5f;
    OpCase c = attention_case(masked ? "attention_masked" : "attention_causal", d, 11, 2, masked);
    auto km = [masked](const Inputs& in) { return masked ? in[3].v.data() : nullptr; };
    c.run = [=](const Inputs& in, float* ctx) {
      std::vector<float> probs(d.B * d.H * d.N * d.Lk),
          scratch(attention_scratch_floats(d));
      attention_forward(ctx, probs.data(), in[0].v.data(), in[1].v.data(), in[2].v.data(), km(in),
                        d, scale, 0.f, 0, 0, scratch.data());
    };
    c.backward = [=](const Inputs& in, const float* dctx, Grads& g) {
      std::vector<float> ctx(d.B * d.N * d.D), probs(d.B * d.H * d.N * d.Lk),
          scratch(attention_scratch_floats(d));
      attention_forward(ctx.data(), probs.data(), in[0].v.data(), in[1].v.data(), in[2].v.data(),
                        km(in), d, scale, 0.f, 0, 0, scratch.data());
      attention_backward(g[0].data(), g[1].data(), g[2].data(), dctx, probs.data(), in[0].v.data(),
                         in[1].v.data(), in[2].v.data(), d, scale, 0.f, 0, 0, scratch.data());
    };
    v.push_back(c);
  }
  for (bool streaming : {false, true}) {  // row-block attention (inference), one block per row set
    const AttnDims d{/*B=*/2, /*N=*/300, /*Lk=*/300,      /*D=*/8,
                     /*H=*/2, /*Dh=*/4,  /*causal=*/false};
    const float scale = 0.5f;
    OpCase c =
        attention_case(streaming ? "attention_streaming_rows" : "attention_rows", d, 14, 37, true);
    c.run = [=](const Inputs& in, float* ctx) {
      const int64_t rows = 64;
      std::vector<float> work(streaming ? attention_streaming_work_floats(rows, d)
                                        : attention_rows_work_floats(rows, d));
      for (int64_t b = 0; b < d.B; ++b)
        for (int64_t i0 = 0; i0 < d.N; i0 += rows) {
          const int64_t i1 = std::min(d.N, i0 + rows), o = (b * d.N + i0) * d.D;
          (streaming ? attention_streaming_rows : attention_rows)(
              ctx + o, in[0].v.data() + o, in[1].v.data(), in[2].v.data(), in[3].v.data(), d,
              RowBlock{/*b=*/b, /*i0=*/i0, /*i1=*/i1}, scale, work.data(), ComputeType::f32);
        }
    };
    v.push_back(c);
  }
  {  // sequence projection E diag(m) x with strides
    const SeqProjDims sd{/*B=*/2, /*N=*/6, /*K=*/3, /*C=*/4, /*ldE=*/9, /*ldx=*/5, /*ldo=*/6};
    OpCase c;
    c.name = "seq_project";
    c.in = {{"E", rnd(sd.K * sd.ldE, 17)},
            {"x", rnd(sd.B * sd.N * sd.ldx, 18)},
            {"mask", pad_mask(sd.B, sd.N, 2), false}};
    c.out_size = sd.B * sd.K * sd.ldo;
    c.flops = 2.0 * sd.B * sd.K * sd.N * sd.C;
    c.run = [=](const Inputs& in, float* out) {
      std::fill(out, out + sd.B * sd.K * sd.ldo, 0.f);
      std::vector<float> ebm(sd.B * sd.K * sd.N);
      seq_project_forward(out, nullptr, ebm.data(), in[0].v.data(), in[1].v.data(), in[2].v.data(),
                          sd);
    };
    c.reference = [=](const Inputs& in, double* out) {
      for (int64_t b = 0; b < sd.B; ++b)
        for (int64_t j = 0; j < sd.K; ++j)
          for (int64_t ch = 0; ch < sd.ldo; ++ch) {
            double s = 0;
            for (int64_t t = 0; ch < sd.C && t < sd.N; ++t)
              s += double(in[0].v[j * sd.ldE + t]) * in[2].v[b * sd.N + t] *
                   in[1].v[(b * sd.N + t) * sd.ldx + ch];
            out[(b * sd.K + j) * sd.ldo + ch] = s;
          }
    };
    c.backward = [=](const Inputs& in, const float* dout, Grads& g) {
      std::vector<float> out(sd.B * sd.K * sd.ldo), ebm(sd.B * sd.K * sd.N), scratch(sd.B * sd.K * sd.N);
      seq_project_forward(out.data(), nullptr, ebm.data(), in[0].v.data(), in[1].v.data(),
                          in[2].v.data(), sd);
      seq_project_backward(g[1].data(), g[0].data(), dout, nullptr, ebm.data(), in[0].v.data(),
                           in[1].v.data(), in[2].v.data(), sd, scratch.data());
    };
    v.push_back(c);
  }
  {  // max pooling over windows of w positions
    const int64_t B = 2, N = 7, K = 3, w = 3, C = 4;
    const PoolDims d{/*B=*/B, /*N=*/N, /*K=*/K, /*w=*/w, /*C=*/C};
    OpCase c;
    c.name = "max_pool";
    c.in = {{"x", rnd(B * N * C, 19)}, {"mask", pad_mask(B, N, 3), false}};
    c.out_size = B * K * C;
    c.fd_eps = 1e-3;
    c.run = [=](const Inputs& in, float* out) {
      std::vector<int32_t> arg(B * K * C);
      max_pool_forward(out, arg.data(), in[0].v.data(), in[1].v.data(), d);
    };
    c.reference = [=](const Inputs& in, double* out) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < K; ++j)
          for (int64_t ch = 0; ch < C; ++ch) {
            double m = -INFINITY;
            for (int64_t t = j * w; t < std::min((j + 1) * w, N); ++t)
              if (in[1].v[b * N + t] != 0.f) m = std::max<double>(m, in[0].v[(b * N + t) * C + ch]);
            out[(b * K + j) * C + ch] = std::isinf(m) ? 0.0 : m;
          }
    };
    c.backward = [=](const Inputs& in, const float* dout, Grads& g) {
      std::vector<float> out(B * K * C);
      std::vector<int32_t> arg(B * K * C);
      max_pool_forward(out.data(), arg.data(), in[0].v.data(), in[1].v.data(), d);
      max_pool_backward(g[0].data(), dout, arg.data(), d);
    };
    v.push_back(c);
  }
  return v;
}

class Ops : public ::testing::TestWithParam<OpCase> {};

TEST_P(Ops, MatchesReference) {
  const OpCase& c = GetParam();
  std::vector<float> out(c.out_size);
  std::vector<double> ref(c.out_size);
  c.run(c.in, out.data());
  c.reference(c.in, ref.data());
  double num = 0, den = 0;
  for (size_t i = 0; i < c.out_size; ++i) {
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  ASSERT_GT(den, 0.0) << "the reference is all zeros: the case tests nothing";
  EXPECT_LT(std::sqrt(num / den), c.fwd_tol);
}

TEST_P(Ops, GradientMatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  if (!c.backward) GTEST_SKIP() << c.name << " is forward-only";
  const std::vector<float> r = rnd(c.out_size, 99);
  auto loss = [&](const Inputs& in) {
    std::vector<float> out(c.out_size);
    c.run(in, out.data());
    double s = 0;
    for (size_t i = 0; i < c.out_size; ++i) s += double(out[i]) * r[i];
    return s;
  };
  Grads g;
  for (const Input& x : c.in) g.emplace_back(x.v.size(), 0.f);
  c.backward(c.in, r.data(), g);
  Inputs in = c.in;
  int checked = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k].diff) continue;
    const size_t n = in[k].v.size(), step = std::max<size_t>(1, n / 24);
    for (size_t i = 0; i < n; i += step) {
      const float x0 = in[k].v[i];
      in[k].v[i] = x0 + float(c.fd_eps);
      const double lp = loss(in);
      in[k].v[i] = x0 - float(c.fd_eps);
      const double lm = loss(in);
      in[k].v[i] = x0;
      const double fd = (lp - lm) / (2 * c.fd_eps), an = g[k][i];
      EXPECT_NEAR(an, fd, 2e-3 + 2e-2 * std::abs(fd)) << "d" << in[k].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_P(Ops, Perf) {
  const OpCase& c = GetParam();
  const char* env = std::getenv("LF_OPS_PERF");
  if (!env || std::string(env) != "1") GTEST_SKIP() << "set LF_OPS_PERF=1 to time the ops";
  std::vector<float> out(c.out_size);
  double best = 1e30;
  for (int rep = 0; rep <= 20; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    c.run(c.in, out.data());
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, dt);  // rep 0 warms up
  }
  std::printf("  %-28s %10.2f us  %8.2f GFLOP/s\n", c.name.c_str(), best * 1e6,
              c.flops > 0 ? c.flops / best / 1e9 : 0.0);
}

INSTANTIATE_TEST_SUITE_P(Registry, Ops, ::testing::ValuesIn(op_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace lf
