#include "dist/grad_reducer.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/parallel.h"
#include "linformer/error.h"
#include "linformer/rng.h"
#include "linformer/run.h"

namespace lf::dist {

GradReducer::GradReducer(Model& model, Comm& comm, int64_t bucket_floats)
    : model_(model), comm_(comm) {
  grads_ = model.grad_data();
  const Config& cfg = model.config();
  const int64_t L = cfg.n_layers;
  int64_t total = 0;
  std::vector<int64_t> lo(L, -1), hi(L, -1);
  for (const ParamInfo& p : model.params()) {
    total = std::max(total, static_cast<int64_t>(p.padded_end()));
    const std::string prefix = "roberta.encoder.layer.";
    if (p.name.rfind(prefix, 0) != 0) continue;
    const int64_t l = std::stoll(p.name.substr(prefix.size()));
    lo[l] = lo[l] < 0 ? static_cast<int64_t>(p.offset) : std::min<int64_t>(lo[l], p.offset);
    hi[l] = std::max(hi[l], static_cast<int64_t>(p.padded_end()));
  }
  // Segments in the order backward completes them; each lies just below the previous one.
  struct Seg {
    int64_t lo, hi;
  };
  std::vector<Seg> segs;
  bool layered = L > 0;
  for (int64_t l = 0; l < L; ++l)
    layered = layered && lo[l] >= 0 && (l == 0 || lo[l] == hi[l - 1]);
  std::vector<std::string> seg_names;
  if (layered) {
    segs.push_back({hi[L - 1], total});
    seg_names.push_back("heads");
    for (int64_t l = L - 1; l >= 0; --l) {
      segs.push_back({lo[l], hi[l]});
      seg_names.push_back("layer " + std::to_string(l));
    }
    segs.push_back({0, lo[0]});
    seg_names.push_back("embeddings");
  } else {
    // Not the layout this relies on: one bucket, started after backward.
    segs.push_back({0, total});
    seg_names.push_back("all parameters");
  }
  // Greedy buckets of whole segments in ready order; a bucket is contiguous because each
  // segment ends where the previous one begins.
  int64_t acc_hi = segs[0].hi;
  std::string first_name = seg_names[0];
  for (size_t i = 0; i < segs.size(); ++i) {
    const bool last = i + 1 == segs.size();
    if (acc_hi - segs[i].lo >= bucket_floats || last) {
      const std::string name = first_name == seg_names[i] ? first_name
                                                          : first_name + " .. " + seg_names[i];
      buckets_.push_back({segs[i].lo, acc_hi, i,
                          "gradient bucket " + std::to_string(buckets_.size()) + " (" + name +
                              ")"});
      acc_hi = segs[i].lo;
      if (!last) first_name = seg_names[i + 1];
    }
  }
  // Empty buckets (a model without parameters before layer 0, say) are dropped.
  buckets_.erase(std::remove_if(buckets_.begin(), buckets_.end(),
                                [](const Bucket& b) { return b.hi <= b.lo; }),
                 buckets_.end());
  ready_segs_total_ = segs.size();
  model_.set_backward_observer(this);
}

GradReducer::~GradReducer() { model_.set_backward_observer(nullptr); }

void GradReducer::arm() {
  armed_ = true;
  ready_ = 0;
  started_ = 0;
}

void GradReducer::start_ready() {
  while (started_ < buckets_.size() && buckets_[started_].last_seg < ready_) {
    const Bucket& b = buckets_[started_];
    comm_.start_sum(grads_ + b.lo, b.hi - b.lo, b.what.c_str());
    ++started_;
  }
  comm_.progress();
}

void GradReducer::grads_ready(int64_t layer) {
  if (!armed_) return;
  const int64_t L = model_.config().n_layers;
  // Segment index in ready order: heads 0, layer l at L - l, embeddings L + 1. With the
  // single-bucket fallback only the end of backward (layer -1) counts.
  size_t seg = ready_segs_total_ == 1 ? (layer < 0 ? 0 : SIZE_MAX)
                                      : static_cast<size_t>(layer < 0 ? L + 1 : L - layer);
  if (seg == SIZE_MAX) return;
  ready_ = std::max(ready_, seg + 1);
  start_ready();
}

double GradReducer::finish() {
  if (!armed_) arm();
  ready_ = ready_segs_total_;
  start_ready();
  Stopwatch t;
  comm_.wait_all();
  armed_ = false;
  return t.seconds();
}

std::string GradReducer::describe() const {
  int64_t lo = INT64_MAX, hi = 0;
  for (const Bucket& b : buckets_) {
    lo = std::min(lo, b.hi - b.lo);
    hi = std::max(hi, b.hi - b.lo);
  }
  char s[96];
  std::snprintf(s, sizeof s, "%zu gradient buckets of %.2f-%.2f MB", buckets_.size(),
                lo * 4 / 1048576.0, hi * 4 / 1048576.0);
  return s;
}

uint64_t weight_checksum(Model& model) {
  const float* w = model.param_data();
  int64_t total = 0;
  for (const ParamInfo& p : model.params())
    total = std::max(total, static_cast<int64_t>(p.padded_end()));
  // A sum of per-element hashes: independent of the order the threads add them in.
  std::vector<uint64_t> part(num_threads() + 1, 0);
  parallel_for(0, total, 1 << 16, [&](int64_t i0, int64_t i1) {
    uint64_t s = 0;
    for (int64_t i = i0; i < i1; ++i) {
      uint32_t bits;
      std::memcpy(&bits, w + i, 4);
      s += mix64((static_cast<uint64_t>(i) << 32) ^ bits);
    }
    part[thread_id()] += s;
  });
  uint64_t sum = 0;
  for (uint64_t s : part) sum += s;
  return sum;
}

void check_same_weights(Comm& comm, Model& model, int64_t step) {
  if (comm.size() <= 1) return;
  const uint64_t c = weight_checksum(model);
  int64_t lo = static_cast<int64_t>(c), hi = lo;
  comm.min(&lo, 1, "the weight checksum");
  comm.max(&hi, 1, "the weight checksum");
  LF_CHECK(lo == hi, "the ranks' weights differ after step ", step, " (weight checksum of rank ",
           comm.rank(), ": ", static_cast<int64_t>(c), ", smallest ", lo, ", largest ", hi,
           "): they must stay identical; stopping. Were the ranks started with different "
           "inputs or builds?");
}

}  // namespace lf::dist
