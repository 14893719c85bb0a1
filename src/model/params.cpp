#include <string>

#include "layers/attention_path.h"
#include "linformer/model.h"

namespace lf {

namespace {

struct TableBuilder {
  std::vector<ParamInfo> t;
  size_t offset = 0;
  void add(const std::string& name, std::vector<int64_t> shape, Init init, bool decay) {
    ParamInfo p;
    p.name = name;
    p.shape = std::move(shape);
    p.numel = 1;
    for (int64_t d : p.shape) p.numel *= static_cast<size_t>(d);
    p.offset = offset;
    offset = p.padded_end();
    p.init = init;
    p.decay = decay;
    t.push_back(std::move(p));
  }
  void linear(const std::string& prefix, int64_t out, int64_t in) {
    add(prefix + ".weight", {out, in}, Init::normal, true);
    add(prefix + ".bias", {out}, Init::zeros, false);
  }
  void layernorm(const std::string& prefix, int64_t c) {
    add(prefix + ".weight", {c}, Init::ones, false);
    add(prefix + ".bias", {c}, Init::zeros, false);
  }
  // The tensors an attention kind adds (Linformer's projections); a parameter-free one adds
  // nothing.
  void kind_tensors(const std::vector<PathTensor>& ts) {
    for (const PathTensor& t : ts) {
      if (t.shape.empty()) continue;
      add(t.name, t.shape, t.init, true);
      this->t.back().projection = true;
    }
  }
};

// The table without validation (Config::validate counts parameters with it).
std::vector<ParamInfo> build_table(const Config& c) {
  TableBuilder b;
  const int64_t D = c.d_model;
  b.add("roberta.embeddings.word_embeddings.weight", {c.vocab_size, D}, Init::normal, true);
  b.add("roberta.embeddings.position_embeddings.weight", {c.max_len + c.position_offset, D},
        Init::normal, true);
  b.add("roberta.embeddings.token_type_embeddings.weight", {c.type_vocab_size, D}, Init::normal,
        true);
  b.layernorm("roberta.embeddings.LayerNorm", D);
  const AttentionPath& kind = attention_path(c);
  b.kind_tensors(kind.tensors(c, -1));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "roberta.encoder.layer." + std::to_string(l) + ".";
    b.linear(p + "attention.self.query", D, D);
    b.linear(p + "attention.self.key", D, D);
    b.linear(p + "attention.self.value", D, D);
    b.kind_tensors(kind.tensors(c, l));
    b.linear(p + "attention.output.dense", D, D);
    b.layernorm(p + "attention.output.LayerNorm", D);
    b.linear(p + "intermediate.dense", c.d_ff, D);
    b.linear(p + "output.dense", D, c.d_ff);
    b.layernorm(p + "output.LayerNorm", D);
  }
  if (c.norm == NormPlacement::pre) b.layernorm("roberta.encoder.final_layer_norm", D);
  b.linear("lm_head.dense", D, D);
  b.layernorm("lm_head.layer_norm", D);
  b.add("lm_head.bias", {c.vocab_size}, Init::zeros, false);
  b.linear("classifier.dense", D, D);
  b.linear("classifier.out_proj", c.num_classes, D);
  return b.t;
}

}  // namespace

std::vector<ParamInfo> param_table(const Config& c) {
  c.validate();
  return build_table(c);
}

int64_t Config::num_parameters() const {
  int64_t n = 0;
  for (const ParamInfo& p : build_table(*this)) n += static_cast<int64_t>(p.numel);
  return n;
}

}  // namespace lf
