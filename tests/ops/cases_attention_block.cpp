// Op cases of the own streaming-attention kernel (kernels/attention_block.h: attend_head) against
// a naive double-precision attention, in f32 and bf16 operands, over shapes that exercise every
// tile remainder (rows, keys and head sizes that are not multiples of 16, 6 or 8), key masks (a
// padded tail, scattered holes, a whole masked key block, every key masked), causal rows and
// scores large enough to overflow exp without the running max. The head's columns sit inside
// wider rows, and the columns around them must keep their values. Each case runs on the active
// instruction-set level (ctest runs the op cases once per level: isa_<level>.Registry/Ops.*);
// a level without the kernel, or without its bf16 form, skips. The kernel's properties (NaN,
// large scores, the gemm path, head-major keys) are tests/test_attention_block.cpp.
#include <limits>

#include "kernels/attention_block.h"
#include "kernels/vec_scalar.h"
#include "ops/harness.h"

namespace lf::ops {
namespace {

using attn_block::HeadIn;
using attn_block::Operands;

struct Shape {
  int64_t rows, keys, Dh, kb;
  int mask;             // 0 none, 1 padded tail, 2 holes, 3 a whole block masked, 4 all masked
  int64_t first_query;  // -1: not causal
  float magnitude = 1.f;
  std::string name() const {
    return "attend_head_rows" + std::to_string(rows) + "_keys" + std::to_string(keys) + "_dh" +
           std::to_string(Dh) + "_kb" + std::to_string(kb) + "_mask" + std::to_string(mask) +
           (first_query >= 0 ? "_causal" : "") + (magnitude > 1.f ? "_large" : "");
  }
};

std::vector<float> make_mask(const Shape& c) {
  std::vector<float> m(c.keys, 1.f);
  for (int64_t j = 0; j < c.keys; ++j) {
    if (c.mask == 1) m[j] = j < c.keys * 2 / 3 ? 1.f : 0.f;
    if (c.mask == 2) m[j] = rng_bits(7, 3, j) % 3 == 0 ? 0.f : 1.f;
    if (c.mask == 3) m[j] = j >= c.kb && j < 2 * c.kb ? 0.f : 1.f;
    if (c.mask == 4) m[j] = 0.f;
  }
  return m;
}

// Row r of the reference: softmax over the visible keys in double, 0 when none is visible.
void naive_row(double* out, const double* q, const double* k, const double* v, int64_t ld,
               const float* mask, int64_t keys, int64_t Dh, int64_t r, int64_t first_query,
               double scale) {
  std::vector<double> s(keys);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < keys; ++j) {
    bool vis = !mask || mask[j] != 0.f;
    if (first_query >= 0 && j > first_query + r) vis = false;
    if (!vis) {
      s[j] = std::nan("");  // marks invisible
      continue;
    }
    double d = 0;
    for (int64_t c = 0; c < Dh; ++c) d += q[r * ld + c] * k[j * ld + c];
    s[j] = scale * d;
    mx = std::max(mx, s[j]);
  }
  for (int64_t c = 0; c < Dh; ++c) out[c] = 0;
  if (mx == -std::numeric_limits<double>::infinity()) return;
  double sum = 0;
  for (int64_t j = 0; j < keys; ++j) {
    if (std::isnan(s[j])) continue;
    const double w = std::exp(s[j] - mx);
    sum += w;
    for (int64_t c = 0; c < Dh; ++c) out[c] += w * v[j * ld + c];
  }
  for (int64_t c = 0; c < Dh; ++c) out[c] /= sum;
}

// out: the head's columns of every row [rows, Dh], then one entry per row and column around
// them: 0 where the kernel left the -7 there, NaN where it wrote.
OpCase attend_head_case(const Shape& c, ComputeType t) {
  const bool bf16 = t == ComputeType::bf16;
  const Operands ops = bf16 ? Operands::bf16 : Operands::f32;
  // The head's columns sit inside wider rows (ld = 3 Dh + 5), as in the model's [*, D].
  const int64_t ld = 3 * c.Dh + 5, qoff = c.Dh + 2, head = c.rows * c.Dh;
  const float scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
  OpCase o = new_case(c.name(), t, /*matmul=*/false, dims({c.rows, c.keys, c.Dh}),
                      {{"q", rnd(c.rows * ld, 1, c.magnitude), false},
                       {"k", rnd(c.keys * ld, 2, c.magnitude), false},
                       {"v", rnd(c.keys * ld, 3), false},
                       {"mask", make_mask(c), false}},
                      head + c.rows * (ld - c.Dh));
  // bf16: the reference takes the operands as rounded (the kernel's contract); what remains is
  // the weights' rounding, at most 2^-9 of each term.
  o.tol = 1.0;  // the element rule below is the check
  o.max_abs_tol = bf16 ? 4e-3 : 2e-5 * std::max(1.f, c.magnitude * c.magnitude);
  o.zero_reference = c.mask == 4;
  o.flops = 4.0 * c.rows * c.keys * c.Dh;
  o.unavailable = [ops] {
    return attn_block::available(ops)
               ? std::string()
               : std::string("no own attention kernel for these operands on this level");
  };
  const bool masked = c.mask != 0;
  o.run = [=](const Inputs& in, float* out) {
    std::vector<float> ctx(c.rows * ld, -7.f), work(attn_block::work_floats(c.rows, c.Dh, c.kb));
    // bf16: the keys and values given rounded (as a layer's plan makes them), the queries in
    // f32 (the kernel rounds them).
    std::vector<uint16_t> k16(bf16 ? in[1].v.size() : 0), v16(bf16 ? in[2].v.size() : 0);
    for (size_t i = 0; i < k16.size(); ++i) k16[i] = vm::bf16_round(in[1].v[i]);
    for (size_t i = 0; i < v16.size(); ++i) v16[i] = vm::bf16_round(in[2].v[i]);
    const TensorIn k = bf16 ? TensorIn(k16.data() + qoff) : TensorIn(ptr(in, 1) + qoff),
                   v = bf16 ? TensorIn(v16.data() + qoff) : TensorIn(ptr(in, 2) + qoff);
    attn_block::attend_head(ctx.data() + qoff, ld, HeadIn{ptr(in, 0) + qoff, k, v, ld, ld},
                            masked ? ptr(in, 3) : nullptr, c.rows, c.keys, c.Dh, c.kb,
                            c.first_query, scale, work.data());
    float* around = out + head;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t col = 0; col < ld; ++col) {
        const float x = ctx[r * ld + col];
        if (col >= qoff && col < qoff + c.Dh)
          out[r * c.Dh + col - qoff] = x;
        else
          *around++ = x == -7.f ? 0.f : std::numeric_limits<float>::quiet_NaN();
      }
  };
  o.reference = [=](const Inputs& in, double* out) {
    std::vector<double> q[3];
    for (int i = 0; i < 3; ++i)
      for (float x : in[i].v) q[i].push_back(bf16 ? rne(x) : x);
    for (int64_t r = 0; r < c.rows; ++r)
      naive_row(out + r * c.Dh, q[0].data() + qoff, q[1].data() + qoff, q[2].data() + qoff, ld,
                masked ? ptr(in, 3) : nullptr, c.keys, c.Dh, r, c.first_query, scale);
    std::fill(out + head, out + head + c.rows * (ld - c.Dh), 0.0);
  };
  return o;
}

}  // namespace

std::vector<CaseMaker> attention_block_cases() {
  const Shape shapes[] = {{1, 1, 1, 16, 0, -1},
                          {5, 7, 7, 16, 0, -1},
                          {16, 256, 64, 256, 0, -1},
                          {17, 257, 64, 256, 1, -1},
                          {100, 600, 72, 256, 2, -1},
                          {33, 300, 16, 64, 3, -1},
                          {20, 50, 24, 32, 4, -1},
                          {40, 130, 64, 32, 0, 0},
                          {23, 200, 40, 64, 2, 90},
                          {256, 513, 64, 256, 1, -1},
                          {12, 700, 64, 256, 0, -1, 12.f},
                          {7, 64, 13, 16, 2, -1, 30.f}};
  std::vector<CaseMaker> v;
  for (const Shape& s : shapes)
    add_per_dtype(v, kF32Bf16, [s](ComputeType t, bool) { return attend_head_case(s, t); });
  return v;
}

}  // namespace lf::ops
