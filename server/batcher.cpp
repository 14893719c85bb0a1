#include "batcher.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "linformer/error.h"

namespace lf::serve {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int64_t padded_length(int64_t L, int64_t max_len) {
  int64_t p2 = 1;
  while (p2 < L) p2 *= 2;
  const int64_t g = std::max<int64_t>(8, p2 / 8);
  return std::min(max_len, (L + g - 1) / g * g);
}

bool Job::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return remaining_ == 0; });
}

bool Job::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return remaining_ == 0;
}

void Job::finish_some(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  remaining_ -= n;
  if (remaining_ == 0) cv_.notify_all();
}

Batcher::Batcher(BatcherOptions o, Metrics* metrics) : o_(std::move(o)), metrics_(metrics) {}

Batcher::~Batcher() { stop(); }

void Batcher::start(std::function<void()> ready, std::function<void(const std::string&)> failed) {
  worker_ = std::thread([this, ready, failed] { run(ready, failed); });
}

void Batcher::submit(const std::shared_ptr<Job>& job) {
  const int64_t n = static_cast<int64_t>(job->seqs.size());
  {
    std::lock_guard<std::mutex> lock(job->mu_);
    job->remaining_ = n;
  }
  if (n == 0) return;
  const int64_t max_len = cb_.model->config().max_len;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t L = static_cast<int64_t>(job->seqs[i].size());
      LF_CHECK(L >= 1 && L <= max_len, "serve: a sequence of ", L, " tokens reached the queue");
      queue_.push_back(Item{job, i, padded_length(L, max_len)});
    }
    metrics_->queue_size += n;
  }
  cv_.notify_one();
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Batcher::load_and_warm_up() {
  cb_ = load_classifier(o_.model_dir, false);
  cb_.model->set_compute_type(o_.precision);
  cb_.model->set_float_layers(o_.float_layers);  // a layer the model lacks: the load fails
  // A sequence's result depends on its padded length only, not on the rest of the batch
  // (promised in f32 and int8, whose per-token scales and integer sums keep rows apart; bf16
  // runs the same way unchecked).
  cb_.model->set_batch_invariant(o_.invariant);
  invariant_ = o_.invariant && o_.precision != ComputeType::bf16;
  // One forward at a short and at the longest length, so that the first clients do not pay
  // for the arena and oneDNN's primitives (503 from /health until this is done).
  const Config& cfg = cb_.model->config();
  for (int64_t N : {padded_length(16, cfg.max_len), cfg.max_len}) {
    std::vector<int32_t> ids(N, static_cast<int32_t>(cfg.pad_id));
    ids[0] = static_cast<int32_t>(cfg.cls_id);
    cb_.model->forward(Batch{ids.data(), nullptr, 1, N}, false);
    if (cb_.has_labels()) {
      std::vector<float> logits(cfg.num_classes);
      cb_.model->cls_logits(logits.data());
    }
  }
}

void Batcher::run(std::function<void()> ready, std::function<void(const std::string&)> failed) {
  if (o_.threads > 0) omp_set_num_threads(o_.threads);
  try {
    load_and_warm_up();
  } catch (const std::exception& e) {
    failed(e.what());
    return;
  }
  ready();
  for (;;) {
    std::vector<Item> batch = next_batch();
    if (batch.empty()) return;
    compute(batch);
  }
}

std::vector<Batcher::Item> Batcher::next_batch() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<Item> batch;
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    // Items of jobs whose client has gone are dropped here, before any compute.
    int64_t dropped = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->job->cancelled.load()) {
        it->job->finish_some(1);
        it = queue_.erase(it);
        ++dropped;
      } else {
        ++it;
      }
    }
    metrics_->queue_size -= dropped;
    if (!queue_.empty()) {
      const Clock::time_point until =
          queue_.front().job->queued + std::chrono::milliseconds(o_.batch_wait_ms);
      if (o_.batch_wait_ms <= 0 || stopping_ || Clock::now() >= until) break;
      cv_.wait_until(lock, until, [&] { return stopping_; });
      continue;  // look again: clients may have left meanwhile
    }
    if (stopping_) return batch;
  }
  // The oldest item sets the length; then every queued item of that length, oldest first,
  // while the padded tokens stay within the budget (the first one always fits).
  const int64_t P = queue_.front().padded;
  const int64_t cap_tokens = std::max<int64_t>(o_.max_batch_tokens / P, 1);
  const int64_t cap =
      o_.max_batch_requests > 0 ? std::min(cap_tokens, o_.max_batch_requests) : cap_tokens;
  for (auto it = queue_.begin(); it != queue_.end() && static_cast<int64_t>(batch.size()) < cap;) {
    if (it->padded == P) {
      batch.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  metrics_->queue_size -= static_cast<int64_t>(batch.size());
  return batch;
}

void Batcher::compute(const std::vector<Item>& batch) {
  const Config& cfg = cb_.model->config();
  const int64_t B = static_cast<int64_t>(batch.size()), N = batch.front().padded;
  const int64_t D = cfg.d_model, C = cfg.num_classes;
  const Clock::time_point t0 = Clock::now();
  std::vector<int32_t> ids(B * N, static_cast<int32_t>(cfg.pad_id));
  std::vector<float> mask(B * N, 0.f);
  bool any_classify = false;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t>& s = batch[b].job->seqs[batch[b].index];
    std::copy(s.begin(), s.end(), ids.begin() + b * N);
    std::fill(mask.begin() + b * N, mask.begin() + b * N + static_cast<int64_t>(s.size()), 1.f);
    any_classify = any_classify || batch[b].job->kind == Job::Kind::classify;
    std::lock_guard<std::mutex> lock(batch[b].job->mu_);
    if (!batch[b].job->started_) {
      batch[b].job->started_ = true;
      batch[b].job->queue_seconds = seconds_between(batch[b].job->queued, t0);
    }
  }
  std::string error;
  std::vector<float> logits;
  try {
    cb_.model->forward(Batch{ids.data(), mask.data(), B, N}, false);
    if (any_classify) {
      logits.resize(B * C);
      cb_.model->cls_logits(logits.data());
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  const float* h = error.empty() ? cb_.model->hidden() : nullptr;
  const double dt = seconds_between(t0, Clock::now());
  metrics_->batch(B, B * N);
  for (int64_t b = 0; b < B; ++b) {
    Job& job = *batch[b].job;
    const int64_t i = batch[b].index;
    bool first_in_batch = true;  // a job's time counts each batch once
    for (int64_t e = 0; e < b && first_in_batch; ++e) first_in_batch = batch[e].job != batch[b].job;
    {
      std::lock_guard<std::mutex> lock(job.mu_);
      if (first_in_batch) job.compute_seconds += dt;
      if (!error.empty()) {
        job.error = error;
      } else if (job.kind == Job::Kind::classify) {
        job.width = C;
        if (job.out.empty()) job.out.assign(job.seqs.size() * C, 0.f);
        std::memcpy(job.out.data() + i * C, logits.data() + b * C, C * sizeof(float));
      } else if (job.kind == Job::Kind::embed_all) {
        job.width = D;
        if (job.token_out.empty()) job.token_out.resize(job.seqs.size());
        const int64_t len = static_cast<int64_t>(job.seqs[i].size());
        job.token_out[i].assign(h + b * N * D, h + b * N * D + len * D);
      } else {
        job.width = D;
        if (job.out.empty()) job.out.assign(job.seqs.size() * D, 0.f);
        const float* hb = h + b * N * D;
        float* o = job.out.data() + i * D;
        if (job.pooling == Pooling::cls) {
          std::memcpy(o, hb, D * sizeof(float));
        } else {  // as embed_sequences: the mean over the real tokens, summed in double
          const int64_t len = static_cast<int64_t>(job.seqs[i].size());
          std::vector<double> acc(D, 0.0);
          for (int64_t t = 0; t < len; ++t)
            for (int64_t j = 0; j < D; ++j) acc[j] += hb[t * D + j];
          for (int64_t j = 0; j < D; ++j) o[j] = static_cast<float>(acc[j] / len);
        }
      }
    }
    job.finish_some(1);
  }
}

}  // namespace lf::serve
