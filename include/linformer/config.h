// Model configuration: every architectural choice, read from and written to JSON.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lf {

// The attention kind (each is one entry of the registry, src/layers/attention_path.h):
//   standard  - exact softmax attention over all n keys
//   linformer - softmax attention over k keys projected along the sequence axis
//   nystrom   - Nystromformer: softmax kernels through `landmarks` segment means of Q and K,
//               F A^+ (B V) with A^+ an iterative pseudo-inverse (docs/model.md)
enum class AttentionKind { standard, linformer, nystrom };
// How Linformer projections E (keys) and F (values) are shared:
//   none      - separate E_i, F_i for every head of every layer (the paper's general form)
//   headwise  - one E and one F per layer, shared by its heads
//   kv        - one matrix per layer used as both E and F
//   layerwise - one matrix used as E and F in every layer
enum class Sharing { none, headwise, kv, layerwise };
// What maps the sequence axis from n to k:
//   linear    - learned k x n matrix
//   mean_pool - average over windows of n/k positions (no parameters)
//   max_pool  - maximum over windows of n/k positions (no parameters)
//   conv      - strided 1-D convolution, kernel = stride = n/k, one learned kernel per projection
enum class Projection { linear, mean_pool, max_pool, conv };
// How a learned (linear) projection E starts (fixed projections ignore it):
//   mean_pool - the default: the mean-pooling matrix (E[j, t] = 1/w for t in window j of
//               w = n/k positions; windows of floor(j n / k) .. floor((j+1) n / k) when k does
//               not divide n) plus N(0, (projection_init_noise)^2 / n) noise (docs/model.md,
//               "Why E starts as mean pooling")
//   normal    - N(0, 1/n) entries: a random signed mix of the positions
enum class ProjectionInit { normal, mean_pool };
enum class NormPlacement { post, pre };
// What the classification head reads:
//   first - the first token's hidden state (<s>, RoBERTa's head; the default)
//   mean  - the mean of the hidden states over the real (unpadded) tokens, <s> and </s>
//           included (docs/classification.md, "Training")
enum class ClassifierPooling { first, mean };

struct Config {
  int64_t vocab_size = 8192;
  int64_t max_len = 512;          // n: the longest sequence (positions and E columns)
  int64_t d_model = 256;
  int64_t n_heads = 4;
  int64_t d_ff = 1024;
  int64_t n_layers = 4;
  int64_t type_vocab_size = 1;    // token-type rows (RoBERTa 1, BERT 2); type 0 is used
  int64_t position_offset = 0;    // first position id (RoBERTa checkpoints use 2)
  AttentionKind attention = AttentionKind::linformer;
  std::vector<int64_t> k = {128}; // projected length: one value, or one per layer
  Sharing sharing = Sharing::layerwise;
  Projection projection = Projection::linear;
  ProjectionInit projection_init = ProjectionInit::mean_pool;  // linear projections only
  float projection_init_noise = 0.1f;  // mean_pool init: noise std x sqrt(n)
  // Linformer on a sequence shorter than n (or padded): projected rows whose window of n/k
  // positions holds no real token take no part in the softmax (docs/model.md, "Short
  // sequences"). false keeps them as zero keys and values, as in the paper's formula.
  bool mask_empty_rows = true;
  int64_t landmarks = 64;         // Nystromformer: landmarks per sequence (at most its length)
  NormPlacement norm = NormPlacement::post;
  bool causal = false;            // rejected for Linformer (see validate())
  float dropout = 0.1f;           // hidden dropout (embeddings, sublayer outputs, heads)
  float attention_dropout = 0.1f; // dropout on attention probabilities
  float layer_norm_eps = 1e-5f;
  float init_std = 0.02f;
  int64_t num_classes = 2;        // classification head width
  ClassifierPooling classifier_pooling = ClassifierPooling::first;
  int64_t pad_id = 1;
  int64_t cls_id = 0;             // first token of every sequence (RoBERTa's <s>)

  int64_t d_head() const { return d_model / n_heads; }
  int64_t k_of(int64_t layer) const { return k.size() == 1 ? k[0] : k.at(layer); }
  bool is_linformer() const { return attention == AttentionKind::linformer; }

  // Throws lf::Error naming the first inconsistent field, or a size above its documented
  // maximum (docs/config.md, Limits).
  void validate() const;
  // Number of parameters (floats) of the model, from the parameter table; call on a config
  // whose sizes are within the limits (validate() does).
  int64_t num_parameters() const;

  std::string to_json() const;                      // pretty-printed JSON text
  static Config from_json(const std::string& text);  // unknown keys are an error
  static Config load(const std::string& path);
  // A config file (or the defaults when path is empty), then each KEY=VALUE override in
  // order; VALUE is read as JSON when it parses (numbers, true/false, lists such as [64,32])
  // and as a string otherwise. Errors name the file and whether overrides were given.
  static Config load_with_overrides(const std::string& path, const std::vector<std::string>& sets);
  void save(const std::string& path) const;          // atomic (temporary file + rename)
};

const char* to_string(AttentionKind v);
const char* to_string(Sharing v);
const char* to_string(Projection v);
const char* to_string(ProjectionInit v);
const char* to_string(NormPlacement v);
const char* to_string(ClassifierPooling v);

}  // namespace lf
