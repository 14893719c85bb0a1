// Op cases of the attention kernels of layers/attention.h: training attention with kept
// probabilities (forward and backward; masks, causal, projected keys, dropout), its inference
// form, bf16 training's tiled form (probabilities recomputed by backward), and the row-block
// and streaming inference kernels.
#include "core/parallel.h"
#include "layers/attention.h"
#include "ops/harness.h"

namespace lf::ops {
namespace {

constexpr ComputeType kF32 = ComputeType::f32, kBf16 = ComputeType::bf16;
constexpr uint64_t kSeed = 1234, kStream = 56;

// ctx[b, i, h] = sum_j drop(softmax_j(scale q k^T, masked and causal keys excluded))[i, j] v[b,
// j, h]: the dropout mask of (b, h) drawn from stream rng_stream(kStream, b H + h) at index
// i Lk + j, kept entries scaled by 1/(1-p). Rows that see no key give 0.
void ref_attention(double* ctx, const float* q, const float* k, const float* v,
                   const float* key_mask, const AttnDims& d, double scale, float p) {
  std::vector<double> w(d.Lk);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const uint64_t st = rng_stream(kStream, b * d.H + h);
      for (int64_t i = 0; i < d.N; ++i) {
        const float* qi = q + (b * d.N + i) * d.D + h * d.Dh;
        double mx = -INFINITY, z = 0;
        for (int64_t j = 0; j < d.Lk; ++j) {
          const bool seen = (!key_mask || key_mask[b * d.Lk + j] != 0.f) && (!d.causal || j <= i);
          double s = 0;
          for (int64_t c = 0; c < d.Dh; ++c)
            s += double(qi[c]) * k[(b * d.Lk + j) * d.D + h * d.Dh + c];
          w[j] = seen ? scale * s : -INFINITY;
          mx = std::max(mx, w[j]);
        }
        for (int64_t j = 0; j < d.Lk; ++j) z += w[j] = std::isinf(w[j]) ? 0.0 : std::exp(w[j] - mx);
        for (int64_t j = 0; j < d.Lk; ++j)
          w[j] = z > 0 && dropout_keep(p, kSeed, st, i * d.Lk + j) ? w[j] / z / (1.0 - p) : 0.0;
        for (int64_t c = 0; c < d.Dh; ++c) {
          double s = 0;
          for (int64_t j = 0; j < d.Lk; ++j) s += w[j] * v[(b * d.Lk + j) * d.D + h * d.Dh + c];
          ctx[(b * d.N + i) * d.D + h * d.Dh + c] = s;
        }
      }
    }
}

struct Variant {
  std::string name;
  bool mask = false, causal = false, projected = false;
  float p = 0.f;
};

// Test shapes: tiny in f32; in bf16 large enough for the batched products to run in bf16.
AttnDims attn_dims(const Variant& v, ComputeType t, bool perf) {
  int64_t B = 2, N = 5, Lk = v.projected ? 3 : 5, D = 6, H = v.projected ? 3 : 2;
  if (t == kBf16) N = 128, Lk = v.projected ? 64 : 128, D = 128, H = 4;
  if (perf) B = 4, N = 512, Lk = v.projected ? 128 : 512, D = 512, H = 8;
  return {/*B=*/B, /*N=*/N, /*Lk=*/Lk, /*D=*/D, /*H=*/H, /*Dh=*/D / H, /*causal=*/v.causal};
}

// Batch 0 keeps every key; batch 1 loses key 1 and its last two (causal: key 0 too, so that
// its query 0 sees no key at all).
std::vector<float> key_mask(const AttnDims& d) {
  std::vector<float> m(d.B * d.Lk, 1.f);
  m[d.Lk + 1] = m[2 * d.Lk - 1] = m[2 * d.Lk - 2] = 0.f;
  if (d.causal) m[d.Lk] = 0.f;
  return m;
}

// q [B,N,D], k and v [B,Lk,D], mask [B,Lk]; out = ctx [B,N,D]; reference with the variant's
// mask and dropout.
OpCase attention_base(const std::string& name, const Variant& v, ComputeType t, const AttnDims& d) {
  OpCase c = new_case(name + "_" + v.name, t, true,
                      dims({d.B, d.N, d.Lk, d.D}) + (d.causal ? " causal" : ""),
                      {{"q", rnd(d.B * d.N * d.D, 31)},
                       {"k", rnd(d.B * d.Lk * d.D, 32)},
                       {"v", rnd(d.B * d.Lk * d.D, 33)},
                       {"mask", key_mask(d), false}},
                      d.B * d.N * d.D);
  if (t == kBf16) c.tol = kTolBf16Attention, c.fd_entries = 16;
  c.flops = 4.0 * d.B * d.N * d.Lk * d.D;
  const bool masked = v.mask;
  const float p = v.p;
  c.reference = [=](const Inputs& in, double* ctx) {
    ref_attention(ctx, ptr(in, 0), ptr(in, 1), ptr(in, 2), masked ? ptr(in, 3) : nullptr, d,
                  1.0 / std::sqrt(double(d.Dh)), p);
  };
  return c;
}

const float* mask_of(const Inputs& in, bool masked) { return masked ? ptr(in, 3) : nullptr; }

// Training attention: forward keeps the probabilities (and in bf16 their rounded copy after
// dropout) for backward.
CaseMaker attention_case(const Variant& v, ComputeType t) {
  return [=](bool perf) {
    const AttnDims d = attn_dims(v, t, perf);
    OpCase c = attention_base("attention", v, t, d);
    c.overwrite = {0, 1, 2};
    const float scale = 1.f / std::sqrt(float(d.Dh)), p = v.p;
    const bool m = v.mask;
    const int64_t np = d.B * d.H * d.N * d.Lk;
    // forward(ctx, probs, probs16, scratch)
    auto run = [=](float* scr) { return AttnRun{scale, p, kSeed, kStream, 0, scr, t}; };
    auto kv = [=](const Inputs& in) { return KeysValues{ptr(in, 1), ptr(in, 2), mask_of(in, m)}; };
    auto forward = [=](const Inputs& in, float* ctx, float* probs, uint16_t* p16, float* scr) {
      attention_forward(ctx, AttnKept{probs, p16}, ptr(in, 0), kv(in), d, run(scr));
    };
    c.run = [=](const Inputs& in, float* ctx) {
      std::vector<float> probs(np), scratch(attention_scratch_floats(d));
      std::vector<uint16_t> p16(t == kBf16 ? np : 0);
      forward(in, ctx, probs.data(), p16.empty() ? nullptr : p16.data(), scratch.data());
    };
    c.backward = [=](const Inputs& in, const float* dctx, Grads& g, GradInto into) {
      std::vector<float> ctx(d.B * d.N * d.D), probs(np), scratch(attention_scratch_floats(d));
      std::vector<uint16_t> p16(t == kBf16 ? np : 0);
      uint16_t* pp = p16.empty() ? nullptr : p16.data();
      forward(in, ctx.data(), probs.data(), pp, scratch.data());
      attention_backward(AttnGrads{g[0].data(), g[1].data(), g[2].data(), into}, dctx,
                         AttnKept{probs.data(), pp}, ptr(in, 0), kv(in), d, run(scratch.data()));
    };
    return c;
  };
}

// Inference attention (no kept probabilities: one head at a time per thread).
CaseMaker attention_infer_case(const Variant& v, ComputeType t) {
  return [=](bool perf) {
    const AttnDims d = attn_dims(v, t, perf);
    OpCase c = attention_base("attention_infer", v, t, d);
    const float scale = 1.f / std::sqrt(float(d.Dh)), p = v.p;
    const bool m = v.mask;
    c.run = [=](const Inputs& in, float* ctx) {
      std::vector<float> scratch(attention_scratch_floats(d, p > 0));
      attention_forward(ctx, AttnKept{}, ptr(in, 0),
                        KeysValues{ptr(in, 1), ptr(in, 2), mask_of(in, m)}, d,
                        AttnRun{scale, p, kSeed, kStream, 0, scratch.data(), t});
    };
    return c;
  };
}

// bf16 training's tiled attention: forward from the queries in bf16 to the context in bf16,
// backward recomputing the probabilities tile by tile from the bf16 queries and context
// gradient. Shapes whose tiles are too large to keep.
CaseMaker attention_tiles_case(const Variant& v) {
  return [=](bool perf) {
    AttnDims d =
        v.causal ? AttnDims{2, 128, 128, 64, 2, 32, true} : AttnDims{2, 256, 64, 64, 2, 32};
    if (perf) d = {4, 512, v.causal ? 512 : 128, 512, 8, 64, v.causal};
    OpCase c = attention_base("attention_tiles", v, kBf16, d);
    c.overwrite = {0, 1, 2};
    const float scale = 1.f / std::sqrt(float(d.Dh)), p = v.p;
    const bool m = v.mask;
    const int64_t nq = d.B * d.N * d.D;
    c.run = [=](const Inputs& in, float* ctx) {
      EXPECT_FALSE(attention_keeps_probs(d, kBf16)) << "the shape is not tiled";
      std::vector<float> scratch(attention_scratch_floats(d));
      const std::vector<uint16_t> q16 = to16(ptr(in, 0), nq);
      std::vector<uint16_t> ctx16(nq);
      attention_forward_tiles(ctx16.data(), q16.data(),
                              KeysValues{ptr(in, 1), ptr(in, 2), mask_of(in, m)}, d,
                              AttnRun{scale, p, kSeed, kStream, 0, scratch.data(), kBf16});
      widen_n(ctx, ctx16.data(), nq);
    };
    c.backward = [=](const Inputs& in, const float* dctx, Grads& g, GradInto into) {
      std::vector<float> scratch(attention_scratch_floats(d));
      const std::vector<uint16_t> q16 = to16(ptr(in, 0), nq), dctx16 = to16(dctx, nq);
      attention_backward(AttnGrads{g[0].data(), g[1].data(), g[2].data(), into}, dctx16.data(),
                         AttnKept{}, q16.data(), KeysValues{ptr(in, 1), ptr(in, 2), mask_of(in, m)},
                         d, AttnRun{scale, p, kSeed, kStream, 0, scratch.data(), kBf16});
    };
    return c;
  };
}

// Row-block inference attention (all keys at once, or streaming over key blocks), the rows in
// blocks of 64 queries, serially (one thread); padded keys, a sequence long enough for several
// key blocks.
CaseMaker attention_rows_case(bool streaming, ComputeType t) {
  return [=](bool perf) {
    const int64_t D = t == kBf16 || perf ? 64 : 8;
    const AttnDims d{/*B=*/perf ? 1 : 2,
                     /*N=*/perf ? 1024 : 300,
                     /*Lk=*/perf ? 1024 : 300,
                     /*D=*/D,
                     /*H=*/2,
                     /*Dh=*/D / 2};
    const Variant v{"masked", true};
    OpCase c = attention_base(streaming ? "attention_streaming_rows" : "attention_rows", v, t, d);
    c.name = streaming ? "attention_streaming_rows" : "attention_rows";
    c.in[3].v = pad_mask(d.B, d.Lk, 37);
    const float scale = 1.f / std::sqrt(float(d.Dh));
    c.run = [=](const Inputs& in, float* ctx) {
      const int64_t rows = 64;
      std::vector<float> work(streaming ? attention_streaming_work_floats(rows, d)
                                        : attention_rows_work_floats(rows, d));
      for (int64_t b = 0; b < d.B; ++b)
        for (int64_t i0 = 0; i0 < d.N; i0 += rows) {
          const int64_t i1 = std::min(d.N, i0 + rows), o = (b * d.N + i0) * d.D;
          const RowBlock rb{/*b=*/b, /*i0=*/i0, /*i1=*/i1};
          const KeysValues kv{ptr(in, 1), ptr(in, 2), ptr(in, 3)};
          if (streaming)
            attention_streaming_rows(ctx + o, ptr(in, 0) + o, kv, d, rb, scale, work.data(), t);
          else
            attention_rows(ctx + o, ptr(in, 0) + o, kv, d, rb, scale, work.data(), t);
        }
    };
    return c;
  };
}

// Whole-batch streaming attention: a key mask with a hole over a whole key block (b = 0), a
// padded tail (b = 1) and no real key at all (b = 2: zeros).
CaseMaker attention_streaming_case(bool causal, ComputeType t) {
  return [=](bool perf) {
    const AttnDims d{/*B=*/3,
                     /*N=*/perf ? 2048 : 700,
                     /*Lk=*/perf ? 2048 : 700,
                     /*D=*/48,
                     /*H=*/3,
                     /*Dh=*/16,
                     /*causal=*/causal};
    const Variant v{"masked", true, causal};
    OpCase c = attention_base("attention_streaming", v, t, d);
    c.name = causal ? "attention_streaming_causal" : "attention_streaming";
    for (int i : {0, 1}) c.in[i].v = rnd(c.in[i].v.size(), 1 + i, 2.f);
    std::vector<float>& mask = c.in[3].v;
    std::fill(mask.begin(), mask.end(), 1.f);
    for (int64_t j = 256; j < 600; ++j) mask[j] = 0.f;
    for (int64_t j = 450; j < d.N; ++j) mask[d.N + j] = 0.f;
    for (int64_t j = 0; j < d.N; ++j) mask[2 * d.N + j] = 0.f;
    const float scale = 1.f / std::sqrt(float(d.Dh));
    c.run = [=](const Inputs& in, float* ctx) {
      std::vector<float> scr(attention_streaming_work_floats(kStreamQueryBlock, d) * num_threads());
      attention_streaming_forward(ctx, ptr(in, 0), KeysValues{ptr(in, 1), ptr(in, 2), ptr(in, 3)},
                                  d, scale, scr.data(), t);
    };
    return c;
  };
}

}  // namespace

std::vector<CaseMaker> attention_cases() {
  const Variant plain{"plain"}, mask{"mask", true}, causal{"causal", false, true},
      causal_mask{"causal_mask", true, true}, drop{"dropout", true, false, false, 0.3f},
      projected{"projected", false, false, true},
      projected_drop{"projected_dropout", true, false, true, 0.25f};
  std::vector<CaseMaker> v;
  for (const Variant& a : {plain, mask, causal, causal_mask, drop, projected, projected_drop})
    v.push_back(attention_case(a, kF32));
  for (const Variant& a : {mask, causal, projected_drop}) v.push_back(attention_case(a, kBf16));
  for (ComputeType t : kF32Bf16) {
    v.push_back(attention_infer_case(drop, t));
    v.push_back(attention_infer_case(causal_mask, t));
    for (bool streaming : {false, true}) v.push_back(attention_rows_case(streaming, t));
    for (bool causal_ : {false, true}) v.push_back(attention_streaming_case(causal_, t));
  }
  v.push_back(attention_tiles_case({"linformer_dropout", true, false, true, 0.2f}));
  v.push_back(attention_tiles_case({"causal", false, true}));
  return v;
}

}  // namespace lf::ops
