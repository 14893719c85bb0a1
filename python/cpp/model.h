// The C++ side of linformer.Model (model.cpp), also built by linformer.init (training.cpp).
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "linformer/classify_data.h"
#include "linformer/classifier.h"
#include "linformer/model.h"
#include "linformer/tokenizer.h"
#include "module.h"

namespace lfpy {

struct PyModel {
  // A model folder (FileNotFoundError when absent); see the class docstring.
  PyModel(const std::string& dir, const std::string& precision, py::handle threads,
          py::handle float_layers);
  // A model made in memory (linformer.init), with an optional tokenizer.
  PyModel(std::unique_ptr<lf::Model> m, std::shared_ptr<lf::Tokenizer> tok);

  std::unique_ptr<lf::Model> model;
  std::shared_ptr<lf::Tokenizer> tokenizer;  // null: the folder holds no tokenizer.model
  lf::LabelMap labels;                       // empty for a model that is not a classifier
  lf::TaskInfo task;                         // max_len: the default tokens per text
  std::string path;
  std::vector<std::string> missing;  // parameters model.safetensors lacks (freshly initialised)
  int threads = 0;                   // OpenMP threads of this model's calls (0: unchanged)
  std::mutex mu;                     // one call at a time: the model owns its activations

  const lf::Config& config() const;
  bool has_labels() const { return !labels.names.empty(); }

  // Runs f without the GIL, holding the model's lock, with the model's thread count.
  template <typename F>
  void run(F&& f) {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu);
    ThreadCount tc(threads);
    f();
  }

  py::tuple tokenize(py::handle texts, py::handle pairs, py::handle max_len, py::handle truncate,
                     py::handle lowercase);
  py::dict forward(py::handle ids, py::handle mask, bool logits, bool classify);
  py::array_t<float> embed(py::handle inputs, py::handle mask, py::handle pairs,
                           const std::string& pooling, bool normalize, py::handle batch_size);
  py::array_t<float> classify(py::handle texts, py::handle pairs, py::handle batch_size);
  py::list predict(py::handle texts, py::handle pairs, py::handle batch_size);
  py::object evaluate(const std::string& data, int64_t max_examples, const std::string& bad_rows,
                      py::handle batch_size);
  void save(const std::string& dir, bool overwrite);
  std::string repr() const;

 private:
  void require_tokenizer(const char* what) const;
  void require_labels(const char* what) const;
  // Texts (and pairs) encoded as the CLI encodes them; pairs_as_trained: a classifier's
  // pairing must match how it was finetuned.
  std::vector<std::vector<int32_t>> encode(py::handle texts, py::handle pairs, py::handle max_len,
                                           py::handle truncate, py::handle lowercase,
                                           bool pairs_as_trained);
  // The rows of an ids array without their padding (mask zeros, which must come last).
  std::vector<std::vector<int32_t>> sequences_of(py::handle ids, py::handle mask) const;
  std::vector<float> probs(py::handle texts, py::handle pairs, py::handle batch_size,
                           const char* what);
};

}  // namespace lfpy
