// Batch-invariant inference (Model::set_batch_invariant): with it on, a sequence's hidden
// states, classifier logits and MLM logits are bitwise the same alone (B = 1, padded to N) as
// at any position of a batch of other sequences of other lengths padded to the same N, for
// every attention kind, with one thread and with two. With it off the model computes what it
// always did.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "linformer/config.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

using test::NamedConfig;

// What one sequence of a batch got: hidden states of its N rows [N, D], its classifier
// logits [C] and its MLM logits [N, V].
struct Outputs {
  std::vector<float> hidden, cls, mlm;
};

// Token ids of a sequence of length len: <s>, then ids drawn from (seed, t).
std::vector<int32_t> random_sequence(const Config& cfg, int64_t len, uint64_t seed) {
  std::vector<int32_t> s(len);
  for (int64_t t = 0; t < len; ++t)
    s[t] = t == 0 ? static_cast<int32_t>(cfg.cls_id)
                  : static_cast<int32_t>(rng_bits(seed, 11, t) % cfg.vocab_size);
  return s;
}

// Runs inference on the sequences padded to N (padding: pad_id, mask 0) and returns the
// outputs of sequence `slot`. Without `with_mask` no mask is passed (every sequence must then
// have length N).
Outputs run(Model& m, const std::vector<std::vector<int32_t>>& seqs, int64_t N, size_t slot,
            bool with_mask = true) {
  const Config& cfg = m.config();
  const int64_t B = static_cast<int64_t>(seqs.size()), D = cfg.d_model, V = cfg.vocab_size;
  std::vector<int32_t> ids(B * N, static_cast<int32_t>(cfg.pad_id));
  std::vector<float> mask(B * N, 0.f);
  for (int64_t b = 0; b < B; ++b)
    for (size_t t = 0; t < seqs[b].size(); ++t) {
      ids[b * N + t] = seqs[b][t];
      mask[b * N + t] = 1.f;
    }
  m.forward(Batch{ids.data(), with_mask ? mask.data() : nullptr, B, N}, false);
  Outputs o;
  const float* h = m.hidden() + slot * N * D;
  o.hidden.assign(h, h + N * D);
  std::vector<float> cls(B * cfg.num_classes);
  m.cls_logits(cls.data());
  o.cls.assign(cls.begin() + slot * cfg.num_classes, cls.begin() + (slot + 1) * cfg.num_classes);
  std::vector<float> mlm(B * N * V);
  m.mlm_logits(mlm.data());  // every row of the batch: the sequence's rows sit among them
  o.mlm.assign(mlm.begin() + slot * N * V, mlm.begin() + (slot + 1) * N * V);
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The largest difference between two outputs, for the failure message.
float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0.f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

void expect_same(const Outputs& got, const Outputs& want, const std::string& what) {
  EXPECT_TRUE(same_bits(got.hidden, want.hidden))
      << what << ": hidden states differ (max " << max_diff(got.hidden, want.hidden) << ")";
  EXPECT_TRUE(same_bits(got.cls, want.cls))
      << what << ": classifier logits differ (max " << max_diff(got.cls, want.cls) << ")";
  EXPECT_TRUE(same_bits(got.mlm, want.mlm))
      << what << ": MLM logits differ (max " << max_diff(got.mlm, want.mlm) << ")";
}

// The sequence `seq` alone, then at each position in `slots` of batches of B = 2..max_b whose
// other sequences have random lengths in [1, N]: bitwise the same outputs. Alone it runs
// once with the padding mask and, when it fills N, once without any mask.
void check_invariance(Model& m, const std::vector<int32_t>& seq, int64_t N, int64_t max_b,
                      bool all_positions, const std::string& what) {
  const Config& cfg = m.config();
  const Outputs alone = run(m, {seq}, N, 0);
  if (static_cast<int64_t>(seq.size()) == N)
    expect_same(run(m, {seq}, N, 0, /*with_mask=*/false), alone, what + ", alone without a mask");
  for (int64_t B = 2; B <= max_b; ++B) {
    std::vector<int64_t> slots;
    for (int64_t p = 0; p < B; ++p)
      if (all_positions || p == 0 || p == B - 1 || p == B / 2) slots.push_back(p);
    for (int64_t slot : slots) {
      std::vector<std::vector<int32_t>> seqs;
      for (int64_t b = 0; b < B; ++b) {
        const uint64_t s = 1000 * B + 10 * slot + b;
        seqs.push_back(
            b == slot ? seq
                      : random_sequence(cfg, 1 + static_cast<int64_t>(rng_bits(s, 5, 0) % N), s));
      }
      expect_same(run(m, seqs, N, static_cast<size_t>(slot)), alone,
                  what + ", B=" + std::to_string(B) + " at " + std::to_string(slot));
      if (::testing::Test::HasFailure()) return;  // one failing placement tells enough
    }
  }
}

class BatchInvariance : public ::testing::TestWithParam<NamedConfig> {};

// Every attention kind on the tiny shape: a sequence filling N and a shorter one, at
// N = max_len and at a shorter N (Linformer then forms fewer projected rows), with one and
// two threads.
TEST_P(BatchInvariance, SameBitsAloneAndInAnyBatch) {
  const Config& cfg = GetParam().cfg;
  Model m(cfg);
  test::randomise(m, 5);
  m.set_batch_invariant(true);
  std::vector<Model::ExactAttention> exact{Model::ExactAttention::tiled};
  if (!cfg.is_linformer())
    exact = {Model::ExactAttention::tiled, Model::ExactAttention::streaming,
             Model::ExactAttention::materialized};
  for (int threads : {1, 2}) {
    test::ThreadGuard tg(threads);
    for (Model::ExactAttention how : exact) {
      m.set_exact_attention(how);
      for (int64_t N : {cfg.max_len, cfg.max_len - 3})
        for (int64_t len : {N, N - 5}) {
          const std::string what = GetParam().name + ", " + std::to_string(threads) +
                                   " threads, exact " + std::to_string(static_cast<int>(how)) +
                                   ", N=" + std::to_string(N) + ", len " + std::to_string(len);
          check_invariance(m, random_sequence(cfg, len, 77 + len), N, 7, true, what);
          if (HasFailure()) return;
        }
    }
  }
}

// The same in int8 (--precision int8): per-token scales and exact integer sums keep every
// sequence's result independent of its batch (tiled exact attention, N = max_len, two
// threads).
TEST_P(BatchInvariance, SameBitsInInt8) {
  LF_REQUIRE_INT8();
  LF_REQUIRE_KIND_RUNS(GetParam().cfg, ComputeType::int8);
  const Config& cfg = GetParam().cfg;
  Model m(cfg);
  test::randomise(m, 5);
  m.set_batch_invariant(true);
  m.set_compute_type(ComputeType::int8);
  test::ThreadGuard tg(2);
  for (int64_t len : {cfg.max_len, cfg.max_len - 5}) {
    check_invariance(m, random_sequence(cfg, len, 91 + len), cfg.max_len, 5, true,
                     GetParam().name + ", int8, len " + std::to_string(len));
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, BatchInvariance,
                         ::testing::ValuesIn(test::attention_matrix(test::tiny_config())),
                         [](const auto& info) { return info.param.name; });

// A larger shape (d_model 256, 4 heads, a few hundred tokens), where oneDNN picks different
// kernels for different row counts: Linformer and standard attention, mean pooling.
Config larger(AttentionKind kind) {
  Config c = Config::from_json(R"({"vocab_size": 300, "max_len": 512, "d_model": 256,
      "n_heads": 4, "d_ff": 512, "n_layers": 2, "k": 64, "dropout": 0, "attention_dropout": 0,
      "num_classes": 3, "classifier_pooling": "mean"})");
  c.attention = kind;
  return c;
}

TEST(BatchInvarianceLarger, LinformerAndStandard) {
  for (AttentionKind kind : {AttentionKind::linformer, AttentionKind::standard}) {
    Model m(larger(kind));
    test::randomise(m, 9);
    m.set_batch_invariant(true);
    // Padded lengths whose row tiles are 64 (300), 128 (380) and 256 rows (500), so that tiles
    // of the whole-batch maps start inside sequences (Model::Impl::invariant_rows).
    for (int threads : {1, 2})
      for (int64_t N : {300, 380, 500}) {
        test::ThreadGuard tg(threads);
        const std::string what =
            std::string(kind == AttentionKind::linformer ? "linformer" : "standard") + ", N " +
            std::to_string(N) + ", " + std::to_string(threads) + " threads";
        check_invariance(m, random_sequence(m.config(), N - 29, 3), N, 5, false, what);
        if (HasFailure()) return;
      }
  }
}

// int8 and bf16 at a size where attention's products are large enough to run on bf16 operands
// (on AVX512-BF16 CPUs, Model::Impl::infer_products): both exact paths and Linformer keep a
// sequence's result independent of its batch.
TEST(BatchInvarianceLarger, Int8AndBf16Attention) {
  LF_REQUIRE_INT8();
  std::vector<ComputeType> types{ComputeType::int8};
  if (compute_type_supported(ComputeType::bf16)) types.push_back(ComputeType::bf16);
  test::ThreadGuard tg(2);
  for (AttentionKind kind : {AttentionKind::linformer, AttentionKind::standard}) {
    Model m(larger(kind));
    test::randomise(m, 9);
    m.set_batch_invariant(true);
    for (ComputeType t : types) {
      m.set_compute_type(t);
      for (auto how : {Model::ExactAttention::tiled, Model::ExactAttention::streaming}) {
        if (kind == AttentionKind::linformer && how == Model::ExactAttention::streaming) continue;
        m.set_exact_attention(how);
        const std::string what =
            std::string(kind == AttentionKind::linformer ? "linformer" : "standard") + ", " +
            compute_type_name(t) + ", exact " + std::to_string(static_cast<int>(how));
        check_invariance(m, random_sequence(m.config(), 290, 6), 300, 3, false, what);
        if (HasFailure()) return;
      }
    }
  }
}

// One head: a loop over the batch's (sequence, head) pairs has a single item for one
// sequence, and a short sequence is a single row block; their products must still run as in
// a batch (oneDNN's sgemm splits the reduction among threads for some shapes, e.g. a few
// rows with a long reduction, only outside a parallel region). Linformer with per-head E, a
// few projected rows of 64 columns reduced over 1024 positions; standard streaming attention
// on one 64-row block.
TEST(BatchInvarianceLarger, OneHead) {
  Config lin = Config::from_json(R"({"vocab_size": 300, "max_len": 1024, "d_model": 64,
      "n_heads": 1, "d_ff": 128, "n_layers": 1, "k": 8, "sharing": "none", "dropout": 0,
      "attention_dropout": 0, "num_classes": 3})");
  Config std_cfg = larger(AttentionKind::standard);
  std_cfg.n_heads = 1;
  std_cfg.n_layers = 1;
  for (const Config& cfg : {lin, std_cfg}) {
    Model m(cfg);
    test::randomise(m, 4);
    m.set_batch_invariant(true);
    m.set_exact_attention(Model::ExactAttention::streaming);
    const int64_t N = cfg.is_linformer() ? 1024 : 64;
    for (int threads : {1, 2}) {
      test::ThreadGuard tg(threads);
      const std::string what = std::string(cfg.is_linformer() ? "linformer" : "standard") + ", " +
                               std::to_string(threads) + " threads";
      check_invariance(m, random_sequence(cfg, N - 1, 8), N, 3, false, what);
      if (HasFailure()) return;
    }
  }
}

// Batch-invariant inference runs the whole-batch maps (B N rows) in tiles that restart at
// each sequence (PackedLinear::apply_tiled with a segment of N rows): a sequence's rows get the
// same bits wherever the sequence sits among others, for the tile sizes the mode uses, the
// encoder's map shapes and every precision. (Some kernels, e.g. oneDNN's AVX2 f32 matmul, give
// a row other bits at another place in its tile: the ctest entries prefixed onednn_avx2. run
// this on that path.)
TEST(BatchInvarianceTiles, SegmentsGetTheSameBitsAnywhereInTheCall) {
  std::vector<ComputeType> types{ComputeType::f32};
  if (compute_type_supported(ComputeType::bf16)) types.push_back(ComputeType::bf16);
  if (compute_type_supported(ComputeType::int8)) types.push_back(ComputeType::int8);
  test::ThreadGuard tg(2);
  const int64_t shapes[][2] = {{256, 256}, {1024, 256}, {256, 1024}};  // out, in
  for (ComputeType t : types)
    for (const auto& sh : shapes) {
      const int64_t N = sh[0], K = sh[1];
      const std::vector<float> W = test::random_vec(N * K, 31), b = test::random_vec(N, 32);
      PackedLinear p;
      p.pack(W.data(), N, K, t);
      for (int64_t tile : {8, 64, 152, 256}) {
        const int64_t seg = 2 * tile + 37, segs = 3;
        const std::vector<float> x = test::random_vec(segs * seg * K, 33);
        std::vector<float> all(segs * seg * N), one(seg * N);
        p.apply_tiled(all.data(), x.data(), segs * seg, b.data(), PackedLinear::Epilogue::gelu,
                      tile, seg);
        for (int64_t s = 0; s < segs; ++s) {
          p.apply_tiled(one.data(), x.data() + s * seg * K, seg, b.data(),
                        PackedLinear::Epilogue::gelu, tile);
          for (int64_t i = 0; i < seg * N; ++i)
            ASSERT_EQ(all[s * seg * N + i], one[i])
                << compute_type_name(t) << ", " << N << "x" << K << ", tile " << tile
                << ", segment " << s << ", row " << i / N;
        }
      }
    }
}

// Off (the default), the model computes what it always did: turning the mode on and off
// again leaves no trace, and batched results still agree with the sequence alone to rounding.
TEST(BatchInvarianceOff, DefaultAndUnchangedAfterToggling) {
  const Config cfg = larger(AttentionKind::linformer);
  Model fresh(cfg), toggled(cfg);
  test::randomise(fresh, 9);
  test::randomise(toggled, 9);
  EXPECT_FALSE(fresh.batch_invariant());
  toggled.set_batch_invariant(true);
  EXPECT_TRUE(toggled.batch_invariant());
  const int64_t N = 200;
  const std::vector<std::vector<int32_t>> batch{
      random_sequence(cfg, 200, 1), random_sequence(cfg, 150, 2), random_sequence(cfg, 37, 3)};
  run(toggled, batch, N, 1);
  toggled.set_batch_invariant(false);
  for (size_t slot = 0; slot < batch.size(); ++slot)
    expect_same(run(toggled, batch, N, slot), run(fresh, batch, N, slot),
                "off after on, sequence " + std::to_string(slot));
  const Outputs alone = run(fresh, {batch[1]}, N, 0), in_batch = run(fresh, batch, N, 1);
  EXPECT_LE(test::rel_error(in_batch.hidden.data(), alone.hidden.data(), alone.hidden.size()),
            1e-5);
}

}  // namespace
}  // namespace lf
