// Op cases of the linear maps: linear_forward/backward (plain, and bf16 training's weight forms
// and pre-rounded gradients, the input gradient written in bf16), round_output_gradient, and the
// packed-weight inference products (PackedLinear: every epilogue, tiled, transposed, bf16
// output).
#include <omp.h>

#include "kernels/matmul.h"
#include "ops/harness.h"

namespace lf::ops {
namespace {

// inp [R, I], W [O, I], b [O]; the sizes of a linear case: bf16 ones large enough for every
// product to run in bf16 (gemm_runs_bf16), perf ones an FFN-sized map.
struct LinShape {
  int64_t R, I, O;
};
LinShape lin_shape(ComputeType t, bool perf) {
  if (perf) return {2048, 768, 768};
  return t == ComputeType::bf16 ? LinShape{64, 96, 128} : LinShape{7, 12, 9};
}

OpCase linear_base(const std::string& name, ComputeType t, const LinShape& s) {
  OpCase c;
  c.name = name;
  set_precision(c, t);
  c.shape = dims({s.R, s.I, s.O});
  c.in = {{"x", rnd(s.R * s.I, 1)}, {"W", rnd(s.O * s.I, 2)}, {"b", rnd(s.O, 3)}};
  c.out_size = s.R * s.O;
  c.flops = 2.0 * s.R * s.I * s.O;
  c.reference = [=](const Inputs& in, double* y) {
    ref_linear(y, ptr(in, 0), ptr(in, 1), ptr(in, 2), s.R, s.I, s.O);
  };
  return c;
}

// y = x W^T + b and its backward, in precision t.
CaseMaker linear_case(ComputeType t) {
  return [=](bool perf) {
    const LinShape s = lin_shape(t, perf);
    OpCase c = linear_base("linear", t, s);
    if (t == ComputeType::bf16) c.min_err = 1e-6;
    c.overwrite = {0};
    const LinearDims d{/*rows=*/s.R, /*in=*/s.I, /*out=*/s.O};
    c.run = [=](const Inputs& in, float* y) {
      linear_forward(y, ptr(in, 0), ptr(in, 1), ptr(in, 2), d, t);
    };
    c.backward = [=](const Inputs& in, const float* dy, Grads& g, GradInto into) {
      linear_backward(LinearGrads{g[0].data(), g[1].data(), g[2].data(), into}, dy, ptr(in, 0),
                      ptr(in, 1), d, t);
    };
    return c;
  };
}

// bf16 training's forms of a weight: W rounded once, packed for x W^T and for dY W; the input
// rounded once; the output gradient rounded once with its column sums (round_output_gradient,
// linear_backward's pre_rounded).
struct TrainForms {
  std::vector<uint16_t> w16, x16;
  PackedLinear fwd, bwd;
  TrainForms(const Inputs& in, const LinShape& s)
      : w16(to16(ptr(in, 1), s.O * s.I)), x16(to16(ptr(in, 0), s.R * s.I)) {
    fwd.pack(ptr(in, 1), s.O, s.I, ComputeType::bf16);
    bwd.pack_transposed(ptr(in, 1), s.O, s.I, ComputeType::bf16);
  }
  TrainWeight weight() const { return {w16.data(), &fwd, &bwd}; }
};

OpCase linear_train(bool perf) {
  const LinShape s = lin_shape(ComputeType::bf16, perf);
  OpCase c = linear_base("linear_train_forms", ComputeType::bf16, s);
  c.overwrite = {0};
  const LinearDims d{/*rows=*/s.R, /*in=*/s.I, /*out=*/s.O};
  c.run = [=](const Inputs& in, float* y) {
    const TrainForms f(in, s);
    // The input as a bf16 product reads it: the copy rounded once (f32 for a smaller product).
    const bool bf16 = gemm_runs_bf16(ComputeType::bf16, s.R, s.O, s.I);
    linear_forward(y, bf16 ? TensorIn(f.x16.data()) : TensorIn(ptr(in, 0)),
                   Weight(ptr(in, 1), f.weight()), ptr(in, 2), d, ComputeType::bf16);
  };
  c.backward = [=](const Inputs& in, const float* dy, Grads& g, GradInto into) {
    const TrainForms f(in, s);
    std::vector<uint16_t> dy16(s.R * s.O);
    round_output_gradient(dy16.data(), g[2].data(), dy, s.R, s.O);
    linear_backward(LinearGrads{g[0].data(), g[1].data(), nullptr, into}, dy16.data(), f.x16.data(),
                    Weight(ptr(in, 1), f.weight()), d, ComputeType::bf16);
  };
  return c;
}

// The input gradient written in bf16 only: out = [dinp16 widened, dW, db], from zeros.
OpCase linear_backward_bf16_input_case(bool perf) {
  const LinShape s = lin_shape(ComputeType::bf16, perf);
  OpCase c = linear_base("linear_backward_bf16_input", ComputeType::bf16, s);
  c.in.push_back({"dout", rnd(s.R * s.O, 4), false});
  c.out_size = s.R * s.I + s.O * s.I + s.O;
  c.flops *= 2;
  const LinearDims d{/*rows=*/s.R, /*in=*/s.I, /*out=*/s.O};
  c.run = [=](const Inputs& in, float* out) {
    const TrainForms f(in, s);
    std::vector<uint16_t> dinp16(s.R * s.I);
    std::fill(out + s.R * s.I, out + c.out_size, 0.f);
    linear_backward(LinearGrads{dinp16.data(), out + s.R * s.I, out + s.R * s.I + s.O * s.I,
                                GradInto::overwrite},
                    ptr(in, 3), f.x16.data(), Weight(nullptr, f.weight()), d, ComputeType::bf16);
    widen_n(out, dinp16.data(), s.R * s.I);
  };
  c.reference = [=](const Inputs& in, double* out) {
    ref_matmul(out, false, false, s.R, s.I, s.O, 1, ptr(in, 3), s.O, ptr(in, 1), s.I, 0, nullptr,
               s.I);
    ref_matmul(out + s.R * s.I, true, false, s.O, s.I, s.R, 1, ptr(in, 3), s.O, ptr(in, 0), s.I, 0,
               nullptr, s.I);
    for (int64_t o = 0; o < s.O; ++o) {
      double sum = 0;
      for (int64_t r = 0; r < s.R; ++r) sum += in[3].v[r * s.O + o];
      out[s.R * s.I + s.O * s.I + o] = sum;
    }
  };
  return c;
}

// dout rounded to bf16 with its column sums added to db: out = [d16 widened, db].
OpCase round_output_gradient_case(bool perf) {
  const int64_t R = perf ? 4096 : 37, C = perf ? 768 : 29;
  OpCase c;
  c.name = "round_output_gradient";
  set_precision(c, ComputeType::bf16, /*matmul=*/false);
  c.shape = dims({R, C});
  c.in = {{"dout", rnd(R * C, 5), false}, {"db", rnd(C, 6), false}};
  c.out_size = R * C + C;
  c.bytes = 6.0 * R * C;
  c.run = [=](const Inputs& in, float* out) {
    std::vector<uint16_t> d16(R * C);
    std::copy(in[1].v.begin(), in[1].v.end(), out + R * C);
    round_output_gradient(d16.data(), out + R * C, ptr(in, 0), R, C);
    widen_n(out, d16.data(), R * C);
  };
  c.reference = [=](const Inputs& in, double* out) {
    for (int64_t i = 0; i < R * C; ++i) out[i] = rne(in[0].v[i]);
    for (int64_t j = 0; j < C; ++j) {
      out[R * C + j] = in[1].v[j];
      for (int64_t r = 0; r < R; ++r) out[R * C + j] += in[0].v[r * C + j];
    }
  };
  return c;
}

// ---- Packed weights (inference)

using Epi = PackedLinear::Epilogue;
const char* epi_name(Epi e) {
  return e == Epi::store ? "store" : e == Epi::gelu ? "gelu" : "accumulate";
}

// One call of a packed sweep: rows, with or without bias, from inside a parallel region of
// two threads (each mapping half of the rows on one core) or outside.
struct PackedCall {
  int64_t rows;
  bool bias, nested;
};

// x [rows_max, K] W [N, K] b [N]; out = the calls' outputs one after another, each starting as
// input "out0" (accumulate adds to it). kernel(p, out, x, rows, bias) makes one call.
OpCase packed_sweep(
    const std::string& name, ComputeType t, int64_t N, int64_t K,
    const std::vector<PackedCall>& calls, Epi e,
    std::function<void(const PackedLinear&, float*, const float*, int64_t, const float*)> kernel) {
  OpCase c;
  c.name = name;
  set_precision(c, t);
  int64_t total = 0, rmax = 0;
  for (const PackedCall& k : calls) total += k.rows, rmax = std::max(rmax, k.rows);
  c.shape =
      calls.size() == 1 ? dims({calls[0].rows, K, N}) : std::to_string(calls.size()) + " calls";
  c.in = {{"x", rnd(rmax * K, 12)},
          {"W", rnd(N * K, 11)},
          {"b", rnd(N, 13)},
          {"out0", rnd(total * N, 14), false}};
  c.out_size = total * N;
  c.flops = 2.0 * total * N * K;
  c.run = [=](const Inputs& in, float* out) {
    std::copy(in[3].v.begin(), in[3].v.end(), out);
    PackedLinear p;
    p.pack(ptr(in, 1), N, K, t);
    for (const PackedCall& k : calls) {
      const float* b = k.bias ? ptr(in, 2) : nullptr;
      if (k.nested) {
#pragma omp parallel num_threads(2)
        {
          const int64_t half = k.rows / 2, first = omp_get_thread_num() == 0;
          const int64_t r0 = first ? 0 : half, r1 = first ? half : k.rows;
          kernel(p, out + r0 * N, ptr(in, 0) + r0 * K, r1 - r0, b);
        }
      } else {
        kernel(p, out, ptr(in, 0), k.rows, b);
      }
      out += k.rows * N;
    }
  };
  c.reference = [=](const Inputs& in, double* out) {
    const float* out0 = ptr(in, 3);
    for (const PackedCall& k : calls) {
      ref_linear(out, ptr(in, 0), ptr(in, 1), k.bias ? ptr(in, 2) : nullptr, k.rows, K, N);
      for (int64_t i = 0; i < k.rows * N; ++i) {
        if (e == Epi::gelu) out[i] = gelu_ref(out[i]);
        if (e == Epi::accumulate) out[i] += out0[i];
      }
      out += k.rows * N, out0 += k.rows * N;
    }
  };
  return c;
}

// Row counts below, at and above the block size, with and without bias, inside and outside a
// parallel region.
std::vector<PackedCall> packed_calls(bool perf) {
  if (perf) return {{2048, true, false}};
  std::vector<PackedCall> v;
  for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{256}, PackedLinear::kMaxRows + 300})
    for (bool bias : {true, false})
      for (bool nested : {false, true}) v.push_back({rows, bias, nested});
  return v;
}

CaseMaker packed_case(ComputeType t, Epi e) {
  return [=](bool perf) {
    const int64_t N = perf ? 3072 : 72, K = perf ? 768 : 136;
    return packed_sweep(std::string("packed_linear_") + epi_name(e), t, N, K, packed_calls(perf), e,
                        [e](const PackedLinear& p, float* out, const float* x, int64_t rows,
                            const float* b) { p.apply(out, x, rows, b, e); });
  };
}

// Rows in tiles of exactly `tile` rows (batch-invariant inference), a partial last tile.
CaseMaker packed_tiled_case(ComputeType t) {
  return [=](bool perf) {
    const int64_t N = perf ? 3072 : 40, K = perf ? 768 : 64;
    const std::vector<PackedCall> calls = {{perf ? 2048 : 100, true, false}};
    return packed_sweep("packed_linear_tiled", t, N, K, calls, Epi::gelu,
                        [](const PackedLinear& p, float* out, const float* x, int64_t rows,
                           const float* b) { p.apply_tiled(out, x, rows, b, Epi::gelu, 16); });
  };
}

// The input-gradient form: pack_transposed(W [rows, cols]) maps x [., rows] to x W; in bf16
// also from x already rounded (x16, x not read).
CaseMaker packed_transposed_case(ComputeType t) {
  return [=](bool perf) {
    const int64_t R = perf ? 2048 : 1100, Kin = perf ? 768 : 48, Nout = perf ? 768 : 40;
    OpCase c;
    c.name = "packed_linear_transposed";
    set_precision(c, t);
    c.shape = dims({R, Kin, Nout});
    c.in = {{"x", rnd(R * Kin, 21)}, {"W", rnd(Kin * Nout, 22)}};
    const int64_t parts = t == ComputeType::bf16 ? 2 : 1;
    c.out_size = parts * R * Nout;
    c.flops = 2.0 * c.out_size * Kin;
    c.run = [=](const Inputs& in, float* out) {
      PackedLinear p;
      p.pack_transposed(ptr(in, 1), Kin, Nout, t);
      p.apply(out, ptr(in, 0), R, nullptr, Epi::store);
      if (parts < 2) return;
      const std::vector<uint16_t> x16 = to16(ptr(in, 0), R * Kin);
      p.apply(out + R * Nout, x16.data(), R, nullptr, Epi::store);
    };
    c.reference = [=](const Inputs& in, double* out) {
      for (int64_t i = 0; i < parts; ++i)
        ref_matmul(out + i * R * Nout, false, false, R, Nout, Kin, 1, ptr(in, 0), Kin, ptr(in, 1),
                   Nout, 0, nullptr, Nout);
    };
    return c;
  };
}

// bf16 training's FFN products: out16 = bf16(x16 W^T + bias), over more rows than one block.
OpCase packed_bf16_out(bool perf) {
  const int64_t N = perf ? 3072 : 72, K = perf ? 768 : 136, R = perf ? 2048 : 1100;
  return packed_sweep(
      "packed_linear_bf16_out", ComputeType::bf16, N, K, {{R, true, false}}, Epi::store,
      [N, K](const PackedLinear& p, float* out, const float* x, int64_t rows, const float* b) {
        const std::vector<uint16_t> x16 = to16(x, rows * K);
        std::vector<uint16_t> o16(rows * N);
        p.apply(o16.data(), x16.data(), rows, b, Epi::store);
        widen_n(out, o16.data(), rows * N);
      });
}

}  // namespace

std::vector<CaseMaker> linear_cases() {
  std::vector<CaseMaker> v;
  for (ComputeType t : kF32Bf16) {
    v.push_back(linear_case(t));
    for (Epi e : {Epi::store, Epi::gelu, Epi::accumulate}) v.push_back(packed_case(t, e));
    v.push_back(packed_tiled_case(t));
    v.push_back(packed_transposed_case(t));
  }
  // int8 (inference): every epilogue, and fixed row tiles.
  for (Epi e : {Epi::store, Epi::gelu, Epi::accumulate})
    v.push_back(packed_case(ComputeType::int8, e));
  v.push_back(packed_tiled_case(ComputeType::int8));
  for (auto f :
       {linear_train, linear_backward_bf16_input_case, round_output_gradient_case, packed_bf16_out})
    v.push_back(f);
  return v;
}

}  // namespace lf::ops
