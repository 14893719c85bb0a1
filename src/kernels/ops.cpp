#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/dropout_mask.h"
#include "kernels/matmul.h"
#include "kernels/vec_math.h"
#include "linformer/error.h"
#include "linformer/rng.h"

namespace lf {

namespace {
// Whether the packed weight p serves a product that runs in bf16 (bf16) or in f32.
bool packed_for(const PackedLinear* p, bool bf16) {
  return p && (p->type() == ComputeType::bf16) == bf16;
}
}  // namespace

void linear_forward(Tensor out, TensorIn inp, const Weight& weight, const float* b,
                    const LinearDims& d, ComputeType prec) {
  const float* W = weight.w;
  const TrainWeight& Wt = weight.forms;
  LF_DCHECK(d.rows >= 0 && d.in > 0 && d.out > 0, "linear_forward: bad shape rows=", d.rows,
            " in=", d.in, " out=", d.out);
  const bool bf16 = gemm_runs_bf16(prec, d.rows, d.out, d.in);
  LF_DCHECK(d.rows == 0 || (out && inp && W), "linear_forward: null out, input or weight");
  if (out.is(DataType::bf16)) {  // written rounded by the packed bf16 product
    LF_CHECK(bf16 && packed_for(Wt.forward, true) && inp.is(DataType::bf16),
             "linear_forward: a bf16 output needs a bf16 product, input and packed weight");
    Wt.forward->apply(out, inp, d.rows, b, PackedLinear::Epilogue::store);
    return;
  }
  float* y = out.f32();
  if (packed_for(Wt.forward, bf16)) {
    Wt.forward->apply(y, inp, d.rows, b, PackedLinear::Epilogue::store);
    return;
  }
  // A bf16 product adds the bias in its epilogue; for sgemm out starts as the bias rows.
  const bool fused = b && bf16;
  if (b && !fused) {
    PhaseScope ps(Phase::elementwise);
    parallel_for(0, d.rows, row_grain(d.out), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) std::copy(b, b + d.out, y + r * d.out);
    });
  }
  gemm(prec, false, true, d.rows, d.out, d.in, 1.f, inp, d.in, weight.operand(bf16), d.in,
       b && !fused ? 1.f : 0.f, y, d.out, fused ? b : nullptr);
}

namespace {

// d16 = bf16(G) [rows, cols] and db[c] += sum over rows of G[r, c], in one pass over G, whose
// row r is row(r, buf): a pointer to cols floats, computed into buf (cols floats, per thread)
// or read where they are. Threads take blocks of rows and add their partial sums in thread
// order.
template <typename Row>
void round_and_sum_rows(uint16_t* d16, float* db, int64_t rows, int64_t cols, Row row) {
  thread_local Buffer<float> partial;
  const int nt = num_threads();
  float* part = partial.grow(nt * cols);
  std::fill(part, part + nt * cols, 0.f);
  parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* acc = part + thread_id() * cols;
    thread_local Buffer<float> buf;  // this thread's row, when row() computes it
    float* own = buf.grow(cols);
    for (int64_t r = r0; r < r1; ++r) vm::round_and_sum_row(d16 + r * cols, acc, row(r, own), cols);
  });
  for (int t = 0; t < nt; ++t)
    for (int64_t c = 0; c < cols; ++c) db[c] += part[t * cols + c];
}

}  // namespace

const uint16_t* round_output_gradient(uint16_t* d16, float* db, const float* dout, int64_t rows,
                                      int64_t cols) {
  if (!db) return round_bf16(d16, dout, rows * cols);
  PhaseScope ps(Phase::matmul);  // the rounding serves the products, as round_bf16's does
  round_and_sum_rows(d16, db, rows, cols, [&](int64_t r, float*) { return dout + r * cols; });
  return d16;
}

void linear_backward(const LinearGrads& grads, TensorIn dy, TensorIn inp, const Weight& weight,
                     const LinearDims& d, ComputeType prec) {
  const Tensor dinp = grads.dinp;
  float *dW = grads.dW, *db = grads.db;
  const GradInto into = grads.into;
  const float* W = weight.w;
  const TrainWeight& Wt = weight.forms;
  const bool both_bf16 = linear_backward_runs_bf16(prec, d);
  LF_DCHECK(d.rows >= 0 && d.in > 0 && d.out > 0, "linear_backward: bad shape rows=", d.rows,
            " in=", d.in, " out=", d.out);
  LF_DCHECK(!dy.is(DataType::bf16) || both_bf16,
            "linear_backward: a pre-rounded output gradient needs both products in bf16");
  LF_DCHECK(!dinp.is(DataType::bf16) ||
                (both_bf16 && packed_for(Wt.backward, true) && into == GradInto::overwrite),
            "linear_backward: a bf16 input gradient needs bf16 products and a packed weight, "
            "and is written over");
  LF_DCHECK(d.rows == 0 || (dy && (!dinp || W || Wt.backward) && (!dW || inp)),
            "linear_backward: null output gradient, or a gradient without its operand");
  const int64_t rows = d.rows, in = d.in, out_f = d.out;
  // dout rounded once when both products run in bf16 (it is the A operand of each).
  // The bias gradient's column sums are taken in the same pass over dout.
  thread_local Buffer<uint16_t> dout16;
  TensorIn g = dy;
  if (dy.is(DataType::bf16)) {
    db = nullptr;  // the caller summed it
  } else if (dinp && both_bf16 && (dW || dinp.is(DataType::bf16))) {
    g = round_output_gradient(dout16.grow(rows * out_f), db, dy.f32(), rows, out_f);
    db = nullptr;
  }
  // The weight gradient first, while the output gradient just rounded is still in cache (its
  // reduction over the rows suffers most from operands read from memory).
  if (dW) gemm(prec, true, false, out_f, in, rows, 1.f, g, out_f, inp, in, 1.f, dW, in);
  if (dinp && packed_for(Wt.backward, gemm_runs_bf16(prec, rows, in, out_f)))
    Wt.backward->apply(
        dinp, g, rows, nullptr,
        into == GradInto::add ? PackedLinear::Epilogue::accumulate : PackedLinear::Epilogue::store);
  else if (dinp)
    gemm(prec, false, false, rows, in, out_f, 1.f, g, out_f,
         weight.operand(gemm_runs_bf16(prec, rows, in, out_f)), in,
         into == GradInto::add ? 1.f : 0.f, dinp.f32(), in);
  if (db) {
    const float* dout = dy.f32();
    PhaseScope ps(Phase::elementwise);
    const auto add_n = isa::kernels().add_n;
    parallel_for(0, out_f, 64, [&](int64_t c0, int64_t c1) {
      for (int64_t r = 0; r < rows; ++r) add_n(db + c0, dout + r * out_f + c0, c1 - c0);
    });
  }
}

void layernorm_forward(float* y, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int64_t rows, int64_t C, float eps, Tensor operand) {
  LF_DCHECK(rows >= 0 && C > 0, "layernorm_forward: bad shape rows=", rows, " C=", C);
  LF_DCHECK(rows == 0 || (y && inp && w && b), "layernorm_forward: null pointer");
  add_layernorm_forward(nullptr, y, mean, rstd, inp, nullptr, w, b, rows, C, eps, operand);
}

void add_layernorm_forward(float* sum, float* normed, float* mean, float* rstd, const float* x,
                           const float* y, const float* w, const float* b, int64_t rows, int64_t C,
                           float eps, Tensor operand) {
  LF_DCHECK(rows >= 0 && C > 0, "add_layernorm_forward: bad shape rows=", rows, " C=", C);
  LF_DCHECK(rows == 0 || (normed && x && w && b && (!y || sum)),
            "add_layernorm_forward: null pointer");
  LF_DCHECK(!operand || operand.is(DataType::bf16) || operand.f32() == normed,
            "add_layernorm_forward: an f32 operand form is the output itself");
  uint16_t* normed16 = operand.bf16();
  PhaseScope ps(Phase::elementwise);
  const auto rows_kernel = isa::kernels().layernorm_rows;  // the level's vector form
  parallel_for(0, rows, row_grain(C), [&](int64_t r0, int64_t r1) {
    const int64_t o = r0 * C;
    rows_kernel(normed + o, normed16 ? normed16 + o : nullptr, mean ? mean + r0 : nullptr,
                rstd ? rstd + r0 : nullptr, y ? sum + o : nullptr, x + o, y ? y + o : nullptr, w, b,
                r1 - r0, C, eps);
  });
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int64_t rows,
                        int64_t C, GradInto into, const RoundedGrad* also) {
  LF_DCHECK(rows >= 0 && C > 0, "layernorm_backward: bad shape rows=", rows, " C=", C);
  LF_DCHECK(rows == 0 || (dinp && dw && db && dout && inp && w && mean && rstd),
            "layernorm_backward: null pointer");
  LF_DCHECK(!also || (also->g16 && also->colsum), "layernorm_backward: incomplete RoundedGrad");
  PhaseScope ps(Phase::elementwise);
  // One pass over the rows: each thread adds its rows' share of the parameter gradients into
  // its own partial sums (added in thread order at the end) while it writes their dx.
  thread_local Buffer<float> partial;
  const int nt = num_threads();
  const int64_t per = (also ? 3 : 2) * C;  // dw, db (and also->colsum) partial sums
  float* part = partial.grow(nt * per);
  std::fill(part, part + nt * per, 0.f);
  const bool add = into == GradInto::add;
  const bool drop = also && also->p > 0.f;
  const DropoutMask mask(drop ? also->p : 0.f, drop ? also->seed : 0, drop ? also->stream : 0,
                         drop ? also->first : 0);
  const float keep_scale = drop ? 1.f / (1.f - also->p) : 1.f;
  const auto backward_row = isa::kernels().layernorm_backward_row;
  parallel_for(0, rows, row_grain(C), [&](int64_t r0, int64_t r1) {
    float* pw = part + thread_id() * per;
    float* pb = pw + C;
    thread_local Buffer<float> dropped;  // this thread's row of g, with dropout
    float* drow = drop ? dropped.grow(C) : nullptr;
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = inp + r * C;
      const float* g = dout + r * C;
      float* dx = dinp + r * C;
      backward_row(dx, pw, pb, g, x, w, mean[r], rstd[r], C, add);
      if (!also) continue;
      const float* gr = dx;  // the row of dropout_backward(dx), as dropout_backward writes it
      if (drop) {
        mask.for_range(r * C, (r + 1) * C, [&](int64_t i, bool keep) {
          drow[i - r * C] = keep ? 0.f + dx[i - r * C] * keep_scale : 0.f;
        });
        gr = drow;
      }
      vm::round_and_sum_row(also->g16 + r * C, pb + C, gr, C);  // as round_output_gradient does
    }
  });
  for (int t = 0; t < nt; ++t)
    for (int64_t c = 0; c < C; ++c) {
      dw[c] += part[t * per + c];
      db[c] += part[t * per + C + c];
    }
  if (also)
    for (int t = 0; t < nt; ++t)
      for (int64_t c = 0; c < C; ++c) also->colsum[c] += part[t * per + 2 * C + c];
}

namespace {
void gelu_forward_f32(float* out, const float* inp, int64_t n) {
  PhaseScope ps(Phase::elementwise);
  parallel_for(0, n, kGrainElems,
               [&](int64_t i0, int64_t i1) { vm::gelu_n(out + i0, inp + i0, i1 - i0); });
}
}  // namespace

namespace {

// GELU and GELU' of every bf16 value, indexed by its 16 bits. A bf16 input has only 65536
// values, so looking its result up gives exactly what computing it in f32 gives (the tables
// are made by the same vectorised functions), at the cost of a load instead of an erfc and
// two exps per element. 384 KB, made once on first use.
struct GeluTables {
  uint16_t fwd[65536 + 1];  // bf16(GELU(x)); one padding entry for 32-bit gathers
  float grad[65536];        // GELU'(x)
};

const GeluTables& gelu_tables() {
  static const GeluTables* const tables = [] {
    auto* t = new GeluTables;
    std::vector<float> x(65536), y(65536);
    for (uint32_t b = 0; b < 65536; ++b) {
      const uint32_t u = b << 16;
      std::memcpy(&x[b], &u, 4);
    }
    vm::gelu_n(y.data(), x.data(), 65536);
    vm::to_bf16_n(t->fwd, y.data(), 65536);
    t->fwd[65536] = 0;
    std::fill(t->grad, t->grad + 65536, 1.f);
    vm::gelu_backward_inplace_n(t->grad, x.data(), 65536);
    return t;
  }();
  return *tables;
}

}  // namespace

void gelu_forward(Tensor out, TensorIn inp, int64_t n) {
  LF_DCHECK(n == 0 || (out && inp && out.dtype == inp.dtype && !out.is(DataType::int8)),
            "gelu_forward: null, int8 or mixed operands");
  if (out.dtype == DataType::f32) {
    gelu_forward_f32(out.f32(), inp.f32(), n);
    return;
  }
  uint16_t* out16 = out.bf16();
  const uint16_t* inp16 = inp.bf16();
  const uint16_t* table = gelu_tables().fwd;
  PhaseScope ps(Phase::elementwise);
  const auto lookup = isa::kernels().lookup_u16;  // sixteen lookups per gather with AVX-512
  parallel_for(0, n, kGrainElems,
               [&](int64_t i0, int64_t i1) { lookup(out16 + i0, inp16 + i0, table, i1 - i0); });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  PhaseScope ps(Phase::elementwise);
  parallel_for(0, n, kGrainElems, [&](int64_t i0, int64_t i1) {
    vm::gelu_backward_n(dinp + i0, inp + i0, dout + i0, i1 - i0);
  });
}

bool linear_backward_runs_bf16(ComputeType t, const LinearDims& d) {
  return gemm_runs_bf16(t, d.rows, d.in, d.out) && gemm_runs_bf16(t, d.out, d.in, d.rows);
}

void gelu_backward_inplace(Tensor d, TensorIn inp, int64_t rows, int64_t cols, float* db) {
  LF_DCHECK(rows >= 0 && cols > 0, "gelu_backward_inplace: bad shape rows=", rows, " cols=", cols);
  LF_DCHECK(rows == 0 || (d && inp && d.dtype == inp.dtype && !d.is(DataType::int8) &&
                          (d.dtype == DataType::f32 || db)),
            "gelu_backward_inplace: null, int8 or mixed operands, or bf16 without db");
  PhaseScope ps(Phase::elementwise);
  if (d.dtype == DataType::f32) {
    float* g = d.f32();
    const float* x = inp.f32();
    parallel_for(0, rows * cols, kGrainElems, [&](int64_t i0, int64_t i1) {
      vm::gelu_backward_inplace_n(g + i0, x + i0, i1 - i0);
    });
    return;
  }
  uint16_t* d16 = d.bf16();
  const uint16_t* inp16 = inp.bf16();
  const float* grad = gelu_tables().grad;
  round_and_sum_rows(d16, db, rows, cols, [&](int64_t r, float* buf) {
    vm::from_bf16_n(buf, d16 + r * cols, cols);
    isa::kernels().mul_lookup_f32(buf, inp16 + r * cols, grad, cols);
    return static_cast<const float*>(buf);
  });
}

void tanh_forward(float* out, const float* inp, int64_t n) {
  PhaseScope ps(Phase::elementwise);
  for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(inp[i]);
}

void tanh_backward(float* dinp, const float* out, const float* dout, int64_t n) {
  PhaseScope ps(Phase::elementwise);
  for (int64_t i = 0; i < n; ++i) dinp[i] += dout[i] * (1.f - out[i] * out[i]);
}

}  // namespace lf
