// The one matrix-product module: every product of the engine goes through it, with its
// precision passed per call (ComputeType, see linformer/compute_type.h) and what that
// precision means read from one table (kernels/precision.h):
//   f32   oneDNN sgemm
//   bf16  inputs rounded to bfloat16 (AVX512-BF16 through oneDNN), products accumulated and
//         written in f32: mixed precision with f32 master weights. Products under ~1 MFLOP
//         stay f32, where conversion would cost more than it saves.
//   int8  packed weights only (PackedLinear): int8 weights with one scale per output channel,
//         inputs quantized per row, int32 accumulation, dequantized in the epilogue; products
//         between activations run in f32.
// Two operand kinds for the right-hand side:
//   a plain row-major matrix    gemm()          C = alpha op(A) op(B) + beta C
//   a packed weight             PackedLinear    y = x W^T (+ bias, GELU or accumulate)
// Debug builds check shapes and leading dimensions at entry.
#pragma once
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "kernels/operand.h"
#include "linformer/compute_type.h"

namespace lf {

// Round-to-nearest-even f32 -> bf16 of a rows x cols block with leading dimension ld, packed
// densely (leading dimension cols). Parallel over rows outside an OpenMP parallel region.
void to_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t cols, int64_t ld);
// The n contiguous floats of src rounded to bf16 into dst, in parallel, timed as part of the
// matrix products (Phase::matmul: the rounding serves them). Returns dst.
const uint16_t* round_bf16(uint16_t* dst, const float* src, int64_t n);
// The n bf16 values of src widened (exactly) to f32 into dst, in parallel.
void widen_bf16(float* dst, const uint16_t* src, int64_t n);

// Whether bf16 products are emulated: the environment variable LINFORMER_EMULATE_BF16 is set
// (not "0") on a CPU without a bf16 matmul in oneDNN. Every product that would run in bf16
// then widens its bf16 operands to f32 (exactly), multiplies in f32 and rounds a bf16 output,
// so that the bf16 code paths run (slowly, with results close to but not bitwise those of
// native bf16) on any CPU: a test mode (README, "Building by hand").
bool bf16_emulated();
// Whether oneDNN has a u8 x s8 -> s32 matmul here (AVX2 and newer), and whether its int8 dot
// product is AVX512-VNNI (no intermediate saturation: int8_weight_max).
bool int8_supported();
bool int8_vnni();

// Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C. op(A) = A (stored M x K,
// leading dimension lda) or A^T (stored K x M); likewise for B. bf16 primitives are built
// once per shape and thread and cached. Each operand is f32 or bf16 (a bf16 operand is dense:
// its leading dimension is its stored column count); the product runs in the precision
// gemm_runs_bf16 says and reads its operands in that form: an f32 operand of a bf16 product
// is rounded (into per-thread scratch), a bf16 one of an f32 product widened (exactly). So an
// operand that several bf16 products read is rounded once by its owner (a weight during a
// training step, an output gradient feeding both of a linear map's gradient products). bias
// [N] (only with alpha = 1, beta = 0) is added to every row: in the bf16 product's epilogue,
// or for sgemm copied into C before the product adds onto it.
void gemm(ComputeType t, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          TensorIn A, int64_t lda, TensorIn B, int64_t ldb, float beta, float* C, int64_t ldc,
          const float* bias = nullptr);
// Whether gemm(t, ...) of this size runs in bf16 (and so reads its operands in bf16).
bool gemm_runs_bf16(ComputeType t, int64_t M, int64_t N, int64_t K);

// Where one operand of a batched product keeps its matrices: matrix (b, h) starts at
// b * sb + h * sh and its rows are ld apart (columns contiguous). A zero batch stride shares
// one matrix across that batch dimension (broadcast).
struct BatchLayout {
  int64_t sb = 0, sh = 0, ld = 0;
};

// C_bh = alpha op(A_bh) op(B_bh) + beta C_bh for every b < nb, h < nh: the per-head products
// of attention and the per-sequence products of the sequence projections, too small to run
// well one call at a time. In bf16 (when the whole batch is large enough for gemm_runs_bf16)
// one oneDNN matmul over the batch, each operand rounded once over the span it occupies; in
// f32 one sgemm per matrix, the threads splitting the batch. Shapes as in gemm(); C has no
// zero batch stride. Call outside parallel regions.
// Each operand f32 or bf16 (a bf16 one in the layout it would have in f32, as
// round_batch_bf16 makes it: an operand shared by two products or kept only in bf16), read as
// gemm() reads its operands. C f32, or bf16 (beta must be 0): written by the product itself
// when it runs in bf16, else rounded matrix by matrix.
void gemm_batched(ComputeType t, int64_t nb, int64_t nh, bool trans_a, bool trans_b, int64_t M,
                  int64_t N, int64_t K, float alpha, TensorIn A, BatchLayout la, TensorIn B,
                  BatchLayout lb, float beta, Tensor C, BatchLayout lc);
// Whether gemm_batched(t, nb, nh, ..., M, N, K, ...) runs in bf16.
bool gemm_batched_runs_bf16(ComputeType t, int64_t nb, int64_t nh, int64_t M, int64_t N, int64_t K);
// An operand of gemm_batched (nb x nh matrices of rows x cols as stored, in layout l) rounded
// to bf16 into buf, which keeps its layout and grows as needed; returns the copy.
const uint16_t* round_batch_bf16(Buffer<uint16_t>& buf, int64_t nb, int64_t nh, int64_t rows,
                                 int64_t cols, BatchLayout l, const float* X);

// A linear map y = x W^T (+ bias) whose weight W [out, in] (torch.nn.Linear's layout) is
// packed once into the layout oneDNN's matmul prefers, in f32 or bf16. Inference uses it so
// that products neither re-pack W nor re-round it on every call, and fuses the bias, GELU
// or the residual sum into the product. One oneDNN primitive is built per row count,
// epilogue and threading context, on first use.
//
// bf16: W is rounded to bfloat16 once; each call rounds x to bfloat16 (round to nearest
// even) into per-thread scratch, and the product accumulates in f32 (AVX512-BF16).
//
// Callable from inside an OpenMP parallel region (each thread then runs its own product on
// one core) or from outside (the product uses every thread).
class PackedLinear {
 public:
  // What happens to x W^T + bias before it is stored in out.
  enum class Epilogue {
    store,       // out = x W^T + bias
    gelu,        // out = GELU(x W^T + bias), exact (erf) GELU
    accumulate,  // out += x W^T + bias
  };

  PackedLinear();
  ~PackedLinear();
  PackedLinear(PackedLinear&&) noexcept;
  PackedLinear& operator=(PackedLinear&&) noexcept;

  // Packs W [out_features, in_features] (row-major). W is copied; it may change afterwards.
  // Packing again with the same shape, type and orientation reuses the storage, the
  // primitives and the reorder (bf16 training re-packs its weights after every step).
  void pack(const float* W, int64_t out_features, int64_t in_features, ComputeType type);
  // Packs W^T instead, for y = x W with W [rows, cols] row-major: in_features = rows,
  // out_features = cols (the input-gradient product dX = dY W of a linear map).
  void pack_transposed(const float* W, int64_t rows, int64_t cols, ComputeType type);
  bool packed() const;
  ComputeType type() const;
  int64_t in_features() const;
  int64_t out_features() const;
  size_t bytes() const;  // packed weight storage
  // What bytes() will be after pack() with these arguments (oneDNN's layout may pad).
  static size_t packed_bytes(int64_t out_features, int64_t in_features, ComputeType type);

  // out [rows, out_features] (leading dimension out_features) from x [rows, in_features]
  // (dense); bias [out_features] or null. One entry for every dtype pairing, dispatched once:
  //   x f32    prepared as the weights' precision says (rounded to bf16, quantized per row)
  //   x bf16   bf16 weights only: x already rounded, used as is
  //   x int8   int8 weights only: rows quantized as quantize_rows_u8 stores them with qmax 127
  //            and a scale per row; the result apply() gives on the f32 rows it was quantized
  //            from, without quantizing them again
  //   out f32  any epilogue
  //   out bf16 bf16 weights and a bf16 x, Epilogue::store: bf16(x W^T + bias), rounded to
  //            nearest even from the f32 accumulator (bf16 training keeps the FFN's hidden
  //            activation and gradient in bf16)
  //   out int8 int8 weights, an f32 x, Epilogue::gelu: GELU(x W^T + bias) quantized per row,
  //            the input of a next int8 product (the FFN's hidden activation, never written in
  //            f32): equal to an f32 out followed by quantize_rows_u8(..., 127)
  // `segment` > 0: the rows come in groups of that many (a batch's sequences), where a fixed
  // row tile restarts (set_row_tile); without a row tile it changes nothing.
  void apply(Tensor out, TensorIn x, int64_t rows, const float* bias, Epilogue e,
             int64_t segment = 0) const;
  // The same product with the rows in tiles of exactly `tile` rows, each through the one
  // single-threaded primitive of (tile, epilogue, bias) (a last partial tile runs on a
  // zero-padded copy of its rows), the tiles shared among the threads when called outside a
  // parallel region (serially inside one). With `segment` > 0 the tiles restart every
  // `segment` rows (each sequence of a batch), otherwise at row 0; a segment shorter than
  // `tile` is one tile of its row count rounded up to 8. A row's result then depends
  // only on the row, the tile size and its place in its segment: not on how many rows or
  // segments the call has or what the other rows hold (batch-invariant inference,
  // Model::set_batch_invariant). The place matters: some kernels (oneDNN's AVX2 f32 matmul)
  // give a row other bits at another position of its tile. f32 inputs (bf16 weights round
  // each tile).
  void apply_tiled(float* out, const float* x, int64_t rows, const float* bias, Epilogue e,
                   int64_t tile, int64_t segment = 0) const;
  // Makes apply() run as apply_tiled(..., rows, its segment) (0: as before, in power-of-two
  // blocks). Kept until changed or the object is replaced; pack() keeps it.
  void set_row_tile(int64_t rows);
  int64_t row_tile() const { return row_tile_; }

  // Rows a single product handles at most (a power of two); calls run in blocks of this many
  // rows, then of decreasing powers of two, so that oneDNN sees few distinct shapes.
  static constexpr int64_t kMaxRows = 1024;
  // The same when the input needs no scratch copy (f32 weights, or a pre-rounded x16): larger
  // blocks run faster there (a bias epilogue on 1024-row blocks costs oneDNN ~25%).
  static constexpr int64_t kMaxRowsDirect = 8192;
  // Per-thread scratch bytes apply() may hold for inputs of in_features columns (bf16 copy
  // of the input block), beside oneDNN's own small scratchpad.
  static size_t scratch_bytes(int64_t in_features, ComputeType type);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t row_tile_ = 0;  // set_row_tile
  void pack_impl(const float* W, int64_t N, int64_t K, ComputeType type, bool transposed);
  void apply_impl(void* out, const float* x, const uint16_t* x16, int64_t rows, const float* bias,
                  Epilogue e, bool out16) const;
  struct Int8Rows;
  void apply_int8(const Int8Rows& io, int64_t rows, const float* bias, Epilogue e) const;
  void apply_bf16(uint16_t* out16, const uint16_t* x16, int64_t rows, const float* bias) const;
};

}  // namespace lf
