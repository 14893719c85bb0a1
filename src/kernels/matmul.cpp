#include "kernels/matmul.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/dnnl_util.h"
#include "kernels/precision.h"
#include "kernels/vec_math.h"
#include "linformer/error.h"

namespace lf {

void to_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t cols, int64_t ld) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   vm::to_bf16_n(dst + r * cols, src + r * ld, cols);
               });
}

void widen_bf16(float* dst, const uint16_t* src, int64_t n) {
  parallel_for(0, n, 16384,
               [&](int64_t i0, int64_t i1) { vm::from_bf16_n(dst + i0, src + i0, i1 - i0); });
}

const uint16_t* round_bf16(uint16_t* dst, const float* src, int64_t n) {
  PhaseScope ps(Phase::matmul);
  parallel_for(0, n, 16384,
               [&](int64_t i0, int64_t i1) { vm::to_bf16_n(dst + i0, src + i0, i1 - i0); });
  return dst;
}

const dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

ComputeType parse_compute_type(const std::string& name) {
  if (name == "f32") return ComputeType::f32;
  if (name == "bf16") return ComputeType::bf16;
  if (name == "int8") return ComputeType::int8;
  fail("precision must be \"f32\", \"bf16\" or \"int8\", got \"", name, "\"");
}

namespace {
// Whether oneDNN can build a 64 x 64 matmul with these types here (weights in the layout it
// picks, as the packed products ask).
bool onednn_has_matmul(dnnl::memory::data_type a, dnnl::memory::data_type b,
                       dnnl::memory::data_type c) {
  using tag = dnnl::memory::format_tag;
  try {
    const dnnl::memory::desc ma({64, 64}, a, tag::ab), mb({64, 64}, b, tag::any),
        mc({64, 64}, c, tag::ab);
    dnnl::matmul::primitive_desc(dnnl::matmul::desc(ma, mb, mc), cpu_engine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}
using dt = dnnl::memory::data_type;
// Asked once: can oneDNN build a bf16 x bf16 -> f32 matmul here?
bool native_bf16() {
  static const bool bf16 = onednn_has_matmul(dt::bf16, dt::bf16, dt::f32);
  return bf16;
}
}  // namespace

bool int8_supported() {
  static const bool ok = onednn_has_matmul(dt::u8, dt::s8, dt::s32);
  return ok;
}

bool int8_vnni() {
  // avx512_core_vnni and up (the 0x40 bit of oneDNN's ISA masks). AVX-VNNI without AVX-512
  // (avx2_vnni) does not count: oneDNN 2.6's int8 products there may still take its AVX2
  // kernels, whose pair sums saturate.
  const int isa = static_cast<int>(dnnl_get_effective_cpu_isa());
  return (isa & 0x40) != 0;
}

bool bf16_emulated() {
  static const bool on = [] {
    const char* e = std::getenv("LINFORMER_EMULATE_BF16");
    return e && *e && std::string(e) != "0" && !native_bf16();
  }();
  return on;
}

bool compute_type_supported(ComputeType t) {
  if (t == ComputeType::int8) return int8_supported();
  return t == ComputeType::f32 || native_bf16() || bf16_emulated();
}

void require_compute_type(ComputeType t) {
  if (t == ComputeType::int8 && !int8_supported())
    fail("precision int8: this CPU has no int8 matmul in oneDNN (it needs AVX2 or newer); use "
         "f32");
  if (!compute_type_supported(t))
    fail("precision ", compute_type_name(t), ": this CPU has no ", compute_type_name(t),
         " matmul in oneDNN (bf16 needs AVX-512: AVX512-BF16 or AMX, or plain AVX-512F through "
         "conversion); use f32");
}

namespace {

// A product's input type and shape: everything its oneDNN primitive depends on (bf16 inputs
// are copied densely: their leading dimensions are then the dense ones).
struct ProductKey {
  bool bf16, ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  bool with_bias;
  auto tie() const {
    return std::tie(bf16, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, with_bias);
  }
  bool operator<(const ProductKey& o) const { return tie() < o.tie(); }
};

// A cached oneDNN matmul and the memory descriptors it was built for. With bf16 emulated
// (bf16_emulated()), the descriptors are f32 and the operands flagged here are bf16 in memory:
// run() widens them (and rounds a bf16 output) around an f32 product.
struct Product {
  dnnl::memory::desc a, b, c, bias;
  dnnl::matmul prim;
  bool a16 = false, b16 = false, c16 = false;
};

// The element type of an operand held in bf16: bf16, or f32 when bf16 is emulated.
dnnl::memory::data_type bf16_or_emulated() {
  return bf16_emulated() ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
}

// c = alpha a b + beta c, or with a bias descriptor c = a b + bias (a row added to each row).
Product make_product(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                     const dnnl::memory::desc& c, float alpha, float beta,
                     const dnnl::memory::desc& bias = {}) {
  dnnl::primitive_attr attr;
  if (alpha != 1.f) attr.set_output_scales(0, {alpha});
  if (beta != 0.f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  const dnnl::matmul::desc md =
      bias.is_zero() ? dnnl::matmul::desc(a, b, c) : dnnl::matmul::desc(a, b, bias, c);
  dnnl::matmul::primitive_desc pd(md, attr, cpu_engine());
  return Product{a, b, c, bias, dnnl::matmul(pd)};
}

// Runs p on the operands at a, b and c (and its bias).
void run(const Product& p, const void* a, const void* b, void* c, const float* bias = nullptr) {
  if (p.a16 || p.b16 || p.c16) {  // emulated bf16: widen, multiply in f32, round the output
    thread_local Buffer<float> wa, wb, wc;
    const auto widen = [](Buffer<float>& buf, const dnnl::memory::desc& d, const void* x) {
      const int64_t n = static_cast<int64_t>(d.get_size() / sizeof(float));
      float* w = buf.grow(n);
      widen_bf16(w, static_cast<const uint16_t*>(x), n);
      return w;
    };
    Product f = p;
    f.a16 = f.b16 = f.c16 = false;
    const void* fa = p.a16 ? widen(wa, p.a, a) : a;
    const void* fb = p.b16 ? widen(wb, p.b, b) : b;
    void* fc = p.c16 ? widen(wc, p.c, c) : c;
    run(f, fa, fb, fc, bias);
    if (p.c16)
      round_bf16(static_cast<uint16_t*>(c), static_cast<const float*>(fc),
                 static_cast<int64_t>(p.c.get_size() / sizeof(float)));
    return;
  }
  thread_local dnnl::stream strm(cpu_engine());
  dnnl::memory ma(p.a, cpu_engine(), const_cast<void*>(a)),
      mb(p.b, cpu_engine(), const_cast<void*>(b)), mc(p.c, cpu_engine(), c);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  if (bias)
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, cpu_engine(), const_cast<float*>(bias)));
  p.prim.execute(strm, args);
  strm.wait();
}

// What build(key) returns, built on first use; one cache per thread (primitives are not shared
// between threads that may run them at once) and per build function.
template <typename Key, Product (*build)(const Key&)>
const Product& cached(const Key& key) {
  thread_local std::map<Key, Product> cache;
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, build(key)).first;
  return it->second;
}

Product build_plain_product(const ProductKey& k) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const dt in = k.bf16 ? bf16_or_emulated() : dt::f32;
  // Logical op(A) is M x K: strides {lda, 1} for plain storage, {1, lda} for the transposed one.
  dnnl::memory::desc a({k.M, k.K}, in, k.ta ? dims{1, k.lda} : dims{k.lda, 1});
  dnnl::memory::desc b({k.K, k.N}, in, k.tb ? dims{1, k.ldb} : dims{k.ldb, 1});
  dnnl::memory::desc c({k.M, k.N}, dt::f32, dims{k.ldc, 1});
  const dnnl::memory::desc bias =
      k.with_bias ? dnnl::memory::desc({1, k.N}, dt::f32, dims{k.N, 1}) : dnnl::memory::desc();
  Product p = make_product(a, b, c, k.alpha, k.beta, bias);
  p.a16 = p.b16 = k.bf16 && bf16_emulated();
  return p;
}

// The primitive for a shape, cached.
const Product& plain_product(const ProductKey& k) {
  return cached<ProductKey, build_plain_product>(k);
}

// The operands' bf16 copies (either may be null: rounded by the product).
struct Bf16Inputs {
  const uint16_t* a = nullptr;
  const uint16_t* b = nullptr;
};

// C = alpha op(A) op(B) (+ bias) + beta C with bf16 inputs through a cached oneDNN matmul
// primitive; operands not given rounded in `pre` are rounded into per-thread buffers.
void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const Bf16Inputs& pre, const float* bias) {
  thread_local Buffer<uint16_t> abuf, bbuf;
  const uint16_t* a = pre.a;
  const uint16_t* b = pre.b;
  if (!a) {
    const int64_t ar = ta ? K : M, ac = ta ? M : K;  // stored shape of A
    uint16_t* dst = abuf.grow(ar * ac);
    to_bf16(dst, A, ar, ac, lda);
    a = dst;
  }
  if (!b) {
    const int64_t br = tb ? N : K, bc = tb ? K : N;  // stored shape of B
    uint16_t* dst = bbuf.grow(br * bc);
    to_bf16(dst, B, br, bc, ldb);
    b = dst;
  }
  const int64_t lda16 = ta ? M : K, ldb16 = tb ? K : N;  // the dense copies'
  run(plain_product({true, ta, tb, M, N, K, lda16, ldb16, ldc, alpha, beta, bias != nullptr}), a, b,
      C, bias);
}

// Whether an f32 product runs faster as oneDNN's matmul primitive than as its sgemm: a weight
// gradient dW = dY^T X reducing over many rows into a tall, narrow dW (M >= 1024 rows of at
// most 512 columns). oneDNN 2.6's sgemm runs these at 200-250 GFLOP/s on 2 threads of a
// Sapphire Rapids core pair and the matmul at 290-330 (docs/benchmarks.md); elsewhere the two
// are within a few percent, or sgemm is faster.
bool f32_matmul_faster(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  return ta && !tb && M >= 1024 && N <= 512 && K >= 512;
}

}  // namespace

const Precision& precision(ComputeType t) {
  using P = Precision;
  // Rows in the order of ComputeType's values.
  static const Precision rows[] = {
      {ComputeType::f32, true, ComputeType::f32, 0, P::Weights::f32, P::Input::as_is,
       P::Accumulator::f32, PackedLinear::kMaxRowsDirect},
      {ComputeType::bf16, true, ComputeType::bf16, int64_t{1} << 19, P::Weights::bf16,
       P::Input::round_bf16, P::Accumulator::f32, PackedLinear::kMaxRows},
      {ComputeType::int8, false, ComputeType::f32, 0, P::Weights::int8_per_channel,
       P::Input::quantize_per_row, P::Accumulator::s32_dequantized, 128},
  };
  const auto i = static_cast<size_t>(t);
  LF_CHECK(i < std::size(rows) && rows[i].type == t, "unknown precision ", static_cast<int>(t));
  return rows[i];
}

bool compute_type_trains(ComputeType t) { return precision(t).trains; }

void require_trains(ComputeType t) {
  if (!compute_type_trains(t))
    fail("precision ", compute_type_name(t),
         " is for inference only (forward, evaluate, predict, embed, perplexity, bench, serve); "
         "train in f32 or bf16");
}

bool gemm_runs_bf16(ComputeType t, int64_t M, int64_t N, int64_t K) {
  const Precision& p = precision(t);
  return p.plain == ComputeType::bf16 && M * N * K >= p.min_work;
}

namespace {
// A dense bf16 operand (rows x cols as stored) widened to f32 into buf, for a product that
// runs in f32.
const float* widened(Buffer<float>& buf, const uint16_t* x16, int64_t rows, int64_t cols) {
  float* dst = buf.grow(rows * cols);
  widen_bf16(dst, x16, rows * cols);
  return dst;
}
}  // namespace

void gemm(ComputeType t, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          TensorIn a, int64_t lda, TensorIn b, int64_t ldb, float beta, float* C, int64_t ldc,
          const float* bias) {
  LF_DCHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  LF_DCHECK(!bias || (alpha == 1.f && beta == 0.f), "gemm: a bias needs alpha = 1 and beta = 0");
  LF_DCHECK(lda >= std::max<int64_t>(1, trans_a ? M : K) &&
                ldb >= std::max<int64_t>(1, trans_b ? K : N) && ldc >= std::max<int64_t>(1, N),
            "gemm: leading dimension too small for M=", M, " N=", N, " K=", K, " (lda=", lda,
            " ldb=", ldb, " ldc=", ldc, ", trans_a=", trans_a, " trans_b=", trans_b, ")");
  LF_DCHECK(M == 0 || N == 0 || (C && (K == 0 || (a && b))), "gemm: null operand for M=", M,
            " N=", N, " K=", K);
  LF_DCHECK(!a.is(DataType::int8) && !b.is(DataType::int8),
            "gemm: int8 operands are multiplied by PackedLinear");
  LF_DCHECK((!a.is(DataType::bf16) || lda == (trans_a ? M : K)) &&
                (!b.is(DataType::bf16) || ldb == (trans_b ? K : N)),
            "gemm: a bf16 operand must be dense");
  const bool bf16 = gemm_runs_bf16(t, M, N, K);
  const float *A = a.f32(), *B = b.f32();
  if (!bf16 && M > 0 && N > 0 && K > 0) {  // an operand given only in bf16 is widened back
    thread_local Buffer<float> awide, bwide;
    if (!A) A = widened(awide, a.bf16(), trans_a ? K : M, trans_a ? M : K);
    if (!B) B = widened(bwide, b.bf16(), trans_b ? N : K, trans_b ? K : N);
  }
  if (M == 0 || N == 0) return;
  PhaseScope ps(Phase::matmul, 2.0 * static_cast<double>(M) * static_cast<double>(N) * K);
  if (K == 0) {  // oneDNN rejects K = 0; the product is then just beta * C.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  if (bf16) {
    gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
              Bf16Inputs{a.bf16(), b.bf16()}, bias);
    return;
  }
  if (f32_matmul_faster(trans_a, trans_b, M, N, K)) {
    run(plain_product(
            {false, trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, bias != nullptr}),
        A, B, C, bias);
    return;
  }
  if (bias) {  // sgemm has no bias: C starts as the bias rows and the product adds onto it
    for (int64_t i = 0; i < M; ++i) std::copy(bias, bias + N, C + i * ldc);
    beta = 1.f;
  }
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B,
                                ldb, beta, C, ldc);
  LF_CHECK(st == dnnl_success, "gemm: oneDNN sgemm failed (status ", static_cast<int>(st),
           ") for M=", M, " N=", N, " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc);
}

namespace {

// A batched product's shape and layouts: everything its oneDNN primitive depends on (the
// last flag: the output written in bf16).
using BatchedKey = std::tuple<bool, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, float,
                              float, std::array<int64_t, 9>, bool>;

// Floats from an operand's first element to one past its last one.
int64_t span(int64_t nb, int64_t nh, int64_t rows, int64_t cols, BatchLayout l) {
  return (l.sb ? nb - 1 : 0) * l.sb + (l.sh ? nh - 1 : 0) * l.sh + (rows - 1) * l.ld + cols;
}

Product build_batched_product(const BatchedKey& key) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const auto [bf16, nb, nh, ta, tb, M, N, K, alpha, beta, st, out16] = key;
  const dt in = bf16 ? bf16_or_emulated() : dt::f32;
  // Logical op(A) is M x K; a transposed operand swaps its last two strides. A broadcast
  // dimension has extent 1 and is given the stride of a dense layout (oneDNN takes a zero
  // stride for an unusual format and falls back to its reference kernel).
  const int64_t batches = nb, heads = nh;  // (a lambda cannot capture structured bindings)
  const auto desc = [&](int64_t r, int64_t c, int64_t sb, int64_t sh, int64_t ld, bool t, dt d) {
    const int64_t eb = sb ? batches : 1, eh = sh ? heads : 1;
    const int64_t dense_h = sh ? sh : ld * (t ? c : r), dense_b = sb ? sb : dense_h * eh;
    return dnnl::memory::desc({eb, eh, r, c}, d,
                              t ? dims{dense_b, dense_h, 1, ld} : dims{dense_b, dense_h, ld, 1});
  };
  const auto a = desc(M, K, st[0], st[1], st[2], ta, in);
  const auto b = desc(K, N, st[3], st[4], st[5], tb, in);
  const auto c = desc(M, N, st[6], st[7], st[8], false, out16 ? bf16_or_emulated() : dt::f32);
  Product p = make_product(a, b, c, alpha, beta);
  p.a16 = p.b16 = bf16 && bf16_emulated();
  p.c16 = out16 && bf16_emulated();
  return p;
}

// The primitive for a batched shape, cached.
const Product& batched_product(const BatchedKey& key) {
  return cached<BatchedKey, build_batched_product>(key);
}

}  // namespace

bool gemm_batched_runs_bf16(ComputeType t, int64_t nb, int64_t nh, int64_t M, int64_t N,
                            int64_t K) {
  return gemm_runs_bf16(t, M, N, K * nb * nh);
}

namespace {
// The span of a batched operand held only in bf16 (round_batch_bf16's layout) widened to f32
// into buf (exact), for a batched product that runs in f32.
const float* widen_batch(Buffer<float>& buf, int64_t nb, int64_t nh, int64_t rows, int64_t cols,
                         BatchLayout l, const uint16_t* X16) {
  LF_CHECK(X16, "gemm_batched: an operand is neither given in f32 nor rounded");
  const int64_t n = span(nb, nh, rows, cols, l);
  float* dst = buf.grow(n);
  widen_bf16(dst, X16, n);
  return dst;
}
}  // namespace

const uint16_t* round_batch_bf16(Buffer<uint16_t>& buf, int64_t nb, int64_t nh, int64_t rows,
                                 int64_t cols, BatchLayout l, const float* X) {
  const int64_t n = span(nb, nh, rows, cols, l);
  return round_bf16(buf.grow(n), X, n);
}

void gemm_batched(ComputeType t, int64_t nb, int64_t nh, bool trans_a, bool trans_b, int64_t M,
                  int64_t N, int64_t K, float alpha, TensorIn a_in, BatchLayout la, TensorIn b_in,
                  BatchLayout lb, float beta, Tensor c, BatchLayout lc) {
  const float *A = a_in.f32(), *B = b_in.f32();
  const Bf16Inputs pre{a_in.bf16(), b_in.bf16()};
  float* C = c.f32();
  uint16_t* C16 = c.bf16();
  LF_DCHECK(!C16 || beta == 0.f, "gemm_batched: a bf16 output takes no beta");
  LF_DCHECK(
      nb > 0 && nh > 0 && M > 0 && N > 0 && K > 0 && (A || pre.a) && (B || pre.b) && (C || C16),
      "gemm_batched: empty, null or int8 operand nb=", nb, " nh=", nh, " M=", M, " N=", N,
      " K=", K);
  LF_DCHECK(la.ld >= (trans_a ? M : K) && lb.ld >= (trans_b ? K : N) && lc.ld >= N &&
                (nb == 1 || lc.sb > 0) && (nh == 1 || lc.sh > 0),
            "gemm_batched: leading dimension or output batch stride too small for M=", M, " N=", N,
            " K=", K);
  const double flops = 2.0 * static_cast<double>(nb * nh) * static_cast<double>(M) * N * K;
  PhaseScope ps(Phase::matmul, flops);
  const bool bf16 = gemm_batched_runs_bf16(t, nb, nh, M, N, K);
  if (!bf16) {  // f32: one sgemm per matrix, the threads splitting the batch
    // An operand given only rounded (an activation kept in bf16 alone) is widened back.
    thread_local Buffer<float> awide, bwide;
    if (!A) A = widen_batch(awide, nb, nh, trans_a ? K : M, trans_a ? M : K, la, pre.a);
    if (!B) B = widen_batch(bwide, nb, nh, trans_b ? N : K, trans_b ? K : N, lb, pre.b);
    // A bf16 output: each matrix into this thread's tile, then rounded into place.
    thread_local Buffer<float> tile;
    parallel_for(0, nb * nh, 1, [&](int64_t i0, int64_t i1) {
      float* t = C16 ? tile.grow(M * N) : nullptr;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = i / nh, h = i % nh, co = b * lc.sb + h * lc.sh;
        gemm(ComputeType::f32, trans_a, trans_b, M, N, K, alpha, A + b * la.sb + h * la.sh, la.ld,
             B + b * lb.sb + h * lb.sh, lb.ld, beta, C16 ? t : C + co, C16 ? N : lc.ld);
        if (C16)
          for (int64_t r = 0; r < M; ++r) vm::to_bf16_n(C16 + co + r * lc.ld, t + r * N, N);
      }
    });
    return;
  }
  // Each operand not given rounded is rounded once over its span, keeping its strides.
  thread_local Buffer<uint16_t> abuf, bbuf;
  const void* a =
      pre.a ? pre.a : round_batch_bf16(abuf, nb, nh, trans_a ? K : M, trans_a ? M : K, la, A);
  const void* b =
      pre.b ? pre.b : round_batch_bf16(bbuf, nb, nh, trans_b ? N : K, trans_b ? K : N, lb, B);
  const BatchedKey key{
      bf16,
      nb,
      nh,
      trans_a,
      trans_b,
      M,
      N,
      K,
      alpha,
      beta,
      std::array<int64_t, 9>{la.sb, la.sh, la.ld, lb.sb, lb.sh, lb.ld, lc.sb, lc.sh, lc.ld},
      C16 != nullptr};
  run(batched_product(key), a, b, C16 ? static_cast<void*>(C16) : static_cast<void*>(C));
}

}  // namespace lf
