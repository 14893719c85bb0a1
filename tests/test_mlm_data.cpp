// MLM data against hand-computed expectations: packing a token stream into sequences (every
// token once, in order, with a validation tail) and the masking of a sequence (shares,
// specials, labels, determinism, epoch order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "data/mlm_data.h"
#include "linformer/error.h"
#include "linformer/rng.h"
#include "test_util.h"

namespace lf {
namespace {

// ---------------------------------------------------------------------------------------------
// Packing
// ---------------------------------------------------------------------------------------------

// Stream: "documents" of ids >= 5, each followed by </s> (2), as TokenStream::build writes.
std::vector<int32_t> make_stream(int64_t approx, uint64_t seed) {
  std::vector<int32_t> s;
  while (static_cast<int64_t>(s.size()) < approx) {
    const int64_t len = 1 + static_cast<int64_t>(rng_bits(seed, 1, s.size()) % 30);
    for (int64_t i = 0; i < len; ++i)
      s.push_back(5 + static_cast<int32_t>(rng_bits(seed, 2, s.size()) % 1000));
    s.push_back(2);
  }
  return s;
}

// Checks the layout of every sequence and returns the stream tokens they hold, in order.
std::vector<int32_t> unpack(const PackedSequences& ps, int64_t* partial) {
  std::vector<int32_t> got;
  std::vector<int32_t> ids(ps.n);
  std::vector<float> mask(ps.n);
  *partial = 0;
  for (int64_t i = 0; i < ps.count(); ++i) {
    std::fill(ids.begin(), ids.end(), -7);
    std::fill(mask.begin(), mask.end(), -7.f);
    ps.get(i, ids.data(), mask.data());
    int64_t real = 0;
    while (real < ps.n && mask[real] == 1.f) ++real;
    for (int64_t t = real; t < ps.n; ++t) {
      EXPECT_EQ(mask[t], 0.f) << "sequence " << i << " position " << t;
      EXPECT_EQ(ids[t], 1) << "padding of sequence " << i << " at " << t;
    }
    EXPECT_GE(real, 3) << "sequence " << i;
    EXPECT_EQ(ids[0], 0) << "sequence " << i << " must start with <s>";
    EXPECT_EQ(ids[real - 1], 2) << "sequence " << i << " must end its real part with </s>";
    if (real < ps.n) ++*partial;
    got.insert(got.end(), ids.begin() + 1, ids.begin() + real - 1);
  }
  return got;
}

TEST(MlmPacking, EveryTokenOnceInOrderWithValidationTail) {
  const std::vector<int32_t> tokens = make_stream(10007, 5);
  const TokenStream s = TokenStream::from_tokens(tokens);
  const int64_t n = 32, body = n - 2;
  PackedSequences train, valid;
  split_stream(s, n, 0.1, &train, &valid);
  const int64_t total = (s.size() + body - 1) / body;  // sequences the stream fills
  const int64_t nv = static_cast<int64_t>(std::ceil(0.1 * total));
  EXPECT_EQ(valid.count(), nv);
  EXPECT_EQ(train.count(), total - nv);
  int64_t partial_train = 0, partial_valid = 0;
  std::vector<int32_t> got = unpack(train, &partial_train);
  const size_t train_tokens = got.size();
  const std::vector<int32_t> v = unpack(valid, &partial_valid);
  got.insert(got.end(), v.begin(), v.end());
  EXPECT_EQ(got, tokens);  // every token exactly once, in order
  // The validation set is the last share of the stream, train sequences are all full.
  EXPECT_EQ(train_tokens, static_cast<size_t>((total - nv) * body));
  EXPECT_EQ(partial_train, 0);
  EXPECT_EQ(partial_valid, s.size() % body == 0 ? 0 : 1);
  EXPECT_EQ(std::vector<int32_t>(tokens.end() - v.size(), tokens.end()), v);

  // At least one validation sequence, at least one training sequence.
  PackedSequences t2, v2;
  split_stream(s, n, 0.0, &t2, &v2);
  EXPECT_EQ(v2.count(), 1);
  split_stream(s, n, 1.0, &t2, &v2);
  EXPECT_EQ(t2.count(), 1);
  EXPECT_EQ(v2.count(), total - 1);
}

TEST(MlmPacking, ExactMultipleAndTooSmallStreams) {
  const int64_t n = 10, body = n - 2;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4 * body; ++i) tokens.push_back(5 + i);
  const TokenStream s = TokenStream::from_tokens(tokens);
  PackedSequences train, valid;
  split_stream(s, n, 0.25, &train, &valid);
  EXPECT_EQ(train.count(), 3);
  EXPECT_EQ(valid.count(), 1);
  int64_t partial = 0;
  std::vector<int32_t> got = unpack(train, &partial);
  const std::vector<int32_t> v = unpack(valid, &partial);
  EXPECT_EQ(partial, 0);
  got.insert(got.end(), v.begin(), v.end());
  EXPECT_EQ(got, tokens);

  const TokenStream tiny = TokenStream::from_tokens({5, 6, 7, 2, 8, 9, 2});
  EXPECT_ERROR_MENTIONS(split_stream(tiny, n, 0.1, &train, &valid), "too small");
  EXPECT_ERROR_MENTIONS(split_stream(s, 2, 0.1, &train, &valid), "at least 3");
}

// ---------------------------------------------------------------------------------------------
// Masking
// ---------------------------------------------------------------------------------------------

MaskingOptions mask_opts(int64_t vocab) {
  MaskingOptions mo;
  mo.mask_prob = 0.15;
  mo.vocab_size = vocab;
  mo.mask_id = 4;
  mo.first_normal_id = 5;
  return mo;
}

// A packed-looking sequence: <s>, normal tokens with some </s> and <unk> inside, </s>, padding.
void make_sequence(uint64_t i, int64_t n, int64_t vocab, std::vector<int32_t>* ids,
                   std::vector<float>* mask) {
  ids->assign(n, 1);
  mask->assign(n, 0.f);
  const int64_t len = 3 + static_cast<int64_t>(rng_bits(9, i, 0) % (n - 2));  // 3 .. n
  for (int64_t t = 0; t < len; ++t) {
    (*mask)[t] = 1.f;
    const uint64_t r = rng_bits(9, i, t + 1);
    int32_t id = 5 + static_cast<int32_t>(r % (vocab - 5));
    if (r % 23 == 0) id = 2;
    if (r % 29 == 0) id = 3;
    (*ids)[t] = t == 0 ? 0 : t == len - 1 ? 2 : id;
  }
}

TEST(MlmMasking, ChosenShareProportionsSpecialsAndLabels) {
  const int64_t n = 64, V = 1000;
  const MaskingOptions mo = mask_opts(V);
  int64_t chosen = 0, masked = 0, random = 0, kept = 0;
  std::vector<int32_t> ids, orig, labels(n);
  std::vector<float> mask;
  for (uint64_t i = 0; i < 6000; ++i) {
    make_sequence(i, n, V, &ids, &mask);
    orig = ids;
    int64_t m = 0;
    for (int64_t t = 0; t < n; ++t) m += mask[t] == 1.f && orig[t] >= 5;
    const int64_t k = apply_mlm_mask(ids.data(), labels.data(), mask.data(), n, mo, 17, i);
    const int64_t expect_k = m == 0 ? 0 : std::max<int64_t>(1, std::llround(0.15 * m));
    ASSERT_EQ(k, expect_k) << "sequence " << i << " with " << m << " maskable tokens";
    int64_t labelled = 0;
    for (int64_t t = 0; t < n; ++t) {
      if (labels[t] == -100) {
        ASSERT_EQ(ids[t], orig[t]) << "unchosen token changed, sequence " << i << " pos " << t;
        continue;
      }
      ++labelled;
      ASSERT_EQ(labels[t], orig[t]);
      ASSERT_EQ(mask[t], 1.f) << "padding chosen";
      ASSERT_GE(orig[t], 5) << "special token " << orig[t] << " chosen";
      if (ids[t] == 4) {
        ++masked;
      } else if (ids[t] == orig[t]) {
        ++kept;
      } else {
        ++random;
        ASSERT_GE(ids[t], 5) << "random replacement is a special id";
        ASSERT_LT(ids[t], V);
      }
    }
    ASSERT_EQ(labelled, k);
    chosen += k;
  }
  ASSERT_GE(chosen, 20000);
  // A random replacement equal to the original (probability 1/995) counts as kept: +0.01%.
  const double fm = double(masked) / chosen, fr = double(random) / chosen,
               fk = double(kept) / chosen;
  std::printf("chosen %lld: mask %.4f random %.4f unchanged %.4f\n",
              static_cast<long long>(chosen), fm, fr, fk);
  EXPECT_NEAR(fm, 0.80, 0.02);
  EXPECT_NEAR(fr, 0.10, 0.02);
  EXPECT_NEAR(fk, 0.10, 0.02);
}

TEST(MlmMasking, EveryPositionEquallyLikelyAndAtLeastOne) {
  const int64_t n = 40, V = 500;
  const MaskingOptions mo = mask_opts(V);
  std::vector<int64_t> hits(n, 0);
  std::vector<int32_t> ids(n), labels(n);
  std::vector<float> mask(n, 1.f);
  const int64_t trials = 6000;
  for (int64_t i = 0; i < trials; ++i) {
    for (int64_t t = 0; t < n; ++t) ids[t] = 5 + static_cast<int32_t>((t * 7 + i) % (V - 5));
    ASSERT_EQ(apply_mlm_mask(ids.data(), labels.data(), mask.data(), n, mo, 3, i), 6);  // 0.15*40
    for (int64_t t = 0; t < n; ++t) hits[t] += labels[t] != -100;
  }
  // Each position is chosen with probability 6/40 = 0.15 (std over 6000 trials: 0.0046).
  for (int64_t t = 0; t < n; ++t)
    EXPECT_NEAR(double(hits[t]) / trials, 0.15, 0.025) << "position " << t;

  // Few maskable tokens: at least one chosen; none: nothing chosen.
  std::vector<int32_t> few = {0, 9, 2, 1, 1};
  std::vector<float> fm = {1, 1, 1, 0, 0};
  std::vector<int32_t> lab(5);
  EXPECT_EQ(apply_mlm_mask(few.data(), lab.data(), fm.data(), 5, mo, 1, 1), 1);
  EXPECT_EQ(lab[1], 9);
  std::vector<int32_t> none = {0, 3, 2, 1, 1};
  EXPECT_EQ(apply_mlm_mask(none.data(), lab.data(), fm.data(), 5, mo, 1, 1), 0);
  EXPECT_EQ(none, (std::vector<int32_t>{0, 3, 2, 1, 1}));
  for (int32_t l : lab) EXPECT_EQ(l, -100);
  // Real-looking ids under padding are never chosen.
  std::vector<int32_t> padded = {0, 50, 2, 60, 70};
  std::vector<float> pm = {1, 1, 1, 0, 0};
  for (uint64_t s = 0; s < 50; ++s) {
    std::vector<int32_t> p = padded;
    apply_mlm_mask(p.data(), lab.data(), pm.data(), 5, mo, s, 0);
    EXPECT_EQ(lab[3], -100);
    EXPECT_EQ(lab[4], -100);
    EXPECT_EQ(lab[1], 50);
  }
}

TEST(MlmMasking, DeterministicPerSeedAndStream) {
  const int64_t n = 64, V = 1000;
  const MaskingOptions mo = mask_opts(V);
  std::vector<int32_t> base;
  std::vector<float> mask;
  make_sequence(123, n, V, &base, &mask);
  auto run = [&](uint64_t seed, uint64_t stream) {
    std::vector<int32_t> ids = base, labels(n);
    apply_mlm_mask(ids.data(), labels.data(), mask.data(), n, mo, seed, stream);
    ids.insert(ids.end(), labels.begin(), labels.end());
    return ids;
  };
  EXPECT_EQ(run(5, 1), run(5, 1));
  EXPECT_NE(run(5, 1), run(5, 2));  // another epoch: other masks
  EXPECT_NE(run(5, 1), run(6, 1));  // another seed
}

TEST(MlmMasking, EpochOrderIsAPermutationDifferentPerEpoch) {
  const int64_t count = 1000;
  const std::vector<int64_t> e0 = epoch_order(count, 7, 0), e1 = epoch_order(count, 7, 1);
  for (const auto* e : {&e0, &e1}) {
    std::vector<int64_t> sorted = *e;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> iota(count);
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(sorted, iota);
  }
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, epoch_order(count, 7, 0));
  EXPECT_NE(e0, epoch_order(count, 8, 0));
  std::vector<int64_t> iota(count);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_NE(e0, iota);  // actually shuffled
  int64_t fixed = 0;
  for (int64_t i = 0; i < count; ++i) fixed += e0[i] == i;
  EXPECT_LT(fixed, 10);  // a random permutation has ~1 fixed point
  EXPECT_EQ(epoch_order(1, 7, 3), (std::vector<int64_t>{0}));
}

}  // namespace
}  // namespace lf
