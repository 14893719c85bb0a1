// linformer.Model: a model folder (or a freshly initialised model) run on numpy arrays and
// texts. Each call runs with the GIL released and the model's mutex held: one lf::Model owns
// its activation arena and is not safe for concurrent use, so calls on one Model serialise
// while two Models run in parallel.
#include <omp.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "linformer/checkpoint.h"
#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/config.h"
#include "linformer/model.h"
#include "linformer/safetensors.h"
#include "linformer/tokenizer.h"
#include "model.h"
#include "module.h"

namespace lfpy {

namespace fs = std::filesystem;

PyModel::PyModel(const std::string& name_or_path, const std::string& precision, py::handle threads_obj,
                 py::handle float_layers_obj)
    : path(resolve_model_path(name_or_path)), threads(parse_threads(threads_obj)) {
  const lf::ComputeType ct = parse_precision(precision);
  std::vector<int64_t> float_layers;
  if (!float_layers_obj.is_none()) {
    try {
      float_layers = py::cast<std::vector<int64_t>>(float_layers_obj);
    } catch (const py::cast_error&) {
      throw py::value_error("float_layers must be a list of layer indices (ints), or None");
    }
  }
  require_path(path, "model folder", true);
  const fs::path weights = fs::path(path) / "model.safetensors";
  require_path(weights.string(), "model file", false);
  {
    py::gil_scoped_release nogil;
    if (!lf::Tokenizer::files_in(path).empty()) {
      lf::ClassifierBundle b = lf::load_classifier(path, false);
      model = std::move(b.model);
      tokenizer = std::shared_ptr<lf::Tokenizer>(std::move(b.tokenizer));
      labels = b.labels;
      task = b.task;
    } else {
      lf::LoadOptions lo;
      lo.init_missing = true;  // then refused by forward() if an output needs what is missing
      model = lf::load_model(path, lo);
      task.max_len = model->config().max_len;
    }
    const lf::SafeTensorsReader file(weights.string());
    for (const lf::ParamInfo& p : model->params())
      if (!file.has(p.name)) missing.push_back(p.name);
  }
  model->set_compute_type(ct);
  try {
    model->set_float_layers(float_layers);
  } catch (const lf::Error& e) {
    throw py::value_error(e.what());
  }
}

PyModel::PyModel(std::unique_ptr<lf::Model> m, std::shared_ptr<lf::Tokenizer> tok)
    : model(std::move(m)), tokenizer(std::move(tok)) {
  task.max_len = model->config().max_len;
}

const lf::Config& PyModel::config() const { return model->config(); }

void PyModel::require_tokenizer(const char* what) const {
  if (!tokenizer)
    throw py::value_error(std::string(what) + ": this model has no tokenizer (its folder holds no "
                                              "tokenizer.model); give token ids instead");
}

void PyModel::require_labels(const char* what) const {
  if (!has_labels())
    throw py::value_error(std::string(what) + ": this model is not a classifier (its folder holds "
                                              "no labels.json; train one with linformer.finetune)");
}

std::vector<std::vector<int32_t>> PyModel::encode(py::handle texts, py::handle pairs,
                                                  py::handle max_len_obj, py::handle truncate,
                                                  py::handle lowercase, bool pairs_as_trained) {
  require_tokenizer("texts");
  lf::ClassifyData d;
  const std::vector<std::string> a = to_texts(texts, "texts");
  std::vector<std::string> b;
  if (!pairs.is_none()) {
    b = to_texts(pairs, "pairs");
    if (b.size() != a.size())
      throw py::value_error("pairs holds " + std::to_string(b.size()) + " texts but texts holds " +
                            std::to_string(a.size()));
  }
  if (pairs_as_trained && has_labels() && task.pairs != !pairs.is_none())
    throw py::value_error(task.pairs ? "this model was finetuned on sentence pairs: give pairs="
                                     : "this model was finetuned on single texts: give no pairs");
  int64_t max_len = task.max_len;
  if (!max_len_obj.is_none()) {
    if (!py::isinstance<py::int_>(max_len_obj))
      throw py::value_error("max_len must be None or an int");
    max_len = max_len_obj.cast<int64_t>();
    if (max_len < 2 || max_len > config().max_len)
      throw py::value_error("max_len must be in [2, " + std::to_string(config().max_len) +
                            "] (the model's max_len), got " + std::to_string(max_len));
  }
  lf::Truncate t = task.truncate;
  if (!truncate.is_none()) {
    const std::string s = py::isinstance<py::str>(truncate) ? truncate.cast<std::string>() : "";
    if (s != "head" && s != "tail" && s != "head+tail")
      throw py::value_error("truncate must be \"head\", \"tail\" or \"head+tail\", got " +
                            std::string(py::repr(truncate)));
    t = lf::parse_truncate(s);
  }
  if (!lowercase.is_none() && !py::isinstance<py::bool_>(lowercase))
    throw py::value_error("lowercase must be None, True or False");
  const bool lower = lowercase.is_none() ? task.lowercase : lowercase.cast<bool>();
  d.pairs = !b.empty();
  d.examples.resize(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    d.examples[i].a = a[i];
    if (d.pairs) d.examples[i].b = b[i];
  }
  py::gil_scoped_release nogil;
  return lf::encode_all(*tokenizer, d, max_len, t, lower);
}

std::vector<std::vector<int32_t>> PyModel::sequences_of(py::handle ids, py::handle mask) const {
  const IdsBatch b = to_ids_batch(ids, mask, config().vocab_size, config().max_len);
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(b.B));
  for (int64_t r = 0; r < b.B; ++r) {
    int64_t len = b.N;
    if (!b.mask.empty()) {
      const float* m = b.mask.data() + r * b.N;
      len = std::find(m, m + b.N, 0.f) - m;
      if (std::find(m + len, m + b.N, 1.f) != m + b.N)
        throw py::value_error("attention_mask row " + std::to_string(r) +
                              " has a real token after padding: padding must come last");
      if (len == 0)
        throw py::value_error("attention_mask row " + std::to_string(r) + " has no real token");
    }
    seqs[r].assign(b.ids.begin() + r * b.N, b.ids.begin() + r * b.N + len);
  }
  return seqs;
}

namespace {

// Texts (str or sequence of str) or an array of token ids?
bool is_texts(py::handle obj) {
  if (py::isinstance<py::str>(obj)) return true;
  if (py::isinstance<py::array>(obj) || !py::isinstance<py::sequence>(obj)) return false;
  py::sequence s = py::reinterpret_borrow<py::sequence>(obj);
  return s.size() > 0 && py::isinstance<py::str>(s[0]);
}

int64_t batch_size_of(py::handle obj) {
  if (!py::isinstance<py::int_>(obj) || py::isinstance<py::bool_>(obj))
    throw py::value_error("batch_size must be an int");
  const int64_t v = obj.cast<int64_t>();
  if (v < 1 || v > (1 << 20))
    throw py::value_error("batch_size must be in [1, 1048576], got " + std::to_string(v));
  return v;
}

py::dict task_dict(const lf::TaskInfo& t) {
  py::dict d;
  d["format"] = t.format;
  d["pairs"] = t.pairs;
  d["max_len"] = t.max_len;
  d["truncate"] = std::string(lf::to_string(t.truncate));
  d["metric"] = t.metric;
  d["lowercase"] = t.lowercase;
  return d;
}

}  // namespace

py::tuple PyModel::tokenize(py::handle texts, py::handle pairs, py::handle max_len,
                            py::handle truncate, py::handle lowercase) {
  const auto seqs = encode(texts, pairs, max_len, truncate, lowercase, false);
  std::vector<int64_t> which(seqs.size());
  for (size_t i = 0; i < which.size(); ++i) which[i] = static_cast<int64_t>(i);
  lf::PaddedBatch pb;
  lf::make_padded_batch(seqs, which, static_cast<int32_t>(config().pad_id), 0, &pb);
  std::vector<int32_t> mask(pb.mask.begin(), pb.mask.end());
  return py::make_tuple(adopt(std::move(pb.ids), {pb.B, pb.N}), adopt(std::move(mask), {pb.B, pb.N}));
}

py::dict PyModel::forward(py::handle ids, py::handle mask, bool logits, bool classify) {
  const IdsBatch b = to_ids_batch(ids, mask, config().vocab_size, config().max_len);
  // As `linformer forward`: an output whose tensors the folder lacks is refused.
  std::vector<std::string> lacking;
  for (const std::string& n : missing) {
    const bool lm = n.rfind("lm_head.", 0) == 0, cls = n.rfind("classifier.", 0) == 0;
    if ((!lm && !cls) || (lm && logits) || (cls && classify)) lacking.push_back(n);
  }
  if (!lacking.empty())
    throw py::value_error("model folder " + path + ": model.safetensors lacks " +
                          std::to_string(lacking.size()) + " tensor(s) needed for the requested "
                          "outputs, e.g. " + lacking[0] +
                          (logits ? " (give logits=False to skip mlm_logits)" : ""));
  const int64_t D = config().d_model, V = config().vocab_size, C = config().num_classes;
  py::array_t<float> hidden = new_f32({b.B, b.N, D});
  py::array_t<float> lm, cl;
  if (logits) lm = new_f32({b.B, b.N, V});
  if (classify) cl = new_f32({b.B, C});
  float* hp = hidden.mutable_data();
  float* lp = logits ? lm.mutable_data() : nullptr;
  float* cp = classify ? cl.mutable_data() : nullptr;
  run([&] {
    model->forward(lf::Batch{b.ids.data(), b.mask.empty() ? nullptr : b.mask.data(), b.B, b.N},
                   false);
    std::memcpy(hp, model->hidden(), sizeof(float) * static_cast<size_t>(b.B * b.N * D));
    if (lp) model->mlm_logits(lp);
    if (cp) model->cls_logits(cp);
  });
  py::dict out;
  out["hidden_states"] = hidden;
  if (logits) out["mlm_logits"] = lm;
  if (classify) out["class_logits"] = cl;
  return out;
}

py::array_t<float> PyModel::embed(py::handle inputs, py::handle mask, py::handle pairs,
                                  const std::string& pooling, bool normalize,
                                  py::handle batch_size_obj) {
  if (pooling != "cls" && pooling != "mean")
    throw py::value_error("pooling must be \"cls\" or \"mean\", got \"" + pooling + "\"");
  const int64_t batch_size = batch_size_of(batch_size_obj);
  std::vector<std::vector<int32_t>> seqs;
  if ((py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) &&
      py::len(inputs) == 0)
    throw py::value_error("inputs is empty: give at least one text or sequence");
  if (is_texts(inputs)) {
    if (!mask.is_none()) throw py::value_error("attention_mask applies to token ids, not texts");
    // As `linformer embed`: pairs as the model was finetuned, unless pairs are given.
    if (has_labels() && task.pairs && pairs.is_none())
      throw py::value_error("this model was finetuned on sentence pairs: give pairs=");
    seqs = encode(inputs, pairs, py::none(), py::none(), py::none(), false);
  } else {
    if (!pairs.is_none()) throw py::value_error("pairs applies to texts, not token ids");
    seqs = sequences_of(inputs, mask);
  }
  const int64_t n = static_cast<int64_t>(seqs.size()), D = config().d_model;
  std::vector<float> v;
  run([&] {
    lf::embed_sequences(*model, seqs, batch_size, pooling == "cls" ? &v : nullptr,
                        pooling == "mean" ? &v : nullptr);
    if (normalize)
      for (int64_t i = 0; i < n; ++i) {
        float* r = v.data() + i * D;
        double ss = 0;
        for (int64_t j = 0; j < D; ++j) ss += static_cast<double>(r[j]) * r[j];
        if (ss > 0)
          for (int64_t j = 0; j < D; ++j) r[j] = static_cast<float>(r[j] / std::sqrt(ss));
      }
  });
  return adopt(std::move(v), {n, D});
}

std::vector<float> PyModel::probs(py::handle texts, py::handle pairs, py::handle batch_size_obj,
                                  const char* what) {
  require_labels(what);
  const int64_t batch_size = batch_size_of(batch_size_obj);
  const auto seqs = encode(texts, pairs, py::none(), py::none(), py::none(), true);
  std::vector<float> p;
  run([&] { p = lf::predict_probs(*model, seqs, batch_size, true); });
  return p;
}

py::array_t<float> PyModel::classify(py::handle texts, py::handle pairs, py::handle batch_size) {
  std::vector<float> p = probs(texts, pairs, batch_size, "classify");
  const int64_t C = labels.size(), n = static_cast<int64_t>(p.size()) / C;
  return adopt(std::move(p), {n, C});
}

py::list PyModel::predict(py::handle texts, py::handle pairs, py::handle batch_size) {
  const std::vector<float> p = probs(texts, pairs, batch_size, "predict");
  const int64_t C = labels.size(), n = static_cast<int64_t>(p.size()) / C;
  py::list out;
  for (int64_t i = 0; i < n; ++i) {
    // As `linformer predict`: the most probable label, probabilities rounded to 1e-6.
    const float* pi = p.data() + i * C;
    const int64_t best = std::max_element(pi, pi + C) - pi;
    py::dict probs, rec;
    for (int64_t c = 0; c < C; ++c) probs[py::str(labels.names[c])] = std::round(pi[c] * 1e6) / 1e6;
    rec["label"] = labels.names[best];
    rec["probs"] = probs;
    out.append(rec);
  }
  return out;
}

py::object PyModel::evaluate(const std::string& data, int64_t max_examples,
                             const std::string& bad_rows, py::handle batch_size_obj) {
  require_labels("evaluate");
  require_tokenizer("evaluate");
  require_path(data, "data", false);
  if (bad_rows != "stop" && bad_rows != "skip")
    throw py::value_error("bad_rows must be \"stop\" or \"skip\", got \"" + bad_rows + "\"");
  if (max_examples < 0) throw py::value_error("max_examples must be >= 0");
  const int64_t batch_size = batch_size_of(batch_size_obj);
  nlohmann::json j;
  run([&] {
    // As `linformer evaluate` (tools/cmd_evaluate.cpp): the data's format from its header,
    // the model's finetuning length and truncation, batches sorted by length.
    lf::ReadOptions ro;
    ro.bad_rows = bad_rows == "skip" ? lf::BadRows::skip : lf::BadRows::stop;
    ro.require_labels = true;
    ro.split = "test";
    ro.max_examples = max_examples;
    lf::ClassifyData d = as_value_error([&] { return lf::read_classify_data(data, ro); });
    if (d.pairs != task.pairs)
      throw BadValue(data + " holds " + (d.pairs ? "sentence pairs" : "single texts") +
                     " but the model was trained on " +
                     (task.pairs ? "sentence pairs" : "single texts"));
    const std::vector<int32_t> gold =
        as_value_error([&] { return lf::assign_labels(d, labels, ro.bad_rows); });
    const auto seqs = lf::encode_all(*tokenizer, d, task.max_len, task.truncate, task.lowercase);
    const std::vector<float> p = lf::predict_probs(*model, seqs, batch_size, true);
    const lf::ClassifyMetrics m = lf::compute_metrics(p, gold, labels.size(), labels.positive);
    j = m.to_json(labels);
    j["data"] = data;
    j["format"] = d.format;
    j["bad_rows"] = d.bad_rows;
    j["max_len"] = task.max_len;
  });
  return from_json(j);
}

void PyModel::save(const std::string& dir, bool overwrite) {
  if (!overwrite && fs::exists(fs::path(dir) / "model.safetensors"))
    throw py::value_error(dir + " already holds a model (model.safetensors); give overwrite=True "
                                "to replace it, or choose another folder");
  if (!path.empty() && fs::exists(dir) && fs::exists(path) && fs::equivalent(dir, path))
    throw py::value_error(dir + " is the folder this model was loaded from");
  run([&] {
    if (tokenizer && has_labels()) {
      lf::save_classifier_folder(*model, tokenizer->path(), labels, task, dir);
      return;
    }
    lf::save_model(*model, dir);
    if (tokenizer) {
      lf::copy_tokenizer_files(*tokenizer, dir);
    }
  });
}

std::string PyModel::repr() const {
  const lf::Config& c = config();
  std::string s = "<linformer.Model " + (path.empty() ? std::string("(in memory)") : path) + ": " +
                  lf::to_string(c.attention) + ", " + std::to_string(c.n_layers) + " layers, d " +
                  std::to_string(c.d_model) + ", max_len " + std::to_string(c.max_len) + ", " +
                  lf::compute_type_name(model->compute_type());
  if (has_labels()) s += ", " + std::to_string(labels.size()) + " classes";
  return s + ">";
}

void register_model(py::module_& m) {
  py::class_<PyModel>(m, "Model", R"doc(A Linformer (or standard-attention) encoder, loaded from a model folder.

Model(path, precision="f32", threads=None, float_layers=None)

path      a model folder: config.json and model.safetensors, plus tokenizer.model to
          take texts and labels.json for a classifier (what `linformer init`,
          `pretrain` (RUN/model) and `finetune` (RUN/best, RUN/model) write), or the
          name of an installed model such as "linformer-mini" (linformer.models()).
precision "f32" (default), "bf16", "int8" or "auto": the precision of the encoder's linear
          maps at inference. bf16: bf16 weights and inputs, f32 accumulation (about 1e-2
          relative difference; faster with AMX or on AMD Zen 4/5, slower on Intel CPUs
          with AVX512-BF16 but no AMX). auto: bf16 where it is faster, else f32
          (linformer.auto_precision() says which and why). int8: int8 weights with a
          scale per output channel, inputs quantized per token, int32 accumulation
          (docs/int8.md; fastest with AVX512-VNNI). With bf16 or int8 on a CPU with
          AVX512-BF16, attention's products also take bf16 operands (with int8 only
          where bf16 is the faster, as auto decides). Anything else:
          ValueError.
float_layers  None (default) or a list of encoder layer indices whose linear maps stay
          f32 with precision "int8" or "bf16" (--float-layers; docs/int8.md).
threads   None (default): the OpenMP thread count of the process (OMP_NUM_THREADS);
          an int n: this model's calls set the calling thread's OpenMP thread count
          (omp_set_num_threads) to n for their duration, then restore it.

Every compute call releases the GIL. A Model is not safe for concurrent use (it
owns its activation memory): calls on one Model from several threads are
serialised by its lock, while two Models run in parallel.
A missing folder or file raises FileNotFoundError, bad arguments ValueError,
anything else the engine refuses RuntimeError, each with the engine's message.)doc")
      .def(py::init<const std::string&, const std::string&, py::handle, py::handle>(),
           py::arg("path"), py::arg("precision") = "f32", py::arg("threads") = py::none(),
           py::arg("float_layers") = py::none())
      .def_property_readonly(
          "config", [](const PyModel& s) { return from_json(nlohmann::json::parse(s.config().to_json())); },
          "The model configuration (a dict: the keys of config.json, docs/config.md).")
      .def_property_readonly("labels", [](const PyModel& s) { return s.labels.names; },
                             "Class names of a classifier, in class-id order ([] otherwise).")
      .def_property_readonly("task",
                             [](const PyModel& s) -> py::object {
                               if (!s.has_labels()) return py::none();
                               return task_dict(s.task);
                             },
                             "How a classifier encodes its inputs (pairs, max_len, truncate, "
                             "lowercase; from labels.json), or None.")
      .def_property_readonly("max_len", [](const PyModel& s) { return s.config().max_len; },
                             "The longest sequence (tokens) the model takes.")
      .def_property_readonly("vocab_size", [](const PyModel& s) { return s.config().vocab_size; },
                             "Token ids are in [0, vocab_size).")
      .def_property_readonly("d_model", [](const PyModel& s) { return s.config().d_model; },
                             "Width of the hidden states and embeddings.")
      .def_property_readonly("precision",
                             [](const PyModel& s) {
                               return std::string(lf::compute_type_name(s.model->compute_type()));
                             },
                             "\"f32\", \"bf16\" or \"int8\" (see the class docstring).")
      .def_property_readonly("path", [](const PyModel& s) { return s.path; },
                             "The folder the model was loaded from (\"\" for linformer.init).")
      .def_property_readonly("tokenizer",
                             [](const PyModel& s) -> py::object {
                               if (!s.tokenizer) return py::none();
                               return py::cast(s.tokenizer);
                             },
                             "The model's linformer.Tokenizer, or None.")
      .def("tokenize", &PyModel::tokenize, py::arg("texts"), py::arg("pairs") = py::none(),
           py::arg("max_len") = py::none(), py::arg("truncate") = py::none(),
           py::arg("lowercase") = py::none(),
           R"doc(Token ids of texts, as the model's commands encode them.

texts     a str or a list of str; pairs: an optional list of second texts
          (<s> A </s></s> B </s>), one per text.
max_len   tokens per text including <s> and </s> (default: the length a classifier
          was finetuned with, else the model's max_len).
truncate  what a too-long text keeps: "head", "tail" or "head+tail" (default: as
          finetuned, else "head"); lowercase: ASCII-lowercase first (default: as
          finetuned).
Returns (ids, attention_mask): int32 arrays [B, N], N the longest sequence, padded
with the model's pad_id (mask 0).)doc")
      .def("forward", &PyModel::forward, py::arg("ids"), py::arg("attention_mask") = py::none(),
           py::arg("logits") = true, py::arg("classify") = false,
           R"doc(Run the encoder on token ids (as `linformer forward`).

ids             integer array [B, N] (any integer dtype; values in [0, vocab_size),
                1 <= N <= max_len).
attention_mask  optional array [B, N] of 0 (padding) and 1 (real token), any
                integer, bool or float dtype; None: every token is real.
logits          also return mlm_logits [B, N, vocab_size] (the MLM head).
classify        also return class_logits [B, num_classes] (the classification head).
Returns a dict of float32 arrays: hidden_states [B, N, d_model], mlm_logits,
class_logits. Bad ids, shapes or dtypes raise ValueError naming the first bad
value.)doc")
      .def("embed", &PyModel::embed, py::arg("inputs"), py::arg("attention_mask") = py::none(),
           py::arg("pairs") = py::none(), py::arg("pooling") = "cls", py::arg("normalize") = false,
           py::arg("batch_size") = 32,
           R"doc(Sentence vectors (as `linformer embed`): float32 array [B, d_model].

inputs          texts (a str or a list of str; needs the tokenizer), or token ids
                [B, N] with an optional attention_mask whose padding comes last.
pooling         "cls": the first token's (<s>) hidden state; "mean": the mean of the
                hidden states over the real tokens, <s> and </s> included.
normalize       scale every vector to unit L2 norm (for cosine similarity by dot
                product).
batch_size      sequences per forward pass (sorted by length; padding is masked, so
                the result does not depend on it).)doc")
      .def("classify", &PyModel::classify, py::arg("texts"), py::arg("pairs") = py::none(),
           py::arg("batch_size") = 32,
           R"doc(Class probabilities of a classifier: float32 array [B, len(labels)].

texts (and pairs for a model finetuned on sentence pairs) as in tokenize(); encoded
with the length, truncation and casing the model was finetuned with.)doc")
      .def("predict", &PyModel::predict, py::arg("texts"), py::arg("pairs") = py::none(),
           py::arg("batch_size") = 32,
           R"doc(Predictions as `linformer predict` writes them: a list of dicts
{"label": NAME, "probs": {NAME: p, ...}}, probabilities rounded to 6 decimals.)doc")
      .def("evaluate", &PyModel::evaluate, py::arg("data"), py::arg("max_examples") = 0,
           py::arg("bad_rows") = "stop", py::arg("batch_size") = 64,
           R"doc(Evaluate a classifier on labelled data (as `linformer evaluate`).

data          a TSV file with a header (SST-2, QNLI, QQP, any TSV with label and text
              columns) or an aclImdb folder.
max_examples  an evenly spread subset (0: all); bad_rows: "stop" or "skip".
Returns a dict: accuracy, f1, precision, recall, loss, count, confusion (rows true,
columns predicted), per_class_f1, labels, format, bad_rows, max_len.)doc")
      .def("save", &PyModel::save, py::arg("path"), py::arg("overwrite") = false,
           R"doc(Write the model as a folder (config.json, model.safetensors, and the
tokenizer and labels.json when it has them); each file is written atomically.
An existing model in path is refused unless overwrite=True.)doc")
      .def("__repr__", &PyModel::repr);
}

}  // namespace lfpy
