// Op cases of Linformer's sequence-axis kernels (layers/attention.h): the projection
// out_b = E diag(m_b) x_b with its mask-weighted row sums em (training form with backward, and
// the low-memory inference form), and max pooling over windows.
#include "layers/attention.h"
#include "ops/harness.h"

namespace lf::ops {
namespace {

SeqProjDims proj_dims(ComputeType t, bool perf) {
  if (perf)
    return {/*B=*/8, /*N=*/512, /*K=*/128, /*C=*/768, /*ldE=*/512, /*ldx=*/768, /*ldo=*/768};
  if (t == ComputeType::bf16)  // large enough for the batched products to run in bf16
    return {/*B=*/2, /*N=*/128, /*K=*/64, /*C=*/64, /*ldE=*/131, /*ldx=*/66, /*ldo=*/65};
  return {/*B=*/2, /*N=*/5, /*K=*/3, /*C=*/4, /*ldE=*/7, /*ldx=*/6, /*ldo=*/5};
}

// E [K, ldE], x [B, N, ldx], mask [B, N] (batch b padded in its last 2b/5 of the positions;
// perf: b/16); out = [out [B, K, ldo] (padding columns stay 0), em [B, K] when with_em].
OpCase proj_base(const std::string& name, ComputeType t, bool perf, bool masked, bool with_em) {
  const SeqProjDims s = proj_dims(t, perf);
  OpCase c = new_case(name + (masked ? "_masked" : "") + (with_em ? "_em" : ""), t, true,
                      dims({s.B, s.N, s.K, s.C}),
                      {{"E", rnd(s.K * s.ldE, 41)},
                       {"x", rnd(s.B * s.N * s.ldx, 42)},
                       {"mask", pad_mask(s.B, s.N, perf ? s.N / 16 : 2 * s.N / 5), false}},
                      s.B * s.K * s.ldo + (with_em ? s.B * s.K : 0));
  c.flops = 2.0 * s.B * s.K * s.N * s.C;
  c.reference = [=](const Inputs& in, double* out) {
    const float *E = ptr(in, 0), *x = ptr(in, 1), *m = ptr(in, 2);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t j = 0; j < s.K; ++j) {
        double em = 0;
        for (int64_t t = 0; t < s.N; ++t)
          em += double(E[j * s.ldE + t]) * (masked ? m[b * s.N + t] : 1.f);
        if (with_em) out[s.B * s.K * s.ldo + b * s.K + j] = em;
        for (int64_t ch = 0; ch < s.ldo; ++ch) {
          double sum = 0;
          for (int64_t t = 0; ch < s.C && t < s.N; ++t)
            sum += double(E[j * s.ldE + t]) * (masked ? m[b * s.N + t] : 1.f) *
                   x[(b * s.N + t) * s.ldx + ch];
          out[(b * s.K + j) * s.ldo + ch] = sum;
        }
      }
  };
  return c;
}

// The training form: Ebm = E diag(m_b) kept for backward; in bf16 x also given rounded.
CaseMaker seq_project_case(ComputeType t, bool masked, bool with_em) {
  return [=](bool perf) {
    const SeqProjDims s = proj_dims(t, perf);
    OpCase c = proj_base("seq_project", t, perf, masked, with_em);
    if (t == ComputeType::bf16) c.fd_entries = 16;
    const size_t nout = s.B * s.K * s.ldo;
    // forward(out, Ebm): out's padding columns zeroed first.
    auto forward = [=](const Inputs& in, float* out, float* ebm) {
      std::fill(out, out + nout, 0.f);
      seq_project_forward(out, with_em ? out + nout : nullptr, ebm, ptr(in, 0), ptr(in, 1),
                          masked ? ptr(in, 2) : nullptr, s, t);
    };
    c.run = [=](const Inputs& in, float* out) {
      std::vector<float> ebm(s.B * s.K * s.N);
      forward(in, out, ebm.data());
    };
    c.backward = [=](const Inputs& in, const float* dout, Grads& g, GradInto) {
      std::vector<float> out(c.out_size), ebm(s.B * s.K * s.N), scratch(s.B * s.K * s.N);
      forward(in, out.data(), ebm.data());
      seq_project_backward(g[1].data(), g[0].data(), dout, with_em ? dout + nout : nullptr,
                           ebm.data(), ptr(in, 0), ptr(in, 1), masked ? ptr(in, 2) : nullptr, s,
                           scratch.data(), t);
    };
    return c;
  };
}

// The inference form: E diag(m_b) formed two columns at a time (a fully padded block skipped).
CaseMaker seq_project_lowmem_case(ComputeType t) {
  return [=](bool perf) {
    const SeqProjDims s = proj_dims(t, perf);
    const int64_t tchunk = perf ? 64 : 2;
    OpCase c = proj_base("seq_project_lowmem", t, perf, true, true);
    c.run = [=](const Inputs& in, float* out) {
      std::vector<float> scratch(s.K * tchunk);
      std::fill(out, out + s.B * s.K * s.ldo, 0.f);
      seq_project_forward_lowmem(out, out + s.B * s.K * s.ldo, ptr(in, 0), ptr(in, 1), ptr(in, 2),
                                 s, scratch.data(), tchunk, t);
    };
    return c;
  };
}

// N = 7 positions in windows of w = 3 (the last window holds one position); batch 1 has
// positions 3..5 padded, so its window 1 is empty (output 0, no gradient). Within a window the
// values (7t + 3c + 5b) mod 11 / 10 are >= 0.1 apart, so a finite-difference step never moves
// an argmax; a random offset per (b, window, channel) keeps the data irregular.
OpCase max_pool(bool perf) {
  const int64_t B = perf ? 8 : 2, N = perf ? 512 : 7, K = perf ? 128 : 3, w = perf ? 4 : 3,
                C = perf ? 768 : 4;
  const PoolDims d{/*B=*/B, /*N=*/N, /*K=*/K, /*w=*/w, /*C=*/C};
  std::vector<float> x(B * N * C), mask(B * N, 1.f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < N; ++t)
      for (int64_t ch = 0; ch < C; ++ch)
        x[(b * N + t) * C + ch] = 0.1f * static_cast<float>((7 * t + 3 * ch + 5 * b) % 11) +
                                  rng_normal(51, b * K + t / w, ch);
  for (int64_t t = 3; t < 6; ++t) mask[N + t] = 0.f;
  OpCase c = new_case("max_pool", ComputeType::f32, false, dims({B, N, K, w, C}),
                      {{"x", x}, {"mask", mask, false}}, B * K * C);
  c.bytes = 4.0 * B * (N + K) * C;
  c.run = [=](const Inputs& in, float* out) {
    std::vector<int32_t> arg(B * K * C);
    max_pool_forward(out, arg.data(), ptr(in, 0), ptr(in, 1), d);
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
  c.backward = [=](const Inputs& in, const float* dout, Grads& g, GradInto) {
    std::vector<float> out(B * K * C);
    std::vector<int32_t> arg(B * K * C);
    max_pool_forward(out.data(), arg.data(), ptr(in, 0), ptr(in, 1), d);
    max_pool_backward(g[0].data(), dout, arg.data(), d);
  };
  return c;
}

}  // namespace

std::vector<CaseMaker> projection_cases() {
  std::vector<CaseMaker> v;
  for (ComputeType t : kF32Bf16) {
    for (bool masked : {false, true})
      for (bool em : {false, true}) v.push_back(seq_project_case(t, masked, em));
    v.push_back(seq_project_lowmem_case(t));
  }
  v.push_back(max_pool);
  return v;
}

}  // namespace lf::ops
