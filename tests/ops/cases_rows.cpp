// Op cases of the row-wise and element-wise kernels of kernels/ops.h: LayerNorm (plain, fused
// with the residual sum, its backward's bf16 gradient), GELU (f32 and the bf16 forms), tanh,
// softmax, dropout (and its bf16 rounding), the embedding sum and cross-entropy.
#include "ops/harness.h"

namespace lf::ops {
namespace {

constexpr float kEps = 1e-5f;
constexpr ComputeType kF32 = ComputeType::f32, kBf16 = ComputeType::bf16;

// LayerNorm of x [R, C] in double: y, and mean and rstd when given.
void ref_layernorm(double* y, double* mean, double* rstd, const float* x, const float* w,
                   const float* b, int64_t R, int64_t C) {
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, var = 0;
    for (int64_t j = 0; j < C; ++j) m += x[r * C + j] / double(C);
    for (int64_t j = 0; j < C; ++j) var += (x[r * C + j] - m) * (x[r * C + j] - m) / double(C);
    const double rs = 1.0 / std::sqrt(var + kEps);
    for (int64_t j = 0; j < C; ++j) y[r * C + j] = (x[r * C + j] - m) * rs * w[j] + b[j];
    if (mean) mean[r] = m, rstd[r] = rs;
  }
}

// Rows with a large mean (5) and a constant row (variance 0) among random ones.
std::vector<float> layernorm_input(int64_t R, int64_t C) {
  std::vector<float> x = rnd(R * C, 3, 2.f);
  for (int64_t j = 0; j < C; ++j) x[j] += 5.f, x[C + j] = 0.25f;
  return x;
}

// out = [y, mean, rstd]; the backward differentiates y.
OpCase layernorm(bool perf) {
  const int64_t R = perf ? 4096 : 7, C = perf ? 768 : 37;
  OpCase c =
      new_case("layernorm", kF32, false, dims({R, C}),
               {{"x", layernorm_input(R, C)}, {"w", rnd(C, 4)}, {"b", rnd(C, 5)}}, R * C + 2 * R);
  c.out_diff = R * C;
  c.fd_h = 1e-4;  // the constant row: rstd(var) bends over |dx| ~ sqrt(C eps) = 0.02
  c.bytes = 8.0 * R * C;
  c.overwrite = {0};
  c.run = [=](const Inputs& in, float* out) {
    layernorm_forward(out, out + R * C, out + R * C + R, ptr(in, 0), ptr(in, 1), ptr(in, 2), R, C,
                      kEps);
  };
  c.reference = [=](const Inputs& in, double* out) {
    ref_layernorm(out, out + R * C, out + R * C + R, ptr(in, 0), ptr(in, 1), ptr(in, 2), R, C);
  };
  c.backward = [=](const Inputs& in, const float* dy, Grads& g, GradInto into) {
    std::vector<float> y(R * C), mean(R), rstd(R);
    layernorm_forward(y.data(), mean.data(), rstd.data(), ptr(in, 0), ptr(in, 1), ptr(in, 2), R, C,
                      kEps);
    layernorm_backward(g[0].data(), g[1].data(), g[2].data(), dy, ptr(in, 0), ptr(in, 1),
                       mean.data(), rstd.data(), R, C, into);
  };
  return c;
}

// The residual sum and its LayerNorm in one pass: out = [sum, y, mean, rstd], and in bf16 the
// copy of y rounded (out16) after them.
CaseMaker add_layernorm(ComputeType t) {
  return [=](bool perf) {
    const int64_t R = perf ? 4096 : 9, C = perf ? 768 : 40, n = R * C;
    const bool r16 = t == kBf16;
    OpCase c =
        new_case("add_layernorm", t, false, dims({R, C}),
                 {{"x", rnd(n, 6, 2.f)}, {"y", rnd(n, 7, 3.f)}, {"w", rnd(C, 8)}, {"b", rnd(C, 9)}},
                 2 * n + 2 * R + (r16 ? n : 0));
    c.bytes = 12.0 * n;
    c.run = [=](const Inputs& in, float* out) {
      std::vector<uint16_t> y16(r16 ? n : 0);
      add_layernorm_forward(out, out + n, out + 2 * n, out + 2 * n + R, ptr(in, 0), ptr(in, 1),
                            ptr(in, 2), ptr(in, 3), R, C, kEps,
                            r16 ? Tensor(y16.data()) : Tensor());
      widen_n(out + 2 * n + 2 * R, y16.data(), y16.size());
    };
    c.reference = [=](const Inputs& in, double* out) {
      std::vector<float> sum(n);
      for (int64_t i = 0; i < n; ++i) out[i] = sum[i] = in[0].v[i] + in[1].v[i];
      ref_layernorm(out + n, out + 2 * n, out + 2 * n + R, sum.data(), ptr(in, 2), ptr(in, 3), R,
                    C);
      for (int64_t i = 0; r16 && i < n; ++i) out[2 * n + 2 * R + i] = rne(out[n + i]);
    };
    return c;
  };
}

// layernorm_backward's RoundedGrad: out = [dx, dw, db, g16 widened, colsum] (from zeros), where
// g = dropout_backward(dx) (mask of seed 5, stream 6, first 7), rounded, and its column sums
// added to colsum; p = 0 and p = 0.3 one after the other.
OpCase layernorm_backward_rounded(bool perf) {
  const int64_t R = perf ? 4096 : 37, C = perf ? 768 : 24, n = R * C;
  const float ps[] = {0.f, 0.3f};
  const size_t part = 2 * n + 3 * C;
  OpCase c = new_case(
      "layernorm_backward_rounded", kBf16, false, dims({R, C}),
      {{"x", rnd(n, 11, 2.f)}, {"dy", rnd(n, 12)}, {"w", rnd(C, 13)}, {"b", rnd(C, 14)}}, 2 * part);
  c.bytes = 14.0 * n;
  c.run = [=](const Inputs& in, float* out) {
    std::vector<float> y(n), mean(R), rstd(R);
    layernorm_forward(y.data(), mean.data(), rstd.data(), ptr(in, 0), ptr(in, 2), ptr(in, 3), R, C,
                      kEps);
    for (float p : ps) {
      std::vector<uint16_t> g16(n);
      std::fill(out + n, out + part, 0.f);
      const RoundedGrad also{g16.data(), out + 2 * n + 2 * C, p, 5, 6, 7};
      layernorm_backward(out, out + n, out + n + C, ptr(in, 1), ptr(in, 0), ptr(in, 2), mean.data(),
                         rstd.data(), R, C, GradInto::overwrite, &also);
      widen_n(out + n + 2 * C, g16.data(), n);
      out += part;
    }
  };
  c.reference = [=](const Inputs& in, double* out) {
    const float *x = ptr(in, 0), *dy = ptr(in, 1), *w = ptr(in, 2);
    std::vector<double> y(n), mean(R), rstd(R), dx(n), dw(C, 0.0), db(C, 0.0);
    ref_layernorm(y.data(), mean.data(), rstd.data(), x, w, ptr(in, 3), R, C);
    for (int64_t r = 0; r < R; ++r) {  // dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w
      double mg = 0, mgx = 0;
      for (int64_t j = 0; j < C; ++j) {
        const double xh = (x[r * C + j] - mean[r]) * rstd[r], gj = dy[r * C + j] * double(w[j]);
        mg += gj / C, mgx += gj * xh / C;
        dw[j] += dy[r * C + j] * xh, db[j] += dy[r * C + j];
      }
      for (int64_t j = 0; j < C; ++j) {
        const double xh = (x[r * C + j] - mean[r]) * rstd[r];
        dx[r * C + j] = rstd[r] * (dy[r * C + j] * double(w[j]) - mg - xh * mgx);
      }
    }
    for (float p : ps) {
      for (int64_t i = 0; i < n; ++i) {
        const double g = dropout_keep(p, 5, 6, 7 + i) ? dx[i] / (1.0 - p) : 0.0;
        out[i] = dx[i], out[n + 2 * C + i] = rne(g);
        out[2 * n + 2 * C + i % C] += g;
      }
      for (int64_t j = 0; j < C; ++j) out[n + j] = dw[j], out[n + C + j] = db[j];
      out += part;
    }
  };
  // The colsum entries start at 0 before the loop adds to them.
  auto ref = c.reference;
  c.reference = [=](const Inputs& in, double* out) {
    std::fill(out, out + 2 * part, 0.0);
    ref(in, out);
  };
  return c;
}

// Element-wise activation f, over a grid of [-lo, lo] (every regime).
OpCase activation(const std::string& name, int64_t n, float lo, double (*f)(double)) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -lo + 2 * lo * float(i) / float(n - 1);
  OpCase c = new_case(name, kF32, false, dims({n}), {{"x", x}}, n);
  c.bytes = 8.0 * n;
  c.in_place = true;
  c.reference = [=](const Inputs& in, double* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(in[0].v[i]);
  };
  return c;
}

// GELU, exact (erf) form; GradInto::overwrite runs the in-place backward.
OpCase gelu(bool perf) {
  const int64_t n = perf ? 1 << 22 : 2001;
  OpCase c = activation("gelu", n, 10.f, gelu_ref);
  c.overwrite = {0};
  c.run = [=](const Inputs& in, float* y) { gelu_forward(y, ptr(in, 0), n); };
  c.backward = [=](const Inputs& in, const float* dy, Grads& g, GradInto into) {
    if (into == GradInto::add) return gelu_backward(g[0].data(), ptr(in, 0), dy, n);
    std::copy(dy, dy + n, g[0].data());
    gelu_backward_inplace(g[0].data(), ptr(in, 0), 1, n);
  };
  return c;
}

OpCase tanh_case(bool perf) {
  const int64_t n = perf ? 1 << 22 : 301;
  OpCase c = activation("tanh", n, 7.5f, [](double x) { return std::tanh(x); });
  c.in_place = false;
  c.run = [=](const Inputs& in, float* y) { tanh_forward(y, ptr(in, 0), n); };
  c.backward = [=](const Inputs& in, const float* dy, Grads& g, GradInto) {
    std::vector<float> y(n);
    tanh_forward(y.data(), ptr(in, 0), n);
    tanh_backward(g[0].data(), y.data(), dy, n);
  };
  return c;
}

// GELU of bf16 inputs (spanning [-4, 4]), written in bf16; n with a ragged tail.
OpCase gelu_bf16(bool perf) {
  const int64_t n = perf ? 1 << 22 : 3 * 4096 + 77;
  OpCase c = new_case("gelu_forward_bf16", kBf16, false, dims({n}), {{"x", rnd(n, 21, 4.f)}}, n);
  c.bytes = 4.0 * n;
  c.run = [=](const Inputs& in, float* y) {
    const std::vector<uint16_t> x16 = to16(ptr(in, 0), n);
    std::vector<uint16_t> y16(n);
    gelu_forward(y16.data(), x16.data(), n);
    widen_n(y, y16.data(), n);
  };
  c.reference = [=](const Inputs& in, double* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = rne(gelu_ref(rne(in[0].v[i])));
  };
  return c;
}

// GELU's in-place backward over [R, C] as the FFN runs it, rows split between threads and a
// ragged width: out = [d widened, db]. bf16: d rounded, its column sums added to db; f32: db
// left alone (linear_backward sums an f32 gradient's).
CaseMaker gelu_backward_rows(ComputeType t) {
  return [=](bool perf) {
    const int64_t R = perf ? 4096 : 301, C = perf ? 3072 : 1029, n = R * C;
    const bool r16 = t == kBf16;
    OpCase c = new_case("gelu_backward_inplace", t, false, dims({R, C}),
                        {{"h", rnd(n, 31, 3.f)}, {"dout", rnd(n, 32)}, {"db", rnd(C, 33)}}, n + C);
    c.bytes = (r16 ? 6.0 : 12.0) * n;
    c.run = [=](const Inputs& in, float* out) {
      std::copy(in[2].v.begin(), in[2].v.end(), out + n);
      if (!r16) {
        std::copy(in[1].v.begin(), in[1].v.end(), out);
        gelu_backward_inplace(out, ptr(in, 0), R, C, out + n);
        return;
      }
      const std::vector<uint16_t> h16 = to16(ptr(in, 0), n);
      std::vector<uint16_t> d16 = to16(ptr(in, 1), n);
      gelu_backward_inplace(d16.data(), h16.data(), R, C, out + n);
      widen_n(out, d16.data(), n);
    };
    c.reference = [=](const Inputs& in, double* out) {
      const auto in16 = [&](double x) { return r16 ? rne(x) : x; };
      for (int64_t j = 0; j < C; ++j) out[n + j] = in[2].v[j];
      for (int64_t i = 0; i < n; ++i) {
        const double d = in16(in[1].v[i]) * gelu_grad_ref(in16(in[0].v[i]));
        out[i] = in16(d);
        if (r16) out[n + i % C] += d;
      }
    };
    return c;
  };
}

// Row softmax of scale * x; masked keys (one holding a huge value) get exactly 0, large
// logits need the max subtraction. Masked: key_mask [cols], unmasked: scale 1.
CaseMaker softmax(bool masked) {
  return [=](bool perf) {
    const int64_t R = perf ? 8192 : 5, C = perf ? 512 : 11;
    const float scale = masked ? 0.35f : 1.f;
    std::vector<float> x = rnd(R * C, 8, 3.f), mask(C, 1.f);
    x[2 * C + 4] = 80.f, x[2 * C + 5] = 200.f;
    if (masked) mask[0] = mask[3] = mask[10] = 0.f, x[C + 3] = 1000.f;
    OpCase c = new_case(masked ? "softmax_masked" : "softmax", kF32, false, dims({R, C}),
                        {{"x", x}, {"mask", mask, false}}, R * C);
    c.bytes = 8.0 * R * C;
    c.in_place = true;
    c.overwrite = {0};
    const float* (*km)(const Inputs&) = [](const Inputs& in) { return ptr(in, 1); };
    c.run = [=](const Inputs& in, float* y) {
      softmax_forward(y, ptr(in, 0), R, C, scale, masked ? km(in) : nullptr);
    };
    c.reference = [=](const Inputs& in, double* y) {
      for (int64_t r = 0; r < R; ++r) {
        double mx = -INFINITY, z = 0;
        for (int64_t j = 0; j < C; ++j)
          if (in[1].v[j] != 0.f) mx = std::max(mx, double(scale) * in[0].v[r * C + j]);
        for (int64_t j = 0; j < C; ++j)
          z += y[r * C + j] = in[1].v[j] != 0.f ? std::exp(scale * in[0].v[r * C + j] - mx) : 0.0;
        for (int64_t j = 0; j < C; ++j) y[r * C + j] /= z;
      }
    };
    c.backward = [=](const Inputs& in, const float* dy, Grads& g, GradInto into) {
      std::vector<float> p(R * C);
      softmax_forward(p.data(), ptr(in, 0), R, C, scale, masked ? km(in) : nullptr);
      softmax_backward(g[0].data(), p.data(), dy, R, C, scale, into == GradInto::add);
    };
    return c;
  };
}

// Dropout of x [n] under several (p, first) pairs one after the other (first: every offset
// modulo 4 of the 16-bit draws, n not a multiple of the vector block), against the mask
// written out from the specification; p = 0 is the identity.
OpCase dropout(bool perf) {
  const int64_t n = perf ? 1 << 22 : 1037;
  const std::vector<std::pair<float, int64_t>> runs =
      perf ? std::vector<std::pair<float, int64_t>>{{0.1f, 0}}
           : std::vector<std::pair<float, int64_t>>{{0.1f, 0}, {0.5f, 1},   {0.9f, 2},
                                                    {0.3f, 3}, {0.3f, 101}, {0.f, 6}};
  OpCase c = new_case("dropout", kF32, false, dims({n}), {{"x", rnd(n, 41)}}, runs.size() * n);
  c.bytes = 8.0 * n;
  c.overwrite = {0};
  c.run = [=](const Inputs& in, float* y) {
    for (auto [p, first] : runs) dropout_forward(y, ptr(in, 0), n, p, 9, 4, first), y += n;
  };
  c.reference = [=](const Inputs& in, double* y) {
    for (auto [p, first] : runs)
      for (int64_t i = 0; i < n; ++i)
        *y++ = dropout_keep(p, 9, 4, first + i) ? in[0].v[i] / (1.0 - p) : 0.0;
  };
  c.backward = [=](const Inputs&, const float* dy, Grads& g, GradInto into) {
    for (auto [p, first] : runs)
      dropout_backward(g[0].data(), dy, n, p, 9, 4, first, into), dy += n, into = GradInto::add;
  };
  return c;
}

// Attention's bf16 dropout: out = [bf16(dropout(x)) widened, dropout(g) in place].
OpCase dropout_round_case(bool perf) {
  const int64_t n = perf ? 1 << 22 : 1037;
  const float p = 0.5f;
  OpCase c = new_case("dropout_round", kBf16, false, dims({n}),
                      {{"x", rnd(n, 41)}, {"g", rnd(n, 42)}}, 2 * n);
  c.bytes = 14.0 * n;
  c.run = [=](const Inputs& in, float* out) {
    std::vector<uint16_t> y16(n);
    std::copy(in[1].v.begin(), in[1].v.end(), out + n);
    dropout_round(y16.data(), ptr(in, 0), out + n, n, p, 9, 4);
    widen_n(out, y16.data(), n);
  };
  c.reference = [=](const Inputs& in, double* out) {
    for (int64_t i = 0; i < n; ++i) {
      const bool k = dropout_keep(p, 9, 4, i);
      out[i] = k ? rne(in[0].v[i] / (1.0 - p)) : 0.0;
      out[n + i] = k ? in[1].v[i] / (1.0 - p) : 0.0;
    }
  };
  return c;
}

// out[r] = word[ids[r]] + pos[r % N + off] + type[0]; repeated ids accumulate in backward.
OpCase embedding(bool perf) {
  const int64_t B = perf ? 32 : 3, N = perf ? 512 : 5, C = perf ? 768 : 6, V = perf ? 8000 : 10,
                off = 2, P = N + off + 1;
  std::vector<int32_t> ids(B * N);
  for (int64_t i = 0; i < B * N; ++i) ids[i] = static_cast<int32_t>(rng_bits(4, 4, i) % V);
  ids[1] = ids[2] = ids[B * N - 1];
  OpCase c = new_case("embedding", kF32, false, dims({B, N, C}),
                      {{"word", rnd(V * C, 21)}, {"pos", rnd(P * C, 22)}, {"type", rnd(2 * C, 23)}},
                      B * N * C);
  c.bytes = 12.0 * B * N * C;
  const EmbedDims d{/*B=*/B, /*N=*/N, /*C=*/C, /*pos_offset=*/off};
  c.run = [=](const Inputs& in, float* out) {
    embedding_forward(out, ids.data(), ptr(in, 0), ptr(in, 1), ptr(in, 2), d);
  };
  c.reference = [=](const Inputs& in, double* out) {
    for (int64_t r = 0; r < B * N; ++r)
      for (int64_t j = 0; j < C; ++j)
        out[r * C + j] =
            double(in[0].v[ids[r] * C + j]) + in[1].v[(r % N + off) * C + j] + in[2].v[j];
  };
  c.backward = [=](const Inputs&, const float* dout, Grads& g, GradInto) {
    embedding_backward(g[0].data(), g[1].data(), g[2].data(), dout, ids.data(), d);
  };
  return c;
}

// out = [summed loss, counted rows]; the gradient (written, not added) is that of the loss
// scaled by dout[0]. Targets < 0 are ignored; one row is confident (a logit of 60).
OpCase cross_entropy_case(bool perf) {
  const int64_t R = perf ? 2048 : 9, V = perf ? 8192 : 13;
  std::vector<int32_t> tgt(R);
  for (int64_t r = 0; r < R; ++r) tgt[r] = static_cast<int32_t>(rng_bits(5, 5, r) % V);
  tgt[1] = tgt[R - 1] = -100, tgt[5] = -1;
  std::vector<float> logits = rnd(R * V, 11, 2.f);
  logits[3 * V + 2] = 60.f;
  OpCase c = new_case("cross_entropy", kF32, false, dims({R, V}), {{"logits", logits}}, 2);
  c.bytes = 8.0 * R * V;
  c.out_diff = 1;
  c.writes_grad = true;
  c.overwrite = {0};
  c.run = [=](const Inputs& in, float* out) {
    int64_t count = -5;
    out[0] = float(cross_entropy(nullptr, ptr(in, 0), tgt.data(), R, V, 1.f, &count));
    out[1] = float(count);
  };
  c.reference = [=](const Inputs& in, double* out) {
    out[0] = out[1] = 0;
    for (int64_t r = 0; r < R; ++r) {
      if (tgt[r] < 0) continue;
      const float* x = ptr(in, 0) + r * V;
      double mx = -INFINITY, z = 0;
      for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(x[j]));
      for (int64_t j = 0; j < V; ++j) z += std::exp(x[j] - mx);
      out[0] += mx + std::log(z) - x[tgt[r]];
      out[1] += 1;
    }
  };
  c.backward = [=](const Inputs& in, const float* dout, Grads& g, GradInto) {
    cross_entropy(g[0].data(), ptr(in, 0), tgt.data(), R, V, dout[0], nullptr);
  };
  return c;
}

}  // namespace

std::vector<CaseMaker> row_cases() {
  std::vector<CaseMaker> v = {layernorm,
                              add_layernorm(kF32),
                              add_layernorm(kBf16),
                              layernorm_backward_rounded,
                              gelu,
                              gelu_bf16,
                              gelu_backward_rows(kF32),
                              gelu_backward_rows(kBf16),
                              tanh_case,
                              softmax(false),
                              softmax(true),
                              dropout,
                              dropout_round_case,
                              embedding,
                              cross_entropy_case};
  return v;
}

}  // namespace lf::ops
