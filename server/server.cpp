#include "server_impl.h"

#ifndef LINFORMER_VERSION
#define LINFORMER_VERSION "unknown"
#endif

namespace lf::serve {
namespace detail {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_header("x-error-type", e.type);
  res.set_content(error_body(e), "application/json");
}

void Server::log(const httplib::Request& req, const httplib::Response& res) {
  auto h = [&](const char* k) { return res.get_header_value(k); };
  const std::string path = req.path.empty() ? req.target : req.path;
  std::string line;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (o_.log_format == "json") {
    json j{{"time", ts},
           {"method", req.method},
           {"route", path},
           {"status", res.status},
           {"client", req.remote_addr + ":" + std::to_string(req.remote_port)}};
    auto num = [&](const char* key, const char* header) {
      const std::string v = h(header);
      if (!v.empty()) j[key] = std::strtod(v.c_str(), nullptr);
    };
    num("inputs", "x-compute-inputs");
    num("tokens", "x-compute-tokens");
    num("queue_ms", "x-queue-time");
    num("compute_ms", "x-inference-time");
    num("total_ms", "x-total-time");
    if (!h("x-error-type").empty()) j["error_type"] = h("x-error-type");
    line = j.dump();
  } else {
    line = std::string(ts) + " " + req.method + " " + path + " " + std::to_string(res.status);
    auto add = [&](const char* key, const char* header) {
      const std::string v = h(header);
      if (!v.empty()) line += std::string(" ") + key + "=" + v;
    };
    add("inputs", "x-compute-inputs");
    add("tokens", "x-compute-tokens");
    add("queue_ms", "x-queue-time");
    add("compute_ms", "x-inference-time");
    add("total_ms", "x-total-time");
    add("error", "x-error-type");
    line += " client=" + req.remote_addr + ":" + std::to_string(req.remote_port);
  }
  std::lock_guard<std::mutex> lock(log_mu_);
  std::fprintf(stderr, "%s\n", line.c_str());
}

bool Server::authorized(const httplib::Request& req) const {
  if (o_.api_key.empty()) return true;
  const std::string want = "Bearer " + o_.api_key;
  const std::string got = req.get_header_value("Authorization");
  // Compared in time independent of where they first differ.
  unsigned diff = got.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i)
    diff |= static_cast<unsigned>(i < got.size() ? got[i] ^ want[i] : 1);
  return diff == 0;
}

std::string Server::on_ready() {
  const ClassifierBundle& cb = batcher_.bundle();
  const Config& cfg = cb.model->config();
  max_input_ =
      o_.max_input_length > 0 ? std::min<int64_t>(o_.max_input_length, cfg.max_len) : cfg.max_len;
  limits_.max_client_batch_size = o_.max_client_batch_size;
  limits_.auto_truncate = o_.auto_truncate;
  limits_.model_pairs = cb.has_labels() && cb.task.pairs;
  limits_.default_pooling = o_.pooling == "mean"  ? Pooling::mean
                            : o_.pooling == "cls" ? Pooling::cls
                            : cb.has_labels() && cfg.classifier_pooling == ClassifierPooling::mean
                                ? Pooling::mean
                                : Pooling::cls;
  const bool pairs = cb.has_labels() && cb.task.pairs;
  if (pairs) rerank_class_ = relevant_class(cb.labels.names, o_.rerank_label);
  if (!o_.rerank_label.empty()) {
    if (!pairs)
      return "--rerank-label: " + o_.model +
             " is not a pair classifier (finetuned on sentence pairs); /rerank needs one";
    if (rerank_class_ < 0) {
      std::string names;
      for (const std::string& n : cb.labels.names) names += (names.empty() ? "" : ", ") + n;
      return "--rerank-label " + o_.rerank_label + ": the classifier has no such label (" + names +
             ")";
    }
  }
  root_route_ = o_.root_route == "auto" ? (cb.has_labels() ? "predict" : "embed") : o_.root_route;
  if (root_route_ == "predict" && !cb.has_labels())
    return "--root-route predict: " + o_.model + " is not a classifier (no labels.json)";
  if (root_route_ == "rerank" && (!pairs || rerank_class_ < 0))
    return "--root-route rerank: " + o_.model +
           (pairs ? " has no class that means relevant: name it with --rerank-label"
                  : " is not a pair classifier (finetuned on sentence pairs)");
  json model_type;
  if (cb.has_labels()) {
    json id2label = json::object(), label2id = json::object();
    for (int64_t c = 0; c < cb.labels.size(); ++c) {
      id2label[std::to_string(c)] = cb.labels.names[c];
      label2id[cb.labels.names[c]] = c;
    }
    model_type = {{"classifier", {{"id2label", id2label}, {"label2id", label2id}}}};
  } else {
    model_type = {{"embedding", {{"pooling", to_string(limits_.default_pooling)}}}};
  }
  json info{
      {"model_id", o_.model_id},
      {"model_dtype", o_.precision == ComputeType::bf16   ? "bfloat16"
                      : o_.precision == ComputeType::int8 ? "int8"
                                                          : "float32"},
      {"precision", compute_type_name(o_.precision)},
      {"float_layers", o_.float_layers},
      {"model_type", model_type},
      {"labels", cb.labels.names},
      {"pairs", limits_.model_pairs},
      {"lowercase", cb.task.lowercase},
      {"config", json::parse(cfg.to_json())},
      {"max_concurrent_requests", o_.max_concurrent_requests},
      {"max_input_length", max_input_},
      {"max_batch_tokens", o_.max_batch_tokens},
      {"max_batch_requests", o_.max_batch_requests > 0 ? json(o_.max_batch_requests) : json()},
      {"max_client_batch_size", o_.max_client_batch_size},
      {"auto_truncate", o_.auto_truncate},
      {"payload_limit", o_.payload_limit},
      // Whether a text's result is the same, bit for bit, alone and in any batch.
      {"batch_invariant", batcher_.batch_invariant()},
      {"tokenization_workers", nullptr},
      {"version", LINFORMER_VERSION},
      // What POST / and POST /invocations answer as.
      {"root_route", "/" + root_route_},
      // The class whose probability /rerank gives as the score (null: /rerank answers 424).
      {"rerank_label", rerank_class_ >= 0 ? json(cb.labels.names[rerank_class_]) : json()},
  };
  info_ = info.dump();
  ready_ = true;
  return "";
}

Tokenized Server::tokenize(const RunRequest& r) const {
  const ClassifierBundle& cb = batcher_.bundle();
  Tokenized t;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const TextInput& in = r.inputs[i];
    const bool lc = cb.task.lowercase;
    const std::vector<int32_t> a = cb.tokenizer->encode(lc ? lower_ascii(in.a) : in.a);
    std::vector<int32_t> b;
    if (in.pair) b = cb.tokenizer->encode(lc ? lower_ascii(in.b) : in.b);
    const SpecialIds& sp = cb.tokenizer->special();
    const int64_t total = static_cast<int64_t>(
        a.size() + 2 + (in.pair ? b.size() + (sp.pair_double_sep ? 2 : 1) : 0));
    if (total > max_input_ && !r.truncate)
      invalid("input " + std::to_string(i) + " has " + std::to_string(total) +
              " tokens, more than this server's limit of " + std::to_string(max_input_) +
              " (--max-input-length); send \"truncate\": true to cut it");
    t.seqs.push_back(encode_tokens(sp, a, in.pair ? &b : nullptr, max_input_,
                                   r.truncate_left ? Truncate::tail : Truncate::head));
    t.tokens += static_cast<int64_t>(t.seqs.back().size());
    metrics_.input_length(static_cast<int64_t>(t.seqs.back().size()));
  }
  return t;
}

bool Server::run_job(const httplib::Request& req, const std::shared_ptr<Job>& job) {
  job->queued = Clock::now();
  batcher_.submit(job);
  const int fd = client_socket(req);
  while (!job->wait_for(std::chrono::milliseconds(20))) {
    if (!job->cancelled && client_gone(fd)) job->cancelled = true;
  }
  if (!job->error.empty()) throw ApiError(424, "backend", job->error);
  return !job->cancelled;
}

std::shared_ptr<Job> Server::run_inputs(const httplib::Request& req, const RunRequest& r,
                                        Job::Kind kind, Pooling pooling, Clock::time_point t0,
                                        Tokenized* t, double* tok_ms) {
  auto job = std::make_shared<Job>();
  job->kind = kind;
  job->pooling = pooling;
  *t = tokenize(r);
  *tok_ms = ms_since(t0);
  job->seqs = std::move(t->seqs);
  if (!run_job(req, job)) throw ApiError(499, "client_closed", "the client closed the connection");
  return job;
}

void Server::set_timing_headers(httplib::Response& res, const Job& job, int64_t tokens,
                                double tok_ms, Clock::time_point t0) {
  const double total = ms_since(t0);
  res.set_header("x-compute-type", compute_type_name(o_.precision));
  res.set_header("x-compute-inputs", std::to_string(job.seqs.size()));
  res.set_header("x-compute-tokens", std::to_string(tokens));
  res.set_header("x-tokenization-time", fmt_ms(tok_ms));
  res.set_header("x-queue-time", fmt_ms(job.queue_seconds * 1e3));
  res.set_header("x-inference-time", fmt_ms(job.compute_seconds * 1e3));
  res.set_header("x-compute-time", fmt_ms(job.compute_seconds * 1e3));
  res.set_header("x-total-time", fmt_ms(total));
  metrics_.request_phases(total / 1e3, tok_ms / 1e3, job.queue_seconds, job.compute_seconds);
}

void Server::model_route(
    const char* path,
    std::function<void(const httplib::Request&, httplib::Response&, Clock::time_point)> body) {
  const std::string route = path;
  model_routes_.push_back(route);
  http_.Post(path, [this, route, body](const httplib::Request& req, httplib::Response& res) {
    const Clock::time_point t0 = Clock::now();
    metrics_.request_started(route);
    const int64_t admitted = ++metrics_.in_flight;
    try {
      if (draining_) throw ApiError(503, "unhealthy", "the server is shutting down");
      if (!ready_) throw ApiError(503, "unhealthy", "the model is still loading");
      if (admitted > o_.max_concurrent_requests)
        throw ApiError(429, "overloaded",
                       "too many requests in flight (" + std::to_string(admitted - 1) +
                           ", --max-concurrent-requests " +
                           std::to_string(o_.max_concurrent_requests) + "): retry later");
      body(req, res, t0);
      if (!res.has_header("x-total-time")) res.set_header("x-total-time", fmt_ms(ms_since(t0)));
      metrics_.request_done(route, true, "");
    } catch (const std::exception& ex) {
      // lf::Error from the engine's checks is bad input; anything else is ours.
      const auto* api = dynamic_cast<const ApiError*>(&ex);
      const ApiError e = api ? *api
                         : dynamic_cast<const lf::Error*>(&ex)
                             ? ApiError(422, "validation", ex.what())
                             : ApiError(500, "backend", ex.what());
      res.headers.clear();
      send_error(res, e);
      res.set_header("x-total-time", fmt_ms(ms_since(t0)));
      metrics_.request_done(route, false, e.type);
    }
    --metrics_.in_flight;
  });
}

void Server::routes() {
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Open to all: the health check (load balancers), the page (it asks for the key) and
    // the API description.
    const bool open = req.method == "GET" && (req.path == "/health" || req.path == "/ping" ||
                                              req.path == "/" || req.path == "/openapi.json");
    if (open || authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, ApiError(401, "unauthorized",
                             "missing or wrong API key: send the header "
                             "\"Authorization: Bearer KEY\" with the server's --api-key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  model_route("/embed", [this](auto& q, auto& s, auto t) { embed(q, s, t); });
  model_route("/v1/embeddings", [this](auto& q, auto& s, auto t) { openai_embed(q, s, t); });
  model_route("/predict", [this](auto& q, auto& s, auto t) { predict(q, s, t); });
  model_route("/tokenize", [this](auto& q, auto& s, auto) { tokenize_route(q, s); });
  // TEI's other routes: OpenAI's without /v1, every token's vector, ids back to text,
  // reranking, and POST / and POST /invocations (SageMaker) as the model's own route.
  model_route("/embeddings", [this](auto& q, auto& s, auto t) { openai_embed(q, s, t); });
  model_route("/embed_all", [this](auto& q, auto& s, auto t) { embed_all(q, s, t); });
  model_route("/decode", [this](auto& q, auto& s, auto) { decode_route(q, s); });
  model_route("/rerank", [this](auto& q, auto& s, auto t) { rerank(q, s, t); });
  model_route("/", [this](auto& q, auto& s, auto t) { root(q, s, t); });
  model_route("/invocations", [this](auto& q, auto& s, auto t) { root(q, s, t); });
  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (ready_ && !draining_)
      res.set_content("{\"status\":\"ok\"}", "application/json");
    else
      send_error(res, ApiError(503, "unhealthy",
                               draining_ ? "the server is shutting down"
                                         : "the model is loading and warming up"));
  };
  http_.Get("/health", health);
  http_.Get("/ping", health);  // SageMaker's health check
  http_.Get("/info", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return send_error(res, ApiError(503, "unhealthy", "the model is still loading"));
    res.set_content(info_, "application/json");
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  http_.Get("/openapi.json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kOpenApiJson, "application/json");
  });
  http_.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kIndexHtml, "text/html; charset=utf-8");
  });
  // httplib's own errors (404, 413, 400 on a malformed request line) get a JSON body too.
  http_.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413) {
      // Counted under the route when it is one (not under any path a client makes up).
      for (const std::string& r : model_routes_)
        if (req.path == r) metrics_.request_done(r, false, "payload_too_large");
      send_error(res, ApiError(413, "payload_too_large",
                               "the request body is larger than this server's limit of " +
                                   std::to_string(o_.payload_limit) + " bytes (--payload-limit)"));
    } else if (res.status == 404) {
      send_error(res, ApiError(404, "not_found", "no route " + req.method + " " + req.path));
    } else {
      send_error(res,
                 ApiError(res.status, "bad_request",
                          "malformed HTTP request (status " + std::to_string(res.status) + ")"));
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, ApiError(500, "backend", what));
      });
  http_.set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { log(req, res); });
}

int Server::run() {
  // SIGTERM and SIGINT go to one thread that waits for them (blocked everywhere else: every
  // thread started from here on, OpenMP's and httplib's included, inherits the mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that left must not end the server

  routes();
  http_.set_payload_max_length(static_cast<size_t>(o_.payload_limit));
  http_.set_keep_alive_max_count(1000000);  // a client may keep its connection
  http_.set_keep_alive_timeout(5);
  // No Nagle: httplib writes a response's headers and body in two writes, and with Nagle's
  // algorithm the second waits for the client's delayed ACK of the first (~40 ms on Linux),
  // which capped a keep-alive client at ~20 requests/s. Set on the listening socket (through
  // the setter: the macro CPPHTTPLIB_TCP_NODELAY is compiled into Debian's .so); Linux gives
  // accepted sockets the listening socket's TCP_NODELAY.
  http_.set_tcp_nodelay(true);
  // httplib 0.11 listens with a backlog of 5: a burst of new connections (64 clients starting
  // at once) overflowed it, and the refused handshakes were retried by the clients' kernels
  // after 1 s, 3 s, ... (the multi-second p99 of the load test). The listening socket is
  // recorded here (this callback runs on it before bind) and listen() is called again with a
  // larger backlog once bound (Linux updates the backlog of a listening socket).
  http_.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  const size_t max_threads = static_cast<size_t>(o_.max_concurrent_requests) + 16;
  http_.new_task_queue = [max_threads] { return new ElasticPool(max_threads); };
  int port = o_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(o_.host);
  } else if (!http_.bind_to_port(o_.host, port)) {
    port = -1;
  }
  if (port >= 0) {
    const int backlog = static_cast<int>(std::min<int64_t>(o_.max_concurrent_requests, 4096));
    if (listen_fd_ < 0 || ::listen(listen_fd_, std::max(backlog, 128)) != 0)
      std::fprintf(stderr, "linformer serve: warning: could not raise the listen backlog\n");
  }
  if (port < 0) {
    std::fprintf(stderr,
                 "linformer: error: serve: cannot listen on %s:%d (in use, or not an "
                 "address of this machine)\n",
                 o_.host.c_str(), o_.port);
    return 1;
  }
  const bool v6 = o_.host.find(':') != std::string::npos;
  std::printf("linformer serve: listening on http://%s%s%s:%d (model %s, %s)\n", v6 ? "[" : "",
              o_.host.c_str(), v6 ? "]" : "", port, o_.model.c_str(),
              compute_type_name(o_.precision));
  std::fflush(stdout);

  std::atomic<bool> failed{false};
  std::thread listener([this] { http_.listen_after_bind(); });
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig == SIGTERM || sig == SIGINT) {
      if (!failed)
        std::fprintf(stderr, "linformer serve: %s: finishing the requests in flight\n",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
    }
    draining_ = true;
    http_.stop();
  });
  // httplib's stop() does nothing before its loop runs: wait for it (it starts at once).
  for (int i = 0; i < 5000 && !http_.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const Clock::time_point t_load = Clock::now();
  batcher_.start(
      [&] {
        const std::string error = on_ready();
        if (!error.empty()) {
          std::fprintf(stderr, "linformer: error: serve: %s\n", error.c_str());
          failed = true;
          pthread_kill(signals.native_handle(), SIGTERM);
          return;
        }
        std::fprintf(stderr,
                     "linformer serve: model loaded and warmed up in %.1f s; ready (POST / "
                     "answers as /%s)\n",
                     ms_since(t_load) / 1e3, root_route_.c_str());
      },
      [&](const std::string& msg) {
        std::fprintf(stderr, "linformer: error: serve: %s\n", msg.c_str());
        failed = true;
        pthread_kill(signals.native_handle(), SIGTERM);
      });
  listener.join();  // returns once stopped and every connection's thread has finished
  batcher_.stop();
  if (!failed) pthread_kill(signals.native_handle(), SIGTERM);  // (when stopped otherwise)
  signals.join();
  std::fprintf(stderr, "linformer serve: stopped\n");
  return failed ? 1 : 0;
}

}  // namespace detail


int64_t relevant_class(const std::vector<std::string>& labels, const std::string& wanted) {
  const int64_t C = static_cast<int64_t>(labels.size());
  auto lower = [](std::string x) {
    for (char& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return x;
  };
  if (!wanted.empty()) {
    for (int64_t c = 0; c < C; ++c)
      if (labels[c] == wanted) return c;
    return -1;
  }
  for (const char* name : {"entailment", "relevant", "related", "duplicate", "paraphrase",
                           "equivalent", "yes", "true", "positive", "1"})
    for (int64_t c = 0; c < C; ++c)
      if (lower(labels[c]) == name) return c;
  if (C == 2) return 1;
  if (C == 1) return 0;
  return -1;
}

int run_server(const ServeOptions& o) {
  detail::Server s(o);
  return s.run();
}

}  // namespace lf::serve
