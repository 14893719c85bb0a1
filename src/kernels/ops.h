// Element-wise and row-wise kernels, each a forward/backward pair of free functions.
// Conventions (as in llm.c): outputs first; forward caches what backward needs;
// backward ADDS into every gradient it produces (inputs and parameters), so callers zero
// gradients once and residual branches simply accumulate. Where a backward is the first to
// write an input gradient, GradInto::overwrite writes over the buffer instead (no zeroing
// pass over memory first).
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/operand.h"
#include "linformer/compute_type.h"

namespace lf {

// How a backward writes the gradient of its input: added to what the buffer holds, or
// written over it.
enum class GradInto { add, overwrite };

// Rows per parallel_for chunk for rows of `cols` floats: about kGrainElems floats a chunk.
constexpr int64_t kGrainElems = 1 << 14;
inline int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(cols, 1));
}

// Sizes travel in small structs where a kernel takes three or more, so that two of them cannot
// be swapped silently. Call sites name the fields: LinearDims{/*rows=*/R, /*in=*/D, /*out=*/F}.

// A linear map: inp [rows, in], W [out, in], b [out], out [rows, out].
struct LinearDims {
  int64_t rows = 0, in = 0, out = 0;
};

class PackedLinear;
// A weight's forms for training's products, beside its f32 master copy: `plain`, the operand
// of its unpacked products that run in bf16 (same layout as W: its bf16 rounding in bf16
// training, W itself in f32 training; empty: W), and W packed for the forward product x W^T
// and for the input gradient dY W (kernels/matmul.h), in f32 or bf16 (each may be absent). A
// packed form runs a product only when its type is the product's (gemm_runs_bf16 decides);
// other products read `plain` when they run in bf16, W when they run in f32. Two forms with
// two roles, not one operand: which one a product reads depends on the product's size.
struct TrainWeight {
  TensorIn plain;
  const PackedLinear* forward = nullptr;   // pack(W, out, in)
  const PackedLinear* backward = nullptr;  // pack_transposed(W, out, in)
};

// A linear map's weight W [out, in] and its training forms (TrainWeight; none outside
// training).
struct Weight {
  const float* w = nullptr;
  TrainWeight forms;
  Weight() = default;
  Weight(const float* f32) : Weight(f32, TrainWeight()) {}  // NOLINT: an f32 weight converts
  Weight(const float* f32, const TrainWeight& t) : w(f32), forms(t) {
    if (!forms.plain) forms.plain = f32;
  }
  // The form a plain product of this precision reads.
  TensorIn operand(bool bf16) const { return bf16 ? forms.plain : TensorIn(w); }
};

// out = inp W^T + b; b may be null. t: precision of the products (kernels/matmul.h). inp f32
// or bf16 (read as gemm reads its operands). out f32, or bf16 (bf16 training: the product
// runs in bf16 on W's packed forward form and writes its result rounded).
void linear_forward(Tensor out, TensorIn inp, const Weight& W, const float* b, const LinearDims& d,
                    ComputeType t = ComputeType::f32);
// The gradients linear_backward writes (each may be null): dinp += dout W (dinp = dout W with
// GradInto::overwrite); dW += dout^T inp; db += column sums of dout. dinp f32, or bf16
// (written over, rounded, as the next bf16 products read it: only when both gradient
// products run in bf16, linear_backward_runs_bf16, and W has its packed backward form).
struct LinearGrads {
  Tensor dinp;
  float *dW = nullptr, *db = nullptr;
  GradInto into = GradInto::add;
};
// In bf16, dout is rounded once for both products, its column sums into db in the same pass.
// dout bf16: already rounded by the caller, who has summed db too (db is then left alone);
// only when linear_backward_runs_bf16(t, d). inp f32 or bf16. The weight gradient is taken
// first, while the rounded output gradient is in cache.
void linear_backward(const LinearGrads& g, TensorIn dout, TensorIn inp, const Weight& W,
                     const LinearDims& d, ComputeType t = ComputeType::f32);
// Whether both gradient products of linear_backward run in bf16 (dout is then rounded once).
bool linear_backward_runs_bf16(ComputeType t, const LinearDims& d);
// bf16 training: a linear map's output gradient dout [rows, cols] rounded to bf16 into d16
// (the operand of both its gradient products, linear_backward's pre_rounded), with its column
// sums added to db (the bias gradient; null: none) in the same pass. Returns d16.
const uint16_t* round_output_gradient(uint16_t* d16, float* db, const float* dout, int64_t rows,
                                      int64_t cols);

// LayerNorm over the last axis. inp/out [rows, C]; mean/rstd [rows] cached for backward (or
// null). operand: the output as the next products read it (a planned buffer of its own
// dtype): bf16, written rounded in the same pass; f32 (out itself) or empty, nothing more.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int64_t rows, int64_t C, float eps, Tensor operand = {});
// The residual sum and the LayerNorm after it in one pass: sum = x + y, then
// layernorm_forward(out, mean, rstd, sum, ..., operand), each row normalised while its sum is
// in cache. The same values as the two steps apart.
void add_layernorm_forward(float* sum, float* out, float* mean, float* rstd, const float* x,
                           const float* y, const float* w, const float* b, int64_t rows, int64_t C,
                           float eps, Tensor operand = {});
// What layernorm_backward may also make of the input gradient dx it writes, in the same pass
// (bf16 training, where dx is the output gradient of a linear map behind a dropout): g =
// dropout_backward(dx) (p = 0: g = dx; else the mask of dropout_backward with this seed,
// stream and first), rounded to bf16 into g16 [rows, C], its column sums added to colsum
// (that map's bias gradient). The same values as round_output_gradient of g.
struct RoundedGrad {
  uint16_t* g16 = nullptr;
  float* colsum = nullptr;
  float p = 0.f;
  uint64_t seed = 0, stream = 0;
  int64_t first = 0;
};
void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int64_t rows,
                        int64_t C, GradInto into = GradInto::add,
                        const RoundedGrad* also = nullptr);

// GELU, exact (erf) form, of n elements; out may alias inp. f32 to f32, or bf16 to bf16 (the
// FFN's pre-activation kept in bf16: exact per bf16 value, from a table, written rounded).
void gelu_forward(Tensor out, TensorIn inp, int64_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);
// In place over [rows, cols]: d holds d(out) on entry and d(inp) on exit (d *= GELU'(inp)), no
// buffer to zero; d and inp in one dtype, f32 or bf16. bf16 (the FFN's hidden activation in
// bf16 training): d and inp widened exactly, GELU' looked up per bf16 value, d(inp) rounded,
// and its column sums added to db in the same pass: db is the bias gradient of the map that
// reads d, which linear_backward takes from the maker of a bf16 output gradient. f32: db is
// not touched (linear_backward sums it from the f32 gradient).
void gelu_backward_inplace(Tensor d, TensorIn inp, int64_t rows, int64_t cols, float* db = nullptr);

// tanh; backward uses the cached output.
void tanh_forward(float* out, const float* inp, int64_t n);
void tanh_backward(float* dinp, const float* out, const float* dout, int64_t n);

// Row softmax of scale * inp over `cols` entries; entries with key_mask[j] == 0 get exactly 0
// (key_mask may be null). Rows whose keys are all masked become all zeros. out may alias inp.
void softmax_forward(float* out, const float* inp, int64_t rows, int64_t cols, float scale,
                     const float* key_mask);
// Gradient w.r.t. the pre-scale input: dinp (+)= scale * p * (dout - sum(dout * p)).
// When accumulate is false dinp is overwritten (dinp may then alias dout).
void softmax_backward(float* dinp, const float* p, const float* dout, int64_t rows, int64_t cols,
                      float scale, bool accumulate);

// Inverted dropout with a counter-based mask: element i is kept iff 16 random bits drawn for
// it from (seed, stream, first + i) are >= round(p * 65536), and then scaled by 1/(1-p).
// `first` is the mask index of element 0: a data-parallel rank holding a slice of the global
// batch passes the index its slice starts at, so that the masks are those of the whole batch.
// out may alias inp.
void dropout_forward(float* out, const float* inp, int64_t n, float p, uint64_t seed,
                     uint64_t stream, int64_t first = 0);
void dropout_backward(float* dinp, const float* dout, int64_t n, float p, uint64_t seed,
                      uint64_t stream, int64_t first = 0, GradInto into = GradInto::add);
// Attention dropout in bf16 training, under dropout_forward's mask for (seed, stream, first):
// out16 = bf16(dropout(inp)) (the probabilities that multiply V), and, when g is given, g =
// dropout(g) in place (their gradient, in backward), one mask draw serving both.
void dropout_round(uint16_t* out16, const float* inp, float* g, int64_t n, float p, uint64_t seed,
                   uint64_t stream, int64_t first = 0);

// The embedding sum of B sequences of N tokens, C features; position t of a sequence uses
// row t + pos_offset of the position table.
struct EmbedDims {
  int64_t B = 0, N = 0, C = 0, pos_offset = 0;
};

// out[r] = word[ids[r]] + pos[(r % N) + pos_offset] + type[0], for r in [0, B*N).
// ids [B*N]; word [vocab, C]; pos [N + pos_offset (at least), C]; type [C]; out [B*N, C].
void embedding_forward(float* out, const int32_t* ids, const float* word, const float* pos,
                       const float* type, const EmbedDims& d);
void embedding_backward(float* dword, float* dpos, float* dtype, const float* dout,
                        const int32_t* ids, const EmbedDims& d);

// Softmax cross-entropy over V classes per row. Rows with target < 0 are ignored.
// Returns the sum of losses over counted rows and stores the count in *count.
// If dlogits is non-null, writes (not adds) grad_scale * (softmax - onehot) there,
// zero for ignored rows. dlogits may alias logits.
double cross_entropy(float* dlogits, const float* logits, const int32_t* targets, int64_t rows,
                     int64_t V, float grad_scale, int64_t* count);

}  // namespace lf
