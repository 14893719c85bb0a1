// Properties the model must have whatever its weights: padding does not change real
// positions, a shorter max_len with sliced E is the same function, empty projected rows are
// masked, and the thread count does not change results.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/config.h"
#include "linformer/error.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

using test::NamedConfig;

// Random, non-trivial weights: every tensor (LayerNorm and biases too) gets noise.
using test::randomise;

std::vector<float> grads_of(Model& m) {
  const ParamInfo& last = m.params().back();
  return std::vector<float>(m.grad_data(), m.grad_data() + last.offset + last.numel);
}

// Relative error per tensor, with the denominator floored at 1% of the RMS tensor-gradient
// norm: some gradients are zero in exact arithmetic (the key bias of standard attention,
// unused position rows), and their rounding noise is not a relative quantity.
void expect_same_grads(const Model& m, const std::vector<float>& got,
                       const std::vector<float>& want, double tol, const std::string& what) {
  double sum_sq = 0;
  for (const ParamInfo& p : m.params())
    for (size_t i = 0; i < p.numel; ++i) sum_sq += double(want[p.offset + i]) * want[p.offset + i];
  ASSERT_GT(sum_sq, 0) << what << ": all gradients are zero";
  const double floor = 0.01 * std::sqrt(sum_sq / m.params().size());
  for (const ParamInfo& p : m.params()) {
    double num = 0, den = 0;
    for (size_t i = 0; i < p.numel; ++i) {
      const double d = double(got[p.offset + i]) - want[p.offset + i];
      num += d * d;
      den += double(want[p.offset + i]) * want[p.offset + i];
    }
    EXPECT_LE(std::sqrt(num) / std::max(std::sqrt(den), floor), tol) << what << ": grad." << p.name;
  }
}

// ---------------------------------------------------------------------------------------------
// Padding invariance

// One sequence `seq` placed at row `slot` of a [B, N] batch; the other rows hold unrelated
// sequences of the given lengths. Padding positions get `pad` ids (or random ids when
// pad < 0: whatever sits in a padded position must not matter).
struct Placed {
  int64_t B, N, slot;
  std::vector<int32_t> ids, labels;
  std::vector<float> mask;
};

Placed place(const std::vector<int32_t>& seq, const std::vector<int32_t>& seq_labels, int64_t B,
             int64_t N, int64_t slot, const std::vector<int64_t>& other_lens, int32_t pad,
             const Config& cfg, uint64_t seed) {
  Placed p{B,
           N,
           slot,
           std::vector<int32_t>(B * N),
           std::vector<int32_t>(B * N, -100),
           std::vector<float>(B * N, 0.f)};
  size_t other = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = b == slot ? static_cast<int64_t>(seq.size()) : other_lens.at(other++);
    for (int64_t t = 0; t < N; ++t) {
      const int64_t i = b * N + t;
      const int32_t rnd = static_cast<int32_t>(rng_bits(seed, b, t) % cfg.vocab_size);
      if (t < len) {
        p.mask[i] = 1.f;
        p.ids[i] = b == slot ? seq[t] : rnd;
        if (b == slot) p.labels[i] = seq_labels[t];
      } else {
        p.ids[i] = pad >= 0 ? pad : rnd;
      }
    }
  }
  return p;
}

class PaddingInvariance : public ::testing::TestWithParam<NamedConfig> {};

// Sequence lengths 7 and 1 (a lone <s>), each alone and in several padded placements.
void padding_invariance(const Config& cfg, int64_t L) {
  Model m(cfg);
  randomise(m, 23);
  const int64_t D = cfg.d_model;
  std::vector<int32_t> seq(L), lab(L, -100);
  int64_t n_labels = 0;
  for (int64_t t = 0; t < L; ++t) {
    seq[t] = t == 0 ? static_cast<int32_t>(cfg.cls_id)
                    : static_cast<int32_t>(rng_bits(3, 0, t) % cfg.vocab_size);
    if (t % 2 == 1 || L == 1) {
      lab[t] = static_cast<int32_t>(rng_bits(3, 1, t) % cfg.vocab_size);
      ++n_labels;
    }
  }

  // Hidden states of `seq` (eval and train mode) and the parameter gradients of the MLM loss
  // on its labelled positions, for one placement.
  struct Result {
    std::vector<float> hid_eval, hid_train, grads;
    double loss = 0;
  };
  auto run = [&](const Placed& p, bool with_mask) {
    Result r;
    const Batch batch{p.ids.data(), with_mask ? p.mask.data() : nullptr, p.B, p.N};
    m.forward(batch, false);
    r.hid_eval.assign(m.hidden() + p.slot * p.N * D, m.hidden() + (p.slot * p.N + L) * D);
    m.zero_grad();
    m.forward(batch, true, 0);
    r.hid_train.assign(m.hidden() + p.slot * p.N * D, m.hidden() + (p.slot * p.N + L) * D);
    int64_t count = 0;
    r.loss = m.mlm_loss(p.labels.data(), true, 1.f, &count);
    EXPECT_EQ(count, n_labels);
    m.backward();
    r.grads = grads_of(m);
    return r;
  };

  const Result alone = run(place(seq, lab, 1, L, 0, {}, 0, cfg, 1), false);
  // Evaluation and training paths (dropout 0) compute the same function.
  EXPECT_LE(test::rel_error(alone.hid_train.data(), alone.hid_eval.data(), L * D), 1e-6);

  const Placed placements[] = {
      place(seq, lab, 3, 12, 1, {12, 10}, static_cast<int32_t>(cfg.pad_id), cfg, 2),
      place(seq, lab, 2, cfg.max_len, 0, {cfg.max_len}, -1, cfg, 3),  // random ids in padding
      place(seq, lab, 1, 9, 0, {}, static_cast<int32_t>(cfg.pad_id), cfg, 4),
      place(seq, lab, 2, 8, 1, {3}, -1, cfg, 5),       // the other sequence is the padded one
      place(seq, lab, 3, 10, 2, {0, 10}, -1, cfg, 6),  // a row with no real token at all
  };
  for (const Placed& p : placements) {
    SCOPED_TRACE("B=" + std::to_string(p.B) + " N=" + std::to_string(p.N) +
                 " slot=" + std::to_string(p.slot));
    const Result r = run(p, true);
    // Summation orders inside GEMMs change with the shapes, so results agree to rounding
    // (measured ~1e-7), not bitwise; 1e-5 is the bound the engine promises.
    EXPECT_LE(test::rel_error(r.hid_eval.data(), alone.hid_eval.data(), L * D), 1e-5) << "eval";
    EXPECT_LE(test::rel_error(r.hid_train.data(), alone.hid_eval.data(), L * D), 1e-5) << "train";
    EXPECT_NEAR(r.loss, alone.loss, 1e-5 * alone.loss);
    // Nystromformer's pseudo-inverse (6 iterations of products of A) amplifies the rounding
    // of the other products into the gradients of Q and K: measured 2e-5.
    const double grad_tol = cfg.attention == AttentionKind::nystrom ? 1e-4 : 1e-5;
    expect_same_grads(m, r.grads, alone.grads, grad_tol, "padded");
  }
}

TEST_P(PaddingInvariance, RealPositionsUnchanged) { padding_invariance(GetParam().cfg, 7); }
TEST_P(PaddingInvariance, SingleTokenSequence) { padding_invariance(GetParam().cfg, 1); }

INSTANTIATE_TEST_SUITE_P(Padding, PaddingInvariance,
                         ::testing::ValuesIn(test::attention_matrix(test::tiny_config())),
                         [](const auto& info) { return info.param.name; });

// A mask of all ones is the same as no mask.
TEST(PaddingMask, AllOnesMaskEqualsNoMask) {
  for (const NamedConfig& nc : test::attention_matrix(test::tiny_config())) {
    SCOPED_TRACE(nc.name);
    Model m(nc.cfg);
    randomise(m, 5);
    const int64_t B = 2, N = 11, D = nc.cfg.d_model;
    std::vector<int32_t> ids(B * N);
    for (int64_t i = 0; i < B * N; ++i)
      ids[i] = static_cast<int32_t>(rng_bits(8, 0, i) % nc.cfg.vocab_size);
    std::vector<float> ones(B * N, 1.f);
    m.forward(Batch{ids.data(), nullptr, B, N}, false);
    std::vector<float> h(m.hidden(), m.hidden() + B * N * D);
    m.forward(Batch{ids.data(), ones.data(), B, N}, false);
    EXPECT_LE(test::rel_error(m.hidden(), h.data(), h.size()), 1e-6);
  }
}

// ---------------------------------------------------------------------------------------------
// E slicing: a sequence of length N < max_len sees the first N columns of E (and the first
// N positions), so a model with max_len = N and those slices is the same function.

// Copies the leading sub-block of a tensor: dst shape <= src shape in every dimension.
void copy_leading_block(float* dst, const std::vector<int64_t>& dshape, const float* src,
                        const std::vector<int64_t>& sshape) {
  ASSERT_EQ(dshape.size(), sshape.size());
  size_t n = 1;
  for (size_t d = 0; d < dshape.size(); ++d) {
    ASSERT_LE(dshape[d], sshape[d]);
    n *= static_cast<size_t>(dshape[d]);
  }
  std::vector<int64_t> idx(dshape.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t so = 0;
    for (size_t d = 0; d < dshape.size(); ++d) so = so * sshape[d] + idx[d];
    dst[i] = src[so];
    for (int64_t d = static_cast<int64_t>(dshape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dshape[d]) break;
      idx[d] = 0;
    }
  }
}

TEST(Slicing, LinearProjectionUsesFirstNColumns) {
  for (Sharing s : {Sharing::none, Sharing::headwise, Sharing::kv, Sharing::layerwise}) {
    SCOPED_TRACE(to_string(s));
    Config big = test::tiny_config();  // max_len 16, k 4
    big.sharing = s;
    big.projection = Projection::linear;
    // With empty rows masked the two models differ: their windows of max_len / k positions
    // differ, and so do the rows a short sequence leaves empty.
    big.mask_empty_rows = false;
    const int64_t N = 12, B = 2, D = big.d_model;
    Config small = big;
    small.max_len = N;
    Model mb(big), ms(small);
    randomise(mb, 31);
    randomise(ms, 999);  // overwritten below: every tensor is copied by name
    int sliced = 0;
    for (const ParamInfo& p : ms.params()) {
      const ParamInfo* q = mb.find(p.name);
      ASSERT_NE(q, nullptr) << p.name;
      if (q->shape != p.shape) ++sliced;
      copy_leading_block(ms.param_data() + p.offset, p.shape, mb.param_data() + q->offset,
                         q->shape);
    }
    EXPECT_GE(sliced, 2) << "position table and at least one E should differ in shape";

    // A full-length sequence and a padded one.
    std::vector<int32_t> ids(B * N), labels(B * N, -100), cls = {1, 2};
    std::vector<float> mask(B * N, 1.f);
    for (int64_t i = 0; i < B * N; ++i) {
      ids[i] = static_cast<int32_t>(rng_bits(9, 0, i) % big.vocab_size);
      if (i % 4 == 2) labels[i] = static_cast<int32_t>(rng_bits(9, 1, i) % big.vocab_size);
    }
    for (int64_t t = 8; t < N; ++t) mask[N + t] = 0.f, labels[N + t] = -100;
    const Batch batch{ids.data(), mask.data(), B, N};
    auto run = [&](Model& m) {
      m.zero_grad();
      m.forward(batch, true, 0);
      int64_t count = 0;
      double l = m.mlm_loss(labels.data(), true, 1.f, &count) / count;
      l += m.cls_loss(cls.data(), true, 1.f) / B;
      m.backward();
      return l;
    };
    const double lb = run(mb);
    std::vector<float> hb(mb.hidden(), mb.hidden() + B * N * D);
    const double ls = run(ms);
    std::vector<float> hs(ms.hidden(), ms.hidden() + B * N * D);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t real = b == 0 ? N : 8;
      EXPECT_LE(test::rel_error(hs.data() + b * N * D, hb.data() + b * N * D, real * D), 1e-5)
          << "sequence " << b;
    }
    EXPECT_NEAR(ls, lb, 1e-5 * lb);
    // Gradients: the small model's are the leading blocks of the big model's, and the big
    // model's gradient is zero outside them (columns of E and position rows never used).
    for (const ParamInfo& p : ms.params()) {
      const ParamInfo* q = mb.find(p.name);
      std::vector<float> block(p.numel);
      copy_leading_block(block.data(), p.shape, mb.grad_data() + q->offset, q->shape);
      const float* g = ms.grad_data() + p.offset;
      double n2 = 0, d2 = 0;
      for (size_t i = 0; i < p.numel; ++i)
        n2 += double(g[i] - block[i]) * (g[i] - block[i]), d2 += double(block[i]) * block[i];
      EXPECT_LE(std::sqrt(n2), 1e-5 * std::sqrt(d2) + 1e-9) << "grad." << p.name;
      if (q->shape != p.shape) {
        double full = 0;
        for (size_t i = 0; i < q->numel; ++i)
          full += double(mb.grad_data()[q->offset + i]) * mb.grad_data()[q->offset + i];
        EXPECT_NEAR(full, d2, 1e-6 * full) << "grad." << p.name << " outside the first N";
      }
    }
  }
}

// With k = max_len, mean pooling is the identity: each projected row is one position. With
// empty rows masked, such a Linformer must then be standard attention with padding masked,
// on a sequence shorter than max_len and on a padded one, in training and inference. With
// empty rows kept, the rows past the end take part in the softmax as zero keys, and it is not.
TEST(EmptyRows, IdentityPoolingIsStandardAttention) {
  Config lin = test::tiny_config();  // max_len 16
  lin.projection = Projection::mean_pool;
  lin.k = {lin.max_len};
  Config std_cfg = lin;
  std_cfg.attention = AttentionKind::standard;
  Model ms(std_cfg);
  randomise(ms, 41);
  const int64_t B = 2, N = 12, D = lin.d_model;
  std::vector<int32_t> ids(B * N);
  std::vector<float> mask(B * N, 1.f);
  for (int64_t i = 0; i < B * N; ++i)
    ids[i] = static_cast<int32_t>(rng_bits(13, 0, i) % lin.vocab_size);
  for (int64_t t = 7; t < N; ++t) mask[N + t] = 0.f;  // sequence 1 has 7 real tokens
  const Batch batch{ids.data(), mask.data(), B, N};
  auto real_rows = [&](const Model& m) {
    std::vector<float> h;
    for (int64_t r = 0; r < B * N; ++r)
      if (mask[r] != 0.f) h.insert(h.end(), m.hidden() + r * D, m.hidden() + (r + 1) * D);
    return h;
  };
  ms.forward(batch, true, 0);
  const std::vector<float> want = real_rows(ms);
  for (bool masked : {true, false}) {
    SCOPED_TRACE(masked ? "empty rows masked" : "empty rows kept");
    lin.mask_empty_rows = masked;
    Model ml(lin);
    ASSERT_EQ(ml.params().size(), ms.params().size());  // mean pooling has no parameters
    std::memcpy(ml.param_data(), ms.param_data(),
                (ms.params().back().offset + ms.params().back().numel) * sizeof(float));
    for (bool train : {true, false}) {
      ml.forward(batch, train, 0);
      const double err = test::rel_error(real_rows(ml).data(), want.data(), want.size());
      if (masked)
        EXPECT_LT(err, 1e-5) << (train ? "training" : "inference");
      else
        EXPECT_GT(err, 1e-3) << (train ? "training" : "inference");
    }
  }
}

// A short batch forms only the rows that can hold a real token; the probabilities have that
// many columns, each row summing to 1 over the live ones.
TEST(EmptyRows, ShortBatchFormsFewerRows) {
  Config c = test::tiny_config();  // max_len 16, k 4: windows of 4 positions
  const int64_t B = 2, N = 9, H = c.n_heads;
  std::vector<int32_t> ids(B * N, 5);
  std::vector<float> mask(B * N, 1.f);
  for (int64_t t = 3; t < N; ++t) mask[N + t] = 0.f;  // sequence 1: 3 real tokens, window 0
  for (bool masked : {true, false}) {
    c.mask_empty_rows = masked;
    Model m(c);
    randomise(m, 3);
    m.forward(Batch{ids.data(), mask.data(), B, N}, true, 0);
    const int64_t Lk = m.attention_keys(0);
    EXPECT_EQ(Lk, masked ? 3 : 4);  // ceil(9 * 4 / 16) = 3 windows start before position 9
    const float* P = m.attention_probs(0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < N * H; ++i) {
        const float* row = P + (b * H * N + i) * Lk;
        double sum = 0;
        for (int64_t j = 0; j < Lk; ++j) sum += row[j];
        EXPECT_NEAR(sum, 1.0, 1e-5);
        // Sequence 1's windows 1 and 2 hold only padding: no weight when masked.
        if (masked && b == 1) {
          EXPECT_EQ(row[1] + row[2], 0.f);
        }
      }
  }
  c.attention = AttentionKind::standard;
  Model s(c);
  s.forward(Batch{ids.data(), mask.data(), B, N}, true, 0);
  EXPECT_EQ(s.attention_keys(1), N);
}

TEST(EmptyRows, ConfigKey) {
  Config c = test::tiny_config();
  EXPECT_TRUE(c.mask_empty_rows);  // the default (docs/model.md)
  c.mask_empty_rows = false;
  EXPECT_FALSE(Config::from_json(c.to_json()).mask_empty_rows);
  // A config written before the key existed reads as true; a standard config has no key.
  nlohmann::json j = nlohmann::json::parse(c.to_json());
  j.erase("mask_empty_rows");
  EXPECT_TRUE(Config::from_json(j.dump()).mask_empty_rows);
  c.attention = AttentionKind::standard;
  EXPECT_EQ(c.to_json().find("mask_empty_rows"), std::string::npos);
  test::expect_error([] { Config::from_json(R"({"mask_empty_rows": "no"})"); },
                     {"mask_empty_rows", "true or false"});
}

// The mean-pooling head in inference: a sequence's class logits do not depend on the padding
// around it, and they differ from the first-token head's.
TEST(ClassifierHead, MeanPoolingIgnoresPadding) {
  for (AttentionKind kind : {AttentionKind::standard, AttentionKind::linformer}) {
    SCOPED_TRACE(to_string(kind));
    Config c = test::tiny_config();
    c.attention = kind;
    c.classifier_pooling = ClassifierPooling::mean;
    Model m(c);
    test::randomise(m, 5);
    const int64_t C = c.num_classes, lens[3] = {5, 12, 9}, N = 12, B = 3;
    std::vector<int32_t> ids(B * N, static_cast<int32_t>(c.pad_id));
    std::vector<float> mask(B * N, 0.f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < lens[b]; ++t) {
        ids[b * N + t] = static_cast<int32_t>(rng_bits(9, b, t) % c.vocab_size);
        mask[b * N + t] = 1.f;
      }
    std::vector<float> batched(B * C), alone(C);
    m.forward(Batch{ids.data(), mask.data(), B, N}, false);
    m.cls_logits(batched.data());
    for (int64_t b = 0; b < B; ++b) {
      m.forward(Batch{ids.data() + b * N, nullptr, 1, lens[b]}, false);
      m.cls_logits(alone.data());
      EXPECT_LE(test::rel_error(batched.data() + b * C, alone.data(), C), 1e-5) << "sequence " << b;
    }
    Config f = c;
    f.classifier_pooling = ClassifierPooling::first;
    Model first(f);
    std::copy(m.param_data(), m.param_data() + m.num_params(), first.param_data());
    std::vector<float> fl(B * C);
    first.forward(Batch{ids.data(), mask.data(), B, N}, false);
    first.cls_logits(fl.data());
    EXPECT_GT(test::rel_error(fl.data(), batched.data(), B * C), 1e-3);
  }
}

// ---------------------------------------------------------------------------------------------
// Thread-count independence

using test::ThreadGuard;

TEST(Threads, OneVsTwoThreadsSameLossAndGradients) {
  ThreadGuard guard;
  // Big enough that every parallel_for splits (rows x D >= 2 * 16384 elements) and the
  // per-(batch, head) attention loop runs on both threads; dropout on, padded batch.
  const Config base = Config::from_json(R"({"vocab_size": 97, "max_len": 64, "d_model": 64,
      "n_heads": 4, "d_ff": 96, "n_layers": 2, "k": 16, "dropout": 0.1, "attention_dropout": 0.1,
      "num_classes": 3, "position_offset": 2})");
  std::vector<NamedConfig> cases;
  for (const NamedConfig& nc : test::attention_matrix(base))
    if (nc.name == "standard" || nc.name == "standard_causal" || nc.name == "none_linear" ||
        nc.name == "headwise_conv" || nc.name == "kv_mean_pool" ||
        nc.name == "layerwise_max_pool" || nc.name == "layerwise_linear")
      cases.push_back(nc);
  ASSERT_EQ(cases.size(), 7u);
  const int64_t B = 8, N = 64, D = base.d_model;
  std::vector<int32_t> ids(B * N), labels(B * N, -100), cls(B);
  std::vector<float> mask(B * N, 1.f);
  for (int64_t b = 0; b < B; ++b) {
    cls[b] = static_cast<int32_t>(b % base.num_classes);
    const int64_t len = N - 7 * b;
    for (int64_t t = 0; t < N; ++t) {
      const int64_t i = b * N + t;
      ids[i] = static_cast<int32_t>(rng_bits(12, 0, i) % base.vocab_size);
      if (t >= len)
        mask[i] = 0.f;
      else if (t % 5 == 3)
        labels[i] = static_cast<int32_t>(rng_bits(12, 1, i) % base.vocab_size);
    }
  }
  for (const NamedConfig& nc : cases) {
    SCOPED_TRACE(nc.name);
    Model m(nc.cfg);
    randomise(m, 41);
    auto run = [&](int threads, std::vector<float>& hid, std::vector<float>& hid_eval) {
      omp_set_num_threads(threads);
      m.forward(Batch{ids.data(), mask.data(), B, N}, false);  // inference path
      hid_eval.assign(m.hidden(), m.hidden() + B * N * D);
      m.zero_grad();
      m.forward(Batch{ids.data(), mask.data(), B, N}, true, 1234);
      hid.assign(m.hidden(), m.hidden() + B * N * D);
      int64_t count = 0;
      double l = m.mlm_loss(labels.data(), true, 1.f, &count) / count;
      l += m.cls_loss(cls.data(), true, 0.5f) / B;
      m.backward();
      return l;
    };
    std::vector<float> h1, h2, e1, e2;
    const double l1 = run(1, h1, e1);
    const std::vector<float> g1 = grads_of(m);
    const double l2 = run(2, h2, e2);
    const std::vector<float> g2 = grads_of(m);
    EXPECT_NEAR(l2, l1, 1e-6 * std::abs(l1));
    EXPECT_LE(test::rel_error(h2.data(), h1.data(), h1.size()), 1e-5);
    EXPECT_LE(test::rel_error(e2.data(), e1.data(), e1.size()), 1e-5) << "inference path";
    expect_same_grads(m, g2, g1, 1e-5, "2 threads vs 1");
  }
}

}  // namespace
}  // namespace lf
