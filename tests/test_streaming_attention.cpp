// The inference path (train = false: row blocks, per-thread workspace, low-memory projections)
// and the streaming-softmax attention option against the training-path forward, which the
// reference tests compare with PyTorch. Sequences are long enough for several row blocks and
// several streaming key blocks, and padded.
#include <gtest/gtest.h>

#include <vector>

#include "core/parallel.h"
#include "kernels/matmul.h"
#include "layers/attention.h"
#include "linformer/model.h"
#include "test_util.h"

namespace lf {
namespace {

Config long_config() {
  Config c = test::tiny_config();
  c.max_len = 640;
  c.k = {32};  // window 20
  return c;
}

struct Inputs {
  int64_t B = 3, N = 600;
  std::vector<int32_t> ids;
  std::vector<float> mask;
};

// Three sequences: full length, one padded to 301 real tokens, one with only 17 real tokens
// (whole key blocks of padding).
Inputs make_inputs(const Config& cfg, int64_t N = 600) {
  Inputs in;
  in.N = N;
  const int64_t lens[3] = {N, 301, 17};
  in.ids.resize(in.B * N);
  in.mask.resize(in.B * N);
  for (int64_t b = 0; b < in.B; ++b)
    for (int64_t t = 0; t < N; ++t) {
      const int64_t i = b * N + t;
      const bool real = t < lens[b];
      in.mask[i] = real ? 1.f : 0.f;
      in.ids[i] = real ? static_cast<int32_t>(rng_bits(3, 4, i) % cfg.vocab_size)
                       : static_cast<int32_t>(cfg.pad_id);
    }
  return in;
}

using test::randomise;

// Hidden states at real positions.
std::vector<float> real_rows(const Model& m, const Inputs& in) {
  const int64_t D = m.config().d_model;
  std::vector<float> out;
  for (int64_t r = 0; r < in.B * in.N; ++r)
    if (in.mask[r] != 0.f) out.insert(out.end(), m.hidden() + r * D, m.hidden() + (r + 1) * D);
  return out;
}

std::vector<float> run(Model& m, const Inputs& in, bool train, bool padded = true) {
  m.forward(Batch{in.ids.data(), padded ? in.mask.data() : nullptr, in.B, in.N}, train);
  if (!padded) return std::vector<float>(m.hidden(), m.hidden() + in.B * in.N * m.config().d_model);
  return real_rows(m, in);
}

// A model with random weights on make_inputs' batch, and what its training forward gives:
// the hidden states at the real positions (padded batch) and at every position (the same
// batch unmasked). Every inference path must reproduce them.
struct TrainingReference {
  Model m;
  Inputs in;
  std::vector<float> ref, ref_full;
  explicit TrainingReference(const Config& cfg) : m(cfg), in(make_inputs(cfg)) {
    randomise(m, 21);
    ref = run(m, in, true);
    ref_full = run(m, in, true, false);
  }
};

class InferencePath : public ::testing::TestWithParam<test::NamedConfig> {};

// Keys and values rounded once for every row block (bf16 in the plan where every row block's
// products run in bf16: heads of 64, blocks of 32 rows or more) give the bits that rounding
// them in every row block gives (set_keys_rounded_once(false): the plan keeps them f32): exact
// streaming and Linformer attention, in bf16 and in int8 (whose attention takes bf16 operands
// where bf16 products are the faster), batches whose last row block is long or short (4 rows:
// its products in f32, so the layer's keys stay f32).
TEST(InferenceKeys, RoundedOnceGiveTheSameBits) {
  std::vector<ComputeType> types;
  if (compute_type_supported(ComputeType::bf16)) types.push_back(ComputeType::bf16);
  if (int8_supported()) types.push_back(ComputeType::int8);
  if (types.empty()) GTEST_SKIP() << "no bf16 or int8 products here";
  test::ThreadGuard tg(2);
  for (AttentionKind kind : {AttentionKind::standard, AttentionKind::linformer}) {
    Config cfg = test::tiny_config();
    cfg.attention = kind;
    cfg.max_len = 1024, cfg.d_model = 128, cfg.n_heads = 2, cfg.d_ff = 128, cfg.k = {256};
    Model m(cfg);
    randomise(m, 23);
    m.set_exact_attention(Model::ExactAttention::streaming);
    for (ComputeType t : types) {
      m.set_compute_type(t);
      for (int64_t N : {420, 260, 1024}) {
        Inputs in = make_inputs(cfg, N);
        in.B = 2;
        set_keys_rounded_once(false);
        const std::vector<float> per_block = run(m, in, false);
        set_keys_rounded_once(true);
        const std::vector<float> once = run(m, in, false);
        EXPECT_EQ(per_block, once) << to_string(kind) << " " << compute_type_name(t) << " N " << N;
      }
    }
  }
}

TEST_P(InferencePath, MatchesTrainingForward) {
  TrainingReference t(GetParam().cfg);
  Model& m = t.m;
  const Inputs& in = t.in;
  const std::vector<float>&ref = t.ref, &ref_full = t.ref_full;
  const std::vector<float> got = run(m, in, false);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_LT(test::rel_error(got.data(), ref.data(), ref.size()), 1e-5);
  // Unpadded batch too (the projections take another branch without a mask).
  const std::vector<float> got_full = run(m, in, false, false);
  EXPECT_LT(test::rel_error(got_full.data(), ref_full.data(), ref_full.size()), 1e-5);
  if (m.config().attention == AttentionKind::standard) {
    // Every way, whichever is the default.
    for (auto how : {Model::ExactAttention::tiled, Model::ExactAttention::streaming,
                     Model::ExactAttention::materialized}) {
      const char* name = how == Model::ExactAttention::streaming ? "streaming"
                         : how == Model::ExactAttention::tiled   ? "tiled"
                                                                 : "materialized";
      m.set_exact_attention(how);
      EXPECT_EQ(m.exact_attention(), how);
      const std::vector<float> st = run(m, in, false);
      EXPECT_LT(test::rel_error(st.data(), ref.data(), ref.size()), 1e-5) << name;
      const std::vector<float> st_full = run(m, in, false, false);
      EXPECT_LT(test::rel_error(st_full.data(), ref_full.data(), ref_full.size()), 1e-5)
          << name << ", no mask";
      // Training ignores the option.
      const std::vector<float> tr = run(m, in, true);
      EXPECT_EQ(tr, ref) << name;
    }
  }
}

// bf16 inference (packed bf16 linear maps) stays within bf16 rounding of the f32 training
// forward, in every attention path and exact-attention mode, padded or not.
TEST_P(InferencePath, Bf16CloseToF32) {
  LF_REQUIRE_BF16();
  LF_REQUIRE_KIND_RUNS(GetParam().cfg, ComputeType::bf16);
  TrainingReference t(GetParam().cfg);
  Model& m = t.m;
  const Inputs& in = t.in;
  const std::vector<float>&ref = t.ref, &ref_full = t.ref_full;
  m.set_compute_type(ComputeType::bf16);
  std::vector<Model::ExactAttention> modes = {Model::ExactAttention::tiled};
  if (m.config().attention == AttentionKind::standard)
    modes = {Model::ExactAttention::tiled, Model::ExactAttention::streaming,
             Model::ExactAttention::materialized};
  for (auto how : modes) {
    m.set_exact_attention(how);
    const std::vector<float> got = run(m, in, false);
    const double rel = test::rel_error(got.data(), ref.data(), ref.size());
    // bf16 keeps 8 significant bits (relative rounding 2^-9 ~ 2e-3 per input).
    EXPECT_LT(rel, 2e-2) << "exact=" << static_cast<int>(how);
    EXPECT_GT(rel, 1e-5) << "bf16 products were not used";
    const std::vector<float> got_full = run(m, in, false, false);
    EXPECT_LT(test::rel_error(got_full.data(), ref_full.data(), ref_full.size()), 2e-2)
        << "no mask, exact=" << static_cast<int>(how);
  }
}

// Every activation block of every plan (training and each inference variant, f32 and bf16) is
// big enough: with guard words on, a kernel writing past its block makes forward(),
// mlm_loss() or backward() throw. The sizes forward_bytes() predicts are what is allocated, and
// the packed weights take what packed_weight_bytes() predicts before packing.
TEST_P(InferencePath, ActivationBlocksHoldTheirWrites) {
  const test::NamedConfig& c = GetParam();
  const test::GuardWords guards;
  for (bool train : {false, true})
    for (auto how : {Model::ExactAttention::tiled, Model::ExactAttention::streaming,
                     Model::ExactAttention::materialized})
      for (ComputeType ct : test::compute_types()) {
        if (!attention_path(c.cfg).runs_precision(ct, false)) continue;  // refused
        SCOPED_TRACE(std::string(train ? "train" : "inference") + " exact=" +
                     std::to_string(static_cast<int>(how)) + " " + compute_type_name(ct));
        Model m(c.cfg);
        m.set_exact_attention(how);
        m.set_compute_type(ct);
        randomise(m, 5);
        const Inputs in = make_inputs(c.cfg, 200);
        const size_t predicted = m.forward_bytes(in.B, in.N, train, true);
        const size_t packed_predicted = m.packed_weight_bytes();
        ASSERT_NO_THROW(run(m, in, train));
        if (train) {
          std::vector<int32_t> labels(in.B * in.N, -100);
          for (size_t i = 0; i < labels.size(); i += 3)
            if (in.mask[i] != 0.f) labels[i] = in.ids[i];
          int64_t n = 0;
          ASSERT_NO_THROW(m.mlm_loss(labels.data(), true, 1.f, &n));
          ASSERT_NO_THROW(m.backward());
        }
        EXPECT_GE(m.activation_bytes(), predicted);
        EXPECT_EQ(m.packed_weight_bytes(), packed_predicted);
      }
}

INSTANTIATE_TEST_SUITE_P(AllAttention, InferencePath,
                         ::testing::ValuesIn(test::attention_matrix(long_config(), {64, 16})),
                         [](const auto& info) { return info.param.name; });

TEST(InferenceMemory, LinformerIsLinearAndSmallerThanStandard) {
  Config c = long_config();
  Model lin(c);
  c.attention = AttentionKind::standard;
  Model std_(c);
  std_.set_exact_attention(Model::ExactAttention::tiled);
  Model str(c);
  str.set_exact_attention(Model::ExactAttention::streaming);
  Model mat(c);
  mat.set_exact_attention(Model::ExactAttention::materialized);
  // Linformer and streaming grow linearly in N; tiled standard has an N x N tile per thread,
  // materialized standard H N x N matrices per sequence.
  const size_t l1 = lin.forward_bytes(4, 320, false), l2 = lin.forward_bytes(4, 640, false);
  EXPECT_LE(l2, 2 * l1 + 4096);
  const size_t s1 = str.forward_bytes(4, 320, false), s2 = str.forward_bytes(4, 640, false);
  EXPECT_LE(s2, 2 * s1 + 4096);
  EXPECT_LT(l2, s2);
  EXPECT_LT(s2, std_.forward_bytes(4, 640, false));
  const int64_t H = c.n_heads;
  EXPECT_GE(mat.forward_bytes(4, 640, false), size_t(4 * H * 640 * 640) * sizeof(float));
  EXPECT_GT(mat.forward_bytes(4, 640, false), std_.forward_bytes(4, 640, false));
  // Inference never needs the gradient buffer.
  const size_t before = lin.param_bytes();
  const Inputs in = make_inputs(lin.config(), 64);
  run(lin, in, false);
  EXPECT_EQ(lin.param_bytes(), before);
  run(lin, in, true);
  EXPECT_GT(lin.param_bytes(), before);
}

}  // namespace
}  // namespace lf
