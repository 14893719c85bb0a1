// Token-id batches from numpy arrays (or anything np.asarray takes), validated once.
#include <cmath>
#include <string>

#include "module.h"

namespace lfpy {

namespace {

// As numpy prints shapes: (2, 3), (4,), ().
std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d)
    s += (d ? ", " : "") + std::to_string(a.shape(d));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string dtype_str(const py::array& a) { return py::str(a.dtype()); }

py::array as_array(py::handle obj, const char* what) {
  if (obj.is_none()) throw py::value_error(std::string(what) + " is None");
  py::array a;
  try {
    a = py::reinterpret_borrow<py::array>(py::module_::import("numpy").attr("asarray")(obj));
  } catch (py::error_already_set& e) {
    throw py::value_error(std::string(what) + " is not an array: " + e.what());
  }
  return a;
}

// Copies the ids (integer type T) into out, checking each against the vocabulary.
template <typename T>
void copy_ids(const py::array& a, int64_t vocab, int64_t N, std::vector<int32_t>* out) {
  auto c = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
  const T* p = c.data();
  out->resize(static_cast<size_t>(c.size()));
  for (size_t i = 0; i < out->size(); ++i) {
    const bool ok = (std::is_signed<T>::value ? static_cast<long double>(p[i]) >= 0 : true) &&
                    static_cast<long double>(p[i]) < static_cast<long double>(vocab);
    if (!ok)
      throw py::value_error("ids[" + std::to_string(i / N) + ", " + std::to_string(i % N) +
                            "] = " + std::to_string(p[i]) + " is outside the vocabulary [0, " +
                            std::to_string(vocab) + ")");
    (*out)[i] = static_cast<int32_t>(p[i]);
  }
}

}  // namespace

IdsBatch to_ids_batch(py::handle ids_obj, py::handle mask_obj, int64_t vocab, int64_t max_len) {
  py::array ids = as_array(ids_obj, "ids");
  const char kind = ids.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::value_error("ids must be an integer array (int32 or int64), got dtype " +
                          dtype_str(ids));
  if (ids.ndim() != 2)
    throw py::value_error("ids must have shape [B, N] (2 dimensions), got shape " +
                          shape_str(ids));
  IdsBatch b;
  b.B = ids.shape(0);
  b.N = ids.shape(1);
  if (b.B < 1 || b.N < 1)
    throw py::value_error("ids has shape " + shape_str(ids) +
                          ", an empty batch; need B >= 1 sequences of N >= 1 tokens");
  if (b.N > max_len)
    throw py::value_error("sequence length N = " + std::to_string(b.N) +
                          " exceeds the model's max_len " + std::to_string(max_len));
  if (b.B > (int64_t{1} << 40) / b.N)
    throw py::value_error("a batch of " + std::to_string(b.B) + " x " + std::to_string(b.N) +
                          " tokens is too large");
  const int itemsize = static_cast<int>(ids.itemsize());
  if (kind == 'u' && itemsize == 8)
    copy_ids<uint64_t>(ids, vocab, b.N, &b.ids);
  else if (kind == 'i' && itemsize == 4)
    copy_ids<int32_t>(ids, vocab, b.N, &b.ids);
  else
    copy_ids<int64_t>(ids, vocab, b.N, &b.ids);  // every other integer type fits

  if (mask_obj.is_none()) return b;
  py::array mask = as_array(mask_obj, "attention_mask");
  const char mk = mask.dtype().kind();
  if (mk != 'i' && mk != 'u' && mk != 'b' && mk != 'f')
    throw py::value_error("attention_mask must be an integer, bool or float array, got dtype " +
                          dtype_str(mask));
  if (mask.ndim() != 2 || mask.shape(0) != b.B || mask.shape(1) != b.N)
    throw py::value_error("attention_mask has shape " + shape_str(mask) + " but ids has " +
                          shape_str(ids));
  auto m = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(mask);
  const double* p = m.data();
  b.mask.resize(static_cast<size_t>(m.size()));
  for (size_t i = 0; i < b.mask.size(); ++i) {
    if (p[i] != 0.0 && p[i] != 1.0)
      throw py::value_error("attention_mask[" + std::to_string(i / b.N) + ", " +
                            std::to_string(i % b.N) + "] = " + std::to_string(p[i]) +
                            "; it must hold 0 (padding) or 1 (real token)");
    b.mask[i] = static_cast<float>(p[i]);
  }
  return b;
}

}  // namespace lfpy
