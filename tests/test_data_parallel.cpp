// The model-level pieces of data-parallel training, without MPI: a batch run in
// slices that carry their global position (Batch::first) equals the whole batch run at once,
// dropout included, for every attention kind; the gradient buckets cover the gradient buffer
// exactly once and start during backward; the weight checksum sees a one-ulp change. The
// end-to-end runs under mpirun are tests/mpi/test_distributed.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "dist/comm.h"
#include "dist/grad_reducer.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

// A batch of B sequences of N tokens with some padding and MLM labels on a few real positions.
struct Data {
  int64_t B, N;
  std::vector<int32_t> ids, labels, cls;
  std::vector<float> mask;
};

Data make_data(const Config& cfg, int64_t B, int64_t N, uint64_t seed) {
  Data d{B, N, {}, {}, {}, {}};
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = N - static_cast<int64_t>(rng_bits(seed, b, 99) % 3);  // 0-2 pads
    for (int64_t t = 0; t < N; ++t) {
      const bool real = t < len;
      d.ids.push_back(real ? 5 + static_cast<int32_t>(rng_bits(seed, b, t) % (cfg.vocab_size - 5))
                           : static_cast<int32_t>(cfg.pad_id));
      d.mask.push_back(real ? 1.f : 0.f);
      d.labels.push_back(real && rng_bits(seed + 1, b, t) % 3 == 0 ? d.ids.back() : -100);
    }
    d.cls.push_back(static_cast<int32_t>(rng_bits(seed + 2, b, 0) % cfg.num_classes));
  }
  return d;
}

int64_t grad_floats(const Model& m) {
  const ParamInfo& last = m.params().back();
  return static_cast<int64_t>(last.offset + (last.numel + 15) / 16 * 16);
}

// Forward, MLM loss and classification loss with gradients, backward, on rows [b0, b1) of d
// (first = b0, or `first` when given); the losses are normalised by the whole batch's counts.
double train_slice(Model& m, const Data& d, int64_t b0, int64_t b1, int64_t first,
                   int64_t masked_total, uint64_t seed) {
  const int64_t N = d.N, B = b1 - b0;
  m.forward(Batch{d.ids.data() + b0 * N, d.mask.data() + b0 * N, B, N, first}, true, seed);
  int64_t c = 0;
  double loss =
      m.mlm_loss(d.labels.data() + b0 * N, true, 1.f, &c, masked_total) / masked_total;
  // Classification: weight B / total, the share of the slice (as finetuning does).
  loss += m.cls_loss(d.cls.data() + b0, true, static_cast<float>(B) / d.B) / d.B;
  m.backward();
  return loss;
}

TEST(DataParallel, SlicesWithTheirGlobalPositionEqualTheWholeBatch) {
  Config base = test::tiny_config();
  base.dropout = 0.2f;
  base.attention_dropout = 0.3f;
  for (const test::NamedConfig& nc : test::attention_matrix(base)) {
    SCOPED_TRACE(nc.name);
    Model m(nc.cfg);
    test::randomise(m, 3);
    const Data d = make_data(nc.cfg, 4, 16, 7);
    int64_t masked = 0;
    for (int32_t y : d.labels) masked += y != -100;
    const uint64_t seed = 12345;
    const int64_t G = grad_floats(m);
    // The whole batch at once.
    m.zero_grad();
    const double whole = train_slice(m, d, 0, 4, 0, masked, seed);
    const std::vector<float> g_whole(m.grad_data(), m.grad_data() + G);
    // Three slices (1, 2 and 1 sequences), each at its global position.
    m.zero_grad();
    double sliced = 0;
    for (auto [b0, b1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}, {3, 4}})
      sliced += train_slice(m, d, b0, b1, b0, masked, seed);
    const std::vector<float> g_sliced(m.grad_data(), m.grad_data() + G);
    EXPECT_NEAR(sliced, whole, 1e-6 * std::abs(whole));
    EXPECT_LT(test::rel_error(g_sliced.data(), g_whole.data(), G), 1e-5);
    // Without the offsets the slices draw other dropout masks: the test can tell.
    m.zero_grad();
    for (auto [b0, b1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}, {3, 4}})
      train_slice(m, d, b0, b1, 0, masked, seed);
    const std::vector<float> g_wrong(m.grad_data(), m.grad_data() + G);
    EXPECT_GT(test::rel_error(g_wrong.data(), g_whole.data(), G), 1e-3);
  }
}

// A Comm that records the non-blocking sums it is asked to start, and checks at each start
// whether backward has reached the embeddings yet (the position embeddings' gradient is still
// zero; the word embeddings are tied to the MLM head, which has run before backward).
// The other operations are the single process's identities.
class RecordingComm final : public dist::SingleProcess {
 public:
  explicit RecordingComm(Model& m) : m_(m) {}
  int size() const override { return 2; }
  std::string describe() const override { return "recording"; }
  void start_sum(float* x, int64_t n, const char* what) override {
    const ParamInfo* pos = m_.find("roberta.embeddings.position_embeddings.weight");
    const float* gp = m_.grad_data() + pos->offset;
    bool embeddings_done = false;
    for (size_t i = 0; i < pos->numel; ++i) embeddings_done = embeddings_done || gp[i] != 0.f;
    starts.push_back({x - m_.grad_data(), n, embeddings_done, what});
  }
  void progress() override { ++progress_calls; }
  void wait_all() override { ++waits; }

  struct Start {
    int64_t offset, n;
    bool after_embeddings;
    std::string what;
  };
  std::vector<Start> starts;
  int progress_calls = 0, waits = 0;

 private:
  Model& m_;
};

TEST(DataParallel, GradientBucketsCoverTheBufferOnceAndStartDuringBackward) {
  Config cfg = test::tiny_config();
  cfg.n_layers = 3;
  cfg.sharing = Sharing::layerwise;  // a projection shared by every layer: in the last bucket
  Model m(cfg);
  test::randomise(m, 5);
  const Data d = make_data(cfg, 2, 16, 9);
  int64_t masked = 0;
  for (int32_t y : d.labels) masked += y != -100;
  const int64_t G = grad_floats(m);
  RecordingComm comm(m);
  {
    // One-float buckets: one per segment (heads, layer 2, 1, 0, embeddings).
    dist::GradReducer reducer(m, comm, 1);
    EXPECT_EQ(reducer.bucket_count(), 5);
    m.zero_grad();
    train_slice(m, d, 0, 2, 0, masked, 1);  // not armed: starts nothing
    EXPECT_TRUE(comm.starts.empty());
    m.zero_grad();
    reducer.arm();
    train_slice(m, d, 0, 2, 0, masked, 1);
    ASSERT_EQ(comm.starts.size(), 5u);
    EXPECT_EQ(comm.waits, 0);
    reducer.finish();
    EXPECT_EQ(comm.waits, 1);
    EXPECT_EQ(comm.starts.size(), 5u);  // nothing left to start
    // In ready order each bucket lies just below the previous one; together they are the
    // whole buffer.
    int64_t end = G;
    for (const auto& s : comm.starts) {
      EXPECT_EQ(s.offset + s.n, end) << s.what;
      end = s.offset;
    }
    EXPECT_EQ(end, 0);
    // All but the last started before backward reached the embeddings.
    for (size_t i = 0; i + 1 < comm.starts.size(); ++i)
      EXPECT_FALSE(comm.starts[i].after_embeddings) << comm.starts[i].what;
    EXPECT_TRUE(comm.starts.back().after_embeddings);
    EXPECT_NE(comm.starts.back().what.find("embeddings"), std::string::npos);
    EXPECT_GE(comm.progress_calls, 5);
    // A rank with no data in the last micro-batch starts the same buckets in the same order.
    std::vector<RecordingComm::Start> first = comm.starts;
    comm.starts.clear();
    reducer.arm();
    reducer.finish();
    ASSERT_EQ(comm.starts.size(), first.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(comm.starts[i].offset, first[i].offset);
      EXPECT_EQ(comm.starts[i].n, first[i].n);
    }
  }
  {
    // The default 2 MiB: the tiny model is one bucket, started at the end of backward.
    comm.starts.clear();
    dist::GradReducer reducer(m, comm);
    EXPECT_EQ(reducer.bucket_count(), 1);
    reducer.arm();
    train_slice(m, d, 0, 2, 0, masked, 1);
    reducer.finish();
    ASSERT_EQ(comm.starts.size(), 1u);
    EXPECT_EQ(comm.starts[0].offset, 0);
    EXPECT_EQ(comm.starts[0].n, G);
  }
}

TEST(DataParallel, WeightChecksumSeesOneUlp) {
  Model a(test::tiny_config()), b(test::tiny_config());
  a.init(1);
  b.init(1);
  EXPECT_EQ(dist::weight_checksum(a), dist::weight_checksum(b));
  float* w = b.param_data() + b.params()[3].offset;
  w[0] = std::nextafter(w[0], 1e9f);
  EXPECT_NE(dist::weight_checksum(a), dist::weight_checksum(b));
  // One process: nothing to compare, never an error.
  EXPECT_NO_THROW(dist::check_same_weights(dist::single_process(), b, 0));
}

}  // namespace
}  // namespace lf
