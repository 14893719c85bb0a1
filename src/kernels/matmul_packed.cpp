#include <omp.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/dnnl_util.h"
#include "kernels/matmul.h"
#include "kernels/precision.h"
#include "kernels/quantize.h"
#include "linformer/error.h"

namespace lf {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

using P = Precision;

// The element type of the packed weights and the inputs (the precision's row): f32 also when
// bf16 is emulated (bf16_emulated(): the weights are then rounded to bf16 and packed widened,
// and each block's input is rounded and widened, its bf16 output rounded from f32).
dt dnnl_type(ComputeType t) {
  switch (precision(t).weights) {
    case P::Weights::bf16:
      return bf16_emulated() ? dt::f32 : dt::bf16;
    case P::Weights::int8_per_channel:
      return dt::s8;
    case P::Weights::f32:
      break;
  }
  return dt::f32;
}
// The input's element type: the weights', except int8's inputs, stored as u8 (q + 128: the
// operand form of the u8 x s8 dot products, quantize_rows_u8).
dt input_type(ComputeType t) {
  return precision(t).input == P::Input::quantize_per_row ? dt::u8 : dnnl_type(t);
}
bool emulated(ComputeType t) { return t == ComputeType::bf16 && bf16_emulated(); }
// The product accumulates in int32 and the engine's own epilogue dequantizes.
bool dequantized(ComputeType t) {
  return precision(t).accumulator == P::Accumulator::s32_dequantized;
}

// Rows of the block that starts `rest` rows before the end of a call: max_rows (a power of
// two), else the highest power of two <= rest, so that at most log2(max_rows) + 1 row counts
// ever reach oneDNN however the batches vary (few primitives are built).
int64_t block_rows(int64_t max_rows, int64_t rest) {
  int64_t M = std::min(max_rows, rest);
  while (M & (M - 1)) M &= M - 1;
  return M;
}

}  // namespace

// An int8 product's rows, from the first row of a call or block on: the input in f32 (x,
// quantized block by block) or already quantized (xq, xs); the output in f32 (y) or, GELU
// applied, quantized for the next product (yq, ys).
struct PackedLinear::Int8Rows {
  const float* x = nullptr;
  const uint8_t* xq = nullptr;
  const float* xs = nullptr;
  float* y = nullptr;
  uint8_t* yq = nullptr;
  float* ys = nullptr;
  // The same from row r on (K input, N output columns).
  Int8Rows from(int64_t r, int64_t K, int64_t N) const {
    Int8Rows o = *this;
    if (x) o.x += r * K;
    if (xq) o.xq += r * K, o.xs += r;
    if (y) o.y += r * N;
    if (yq) o.yq += r * N, o.ys += r;
    return o;
  }
};

struct PackedLinear::Impl {
  ComputeType type = ComputeType::f32;
  int64_t N = 0, K = 0;     // out, in features
  bool transposed = false;  // packed from W^T (pack_transposed)
  dnnl::memory::desc wdesc;
  Buffer<uint8_t> weights;
  Buffer<float> col_scale;     // int8: the scale of each output channel
  Buffer<int32_t> col_offset;  // int8: 128 * sum_k q[n, k], what the u8 inputs' shift adds
  dnnl::reorder repack;        // source layout -> packed layout, kept for the next pack()

  // One primitive per (rows, epilogue, bias, called from a parallel region, bf16 output):
  // oneDNN tunes its blocking to the shape and to the threads it may use.
  struct Entry {
    int64_t M;
    Epilogue e;
    bool bias, nested, out16;
    dnnl::matmul prim;
    size_t scratch;
  };
  mutable std::mutex mu;
  mutable std::deque<Entry> cache;

  // weights: the packed layout, or `any` to let oneDNN choose it.
  dnnl::matmul::primitive_desc make_pd(int64_t M, Epilogue e, bool bias,
                                       const dnnl::memory::desc& weights_md,
                                       bool out16 = false) const {
    const dt out = dequantized(type) ? dt::s32 : out16 ? dnnl_type(ComputeType::bf16) : dt::f32;
    dnnl::memory::desc src({M, K}, input_type(type), tag::ab), dst({M, N}, out, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (dequantized(type)) {  // scales, bias and the epilogue come after, in dequantize_rows
      e = Epilogue::store;
      bias = false;
    }
    dnnl::post_ops po;
    if (e == Epilogue::gelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    if (e == Epilogue::accumulate) po.append_sum(1.f);
    attr.set_post_ops(po);
    const dnnl::memory::desc b({1, N}, dt::f32, tag::ab);
    const auto d = bias ? dnnl::matmul::desc(src, weights_md, b, dst)
                        : dnnl::matmul::desc(src, weights_md, dst);
    return dnnl::matmul::primitive_desc(d, attr, cpu_engine());
  }

  // The layout oneDNN picks for a block of kMaxRows rows; it serves every row count. Where
  // oneDNN packs nothing (its gemm-based matmul, the f32 one on CPUs without AVX-512, picks
  // the plain [K, N] layout), f32 weights are kept as W [N, K] instead (`ba`): its sgemm
  // runs the transposed form 1.2x (N 768) to 1.8x (N 3072) faster on the per-thread
  // 256-row blocks of inference (bench/microbench BM_PackedLinear, 2-core AVX2 EPYC).
  dnnl::memory::desc packed_desc() const {
    const dnnl::memory::desc any({K, N}, dnnl_type(type), tag::any);
    try {
      const dnnl::memory::desc picked =
          make_pd(kMaxRows, Epilogue::store, true, any).weights_desc();
      if (dnnl_type(type) == dt::f32 && picked == dnnl::memory::desc({K, N}, dt::f32, tag::ab))
        return {{K, N}, dt::f32, tag::ba};
      return picked;
    } catch (const dnnl::error& err) {
      fail("packed linear: oneDNN has no ", compute_type_name(type), " matmul for ", N, "x", K,
           " weights on this CPU (", err.what(), ")",
           type == ComputeType::bf16   ? "; bf16 needs AVX-512, run without --bf16"
           : type == ComputeType::int8 ? "; int8 needs AVX2 or newer"
                                       : "");
    }
  }

  void run_block(int64_t M, void* dst, const float* x, const uint16_t* x16, const float* bias,
                 Epilogue e, bool out16) const;
  void run_block_int8(const Entry& en, int64_t M, const Int8Rows& io, const float* bias,
                      Epilogue e) const;
  void execute(const Entry& en, int64_t M, void* src, void* dst, const float* bias) const;
  static dnnl::stream& stream() {
    thread_local dnnl::stream strm(cpu_engine());
    return strm;
  }

  const Entry& get(int64_t M, Epilogue e, bool bias, bool nested, bool out16) const {
    if (dequantized(type)) {  // one primitive serves every epilogue
      e = Epilogue::store;
      bias = false;
    }
    std::lock_guard<std::mutex> lock(mu);
    for (const Entry& en : cache)
      if (en.M == M && en.e == e && en.bias == bias && en.nested == nested && en.out16 == out16)
        return en;
    dnnl::matmul::primitive_desc pd;
    try {
      pd = make_pd(M, e, bias, wdesc, out16);
    } catch (const dnnl::error& err) {
      fail("packed linear: oneDNN has no ", compute_type_name(type), " matmul for ", M, "x", K,
           " times ", K, "x", N, " with the packed weight layout (", err.what(), ")");
    }
    cache.push_back(
        Entry{M, e, bias, nested, out16, dnnl::matmul(pd), pd.scratchpad_desc().get_size()});
    return cache.back();
  }
};

PackedLinear::PackedLinear() : impl_(std::make_unique<Impl>()) {}
PackedLinear::~PackedLinear() = default;
PackedLinear::PackedLinear(PackedLinear&&) noexcept = default;
PackedLinear& PackedLinear::operator=(PackedLinear&&) noexcept = default;

void PackedLinear::pack(const float* W, int64_t out_features, int64_t in_features,
                        ComputeType type) {
  pack_impl(W, out_features, in_features, type, false);
}

void PackedLinear::pack_transposed(const float* W, int64_t rows, int64_t cols, ComputeType type) {
  pack_impl(W, cols, rows, type, true);
}

void PackedLinear::pack_impl(const float* W, int64_t N, int64_t K, ComputeType type,
                             bool transposed) {
  LF_CHECK(N > 0 && K > 0, "packed linear: empty weight (", N, "x", K, ")");
  LF_CHECK(!(transposed && dequantized(type)),
           "packed linear: int8 weights are packed from W [out, in] only (inference)");
  const bool int8 = precision(type).weights == P::Weights::int8_per_channel;
  // The product's weight is the logical [K, N] matrix: W [N, K] row-major is it in `ba`
  // order, and W [K, N] (pack_transposed) in `ab` order. The reorder rounds to bf16; int8
  // weights are quantized here first, each output channel (row of W) with its own scale.
  const dnnl::memory::desc src_md({K, N}, int8 ? dt::s8 : dt::f32, transposed ? tag::ab : tag::ba);
  Impl* im = impl_.get();
  const bool reuse =
      im && im->N == N && im->K == K && im->type == type && im->transposed == transposed;
  if (!reuse) {
    auto fresh = std::make_unique<Impl>();
    fresh->type = type;
    fresh->N = N;
    fresh->K = K;
    fresh->transposed = transposed;
    fresh->wdesc = fresh->packed_desc();
    fresh->weights.resize(fresh->wdesc.get_size());
    fresh->repack = dnnl::reorder(
        dnnl::reorder::primitive_desc(cpu_engine(), src_md, cpu_engine(), fresh->wdesc));
    impl_ = std::move(fresh);
    im = impl_.get();
  }
  const void* w = W;
  thread_local Buffer<int8_t> wq;
  if (int8) {
    im->col_scale.resize(static_cast<size_t>(N));
    quantize_rows(wq.grow(N * K), K, im->col_scale.data(), W, N, K, K, int8_weight_max());
    w = wq.data();
    im->col_offset.resize(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) {
      int32_t sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += wq.data()[n * K + k];
      im->col_offset[n] = 128 * sum;
    }
  } else if (emulated(type)) {  // the bf16 weights, widened: W rounded to bf16 and back
    thread_local Buffer<float> wide;
    thread_local Buffer<uint16_t> w16;
    w = wide.grow(N * K);
    widen_bf16(wide.data(), round_bf16(w16.grow(N * K), W, N * K), N * K);
  }
  dnnl::memory src(src_md, cpu_engine(), const_cast<void*>(w));
  dnnl::memory dst(im->wdesc, cpu_engine(), im->weights.data());
  thread_local dnnl::stream strm(cpu_engine());
  im->repack.execute(strm, src, dst);
  strm.wait();
}

bool PackedLinear::packed() const { return impl_ && impl_->N > 0; }
ComputeType PackedLinear::type() const { return impl_ ? impl_->type : ComputeType::f32; }
int64_t PackedLinear::in_features() const { return impl_ ? impl_->K : 0; }
int64_t PackedLinear::out_features() const { return impl_ ? impl_->N : 0; }
size_t PackedLinear::bytes() const { return impl_ ? impl_->weights.size() : 0; }

size_t PackedLinear::packed_bytes(int64_t out_features, int64_t in_features, ComputeType type) {
  // Asking oneDNN builds a primitive descriptor; remember the answer per shape.
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, ComputeType>, size_t> known;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(out_features, in_features, type);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  Impl im;
  im.type = type;
  im.N = out_features;
  im.K = in_features;
  return known[key] = im.packed_desc().get_size();
}

size_t PackedLinear::scratch_bytes(int64_t in_features, ComputeType type) {
  const Precision& p = precision(type);
  switch (p.input) {
    case P::Input::round_bf16:
      return p.max_rows * in_features * sizeof(uint16_t);
    case P::Input::quantize_per_row:  // the int8 input, its scales and the int32 block (at most
      return p.max_rows * (in_features * (1 + sizeof(int32_t)) + sizeof(float));  // in wide)
    case P::Input::as_is:
      break;
  }
  return 0;
}

void PackedLinear::apply(Tensor out, TensorIn x, int64_t rows, const float* bias, Epilogue e,
                         int64_t segment) const {
  LF_CHECK(packed(), "packed linear: apply() before pack()");
  LF_DCHECK(rows <= 0 || (out && x), "packed linear: null input or output for ", rows, " rows");
  LF_CHECK(x.dtype == DataType::f32 || (x.dtype == DataType::bf16 && type() == ComputeType::bf16) ||
               (x.dtype == DataType::int8 && dequantized(type())),
           "packed linear: the ", data_type_name(x.dtype), " input needs ", data_type_name(x.dtype),
           " weights (these are ", compute_type_name(type()), ")");
  switch (out.dtype) {
    case DataType::bf16:
      LF_CHECK(type() == ComputeType::bf16 && x.dtype == DataType::bf16 && e == Epilogue::store,
               "packed linear: a bf16 output needs bf16 weights and input (these are ",
               compute_type_name(type()), ")");
      apply_bf16(out.bf16(), x.bf16(), rows, bias);
      return;
    case DataType::int8: {
      LF_CHECK(dequantized(type()) && x.dtype == DataType::f32 && e == Epilogue::gelu,
               "packed linear: a quantized output needs int8 weights (these are ",
               compute_type_name(type()), ")");
      PhaseScope ps(Phase::matmul, 2.0 * static_cast<double>(rows) * impl_->N * impl_->K);
      Int8Rows io;
      io.x = x.f32();
      io.yq = out.int8();
      io.ys = out.scale;
      apply_int8(io, rows, bias, Epilogue::gelu);
      return;
    }
    case DataType::f32:
      break;
  }
  switch (x.dtype) {
    case DataType::int8: {
      PhaseScope ps(Phase::matmul, 2.0 * static_cast<double>(rows) * impl_->N * impl_->K);
      Int8Rows io;
      io.xq = x.int8();
      io.xs = x.scale;
      io.y = out.f32();
      apply_int8(io, rows, bias, e);
      return;
    }
    case DataType::bf16:
      LF_CHECK(row_tile_ <= 0, "packed linear: a fixed row tile takes f32 inputs");
      apply_impl(out.f32(), nullptr, x.bf16(), rows, bias, e, false);
      return;
    case DataType::f32:
      if (row_tile_ > 0) {
        apply_tiled(out.f32(), x.f32(), rows, bias, e, row_tile_, segment);
        return;
      }
      apply_impl(out.f32(), x.f32(), nullptr, rows, bias, e, false);
      return;
  }
}

void PackedLinear::apply_bf16(uint16_t* out16, const uint16_t* x16, int64_t rows,
                              const float* bias) const {
  LF_DCHECK(rows <= 0 || (out16 && x16), "packed linear: null input or output for ", rows, " rows");
  apply_impl(out16, nullptr, x16, rows, bias, Epilogue::store, true);
}

// Runs the product on one block of M rows: x (f32, rounded here for bf16 weights) or x16
// (bf16 weights only) starts at the block's first row, dst (f32, or bf16 with out16) likewise.
// Builds the block's primitive for the calling thread's context on first use. The caller
// waits for the thread's stream.
void PackedLinear::Impl::run_block(int64_t M, void* dst, const float* x, const uint16_t* x16,
                                   const float* bias, Epilogue e, bool out16) const {
  thread_local Buffer<uint16_t> xb;
  const Entry& en = get(M, e, bias != nullptr, omp_in_parallel(), out16);
  const Precision::Input input = precision(type).input;
  if (input == Precision::Input::quantize_per_row) {
    Int8Rows io;
    io.x = x;
    io.y = static_cast<float*>(dst);
    run_block_int8(en, M, io, bias, e);
    return;
  }
  void* src = x16 ? static_cast<void*>(const_cast<uint16_t*>(x16))
                  : static_cast<void*>(const_cast<float*>(x));
  if (!x16 && input == Precision::Input::round_bf16) {
    uint16_t* b = xb.grow(static_cast<size_t>(M * K));
    to_bf16(b, x, M, K, K);
    src = b;
  }
  // Emulated bf16: the rounded input widened, a bf16 output rounded from an f32 block.
  const bool emu = emulated(type);
  thread_local Buffer<float> xw, yw;
  if (emu) {
    float* xf = xw.grow(M * K);
    widen_bf16(xf, static_cast<const uint16_t*>(src), M * K);
    src = xf;
  }
  void* out = emu && out16 ? yw.grow(M * N) : dst;
  execute(en, M, src, out, bias);
  if (emu && out16) {
    stream().wait();
    to_bf16(static_cast<uint16_t*>(dst), yw.data(), M, N, N);
  }
}

// Runs the entry's primitive on M rows: src and dst in the primitive's types, bias (f32) or
// null. The caller waits for the thread's stream.
void PackedLinear::Impl::execute(const Entry& en, int64_t M, void* src, void* dst,
                                 const float* bias) const {
  thread_local Buffer<uint8_t> pad;
  const dt out = dequantized(type) ? dt::s32 : en.out16 ? dnnl_type(ComputeType::bf16) : dt::f32;
  const dnnl::memory wm(wdesc, cpu_engine(), const_cast<uint8_t*>(weights.data()));
  dnnl::memory sm({{M, K}, input_type(type), tag::ab}, cpu_engine(), src);
  dnnl::memory dm({{M, N}, out, tag::ab}, cpu_engine(), dst);
  dnnl::memory pm({{static_cast<int64_t>(en.scratch)}, dt::u8, tag::a}, cpu_engine(),
                  pad.grow(std::max<size_t>(en.scratch, 1)));
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm}, {DNNL_ARG_SCRATCHPAD, pm}};
  if (bias && !dequantized(type))
    args.emplace(DNNL_ARG_BIAS,
                 dnnl::memory({{1, N}, dt::f32, tag::ab}, cpu_engine(), const_cast<float*>(bias)));
  en.prim.execute(stream(), args);
}

// int8: the block's rows quantized (one scale per row) unless they come quantized, the int32
// product into per-thread scratch, then scales, bias and the epilogue applied while writing
// the f32 output, or GELU applied and each row quantized again (io.yq).
void PackedLinear::Impl::run_block_int8(const Entry& en, int64_t M, const Int8Rows& io,
                                        const float* bias, Epilogue e) const {
  thread_local Buffer<uint8_t> xq;
  thread_local Buffer<float> xs;
  thread_local Buffer<int32_t> acc;
  const uint8_t* q = io.xq;
  const float* rs = io.xs;
  if (!q) {
    uint8_t* qb = xq.grow(M * K);
    float* sb = xs.grow(M);
    quantize_rows_u8(qb, K, sb, io.x, M, K, K, 127);
    q = qb;
    rs = sb;
  }
  int32_t* a = acc.grow(M * N);
  execute(en, M, const_cast<uint8_t*>(q), a, nullptr);
  stream().wait();
  if (io.yq) {
    dequantize_gelu_quantize_rows(io.yq, io.ys, a, M, N, rs, col_scale.data(), col_offset.data(),
                                  bias);
    return;
  }
  const DequantOp op = e == Epilogue::gelu         ? DequantOp::gelu
                       : e == Epilogue::accumulate ? DequantOp::accumulate
                                                   : DequantOp::store;
  dequantize_rows(io.y, a, M, N, rs, col_scale.data(), col_offset.data(), bias, op);
}

// out: float (or uint16_t when the output is bf16: then x16 is given and e is store).
void PackedLinear::apply_impl(void* out, const float* x, const uint16_t* x16, int64_t rows,
                              const float* bias, Epilogue e, bool out16) const {
  LF_CHECK(packed(), "packed linear: apply() before pack()");
  PhaseScope ps(Phase::matmul, 2.0 * static_cast<double>(rows) * impl_->N * impl_->K);
  const Impl& im = *impl_;
  if (rows <= 0) return;
  if (dequantized(im.type)) {
    Int8Rows io;
    io.x = x;
    io.y = static_cast<float*>(out);
    apply_int8(io, rows, bias, e);
    return;
  }
  // Blocks of max_rows rows, then the rest in power-of-two blocks (block_rows).
  const int64_t max_rows = x16 ? kMaxRowsDirect : precision(im.type).max_rows;
  for (int64_t r0 = 0, M = 0; r0 < rows; r0 += M) {
    M = block_rows(max_rows, rows - r0);
    // x is null when only the rounded input is given: offset whichever pointer is used.
    void* dst = out16 ? static_cast<void*>(static_cast<uint16_t*>(out) + r0 * im.N)
                      : static_cast<void*>(static_cast<float*>(out) + r0 * im.N);
    im.run_block(M, dst, x ? x + r0 * im.K : nullptr, x16 ? x16 + r0 * im.K : nullptr, bias, e,
                 out16);
  }
  Impl::stream().wait();
}

// An int8 product in blocks of at most max_rows rows (block_rows). Outside a parallel region,
// over more than one block, the blocks are shared among the threads, each quantized,
// multiplied on the single-threaded primitive and dequantized by the thread that owns it, so
// that its int32 block is still in that core's cache when the epilogue reads it (one block on
// two threads left it to be read back from L3: the epilogue cost 15-30% of the product).
// Integer sums are exact, so the blocking changes no result.
void PackedLinear::apply_int8(const Int8Rows& io, int64_t rows, const float* bias,
                              Epilogue e) const {
  const Impl& im = *impl_;
  if (rows <= 0) return;
  const int64_t max_rows = precision(im.type).max_rows;
  const bool nested = omp_in_parallel();
  if (nested || rows <= max_rows || num_threads() <= 1) {
    for (int64_t r0 = 0, M = 0; r0 < rows; r0 += M) {
      M = block_rows(max_rows, rows - r0);
      im.run_block_int8(im.get(M, e, bias != nullptr, nested, false), M, io.from(r0, im.K, im.N),
                        bias, e);
    }
    return;
  }
  thread_local std::vector<std::pair<int64_t, int64_t>> blocks;  // (first row, rows)
  blocks.clear();
  for (int64_t r0 = 0, M = 0; r0 < rows; r0 += M) {
    M = block_rows(max_rows, rows - r0);
    // Each row count's primitive built here (a oneDNN error is thrown outside the region),
    // once: the counts are max_rows, then ever smaller powers of two.
    if (blocks.empty() || blocks.back().second != M) im.get(M, e, bias != nullptr, true, false);
    blocks.emplace_back(r0, M);
  }
  const auto* b = blocks.data();
  const int64_t nb = static_cast<int64_t>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(num_threads())
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t M = b[i].second;
    im.run_block_int8(im.get(M, e, bias != nullptr, true, false), M,
                      io.from(b[i].first, im.K, im.N), bias, e);
  }
}

void PackedLinear::set_row_tile(int64_t rows) {
  LF_CHECK(rows >= 0, "packed linear: negative row tile ", rows);
  row_tile_ = rows;
}

void PackedLinear::apply_tiled(float* out, const float* x, int64_t rows, const float* bias,
                               Epilogue e, int64_t tile, int64_t segment) const {
  LF_CHECK(packed(), "packed linear: apply() before pack()");
  LF_CHECK(tile > 0 && segment >= 0, "packed linear: row tile ", tile, ", segment ", segment);
  LF_DCHECK(rows <= 0 || (out && x), "packed linear: null input or output for ", rows, " rows");
  PhaseScope ps(Phase::matmul, 2.0 * static_cast<double>(rows) * impl_->N * impl_->K);
  if (rows <= 0) return;
  const Impl& im = *impl_;
  const int64_t K = im.K, N = im.N, seg = segment > 0 ? std::min(segment, rows) : rows;
  tile = std::min(tile, (seg + 7) / 8 * 8);  // a short segment: one tile of its rows
  const int64_t per_seg = (seg + tile - 1) / tile, tiles = (rows + seg - 1) / seg * per_seg;
  // Tile i: rows [r0, r0 + n) of segment i / per_seg; a partial tile runs on zero-padded copies.
  const auto run_tile = [&](int64_t i) {
    const int64_t s0 = i / per_seg * seg, r0 = s0 + i % per_seg * tile;
    const int64_t n = std::min({tile, s0 + seg - r0, rows - r0});
    if (n <= 0) return;
    if (n == tile) {
      im.run_block(tile, out + r0 * N, x + r0 * K, nullptr, bias, e, false);
    } else {
      thread_local Buffer<float> xs, os;
      float* xt = xs.grow(static_cast<size_t>(tile * K));
      float* ot = os.grow(static_cast<size_t>(tile * N));
      std::copy(x + r0 * K, x + (r0 + n) * K, xt);
      std::fill(xt + n * K, xt + tile * K, 0.f);
      if (e == Epilogue::accumulate) std::copy(out + r0 * N, out + (r0 + n) * N, ot);
      im.run_block(tile, ot, xt, nullptr, bias, e, false);
      Impl::stream().wait();
      std::copy(ot, ot + n * N, out + r0 * N);
    }
    Impl::stream().wait();
  };
  if (omp_in_parallel()) {
    for (int64_t i = 0; i < tiles; ++i) run_tile(i);
    return;
  }
  // Outside a parallel region every tile still runs inside one (a team of every thread, even
  // for one tile), on the single-threaded primitive: the same one whatever `rows` is. Built
  // here first, so that a oneDNN error is thrown outside the region.
  im.get(tile, e, bias != nullptr, num_threads() > 1, false);
#pragma omp parallel for schedule(dynamic, 1) num_threads(num_threads())
  for (int64_t i = 0; i < tiles; ++i) run_tile(i);
}

}  // namespace lf
