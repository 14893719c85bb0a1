// The shape checks at kernel and layer entry (LF_DCHECK, src/core/check.h): every call below is
// inconsistent and must be refused with an lf::Error that names the shapes, before any memory
// is touched. The checks are compiled into debug builds and builds configured with
// -DLINFORMER_CHECKS=ON (make sanitize); in a plain Release build these tests skip.
#include <vector>

#include "core/check.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "layers/attention.h"
#include "layers/attention_path.h"
#include "layers/encoder_layer.h"
#include "layers/projection.h"
#include "test_util.h"

namespace lf {
namespace {

class ShapeChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!shape_checks_enabled())
      GTEST_SKIP() << "shape checks are not compiled in (Release build without LINFORMER_CHECKS)";
  }
  std::vector<float> a = std::vector<float>(256, 1.f), b = a, c = a, d = a;
  std::vector<int32_t> ids = std::vector<int32_t>(64, 0);
};

TEST_F(ShapeChecks, Gemm) {
  // A is 2 x 3 (K = 3) but its leading dimension says 2.
  EXPECT_ERROR_MENTIONS(gemm(ComputeType::f32, false, false, 2, 2, 3, 1.f, a.data(), 2, b.data(), 2,
                             0.f, c.data(), 2),
                        "leading dimension too small for M=2 N=2 K=3 (lda=2");
  EXPECT_ERROR_MENTIONS(gemm(ComputeType::f32, false, false, 2, 2, 3, 1.f, TensorIn(), 3, b.data(),
                             2, 0.f, c.data(), 2),
                        "gemm: null operand");
}

TEST_F(ShapeChecks, Linear) {
  EXPECT_ERROR_MENTIONS(linear_forward(c.data(), a.data(), b.data(), nullptr,
                                       LinearDims{/*rows=*/3, /*in=*/0, /*out=*/4}),
                        "linear_forward: bad shape rows=3 in=0 out=4");
  EXPECT_ERROR_MENTIONS(linear_forward(Tensor(), a.data(), b.data(), nullptr,
                                       LinearDims{/*rows=*/3, /*in=*/2, /*out=*/4}),
                        "linear_forward: null");
  // A weight gradient without the input it is computed from.
  EXPECT_ERROR_MENTIONS(
      linear_backward(LinearGrads{Tensor(), d.data(), nullptr}, c.data(), TensorIn(), b.data(),
                      LinearDims{/*rows=*/3, /*in=*/2, /*out=*/4}),
      "linear_backward: null");
}

TEST_F(ShapeChecks, RowKernels) {
  EXPECT_ERROR_MENTIONS(
      layernorm_forward(c.data(), nullptr, nullptr, a.data(), b.data(), d.data(), 4, 0, 1e-5f),
      "layernorm_forward: bad shape rows=4 C=0");
  EXPECT_ERROR_MENTIONS(layernorm_backward(c.data(), d.data(), nullptr, a.data(), a.data(),
                                           b.data(), a.data(), a.data(), 4, 8),
                        "layernorm_backward: null");
  EXPECT_ERROR_MENTIONS(softmax_forward(c.data(), a.data(), 4, 0, 1.f, nullptr),
                        "softmax_forward: bad shape rows=4 cols=0");
  EXPECT_ERROR_MENTIONS(cross_entropy(nullptr, a.data(), ids.data(), 4, 0, 1.f, nullptr),
                        "cross_entropy: bad shape rows=4 V=0");
  EXPECT_ERROR_MENTIONS(embedding_forward(c.data(), ids.data(), a.data(), b.data(), d.data(),
                                          EmbedDims{/*B=*/2, /*N=*/0, /*C=*/4, /*pos_offset=*/0}),
                        "embedding_forward: bad shape B=2 N=0 C=4");
}

TEST_F(ShapeChecks, Attention) {
  // D != H * Dh.
  const AttnDims bad{/*B=*/1, /*N=*/4, /*Lk=*/4, /*D=*/8, /*H=*/2, /*Dh=*/3};
  AttnRun run;
  run.scratch = b.data();
  EXPECT_ERROR_MENTIONS(attention_forward(c.data(), AttnKept{d.data(), {}}, a.data(),
                                          KeysValues{a.data(), a.data(), nullptr}, bad, run),
                        "attention_forward: inconsistent dims B=1 N=4 Lk=4 D=8 H=2 Dh=3");
  // Rows [2, 6) of a sequence of 4 queries; batch element 1 of a batch of 1.
  const AttnDims ok{/*B=*/1, /*N=*/4, /*Lk=*/4, /*D=*/8, /*H=*/2, /*Dh=*/4};
  const KeysValues kv{a.data(), a.data(), nullptr};
  EXPECT_ERROR_MENTIONS(attention_rows(c.data(), a.data(), kv, ok,
                                       RowBlock{/*b=*/0, /*i0=*/2, /*i1=*/6}, 1.f, b.data()),
                        "attention_rows: row block b=0 [2, 6) outside B=1 N=4");
  EXPECT_ERROR_MENTIONS(
      attention_streaming_rows(c.data(), a.data(), kv, ok, RowBlock{/*b=*/1, /*i0=*/0, /*i1=*/4},
                               1.f, b.data()),
      "attention_streaming_rows: row block b=1 [0, 4) outside B=1 N=4");
  // Dropout needs scratch for the dropped-out copy of the probabilities.
  AttnRun drop;
  drop.p_drop = 0.5f;  // dropout without scratch
  EXPECT_ERROR_MENTIONS(attention_forward(c.data(), AttnKept{d.data(), {}}, a.data(),
                                          KeysValues{a.data(), a.data(), nullptr}, ok, drop),
                        "attention_forward: needs probs or scratch");
}

TEST_F(ShapeChecks, SequenceProjectionAndPooling) {
  // x rows of C = 4 features with a row stride of 3.
  const SeqProjDims sd{/*B=*/1, /*N=*/4, /*K=*/2, /*C=*/4, /*ldE=*/4, /*ldx=*/3, /*ldo=*/4};
  EXPECT_ERROR_MENTIONS(
      seq_project_forward(c.data(), nullptr, nullptr, a.data(), b.data(), nullptr, sd),
      "seq_project_forward: inconsistent dims B=1 N=4 K=2 C=4 ldE=4 ldx=3 ldo=4");
  // With a mask, forward keeps E diag(m) for backward: Ebm is required.
  const SeqProjDims ok{/*B=*/1, /*N=*/4, /*K=*/2, /*C=*/4, /*ldE=*/4, /*ldx=*/4, /*ldo=*/4};
  EXPECT_ERROR_MENTIONS(
      seq_project_forward(c.data(), nullptr, nullptr, a.data(), b.data(), d.data(), ok),
      "seq_project_forward: null output, E or input, or no Ebm");
  // K = 2 windows of w = 3 positions do not cover N = 7.
  std::vector<int32_t> arg(64);
  EXPECT_ERROR_MENTIONS(max_pool_forward(c.data(), arg.data(), a.data(), nullptr,
                                         PoolDims{/*B=*/1, /*N=*/7, /*K=*/2, /*w=*/3, /*C=*/4}),
                        "max_pool_forward: inconsistent dims B=1 N=7 K=2 w=3 C=4");
}

TEST_F(ShapeChecks, LayerEntry) {
  const Config cfg = test::tiny_config();
  Projections proj(cfg, nullptr);
  Layout lay;
  LayerParams lp;
  LayerAct act;
  LayerContext ctx;
  ctx.cfg = &cfg;
  ctx.B = 1;
  ctx.N = 4;
  // No attention path, projections or buffers.
  EXPECT_ERROR_MENTIONS(layer_forward(ctx, lp, act, 0, a.data(), c.data(), Tensor()),
                        "layer_forward: incomplete layer context");
  ctx.path = &attention_path(cfg);
  ctx.proj = &proj;
  ctx.lay = &lay;
  ctx.N = cfg.max_len + 1;
  EXPECT_ERROR_MENTIONS(layer_forward_infer(ctx, lp, act, a.data(), c.data()),
                        "layer_forward_infer: batch B=1 N=" + std::to_string(cfg.max_len + 1));
  ctx.N = 4;
  EXPECT_ERROR_MENTIONS(layer_backward(ctx, lp, act, 0, a.data()),
                        "layer_backward: no gradient buffers");
}

}  // namespace
}  // namespace lf
