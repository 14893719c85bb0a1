// The Python module linformer._ext (pybind11): one register_* per class or group of functions,
// the array and error plumbing they share. python/linformer/__init__.py is the thin Python
// layer over it (docs/python.md).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "linformer/compute_type.h"
#include "linformer/error.h"

namespace lfpy {

namespace py = pybind11;

// ---- Errors (module.cpp registers their translation) ----
// lf::Error from the engine becomes RuntimeError; the binding decides at the boundary what is
// bad input (ValueError: py::value_error, or BadValue for an engine check about an argument)
// and what is a missing file (FileNotFoundError: NotFound).
struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct BadValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A model folder or an installed model's name (lf::resolve_model) -> the folder; NotFound
// (listing the installed models) when it is neither.
std::string resolve_model_path(const std::string& name_or_path);

// Throws NotFound naming `what` unless `path` exists (a folder when `folder`).
void require_path(const std::string& path, const char* what, bool folder);

// Runs f; an lf::Error or a JSON error it throws becomes BadValue with the same message (for
// engine checks of caller-given values: options, configs).
template <typename F>
auto as_value_error(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const lf::Error& e) {
    throw BadValue(e.what());
  } catch (const nlohmann::json::exception& e) {
    throw BadValue(e.what());
  }
}

// ---- Conversions ----
lf::ComputeType parse_precision(const std::string& s);  // "f32" | "bf16", else ValueError
nlohmann::json to_json(py::handle obj);                 // dict/list/str/number/bool/None
py::object from_json(const nlohmann::json& j);

// Texts: a str (one text) or a sequence of str; ValueError naming the argument otherwise or
// when empty.
std::vector<std::string> to_texts(py::handle obj, const char* what);

// A batch of token ids [B, N] with its mask, validated for a model (ValueError with the
// position of the first bad value): integer ids in [0, vocab), 1 <= N <= max_len, B >= 1;
// the mask (any integer, bool or float dtype) of the same shape, holding 0 and 1.
struct IdsBatch {
  std::vector<int32_t> ids;
  std::vector<float> mask;  // empty: no mask given
  int64_t B = 0, N = 0;
};
IdsBatch to_ids_batch(py::handle ids, py::handle mask, int64_t vocab_size, int64_t max_len);

// A new float32 array of the given shape; data() is written without the GIL.
py::array_t<float> new_f32(const std::vector<int64_t>& shape);
// A numpy array that takes over a vector's buffer (freed with the array, no copy).
template <typename T>
py::array_t<T> adopt(std::vector<T>&& v, const std::vector<int64_t>& shape) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, heap->data(), owner);
}

// ---- Threads ----
// Sets the OpenMP thread count of the calling thread for one call (threads <= 0: unchanged)
// and restores it after.
class ThreadCount {
 public:
  explicit ThreadCount(int threads);
  ~ThreadCount();
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_ = 0;
};
int parse_threads(py::handle threads);  // None -> 0; else an int >= 1, ValueError otherwise

void register_model(py::module_& m);
void register_tokenizer(py::module_& m);
void register_training(py::module_& m);

}  // namespace lfpy
