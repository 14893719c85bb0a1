// Alternative forms of the training step's bf16 products, timed alone with oneDNN (the figures
// of docs/benchmarks.md, "What limits the figures"). Not part of the build:
//
//   g++ -O2 -fopenmp bench/onednn_forms.cpp -o onednn_forms -ldnnl
//   OMP_NUM_THREADS=2 ./onednn_forms                 # add --transposed-dst for the slow form
//   OMP_NUM_THREADS=2 ./onednn_forms --f32           # part 3 only
//   OMP_NUM_THREADS=2 ./onednn_forms --f32-wgrad     # part 4 only
//
// 1. A forward product x[4096,K] W^T (W packed in oneDNN's layout, bias epilogue) with an f32
//    or a bf16 output, each followed by a pass that reads the output, over 8 rotating buffers
//    (as the step's layers do, so that outputs do not stay in cache).
// 2. The weight gradient dW[OUT,IN] = dY^T X of a linear map over 4096 rows: the matmul with dY
//    read transposed (the engine's form) and with transposed copies of its operands, the
//    inner-product backward-weights primitive (with the row-major and with its preferred weight
//    layout, bias gradient included), and, with
//    --transposed-dst, dW^T = X^T dY written through a transposed destination.
// 3. f32 training's forward product x[4096,K] W^T + b: sgemm on W as stored after a pass copying
//    the bias into every output row (the engine's form before packed f32 weights), against the
//    matmul on W packed in oneDNN's layout with the bias in its epilogue (one buffer each, so
//    both keep their operands in cache).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <utility>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

constexpr int64_t kRows = 4096;
constexpr uint16_t kOne = 0x3f80;  // 1.0 in bfloat16

template <class F>
double best_seconds(F f, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void forward_output_types(engine& eng, stream& s, int64_t K, int64_t N) {
  const int kBuffers = 8;
  const memory::desc a_md({kRows, K}, dt::bf16, tag::ab), w_md({K, N}, dt::bf16, tag::any),
      b_md({1, N}, dt::f32, tag::ab);
  std::vector<std::vector<uint16_t>> A(kBuffers, std::vector<uint16_t>(kRows * K, kOne));
  std::vector<float> bias(N, 0.1f);
  for (dt out : {dt::f32, dt::bf16}) {
    const memory::desc c_md({kRows, N}, out, tag::ab);
    const matmul::primitive_desc pd(matmul::desc(a_md, w_md, b_md, c_md), eng);
    const matmul mm(pd);
    memory wm(pd.weights_desc(), eng), bm(b_md, eng, bias.data());
    std::memset(wm.get_data_handle(), 0, pd.weights_desc().get_size());
    const size_t bytes = c_md.get_size();
    std::vector<std::vector<char>> C(kBuffers, std::vector<char>(bytes, 0));
    uint64_t sink = 0;
    const double t = best_seconds(
                         [&] {
                           for (int i = 0; i < kBuffers; ++i) {
                             memory am(a_md, eng, A[i].data()), cm(c_md, eng, C[i].data());
                             mm.execute(s, {{DNNL_ARG_SRC, am},
                                            {DNNL_ARG_WEIGHTS, wm},
                                            {DNNL_ARG_BIAS, bm},
                                            {DNNL_ARG_DST, cm}});
                             s.wait();
                             // The consumer: one pass reading every byte of the output (the same
                             // work per byte for both types, so the difference is the bytes).
                             const uint32_t* p = reinterpret_cast<const uint32_t*>(C[i].data());
                             const int64_t words = static_cast<int64_t>(bytes / 4);
                             uint64_t acc = 0;
#pragma omp parallel for reduction(+ : acc)
                             for (int64_t j = 0; j < words; ++j) acc += p[j];
                             sink += acc;
                           }
                         },
                         5) /
                     kBuffers;
    std::printf("forward %lldx%lld x %lldx%lld, %s output + read: %.3f ms, %.0f GFLOP/s%s\n",
                static_cast<long long>(kRows), static_cast<long long>(K), static_cast<long long>(K),
                static_cast<long long>(N), out == dt::f32 ? "f32 " : "bf16", t * 1e3,
                2.0 * kRows * K * N / t / 1e9, sink == 1 ? " " : "");
  }
}

void weight_gradient_forms(engine& eng, stream& s, int64_t IN, int64_t OUT, bool transposed_dst) {
  std::vector<uint16_t> X(kRows * IN, kOne), DY(kRows * OUT, kOne);
  std::vector<float> DW(OUT * IN, 0), DB(OUT, 0);
  const double flops = 2.0 * kRows * IN * OUT;
  auto report = [&](const char* form, double t, const char* impl) {
    std::printf("weight gradient %lldx%lld over %lld rows, %-34s %.3f ms, %6.1f GFLOP/s  (%s)\n",
                static_cast<long long>(OUT), static_cast<long long>(IN),
                static_cast<long long>(kRows), form, t * 1e3, flops / t / 1e9, impl);
  };
  // The matmul with the operands stored as the engine stores them (dY [rows, OUT] read as
  // dY^T, X [rows, IN]), and with other layouts: dY^T as a row-major copy [OUT, rows] (a
  // transposed copy made when dY is rounded), X read transposed, or both.
  const struct {
    tag a, b;
    const char* form;
  } layouts[] = {{tag::ba, tag::ab, "matmul dY^T X:"},
                 {tag::ab, tag::ab, "matmul, dY^T copy, X:"},
                 {tag::ba, tag::ba, "matmul dY^T X^T-stored:"},
                 {tag::ab, tag::ba, "matmul, dY^T copy, X^T copy:"}};
  for (const auto& l : layouts) {
    const memory::desc a({OUT, kRows}, dt::bf16, l.a), b({kRows, IN}, dt::bf16, l.b),
        c({OUT, IN}, dt::f32, tag::ab);
    const matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
    const matmul mm(pd);
    memory am(a, eng, DY.data()), bm(b, eng, X.data()), cm(c, eng, DW.data());
    report(l.form,
           best_seconds(
               [&] {
                 mm.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
                 s.wait();
               },
               20),
           pd.impl_info_str());
  }
  {  // inner product backward weights (the bias gradient comes with it)
    const memory::desc src({kRows, IN}, dt::bf16, tag::nc), ddst({kRows, OUT}, dt::bf16, tag::nc),
        db({OUT}, dt::f32, tag::x), w16({OUT, IN}, dt::bf16, tag::any);
    const auto hint = inner_product_forward::primitive_desc(
        inner_product_forward::desc(prop_kind::forward_training, src, w16, db, ddst), eng);
    for (tag layout : {tag::oi, tag::any}) {
      const memory::desc dw({OUT, IN}, dt::f32, layout);
      const auto pd = inner_product_backward_weights::primitive_desc(
          inner_product_backward_weights::desc(src, dw, db, ddst), eng, hint);
      const inner_product_backward_weights ip(pd);
      memory sm(src, eng, X.data()), dm(ddst, eng, DY.data()), wm(pd.diff_weights_desc(), eng),
          bm(db, eng, DB.data());
      report(layout == tag::oi ? "inner product, row-major dW:" : "inner product, its own layout:",
             best_seconds(
                 [&] {
                   ip.execute(s, {{DNNL_ARG_SRC, sm},
                                  {DNNL_ARG_DIFF_DST, dm},
                                  {DNNL_ARG_DIFF_WEIGHTS, wm},
                                  {DNNL_ARG_DIFF_BIAS, bm}});
                   s.wait();
                 },
                 20),
             pd.impl_info_str());
    }
  }
  if (transposed_dst) {  // dW^T = X^T dY, written into dW [OUT, IN] through a "ba" destination
    const memory::desc a({IN, kRows}, dt::bf16, tag::ba), b({kRows, OUT}, dt::bf16, tag::ab),
        c({IN, OUT}, dt::f32, tag::ba);
    const matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
    const matmul mm(pd);
    memory am(a, eng, X.data()), bm(b, eng, DY.data()), cm(c, eng, DW.data());
    report("matmul X^T dY, transposed dst:",
           best_seconds(
               [&] {
                 mm.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
                 s.wait();
               },
               1),
           pd.impl_info_str());
  }
}

void f32_forward_forms(engine& eng, stream& s, int64_t K, int64_t N) {
  std::vector<float> x(kRows * K, 0.01f), W(N * K, 0.02f), y(kRows * N), bias(N, 0.1f);
  const double sgemm = best_seconds(
      [&] {
        for (int64_t r = 0; r < kRows; ++r) std::copy(bias.begin(), bias.end(), y.begin() + r * N);
        dnnl_sgemm('N', 'T', kRows, N, K, 1.f, x.data(), K, W.data(), K, 1.f, y.data(), N);
      },
      10);
  const memory::desc a({kRows, K}, dt::f32, tag::ab), w_any({K, N}, dt::f32, tag::any),
      c({kRows, N}, dt::f32, tag::ab), b({1, N}, dt::f32, tag::ab);
  const matmul::primitive_desc pd(matmul::desc(a, w_any, b, c), eng);
  memory wsrc({{K, N}, dt::f32, tag::ba}, eng, W.data()), wp(pd.weights_desc(), eng);
  reorder(wsrc, wp).execute(s, wsrc, wp);
  s.wait();
  memory am(a, eng, x.data()), cm(c, eng, y.data()), bm(b, eng, bias.data());
  const matmul mm(pd);
  const double packed = best_seconds(
      [&] {
        mm.execute(
            s,
            {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, cm}});
        s.wait();
      },
      10);
  const double flops = 2.0 * kRows * K * N;
  std::printf(
      "f32 forward %lldx%lld x %lldx%lld + bias: sgemm after a bias copy %.0f GFLOP/s, "
      "packed weight with the bias epilogue %.0f GFLOP/s\n",
      static_cast<long long>(kRows), static_cast<long long>(K), static_cast<long long>(K),
      static_cast<long long>(N), flops / sgemm / 1e9, flops / packed / 1e9);
}

// 4. f32 training's weight gradients dW[M,N] += dY^T X over R rows (dY [R,M], X [R,N]): oneDNN's
//    sgemm ('T', 'N', beta 1) against its matmul primitive with dY read transposed and a sum
//    post-op (the form gemm() takes for tall, narrow dW: f32_matmul_faster in matmul.cpp).
void f32_weight_gradient(engine& eng, stream& s, int64_t M, int64_t N, int64_t R) {
  std::vector<float> dY(R * M, 0.01f), X(R * N, 0.02f), dW(M * N, 0.f);
  const double sgemm = best_seconds(
      [&] { dnnl_sgemm('T', 'N', M, N, R, 1.f, dY.data(), M, X.data(), N, 1.f, dW.data(), N); }, 5);
  const memory::desc a({M, R}, dt::f32, memory::dims{1, M}), b({R, N}, dt::f32, tag::ab),
      c({M, N}, dt::f32, tag::ab);
  primitive_attr attr;
  post_ops po;
  po.append_sum(1.f);
  attr.set_post_ops(po);
  const matmul::primitive_desc pd(matmul::desc(a, b, c), attr, eng);
  const matmul mm(pd);
  memory am(a, eng, dY.data()), bm(b, eng, X.data()), cm(c, eng, dW.data());
  const double prim = best_seconds(
      [&] {
        mm.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        s.wait();
      },
      5);
  const double flops = 2.0 * R * M * N;
  std::printf("f32 dW %5lld x %4lld over %5lld rows: sgemm %4.0f, matmul %4.0f GFLOP/s (%.2fx)\n",
              static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(R),
              flops / sgemm / 1e9, flops / prim / 1e9, sgemm / prim);
}

}  // namespace

int main(int argc, char** argv) {
  const bool transposed_dst = argc > 1 && std::strcmp(argv[1], "--transposed-dst") == 0;
  const bool f32_only = argc > 1 && std::strcmp(argv[1], "--f32") == 0;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  if (argc > 1 && std::strcmp(argv[1], "--f32-wgrad") == 0) {
    for (int64_t R : {4096, 16384})
      for (int64_t N : {64, 128, 256, 512, 768})
        for (int64_t M : {256, 512, 1024, 2048, 4096, 8192}) f32_weight_gradient(eng, s, M, N, R);
    for (auto mn : {std::pair<int64_t, int64_t>{768, 3072}, {3072, 768}})
      f32_weight_gradient(eng, s, mn.first, mn.second, 8192);
    return 0;
  }
  // f32 training's forward products at d 256, d_ff 1024 and at d 768, d_ff 3072.
  for (auto kn : {std::pair<int64_t, int64_t>{256, 1024},
                  {1024, 256},
                  {256, 256},
                  {768, 3072},
                  {3072, 768},
                  {768, 768}})
    f32_forward_forms(eng, s, kn.first, kn.second);
  if (f32_only) return 0;
  // The step's shapes at d 256, d_ff 1024: FFN first map and FFN second map / input gradients,
  // the query/key/value width, and the output map.
  for (auto kn : {std::pair<int64_t, int64_t>{256, 1024}, {256, 768}, {1024, 256}, {256, 256}})
    forward_output_types(eng, s, kn.first, kn.second);
  for (auto io : {std::pair<int64_t, int64_t>{256, 1024}, {1024, 256}, {256, 256}})
    weight_gradient_forms(eng, s, io.first, io.second, transposed_dst);
  return 0;
}
