// Op cases of kernels/matmul.h's products and roundings: gemm (each transpose, alpha/beta,
// leading dimensions, bias, the tall weight-gradient shapes), gemm_batched (and an operand
// given only in bf16), and the f32 -> bf16 roundings. The products have no backward of
// their own (linear's is in cases_linear.cpp).
#include <algorithm>

#include "kernels/matmul.h"
#include "ops/harness.h"

namespace lf::ops {
namespace {

// One product of a sweep: C = alpha op(A) op(B) + beta C (+ bias), rows padded by `pad`.
struct Prod {
  bool ta, tb;
  int64_t M, N, K, pad = 0;
  float alpha = 1.f, beta = 0.f;
  bool bias = false;
  int64_t lda() const { return (ta ? M : K) + pad; }
  int64_t ldb() const { return (tb ? K : N) + 2 * pad; }
  int64_t ldc() const { return N + 3 * pad; }
  size_t a_size() const { return std::max<int64_t>((ta ? K : M) * lda(), 1); }
  size_t b_size() const { return std::max<int64_t>((tb ? N : K) * ldb(), 1); }
  size_t c_size() const { return std::max<int64_t>(M * ldc(), 1); }
};

// The kernel under test for one product; A, B, C, bias at the product's offsets.
using ProdRun =
    std::function<void(const Prod&, const float* A, const float* B, float* C, const float* bias)>;

// A sweep of products over pools of A, B, C0 and bias: out is every C (padding included,
// which must keep C0's sentinel), one after another.
OpCase gemm_sweep(const std::string& name, ComputeType t, const std::vector<Prod>& ps,
                  ProdRun kernel, uint64_t seed) {
  OpCase c;
  c.name = name;
  set_precision(c, t);
  size_t na = 0, nb = 0, nc = 0, nbias = 0;
  for (const Prod& p : ps) na += p.a_size(), nb += p.b_size(), nc += p.c_size(), nbias += p.N;
  std::vector<float> C0 = rnd(nc, seed + 2);
  size_t oc = 0;
  for (const Prod& p : ps) {
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = p.N; j < p.ldc(); ++j) C0[oc + i * p.ldc() + j] = 12345.f;
    oc += p.c_size();
    c.flops += 2.0 * p.M * p.N * p.K;
  }
  c.in = {{"A", rnd(na, seed)},
          {"B", rnd(nb, seed + 1)},
          {"C", C0, false},
          {"bias", rnd(nbias, seed + 3)}};
  c.out_size = nc;
  c.shape = ps.size() == 1 ? std::to_string(ps[0].M) + "x" + std::to_string(ps[0].N) + "x" +
                                 std::to_string(ps[0].K)
                           : std::to_string(ps.size()) + " products";
  // Calls f(p, offset of A, B, C, bias) for every product.
  auto each = [ps](const std::function<void(const Prod&, size_t, size_t, size_t, size_t)>& f) {
    size_t a = 0, b = 0, cc = 0, bi = 0;
    for (const Prod& p : ps) {
      f(p, a, b, cc, bi);
      a += p.a_size(), b += p.b_size(), cc += p.c_size(), bi += p.N;
    }
  };
  c.run = [=](const Inputs& in, float* out) {
    std::copy(in[2].v.begin(), in[2].v.end(), out);
    each([&](const Prod& p, size_t a, size_t b, size_t cc, size_t bi) {
      kernel(p, ptr(in, 0) + a, ptr(in, 1) + b, out + cc, p.bias ? ptr(in, 3) + bi : nullptr);
    });
  };
  c.reference = [=](const Inputs& in, double* out) {
    for (size_t i = 0; i < in[2].v.size(); ++i) out[i] = in[2].v[i];
    each([&](const Prod& p, size_t a, size_t b, size_t cc, size_t bi) {
      ref_matmul(out + cc, p.ta, p.tb, p.M, p.N, p.K, p.alpha, ptr(in, 0) + a, p.lda(),
                 ptr(in, 1) + b, p.ldb(), p.beta, ptr(in, 2) + cc, p.ldc());
      for (int64_t i = 0; p.bias && i < p.M; ++i)
        for (int64_t j = 0; j < p.N; ++j) out[cc + i * p.ldc() + j] += in[3].v[bi + j];
    });
  };
  return c;
}

ProdRun gemm_run(ComputeType t) {
  return [t](const Prod& p, const float* A, const float* B, float* C, const float* bias) {
    gemm(t, p.ta, p.tb, p.M, p.N, p.K, p.alpha, A, p.lda(), B, p.ldb(), p.beta, C, p.ldc(), bias);
  };
}

// Small shapes (vectors, odd sizes, both sides of the kernels' blocking) and three
// alpha/beta pairs, packed and padded, for one transpose pair.
std::vector<Prod> small_products(bool ta, bool tb) {
  const int64_t shapes[][3] = {{5, 7, 3},    {7, 5, 9},    {1, 9, 4},   {8, 1, 6},   {1, 1, 11},
                               {13, 11, 17}, {64, 33, 70}, {3, 130, 2}, {130, 3, 65}};
  std::vector<Prod> v;
  for (const auto& s : shapes)
    for (int64_t pad : {0, 3})
      for (auto ab : {std::pair{1.f, 0.f}, {-1.7f, 0.6f}, {0.5f, 1.f}})
        v.push_back({ta, tb, s[0], s[1], s[2], pad, ab.first, ab.second});
  return v;
}

CaseMaker gemm_case(ComputeType t, bool ta, bool tb) {
  return [=](bool perf) {
    const std::string name = std::string("gemm_") + (ta ? "t" : "n") + (tb ? "t" : "n");
    std::vector<Prod> ps;
    if (perf)
      ps = {{ta, tb, 512, 512, 512}};
    else if (t == ComputeType::bf16)  // large enough for the bf16 path
      ps = {{ta, tb, 96, 80, 200, 3, 0.5f, 0.25f}, {ta, tb, 128, 64, 64, 0, 1.f, 0.f}};
    else
      ps = small_products(ta, tb);
    OpCase c = gemm_sweep(name, t, ps, gemm_run(t), 100 + 4 * ta + 2 * tb);
    if (t == ComputeType::bf16) c.min_err = 1e-6;
    return c;
  };
}

// A bias row: in the bf16 product's epilogue, copied into C under sgemm.
CaseMaker gemm_bias_case(ComputeType t) {
  return [=](bool perf) {
    const int64_t M = perf ? 1024 : 96, N = perf ? 768 : 80, K = perf ? 768 : 200;
    return gemm_sweep("gemm_bias", t, {{false, true, M, N, K, 1, 1.f, 0.f, true}}, gemm_run(t), 4);
  };
}

// Tall, narrow products reducing over many rows (a weight gradient dW = dY^T X), which run
// as oneDNN's matmul primitive instead of its sgemm.
OpCase gemm_tall(bool perf) {
  std::vector<Prod> ps = {{true, false, 1024, 40, 512, 0, 1.f, 1.f},
                          {true, false, 1030, 17, 600, 5, -0.5f, 0.f},
                          {true, false, 1024, 24, 512, 0, 1.f, 0.f, true}};
  if (perf) ps = {{true, false, 4096, 256, 1024}};
  return gemm_sweep("gemm_tall", ComputeType::f32, ps, gemm_run(ComputeType::f32), 900);
}

// Batched products: attention's heads side by side in a row (as in [B, N, H * Dh]), an
// operand shared across the batch (zero stride), every transpose, alpha and beta; C's
// padding columns keep their values. One matrix pool per (ta, tb, shared) product.
struct Batched {
  bool ta, tb;
  int shared;  // 1: A shared across b, 2: B shared across h
  int64_t nb, nh, M, N, K;
  int64_t ar() const { return ta ? K : M; }
  int64_t ac() const { return ta ? M : K; }
  int64_t br() const { return tb ? N : K; }
  int64_t bc() const { return tb ? K : N; }
  BatchLayout la() const { return {shared == 1 ? 0 : ar() * (nh * ac() + 3), ac(), nh * ac() + 3}; }
  BatchLayout lb() const { return {br() * (nh * bc() + 1), shared == 2 ? 0 : bc(), nh * bc() + 1}; }
  BatchLayout lc() const { return {M * (nh * N + 5), N, nh * N + 5}; }
};

CaseMaker gemm_batched_case(ComputeType t) {
  return [=](bool perf) {
    std::vector<Batched> bs;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int shared : {0, 1, 2})
          if (!perf || (ta == 0 && tb == 1 && shared == 0))
            bs.push_back(perf ? Batched{false, true, 0, 8, 12, 512, 512, 64}
                              : Batched{ta != 0, tb != 0, shared, 3, 2, 64, 48, 72});
    OpCase c;
    c.name = "gemm_batched";
    set_precision(c, t);
    if (t == ComputeType::bf16) c.min_err = 1e-6;
    const Batched& s = bs[0];
    c.shape = std::to_string(s.nb) + "x" + std::to_string(s.nh) + "x" + std::to_string(s.M) + "x" +
              std::to_string(s.N) + "x" + std::to_string(s.K);
    // Each product's operands get a slice of the largest footprint among them (the transposes
    // change the stored shapes and leading dimensions).
    size_t na = 0, nbb = 0, nc = 0;
    for (const Batched& p : bs) {
      na = std::max<size_t>(na, p.nb * p.ar() * p.la().ld);
      nbb = std::max<size_t>(nbb, p.nb * p.br() * p.lb().ld);
      nc = std::max<size_t>(nc, p.nb * p.M * p.lc().ld);
    }
    c.in = {{"A", rnd(na * bs.size(), 11)},
            {"B", rnd(nbb * bs.size(), 12)},
            {"C", rnd(nc * bs.size(), 13), false}};
    c.out_size = nc * bs.size();
    c.flops = 2.0 * s.nb * s.nh * s.M * s.N * s.K * bs.size();
    c.run = [=](const Inputs& in, float* out) {
      std::copy(in[2].v.begin(), in[2].v.end(), out);
      for (size_t i = 0; i < bs.size(); ++i) {
        const Batched& p = bs[i];
        gemm_batched(t, p.nb, p.nh, p.ta, p.tb, p.M, p.N, p.K, 0.5f, ptr(in, 0) + i * na, p.la(),
                     ptr(in, 1) + i * nbb, p.lb(), 0.25f, out + i * nc, p.lc());
      }
    };
    c.reference = [=](const Inputs& in, double* out) {
      for (size_t i = 0; i < in[2].v.size(); ++i) out[i] = in[2].v[i];
      for (size_t i = 0; i < bs.size(); ++i) {
        const Batched& p = bs[i];
        const BatchLayout la = p.la(), lb = p.lb(), lc = p.lc();
        for (int64_t b = 0; b < p.nb; ++b)
          for (int64_t h = 0; h < p.nh; ++h) {
            const int64_t co = i * nc + b * lc.sb + h * lc.sh;
            ref_matmul(out + co, p.ta, p.tb, p.M, p.N, p.K, 0.5,
                       ptr(in, 0) + i * na + b * la.sb + h * la.sh, la.ld,
                       ptr(in, 1) + i * nbb + b * lb.sb + h * lb.sh, lb.ld, 0.25, ptr(in, 2) + co,
                       lc.ld);
          }
      }
    };
    return c;
  };
}

// An operand kept only in bf16 (A null, its rounded copy given, as the queries of bf16 training
// are), against the product of the rounded A: when the product runs in bf16 (M = 64, eight
// matrices) and when it is too small for bf16 and runs in f32 (M = 4: the copy is widened back,
// so the result is the f32 product of the rounded A, to f32 rounding).
OpCase gemm_batched_rounded_a(bool bf16_product) {
  const int64_t nh = 2, N = 48, K = 16, M = bf16_product ? 64 : 4, nb = bf16_product ? 8 : 1;
  const BatchLayout la{M * nh * K, K, nh * K}, lb{K * nh * N, N, nh * N}, lc{M * nh * N, N, nh * N};
  OpCase c =
      new_case(bf16_product ? "gemm_batched_a16" : "gemm_batched_a16_f32_product",
               ComputeType::bf16, true, dims({nb, nh, M, N, K}),
               {{"A", rnd(nb * M * la.ld, 21)}, {"B", rnd(nb * K * lb.ld, 22)}}, nb * M * lc.ld);
  c.flops = 2.0 * nb * nh * M * N * K;
  if (bf16_product)
    c.min_err = 1e-6;
  else
    c.tol = 1e-6;
  c.run = [=](const Inputs& in, float* out) {
    Buffer<uint16_t> a16;
    round_batch_bf16(a16, nb, nh, M, K, la, ptr(in, 0));
    std::fill(out, out + nb * M * lc.ld, 0.f);
    gemm_batched(ComputeType::bf16, nb, nh, false, false, M, N, K, 1.f, a16.data(),
                 la, ptr(in, 1), lb, 0.f, out, lc);
  };
  c.reference = [=](const Inputs& in, double* out) {
    std::vector<float> ar(in[0].v.size());
    for (size_t i = 0; i < ar.size(); ++i) ar[i] = static_cast<float>(rne(in[0].v[i]));
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t h = 0; h < nh; ++h)
        ref_matmul(out + b * lc.sb + h * lc.sh, false, false, M, N, K, 1.0,
                   ar.data() + b * la.sb + h * la.sh, la.ld, ptr(in, 1) + b * lb.sb + h * lb.sh,
                   lb.ld, 0.0, nullptr, lc.ld);
  };
  return c;
}
OpCase gemm_batched_a16(bool) { return gemm_batched_rounded_a(true); }
OpCase gemm_batched_a16_f32(bool) { return gemm_batched_rounded_a(false); }

// A rounding kernel f32 -> bf16: out = the widened bf16 values; reference rounds to nearest
// even (bf16_bits). src [n] in the input; kernel(dst16, src) fills `dense` bf16 values.
OpCase rounding_case(const std::string& name, const std::string& shape, size_t n_src, size_t dense,
                     std::function<void(uint16_t* dst, const float* src)> kernel,
                     std::function<size_t(size_t)> src_of) {
  OpCase c;
  c.name = name;
  set_precision(c, ComputeType::bf16, /*matmul=*/false);
  c.tol = 0;  // exact: the same rounding of the same floats
  c.shape = shape;
  c.in = {{"x", rnd(n_src, 21, 3.f), false}};
  c.out_size = dense;
  c.bytes = 6.0 * dense;
  c.run = [=](const Inputs& in, float* out) {
    std::vector<uint16_t> d(dense);
    kernel(d.data(), ptr(in, 0));
    widen_n(out, d.data(), dense);
  };
  c.reference = [=](const Inputs& in, double* out) {
    for (size_t i = 0; i < dense; ++i) out[i] = rne(in[0].v[src_of(i)]);
  };
  return c;
}

OpCase to_bf16_case(bool perf) {
  const int64_t rows = perf ? 4096 : 37, cols = perf ? 1024 : 1029, ld = cols + 5;
  OpCase c = rounding_case(
      "to_bf16", std::to_string(rows) + "x" + std::to_string(cols), rows * ld, rows * cols,
      [=](uint16_t* d, const float* x) { to_bf16(d, x, rows, cols, ld); },
      [=](size_t i) { return (i / cols) * ld + i % cols; });
  return c;
}

OpCase round_bf16_case(bool perf) {
  const int64_t n = perf ? 1 << 22 : 100003;
  OpCase c = rounding_case(
      "round_bf16", std::to_string(n), n, n,
      [=](uint16_t* d, const float* x) { round_bf16(d, x, n); }, [](size_t i) { return i; });
  return c;
}

// round_batch_bf16 keeps the operand's layout: the matrices' entries are gathered.
OpCase round_batch_case(bool perf) {
  const int64_t nb = 3, nh = 2, rows = perf ? 512 : 17, cols = perf ? 64 : 9;
  const BatchLayout l{rows * (nh * cols + 3), cols, nh * cols + 3};
  const int64_t per = rows * cols;
  auto src = [=](size_t i) {
    const int64_t m = i / per, r = (i % per) / cols, col = i % cols;
    return size_t((m / nh) * l.sb + (m % nh) * l.sh + r * l.ld + col);
  };
  OpCase c = rounding_case(
      "round_batch_bf16",
      std::to_string(nb * nh) + "x" + std::to_string(rows) + "x" + std::to_string(cols), nb * l.sb,
      nb * nh * per,
      [=](uint16_t* d, const float* x) {
        Buffer<uint16_t> buf;
        const uint16_t* r = round_batch_bf16(buf, nb, nh, rows, cols, l, x);
        for (int64_t i = 0; i < nb * nh * per; ++i) d[i] = r[src(i)];
      },
      src);
  return c;
}

}  // namespace

std::vector<CaseMaker> product_cases() {
  std::vector<CaseMaker> v;
  for (ComputeType t : kF32Bf16) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) v.push_back(gemm_case(t, ta != 0, tb != 0));
    v.push_back(gemm_bias_case(t));
    v.push_back(gemm_batched_case(t));
  }
  // bf16 only: an operand given rounded; f32 only: the tall products; the roundings to bf16.
  for (auto f : {gemm_batched_a16, gemm_batched_a16_f32, gemm_tall, to_bf16_case, round_bf16_case,
                 round_batch_case})
    v.push_back(f);
  return v;
}

}  // namespace lf::ops
