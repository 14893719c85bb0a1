// `linformer serve`: the HTTP server (cpp-httplib) in front of the batcher.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "linformer/compute_type.h"

namespace lf::serve {

struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;       // 0: any free port
  int threads = 0;       // compute threads (0: all cores)
  int http_threads = 8;  // HTTP threads kept ready; more are started while all are busy
  ComputeType precision = ComputeType::f32;
  std::vector<int64_t> float_layers;  // encoder layers kept f32 under bf16/int8 (--float-layers)
  int64_t max_batch_tokens = 16384;
  int64_t max_batch_requests = 0;
  int64_t batch_wait_ms = 0;
  bool batch_invariant = true;
  int64_t max_concurrent_requests = 512;
  int64_t max_client_batch_size = 32;
  int64_t payload_limit = 2000000;
  int64_t max_input_length = 0;  // 0: the model's max_len
  bool auto_truncate = false;
  std::string pooling;  // default pooling of /embed: "" = the classifier's, else cls
  std::string api_key;
  std::string log_format = "text";
  std::string model_id;  // the name /info and /v1/embeddings report (default: the folder)
  // What POST / and POST /invocations do: "auto" (predict for a classifier, embed otherwise),
  // "embed", "predict" or "rerank" (a pair classifier only).
  std::string root_route = "auto";
  // The class whose probability is /rerank's score ("": the rule of relevant_class()).
  std::string rerank_label;
};

// The class of a pair classifier that means "relevant" for /rerank, by name: `wanted` if not
// empty (-1 when no label has that name), else the first label named (case aside)
// entailment, relevant, related, duplicate, paraphrase, equivalent, yes, true, positive or 1,
// else class 1 of a two-class classifier, else class 0 of a one-output one, else -1.
int64_t relevant_class(const std::vector<std::string>& labels, const std::string& wanted);

// Runs until SIGTERM or SIGINT, then stops accepting, answers what is in flight and returns
// 0. Prints "listening on http://HOST:PORT" once the port is bound (before the model has
// loaded; /health answers 503 until it has). Returns 1 if the model cannot be loaded.
int run_server(const ServeOptions& o);

}  // namespace lf::serve
