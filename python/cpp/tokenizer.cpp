// linformer.Tokenizer: the SentencePiece tokenizer of a model folder or run.
#include <pybind11/stl.h>

#include <filesystem>
#include <memory>

#include "linformer/tokenizer.h"
#include "module.h"

namespace lfpy {

namespace {

std::shared_ptr<lf::Tokenizer> open_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  require_path(path, "tokenizer", fs::is_directory(path));
  if (fs::is_directory(path) && lf::Tokenizer::files_in(path).empty())
    throw py::value_error(path + " holds no tokenizer (tokenizer.json, vocab.json + merges.txt, "
                                 "vocab.txt or tokenizer.model)");
  return std::make_shared<lf::Tokenizer>(path);
}

py::object encode(const lf::Tokenizer& tok, py::handle texts, bool add_special) {
  const bool one = py::isinstance<py::str>(texts);
  const std::vector<std::string> all = to_texts(texts, "texts");
  py::list out;
  for (const std::string& t : all) {
    std::vector<int32_t> ids = tok.encode(t);
    if (add_special) {
      ids.insert(ids.begin(), tok.special().cls);
      ids.push_back(tok.special().sep);
    }
    out.append(py::cast(ids));
  }
  return one ? out[0] : py::object(out);
}

std::string decode(const lf::Tokenizer& tok, py::handle ids_obj) {
  py::array a = py::module_::import("numpy").attr("asarray")(ids_obj);
  const char kind = a.dtype().kind();
  if (a.size() > 0 && kind != 'i' && kind != 'u')
    throw py::value_error("ids must be integers, got dtype " + std::string(py::str(a.dtype())));
  if (a.ndim() > 1) throw py::value_error("ids must be one sequence (1 dimension)");
  auto v = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<int32_t> ids(static_cast<size_t>(v.size()));
  const int64_t V = tok.vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = v.data()[i];
    if (id < 0 || id >= V)
      throw py::value_error("ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                            " is outside the vocabulary [0, " + std::to_string(V) + ")");
    ids[i] = static_cast<int32_t>(id);
  }
  return tok.decode(ids);
}

}  // namespace

void register_tokenizer(py::module_& m) {
  py::class_<lf::Tokenizer, std::shared_ptr<lf::Tokenizer>>(m, "Tokenizer", R"doc(A SentencePiece tokenizer.

Tokenizer(path): a tokenizer.model file, or a folder holding one (a model folder or
a run folder). Ids 0-4 are <s>, <pad>, </s>, <unk>, <mask>; the pieces follow.)doc")
      .def(py::init(&open_tokenizer), py::arg("path"))
      .def("encode", &encode, py::arg("texts"), py::arg("add_special") = false,
           R"doc(Token ids of a str (a list of int), or of each str of a list (a list of
lists). add_special=True adds <s> (0) before and </s> (2) after, as the model's
inputs have them (Model.tokenize also truncates and pads).)doc")
      .def("decode", &decode, py::arg("ids"),
           "The text of a sequence of ids (a list or 1-D integer array); special tokens are "
           "dropped. Ids outside [0, vocab_size) raise ValueError.")
      .def("piece", [](const lf::Tokenizer& t, int64_t id) {
             if (id < 0 || id >= t.vocab_size())
               throw py::value_error("id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                     std::to_string(t.vocab_size()) + ")");
             return t.piece(static_cast<int32_t>(id));
           }, py::arg("id"), "The piece (subword string) of one id.")
      .def_property_readonly("vocab_size", &lf::Tokenizer::vocab_size, "Number of ids.")
      .def_property_readonly("path", &lf::Tokenizer::path, "The tokenizer.model file.")
      .def("__len__", &lf::Tokenizer::vocab_size)
      .def("__repr__", [](const lf::Tokenizer& t) {
        return "<linformer.Tokenizer " + t.path() + ": " + std::to_string(t.vocab_size()) + " ids>";
      });
}

}  // namespace lfpy
