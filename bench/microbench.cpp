// Kernel micro-benchmarks: the GEMM shapes of a RoBERTa-base layer (whole-batch and the
// per-thread row blocks of the inference path; sgemm on the weights as in training, and the
// packed f32/bf16/int8 linear maps of inference), softmax, LayerNorm, GELU, the attention
// kernels at several n, and one whole encoder layer for every attention kind of the registry in
// every precision (EncoderLayer/...). GFLOP/s counters count matrix-product FLOPs only.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/parallel.h"
#include "kernels/attention_block.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"
#include "layers/attention.h"
#include "linformer/bench.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "train/optim.h"

namespace {

using namespace lf;
constexpr int64_t D = 768, H = 12, Dh = 64, F = 3072;

void fill(Buffer<float>& b, uint64_t seed, float scale = 1.f) {
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = scale * (static_cast<float>(rng_bits(seed, 1, i) >> 40) / 16777216.f - 0.5f);
}

void set_flops(benchmark::State& st, double flops) {
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// C[M,N] = A[M,K] B[N,K]^T on all threads (oneDNN's own threading).
void BM_GemmNT(benchmark::State& st) {
  const int64_t M = st.range(0), N = st.range(1), K = st.range(2);
  Buffer<float> a(M * K), b(N * K), c(M * N);
  fill(a, 1), fill(b, 2), c.zero();
  for (auto _ : st)
    gemm(ComputeType::f32, false, true, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, c.data(), N);
  set_flops(st, 2.0 * M * N * K);
}
BENCHMARK(BM_GemmNT)
    ->ArgNames({"M", "N", "K"})
    ->Args({4096, 768, 768})   // Q/K/V/output maps, n = 4096
    ->Args({4096, 3072, 768})  // FFN in
    ->Args({4096, 768, 3072})  // FFN out
    ->Args({128, 768, 768})    // Linformer K/V maps on k = 128 projected rows
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The inference path's per-thread row blocks: every thread runs its own single-threaded GEMM.
void BM_GemmNTPerThread(benchmark::State& st) {
  const int64_t M = st.range(0), N = st.range(1), K = st.range(2);
  const int T = num_threads();
  Buffer<float> a(T * M * K), b(N * K), c(T * M * N);
  fill(a, 1), fill(b, 2), c.zero();
  for (auto _ : st) {
    parallel_for(0, T, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        gemm(ComputeType::f32, false, true, M, N, K, 1.f, a.data() + t * M * K, K, b.data(), K, 0.f,
             c.data() + t * M * N, N);
    });
  }
  set_flops(st, 2.0 * T * M * N * K);
}
BENCHMARK(BM_GemmNTPerThread)
    ->ArgNames({"M", "N", "K"})
    ->Args({256, 768, 768})
    ->Args({256, 3072, 768})
    ->Args({256, 768, 3072})
    ->Args({256, 128, 64})   // Linformer scores of one head, k = 128
    ->Args({256, 4096, 64})  // standard scores of one head, n = 4096
    ->UseRealTime();

// The inference path's linear maps: y = x W^T with W packed once (arg 3: 0 f32, 1 bf16, whose
// time includes rounding x to bf16, 2 int8, whose time includes quantizing x and the
// dequantizing epilogue), whole batch on all threads (arg 4 = 0) or per-thread row blocks
// (arg 4 = 1), the epilogue storing y (arg 5 = 0) or GELU(y) (arg 5 = 1, the FFN's first map).
void BM_PackedLinear(benchmark::State& st) {
  const int64_t M = st.range(0), N = st.range(1), K = st.range(2);
  const ComputeType t = st.range(3) == 2   ? ComputeType::int8
                        : st.range(3) == 1 ? ComputeType::bf16
                                           : ComputeType::f32;
  const bool per_thread = st.range(4) != 0;
  const auto e = st.range(5) ? PackedLinear::Epilogue::gelu : PackedLinear::Epilogue::store;
  const int T = per_thread ? num_threads() : 1;
  Buffer<float> a(T * M * K), w(N * K), c(T * M * N);
  fill(a, 1), fill(w, 2), c.zero();
  PackedLinear pl;
  try {
    pl.pack(w.data(), N, K, t);
  } catch (const std::exception& err) {  // a precision this CPU does not run
    st.SkipWithError(err.what());
    return;
  }
  auto apply = [&](int64_t i) {
    pl.apply(c.data() + i * M * N, a.data() + i * M * K, M, nullptr, e);
  };
  for (auto _ : st) {
    if (per_thread)
      parallel_for(0, T, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t i = t0; i < t1; ++i) apply(i);
      });
    else
      apply(0);
  }
  set_flops(st, 2.0 * T * M * N * K);
  st.SetLabel(std::string(compute_type_name(t)) + (st.range(5) ? ", gelu" : ""));
}
BENCHMARK(BM_PackedLinear)
    ->ArgNames({"M", "N", "K", "precision", "per_thread", "gelu"})
    ->ArgsProduct({{4096}, {3072}, {768}, {0, 1, 2}, {0}, {0, 1}})
    ->ArgsProduct({{256}, {768}, {768}, {0, 1, 2}, {1}, {0}})
    ->ArgsProduct({{256}, {3072}, {768}, {0, 1, 2}, {1}, {0, 1}})
    ->ArgsProduct({{256}, {768}, {3072}, {0, 1, 2}, {1}, {0}})
    ->UseRealTime();

void BM_Softmax(benchmark::State& st) {
  const int64_t rows = st.range(0), cols = st.range(1);
  Buffer<float> x(rows * cols), y(rows * cols);
  fill(x, 3, 8.f);
  for (auto _ : st) softmax_forward(y.data(), x.data(), rows, cols, 0.125f, nullptr);
  st.SetItemsProcessed(st.iterations() * rows * cols);
}
BENCHMARK(BM_Softmax)->Args({4096, 128})->Args({4096, 512})->Args({4096, 4096})->UseRealTime();

void BM_LayerNorm(benchmark::State& st) {
  const int64_t rows = st.range(0);
  Buffer<float> x(rows * D), y(rows * D), w(D), b(D);
  fill(x, 4), fill(w, 5), fill(b, 6);
  for (auto _ : st)
    layernorm_forward(y.data(), nullptr, nullptr, x.data(), w.data(), b.data(), rows, D, 1e-5f);
  st.SetItemsProcessed(st.iterations() * rows * D);
}
BENCHMARK(BM_LayerNorm)->Arg(4096)->UseRealTime();

// LayerNorm's backward over rows x C (training's widths: 256 for the small model, 768).
void BM_LayerNormBackward(benchmark::State& st) {
  const int64_t rows = st.range(0), C = st.range(1);
  Buffer<float> x(rows * C), y(rows * C), g(rows * C), dx(rows * C), w(C), b(C), dw(C), db(C),
      mean(rows), rstd(rows);
  fill(x, 4), fill(w, 5), fill(b, 6), fill(g, 7);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C,
                    1e-5f);
  for (auto _ : st)
    layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), rows, C, GradInto::overwrite);
  st.SetItemsProcessed(st.iterations() * rows * C);
}
BENCHMARK(BM_LayerNormBackward)->Args({4096, 256})->Args({4096, 768})->UseRealTime();

// GELU over one row of d_ff or 4096 of them: arg 1 = 0 the exact erf form (f32 and bf16 models), 1
// the rational-erf form of the int8 epilogue (vm::gelu_fast_n).
void BM_Gelu(benchmark::State& st) {
  const int64_t n = st.range(0);
  const bool fast = st.range(1) != 0;
  Buffer<float> x(n), y(n);
  fill(x, 7, 8.f);
  for (auto _ : st) {
    if (fast)
      vm::gelu_fast_n(y.data(), x.data(), n);
    else
      gelu_forward(y.data(), x.data(), n);
  }
  st.SetItemsProcessed(st.iterations() * n);
  st.SetLabel(fast ? "int8 epilogue (rational erf)" : "exact");
}
BENCHMARK(BM_Gelu)
    ->ArgNames({"n", "fast"})
    ->ArgsProduct({{F, 4096 * F}, {0, 1}})  // one FFN row, in cache as in the int8 epilogue
    ->UseRealTime();

// bf16 training's GELU on the FFN's bf16 pre-activation (a table lookup), and its backward
// (rounded d(h) and the bias gradient), over 4096 rows of d_ff 1024.
void BM_GeluBf16(benchmark::State& st) {
  const int64_t rows = 4096, cols = 1024, n = rows * cols;
  Buffer<float> x(n), db(cols);
  fill(x, 7, 8.f);
  Buffer<uint16_t> h16(n), g16(n), d16(n);
  to_bf16(h16.data(), x.data(), rows, cols, cols);
  for (auto _ : st) {
    if (st.range(0) == 0) {
      gelu_forward(g16.data(), h16.data(), n);
    } else {
      to_bf16(d16.data(), x.data(), rows, cols, cols);  // a fresh gradient each time
      gelu_backward_inplace(d16.data(), h16.data(), rows, cols, db.data());
    }
  }
  st.SetItemsProcessed(st.iterations() * n);
}
BENCHMARK(BM_GeluBf16)->Arg(0)->Arg(1)->UseRealTime();

// One AdamW step over the parameters of a RoBERTa-base-shaped layer with the MLM head (15M),
// as bf16 training runs it: arg 0: AdamW, then the weights rounded to bf16 in a pass of their
// own (the bf16 copy the next forward needs); arg 1: AdamW writing the bf16 copy itself;
// arg 2: AdamW alone (f32 training).
void BM_AdamW(benchmark::State& st) {
  Config c;
  c.d_model = D;
  c.n_heads = H;
  c.d_ff = F;
  c.n_layers = 1;
  c.vocab_size = 8192;
  c.max_len = 512;
  Model m(c);
  m.init(1);
  const size_t n = m.params().back().offset + m.params().back().numel;
  Buffer<float> g(n);
  fill(g, 9, 1e-2f);
  std::copy(g.data(), g.data() + n, m.grad_data());
  const bool fused = st.range(0) == 1;
  m.set_train_compute_type(fused ? ComputeType::bf16 : ComputeType::f32);
  Buffer<uint16_t> w16(n);
  AdamW opt(m, OptimOptions{});
  for (auto _ : st) {
    opt.step(1e-4f);
    if (st.range(0) == 0) round_bf16(w16.data(), m.param_data(), static_cast<int64_t>(n));
  }
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_AdamW)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// Attention of one sequence (B = 1, 12 heads of 64), given Q, K, V.
// kind 0: standard (N x N tile per head), 1: streaming softmax (keys and values head-major, as
// the model's streaming inference holds them), 2: Linformer against k rows, 3: streaming with
// token-major keys and values ([n, D], a head's rows D floats apart). bf16: the products'
// operands in bf16 (--precision bf16's attention).
void BM_Attention(benchmark::State& st) {
  const int kind = static_cast<int>(st.range(0));
  const int64_t N = st.range(1), K = st.range(2);
  // own: streaming's own kernel (kernels/attention_block.h) or gemm per key block.
  const bool own = st.range(3) != 0;
  const ComputeType ct = st.range(4) ? ComputeType::bf16 : ComputeType::f32;
  attn_block::set_enabled(own);
  AttnDims d;
  const bool streaming = kind == 1 || kind == 3;
  d.B = 1, d.N = N, d.Lk = kind == 2 ? K : N, d.D = D, d.H = H, d.Dh = Dh;
  Buffer<float> q(N * D), k(d.Lk * D), v(d.Lk * D), ctx(N * D);
  fill(q, 8), fill(k, 9), fill(v, 10);
  const float scale = 0.125f;
  const int T = num_threads();
  Buffer<float> scr(streaming ? attention_streaming_work_floats(kStreamQueryBlock, d) * T
                              : attention_scratch_floats(d, false));
  for (auto _ : st) {
    if (streaming)
      attention_streaming_forward(
          ctx.data(), q.data(),
          KeysValues{k.data(), v.data(), nullptr,
                     kind == 1 ? KVLayout::head_major : KVLayout::token_major},
          d, scale, scr.data(), ct);
    else
      attention_forward(ctx.data(), AttnKept{}, q.data(), KeysValues{k.data(), v.data(), nullptr},
                        d, AttnRun{scale, 0.f, 0, 0, 0, scr.data(), ct});
  }
  set_flops(st, 4.0 * N * d.Lk * D);
  attn_block::set_enabled(true);
  st.SetLabel(std::string(kind == 0 ? "standard"
                          : streaming
                              ? std::string(own ? "streaming own kernel" : "streaming gemm") +
                                    (kind == 3 ? ", token-major keys" : "")
                              : "linformer") +
              (st.range(4) ? ", bf16" : ""));
}
BENCHMARK(BM_Attention)
    ->ArgNames({"kind", "n", "k", "own", "bf16"})
    ->ArgsProduct({{0}, {512, 2048, 8192}, {0}, {0}, {0, 1}})
    ->ArgsProduct({{1}, {512, 2048, 8192}, {0}, {0, 1}, {0, 1}})
    ->Args({2, 512, 128, 0, 0})
    ->Args({2, 2048, 128, 0, 0})
    ->Args({3, 2048, 0, 1, 0})
    ->Args({3, 8192, 0, 1, 0})
    ->Args({2, 8192, 128, 0, 0})
    ->Args({2, 8192, 256, 0, 0})
    ->Args({2, 8192, 128, 0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One encoder layer (plus embeddings), inference, batch of max(1, 8192 / n) sequences, for every
// attention choice of the registry (bench::attention_choices(): each kind, standard attention
// once per inference way) in every precision (bench::precisions()), registered in main() as
// EncoderLayer/<attention>/<precision>/n:<n>[/k:<k>]. A precision the CPU or the kind does not
// run is reported as skipped, with the model's reason. The shape: RoBERTa-base at n 512 and
// 4096 (k 128, and 256 at 4096), or --tiny (d 32, 2 heads, d_ff 64, n 64, k 16: the test's).
struct LayerShape {
  int64_t d = D, heads = H, ff = F, vocab = 50265;
  std::vector<int64_t> ns{512, 4096};
  std::vector<int64_t> ks_at(int64_t n) const {
    if (d != D) return {16};
    return n >= 4096 ? std::vector<int64_t>{128, 256} : std::vector<int64_t>{128};
  }
};

void encoder_layer(benchmark::State& st, const LayerShape& s, const bench::AttentionChoice& a,
                   ComputeType ct, int64_t n, int64_t k) {
  Config c;
  c.vocab_size = s.vocab, c.max_len = n, c.d_model = s.d, c.n_heads = s.heads, c.d_ff = s.ff;
  c.n_layers = 1, c.position_offset = 2, c.dropout = 0.f, c.attention_dropout = 0.f;
  c.k = {k > 0 ? k : 128};
  bench::set_attention(c, a, "layerwise", "linear");
  Model m(c);
  m.init(1);
  m.set_exact_attention(a.exact);
  try {
    m.set_compute_type(ct);
  } catch (const std::exception& err) {  // this CPU, or this kind, does not run ct
    st.SkipWithError(err.what());
    return;
  }
  const int64_t B = std::max<int64_t>(1, 8192 / n);
  std::vector<int32_t> ids(B * n);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>(rng_bits(1, 2, i) % static_cast<uint64_t>(s.vocab));
  const Batch batch{ids.data(), nullptr, B, n};
  m.forward(batch, false);
  for (auto _ : st) m.forward(batch, false);
  set_flops(st, B * bench::encoder_flops(c, n));
  st.SetLabel(a.name + " " + compute_type_name(ct));
}

void register_encoder_layers(const LayerShape& s) {
  for (const bench::AttentionChoice& a : bench::attention_choices())
    for (ComputeType ct : bench::precisions())
      for (int64_t n : s.ns)
        for (int64_t k : a.projected ? s.ks_at(n) : std::vector<int64_t>{0}) {
          std::string name =
              "EncoderLayer/" + a.name + "/" + compute_type_name(ct) + "/n:" + std::to_string(n);
          if (k > 0) name += "/k:" + std::to_string(k);
          benchmark::RegisterBenchmark(
              name.c_str(), [=, &a](benchmark::State& st) { encoder_layer(st, s, a, ct, n, k); })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
}

}  // namespace

// Google Benchmark's flags, and --tiny: the encoder layers at the test's small shape.
int main(int argc, char** argv) {
  LayerShape shape;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--tiny") {
      shape.d = 32, shape.heads = 2, shape.ff = 64, shape.vocab = 100, shape.ns = {64};
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  register_encoder_layers(shape);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
