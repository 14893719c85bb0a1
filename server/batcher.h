// Dynamic batching: HTTP threads submit jobs (a request's tokenized inputs); one inference
// worker thread owns the model and the compute threads, and runs the queued sequences in
// batches under a token budget.
//
// Batches hold sequences of one padded length only. A sequence of L tokens is padded to
// padded_length(L) (L rounded up to a coarse grid: at most ~1/8 padding), whatever else is
// queued, and the model runs with Model::set_batch_invariant: so a text's result is the same,
// bit for bit, alone or in any batch, and a 4,000-token document never pads short sentences.
// Sequences of one request may run in different batches (a large client batch is split).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api.h"
#include "linformer/classifier.h"
#include "metrics.h"

namespace lf::serve {

using Clock = std::chrono::steady_clock;

// The length a sequence of L tokens is padded to (<= max_len): L rounded up to a multiple of
// max(8, 2^ceil(log2 L) / 8).
int64_t padded_length(int64_t L, int64_t max_len);

// One request's sequences and, once run, their results.
struct Job {
  enum class Kind { embed, classify, embed_all };
  Kind kind = Kind::embed;
  Pooling pooling = Pooling::cls;
  std::vector<std::vector<int32_t>> seqs;  // with special tokens, each <= the model's max_len
  Clock::time_point queued;

  // Filled by the worker: [n, width] pooled vectors (embed) or logits (classify); for
  // embed_all, token_out[i] is sequence i's [len_i, width] final hidden states.
  std::vector<float> out;
  std::vector<std::vector<float>> token_out;
  int64_t width = 0;
  double queue_seconds = 0;    // from queued to the start of its first batch
  double compute_seconds = 0;  // the batches it took part in
  std::string error;           // set when the model failed

  // Set by the HTTP thread when the client has gone: the worker drops what is not yet run.
  std::atomic<bool> cancelled{false};

  // Blocks until every sequence has run (or the job was dropped), or until `timeout`;
  // true when done.
  bool wait_for(std::chrono::milliseconds timeout);
  bool done() const;

 private:
  friend class Batcher;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t remaining_ = 0;
  bool started_ = false;
  void finish_some(int64_t n);
};

struct BatcherOptions {
  std::string model_dir;
  ComputeType precision = ComputeType::f32;
  std::vector<int64_t> float_layers;  // encoder layers kept f32 (Model::set_float_layers)
  int threads = 0;                   // compute threads (0: OpenMP's default)
  int64_t max_batch_tokens = 16384;  // padded tokens per batch
  int64_t max_batch_requests = 0;    // sequences per batch (0: no limit but the tokens)
  // How long the oldest queued sequence may wait for others to join its batch (0: run at
  // once). While the worker computes, the queue fills anyway; this only matters when idle.
  int64_t batch_wait_ms = 0;
  // Run the model in its batch-invariant mode (a text's result bitwise independent of its
  // batch in f32); off: faster, results vary in the last bits with the batch.
  bool invariant = true;
};

class Batcher {
 public:
  Batcher(BatcherOptions o, Metrics* metrics);
  ~Batcher();
  // Starts the worker: it loads the model, warms it up and then serves the queue. `ready` is
  // called from the worker once it serves; `failed` with the message if loading fails.
  void start(std::function<void()> ready, std::function<void(const std::string&)> failed);
  // The model folder, valid once ready was called (read-only use by HTTP threads: the
  // tokenizer, labels and config).
  const ClassifierBundle& bundle() const { return cb_; }
  // Queues every sequence of a job (each must be 1..max_len tokens).
  void submit(const std::shared_ptr<Job>& job);
  // Whether the model's results are bitwise independent of the batch (f32 with the engine's
  // batch-invariant mode).
  bool batch_invariant() const { return invariant_; }
  // Runs what is queued, then ends the worker.
  void stop();

 private:
  struct Item {
    std::shared_ptr<Job> job;
    int64_t index;   // into job->seqs
    int64_t padded;  // padded length
  };
  BatcherOptions o_;
  Metrics* metrics_;
  ClassifierBundle cb_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  bool invariant_ = false;
  std::thread worker_;

  void run(std::function<void()> ready, std::function<void(const std::string&)> failed);
  void load_and_warm_up();
  // Takes the next batch from the queue (the oldest item's padded length), dropping the
  // items of cancelled jobs; empty when stopping and nothing is left.
  std::vector<Item> next_batch();
  void compute(const std::vector<Item>& batch);
};

}  // namespace lf::serve
