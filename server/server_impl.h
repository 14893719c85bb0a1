// The server behind `linformer serve` (server.h), shared by its two source files: server.cpp
// (admission, health, metrics, the listener) and routes.cpp (the model routes' bodies).
// Private to server/.
#pragma once
#include "server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "api.h"
#include "assets.h"
#include "batcher.h"
#include "http_util.h"
#include "linformer/error.h"
#include "metrics.h"

namespace lf::serve::detail {

using json = nlohmann::json;

inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

inline std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

// An input tokenized for the model: `<s> A </s>` or `<s> A </s></s> B </s>`.
struct Tokenized {
  std::vector<std::vector<int32_t>> seqs;
  int64_t tokens = 0;
};

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : o_(o),
        batcher_(BatcherOptions{o.model, o.precision, o.float_layers, o.threads, o.max_batch_tokens,
                                o.max_batch_requests, o.batch_wait_ms, o.batch_invariant},
                 &metrics_) {}

  int run();

 private:
  ServeOptions o_;
  mutable Metrics metrics_;
  Batcher batcher_;
  httplib::Server http_;
  std::atomic<bool> ready_{false}, draining_{false};
  std::string load_error_;
  int64_t max_input_ = 0;
  ParseLimits limits_;
  std::string info_;                       // GET /info, built once the model has loaded
  std::vector<std::string> model_routes_;  // the routes model_route() registered
  std::string root_route_;                 // what POST / does: embed, predict or rerank
  int64_t rerank_class_ = -1;              // the class whose probability /rerank scores
  std::mutex log_mu_;
  int listen_fd_ = -1;  // the listening socket (set by httplib's socket-options callback)

  void routes();
  void log(const httplib::Request& req, const httplib::Response& res);
  // Fills the limits and /info once the model has loaded; an error message when the options
  // do not fit the model (then the server stops).
  std::string on_ready();
  bool authorized(const httplib::Request& req) const;
  // Wraps a model route: admission (429), health (503), errors as JSON, metrics and timings.
  void model_route(
      const char* path,
      std::function<void(const httplib::Request&, httplib::Response&, Clock::time_point)> body);
  Tokenized tokenize(const RunRequest& r) const;
  // Queues a job and waits for it while watching the client; false when the client left.
  bool run_job(const httplib::Request& req, const std::shared_ptr<Job>& job);
  // Tokenizes a request's inputs and runs them as one job (499 when the client left).
  std::shared_ptr<Job> run_inputs(const httplib::Request& req, const RunRequest& r, Job::Kind kind,
                                  Pooling pooling, Clock::time_point t0, Tokenized* t,
                                  double* tok_ms);
  void embed(const httplib::Request& req, httplib::Response& res, Clock::time_point t0);
  void openai_embed(const httplib::Request& req, httplib::Response& res, Clock::time_point t0);
  void predict(const httplib::Request& req, httplib::Response& res, Clock::time_point t0);
  void rerank(const httplib::Request& req, httplib::Response& res, Clock::time_point t0);
  void embed_all(const httplib::Request& req, httplib::Response& res, Clock::time_point t0);
  // POST / and POST /invocations: the model's own route (root_route_).
  void root(const httplib::Request& req, httplib::Response& res, Clock::time_point t0);
  void tokenize_route(const httplib::Request& req, httplib::Response& res);
  void decode_route(const httplib::Request& req, httplib::Response& res);
  void set_timing_headers(httplib::Response& res, const Job& job, int64_t tokens, double tok_ms,
                          Clock::time_point t0);
};

// Sends an API error as TEI does: its status and {"error", "error_type"}.
void send_error(httplib::Response& res, const ApiError& e);

}  // namespace lf::serve::detail
