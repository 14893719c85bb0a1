// Masked-LM perplexity of a model on any text, with fixed seeded masks: two models that share
// a tokenizer and a sequence length are scored on exactly the same masked positions.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/compute_type.h"

namespace lf {

class Model;
class Tokenizer;

struct PerplexityOptions {
  std::vector<std::string> text;  // text files or folders, one document per non-empty line
  int64_t seq_len = 0;            // tokens per sequence; 0: the model's max_len
  double mask_prob = 0.15;        // share of the real, non-special tokens masked (80/10/10)
  uint64_t seed = 0;              // mask draw (a pretraining run with this seed masks its
                                  // validation sequences the same way)
  int64_t batch_size = 8;         // sequences per forward pass
  int64_t max_sequences = 0;      // score only the first this many sequences (0: all)
  bool quiet = false;             // no progress on stderr
  // Precision of the encoder's linear maps (Model::set_compute_type; the folder overload sets
  // it) and the layers kept in f32 (Model::set_float_layers).
  ComputeType precision = ComputeType::f32;
  std::vector<int64_t> float_layers;
};

struct PerplexityResult {
  int64_t documents = 0, tokens = 0;  // of the text, after tokenization (</s> per document)
  int64_t sequences = 0, seq_len = 0;
  int64_t masked = 0;  // positions scored
  double loss = 0;     // mean cross-entropy over the masked positions (nats)
  double ppl = 0;      // exp(loss)
  double seconds = 0;
  nlohmann::json to_json() const;
};

// The text is tokenized with `tok`, packed as in pretraining (<s> + n - 2 tokens + </s>, the
// stream cut into consecutive sequences, the last padded) and masked with the evaluation draw
// (epoch -1) of `seed`. Throws lf::Error for a missing or empty text or a seq_len beyond the
// model's max_len.
PerplexityResult mlm_perplexity(Model& model, const Tokenizer& tok, const PerplexityOptions& opt);

// The same for a model folder (config.json, model.safetensors with the MLM head, and
// tokenizer.model), as written by pretraining in RUN/model.
PerplexityResult mlm_perplexity(const std::string& model_dir, const PerplexityOptions& opt);

}  // namespace lf
