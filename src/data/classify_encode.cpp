// Text-classification data, encoding: truncation, the RoBERTa/BERT single/pair layouts, encoding of
// whole data sets, padded batches and the batch orders of training and inference. Reading the
// files is in classify_data.cpp.
#include <algorithm>
#include <mutex>

#include "core/parallel.h"
#include "data/mlm_data.h"
#include "linformer/classify_data.h"
#include "linformer/error.h"
#include "linformer/tokenizer.h"

namespace lf {

std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

Truncate parse_truncate(const std::string& s) {
  if (s == "head") return Truncate::head;
  if (s == "tail") return Truncate::tail;
  if (s == "head+tail" || s == "head_tail") return Truncate::head_tail;
  fail("truncation policy must be head, tail or head+tail, got '", s, "'");
}

const char* to_string(Truncate t) {
  switch (t) {
    case Truncate::head: return "head";
    case Truncate::tail: return "tail";
    case Truncate::head_tail: return "head+tail";
  }
  return "?";
}

std::vector<int32_t> truncate_tokens(const std::vector<int32_t>& ids, int64_t budget, Truncate t) {
  const int64_t n = static_cast<int64_t>(ids.size());
  budget = std::max<int64_t>(budget, 0);
  if (n <= budget) return ids;
  switch (t) {
    case Truncate::head:
      return std::vector<int32_t>(ids.begin(), ids.begin() + budget);
    case Truncate::tail:
      return std::vector<int32_t>(ids.end() - budget, ids.end());
    case Truncate::head_tail: {
      const int64_t h = budget / 4;
      std::vector<int32_t> out(ids.begin(), ids.begin() + h);
      out.insert(out.end(), ids.end() - (budget - h), ids.end());
      return out;
    }
  }
  return ids;
}

std::vector<int32_t> encode_tokens(const SpecialIds& sp, const std::vector<int32_t>& a,
                                   const std::vector<int32_t>* b, int64_t max_len, Truncate t) {
  LF_CHECK(sp.cls >= 0 && sp.sep >= 0,
           "the tokenizer has no cls/sep tokens to frame a sequence (<s> </s> or [CLS] [SEP])");
  std::vector<int32_t> out;
  if (!b) {
    LF_CHECK(max_len >= 3, "--max-len ", max_len, " is too small (at least 3: <s> text </s>)");
    const std::vector<int32_t> ta = truncate_tokens(a, max_len - 2, t);
    out.reserve(ta.size() + 2);
    out.push_back(sp.cls);
    out.insert(out.end(), ta.begin(), ta.end());
    out.push_back(sp.sep);
    return out;
  }
  const int64_t specials = sp.pair_double_sep ? 4 : 3;
  LF_CHECK(max_len >= specials + 2, "--max-len ", max_len,
           " is too small for sentence pairs (at least ", specials + 2,
           sp.pair_double_sep ? ": <s> A </s></s> B </s>)" : ": [CLS] A [SEP] B [SEP])");
  const int64_t budget = max_len - specials;
  int64_t la = static_cast<int64_t>(a.size()), lb = static_cast<int64_t>(b->size());
  // Longest first: shorten the longer text until both fit (each keeps at least one token).
  while (la + lb > budget) {
    if (la > lb)
      --la;
    else
      --lb;
  }
  la = std::max<int64_t>(la, std::min<int64_t>(1, static_cast<int64_t>(a.size())));
  lb = std::max<int64_t>(lb, std::min<int64_t>(1, static_cast<int64_t>(b->size())));
  const std::vector<int32_t> ta = truncate_tokens(a, la, t), tb = truncate_tokens(*b, lb, t);
  out.reserve(ta.size() + tb.size() + 4);
  out.push_back(sp.cls);
  out.insert(out.end(), ta.begin(), ta.end());
  out.push_back(sp.sep);
  if (sp.pair_double_sep) out.push_back(sp.sep);
  out.insert(out.end(), tb.begin(), tb.end());
  out.push_back(sp.sep);
  return out;
}

std::vector<int32_t> encode_example(const Tokenizer& tok, const std::string& a,
                                    const std::string& b, bool pair, int64_t max_len, Truncate t,
                                    bool lowercase) {
  auto prep = [&](const std::string& s) { return lowercase ? lower_ascii(s) : s; };
  const std::vector<int32_t> ta = tok.encode(prep(a));
  if (!pair) return encode_tokens(tok.special(), ta, nullptr, max_len, t);
  const std::vector<int32_t> tb = tok.encode(prep(b));
  return encode_tokens(tok.special(), ta, &tb, max_len, t);
}

std::vector<std::vector<int32_t>> encode_all(const Tokenizer& tok, const ClassifyData& data,
                                             int64_t max_len, Truncate t, bool lowercase) {
  const int64_t n = static_cast<int64_t>(data.examples.size());
  std::vector<std::vector<int32_t>> out(n);
  std::mutex mu;
  std::string error;
  parallel_for(0, n, 64, [&](int64_t i0, int64_t i1) {
    try {
      for (int64_t i = i0; i < i1; ++i) {
        const ClassifyExample& e = data.examples[i];
        out[i] = encode_example(tok, e.a, e.b, data.pairs, max_len, t, lowercase);
      }
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> g(mu);
      if (error.empty()) error = ex.what();
    }
  });
  LF_CHECK(error.empty(), error);
  return out;
}

void make_padded_batch(const std::vector<std::vector<int32_t>>& seqs,
                       const std::vector<int64_t>& which, int32_t pad_id, int64_t pad_to,
                       PaddedBatch* out) {
  int64_t N = pad_to;
  for (int64_t i : which) N = std::max<int64_t>(N, static_cast<int64_t>(seqs[i].size()));
  const int64_t B = static_cast<int64_t>(which.size());
  out->B = B;
  out->N = N;
  out->ids.assign(B * N, pad_id);
  out->mask.assign(B * N, 0.f);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t>& s = seqs[which[b]];
    std::copy(s.begin(), s.end(), out->ids.begin() + b * N);
    std::fill(out->mask.begin() + b * N, out->mask.begin() + b * N + s.size(), 1.f);
  }
}

std::vector<std::vector<int64_t>> epoch_batches(const std::vector<int64_t>& lengths,
                                                int64_t batch_size, bool bucket, uint64_t seed,
                                                int64_t epoch) {
  LF_CHECK(batch_size > 0, "batch size must be positive");
  const int64_t n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> order = epoch_order(n, seed, epoch);
  std::vector<std::vector<int64_t>> batches;
  if (bucket) {
    const int64_t pool = batch_size * 50;
    for (int64_t p0 = 0; p0 < n; p0 += pool) {
      const int64_t p1 = std::min(n, p0 + pool);
      std::stable_sort(order.begin() + p0, order.begin() + p1,
                       [&](int64_t x, int64_t y) { return lengths[x] < lengths[y]; });
    }
  }
  for (int64_t i = 0; i < n; i += batch_size)
    batches.emplace_back(order.begin() + i, order.begin() + std::min(n, i + batch_size));
  if (bucket) {
    const std::vector<int64_t> perm =
        epoch_order(static_cast<int64_t>(batches.size()), seed ^ 0xBA7C4ull, epoch);
    std::vector<std::vector<int64_t>> shuffled;
    shuffled.reserve(batches.size());
    for (int64_t j : perm) shuffled.push_back(std::move(batches[j]));
    batches = std::move(shuffled);
  }
  return batches;
}

std::vector<std::vector<int64_t>> inference_batches(const std::vector<int64_t>& lengths,
                                                    int64_t batch_size, bool sort) {
  LF_CHECK(batch_size > 0, "batch size must be positive");
  const int64_t n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (sort)
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return lengths[x] > lengths[y]; });
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < n; i += batch_size)
    batches.emplace_back(order.begin() + i, order.begin() + std::min(n, i + batch_size));
  return batches;
}

}  // namespace lf
