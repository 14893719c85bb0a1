// The HTTP API's request bodies: parsed and validated into plain structs before anything is
// queued, so that a malformed request is refused with the status and message a client of
// text-embeddings-inference (TEI) expects, and never reaches the inference worker.
// No HTTP here: the parser is a pure function of the body and the limits (fuzzed by
// tests/fuzz/fuzz_serve_request.cpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace lf::serve {

// An error a client sees: HTTP status, TEI's error_type and a message naming the problem.
struct ApiError : std::runtime_error {
  int status;
  std::string type;  // validation, tokenizer, overloaded, unhealthy, unauthorized, ...
  ApiError(int status_, std::string type_, const std::string& message)
      : std::runtime_error(message), status(status_), type(std::move(type_)) {}
};
// 422 validation.
[[noreturn]] void invalid(const std::string& message);

enum class Pooling { cls, mean };
const char* to_string(Pooling p);

// One input: a text, or a pair of texts (b non-empty only when pair).
struct TextInput {
  std::string a, b;
  bool pair = false;
};

// What the parser needs to know about the server and its model.
struct ParseLimits {
  int64_t max_client_batch_size = 32;  // inputs per request
  bool auto_truncate = false;          // default of "truncate"
  bool model_pairs = false;            // a classifier finetuned on pairs
  Pooling default_pooling = Pooling::cls;
};

// Fields shared by the routes that run the model.
struct RunRequest {
  std::vector<TextInput> inputs;
  bool batched = true;         // the response is a list per input (false: TEI's single answer)
  bool truncate = false;       // cut too-long inputs (else 422)
  bool truncate_left = false;  // cut the beginning instead of the end
};

// POST /embed {"inputs": str | [str], "normalize": true, "truncate": false,
//              "truncation_direction": "right" | "left", "pooling": "cls" | "mean"}
struct EmbedRequest : RunRequest {
  bool normalize = true;
  Pooling pooling = Pooling::cls;
};
EmbedRequest parse_embed(const std::string& body, const ParseLimits& lim);

// POST /v1/embeddings (OpenAI): {"input": str | [str] | [int] | [[int]], "model": str,
//   "encoding_format": "float" | "base64", "dimensions": n, "user": str}. Token-id inputs are
// refused (this server tokenizes itself). Normalized, pooled as the server's default.
struct OpenAIEmbedRequest : RunRequest {
  bool base64 = false;
  int64_t dimensions = 0;  // 0: all
  std::string model;
};
OpenAIEmbedRequest parse_openai_embed(const std::string& body, const ParseLimits& lim);

// POST /predict {"inputs": str | [a, b] | [[str] | [a, b], ...], "raw_scores": false,
//                "truncate": false, "truncation_direction": ...}
// As TEI: a string is one input; a list of strings is one pair (two strings) for a pair
// classifier; a list of lists is a batch of texts and pairs. For a single-text classifier a
// list of strings is a batch of texts (a pair means nothing to it), answered as a batch.
struct PredictRequest : RunRequest {
  bool raw_scores = false;
};
PredictRequest parse_predict(const std::string& body, const ParseLimits& lim);

// POST /tokenize {"inputs": str | [str], "add_special_tokens": true}
struct TokenizeRequest {
  std::vector<std::string> inputs;
  bool batched = true;
  bool add_special_tokens = true;
};
TokenizeRequest parse_tokenize(const std::string& body, const ParseLimits& lim);

// POST /embed_all {"inputs": str | [str], "truncate", "truncation_direction"}: every token's
// final hidden state, special tokens included.
struct EmbedAllRequest : RunRequest {};
EmbedAllRequest parse_embed_all(const std::string& body, const ParseLimits& lim);

// POST /rerank {"query": str, "texts": [str], "truncate": false, "truncation_direction",
//               "raw_scores": false, "return_text": false}: one pair (query, text) per text.
struct RerankRequest : RunRequest {
  std::string query;
  std::vector<std::string> texts;
  bool raw_scores = false;
  bool return_text = false;
};
RerankRequest parse_rerank(const std::string& body, const ParseLimits& lim);

// POST /decode {"ids": [int] | [[int]], "skip_special_tokens": true}: ids in [0, vocab_size).
struct DecodeRequest {
  std::vector<std::vector<int32_t>> ids;
  bool skip_special_tokens = true;
};
DecodeRequest parse_decode(const std::string& body, const ParseLimits& lim, int64_t vocab_size);

// The JSON body of an error: {"error": message, "error_type": type}.
std::string error_body(const ApiError& e);

// Standard base64 (RFC 4648, with padding) of bytes.
std::string base64_encode(const void* data, size_t bytes);

// A float array as JSON text, each value printed with the fewest digits that read back as the
// same float (so a client gets the engine's exact f32 values).
void append_floats(std::string* out, const float* v, int64_t n);

}  // namespace lf::serve
