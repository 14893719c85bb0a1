// The HTTP server's request parser (server/api.cpp) on arbitrary bodies: every route's parser
// (/embed, /predict, /v1/embeddings, /tokenize, /embed_all, /rerank, /decode)
// either returns a request that keeps its promises (inputs present, non-empty, within the
// per-request limit, pairs only where the model takes them, rerank's pairs the query and each
// text, token ids within the vocabulary) or refuses with ApiError 422.
// Anything else (another exception, a crash, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "api.h"

namespace {

using namespace lf::serve;

template <typename R>
void check_inputs(const R& r, const ParseLimits& lim) {
  if (r.inputs.empty() || static_cast<int64_t>(r.inputs.size()) > lim.max_client_batch_size)
    std::abort();
  for (const TextInput& in : r.inputs) {
    if (in.a.empty() || in.pair != (in.b.size() > 0)) std::abort();
  }
}

template <typename F>
void refused_or_valid(F&& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    if (e.status != 422 || e.type != "validation" || std::string(e.what()).empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (bool pairs : {false, true}) {
    ParseLimits lim;
    lim.max_client_batch_size = 4;
    lim.model_pairs = pairs;
    refused_or_valid([&] { check_inputs(parse_embed(body, lim), lim); });
    refused_or_valid([&] {
      const PredictRequest r = parse_predict(body, lim);
      check_inputs(r, lim);
      for (const TextInput& in : r.inputs)
        if (in.pair != pairs) std::abort();
    });
    refused_or_valid([&] {
      const OpenAIEmbedRequest r = parse_openai_embed(body, lim);
      check_inputs(r, lim);
      if (r.dimensions < 0) std::abort();
    });
    refused_or_valid([&] {
      const TokenizeRequest r = parse_tokenize(body, lim);
      if (r.inputs.empty() || r.inputs.size() > 4) std::abort();
    });
    refused_or_valid([&] { check_inputs(parse_embed_all(body, lim), lim); });
    refused_or_valid([&] {  // every input the pair (query, text), whatever the model
      const RerankRequest r = parse_rerank(body, lim);
      check_inputs(r, lim);
      if (r.query.empty() || r.texts.size() != r.inputs.size()) std::abort();
      for (size_t i = 0; i < r.inputs.size(); ++i)
        if (!r.inputs[i].pair || r.inputs[i].a != r.query || r.inputs[i].b != r.texts[i])
          std::abort();
    });
    refused_or_valid([&] {  // ids within the vocabulary, at most the limit of sequences
      constexpr int64_t kVocab = 100;
      const DecodeRequest r = parse_decode(body, lim, kVocab);
      if (r.ids.empty() || r.ids.size() > 4)
        std::abort();
      for (const auto& seq : r.ids)
        for (int32_t id : seq)
          if (id < 0 || id >= kVocab) std::abort();
    });
  }
  return 0;
}
