// linformer._ext: the error translation, the shared conversions and the module itself.
#include "module.h"
#include "linformer/checkpoint.h"
#include "linformer/models.h"

#include <omp.h>
#include <pybind11/stl.h>

#include <filesystem>

#include "linformer/cpu.h"

namespace lfpy {

void require_path(const std::string& path, const char* what, bool folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw NotFound(std::string(what) + ": no path given");
  if (!fs::exists(path, ec)) throw NotFound(std::string(what) + " " + path + " does not exist");
  if (folder && !fs::is_directory(path, ec))
    throw NotFound(std::string(what) + " " + path + " is not a folder");
}

std::string resolve_model_path(const std::string& name_or_path) {
  try {
    // An installed model's name, then a run folder's best (else last) model.
    return lf::resolve_model_folder(lf::resolve_model(name_or_path));
  } catch (const lf::Error& e) {
    throw NotFound(e.what());
  }
}

lf::ComputeType parse_precision(const std::string& s) {
  try {
    return lf::resolve_precision(s);  // "auto": this CPU's faster one
  } catch (const lf::Error& e) {
    throw py::value_error(e.what());
  }
}

nlohmann::json to_json(py::handle obj) {
  // Through Python's json module: the same rules as json.dumps (NaN refused: not valid JSON).
  py::module_ json = py::module_::import("json");
  std::string text;
  try {
    text = py::str(json.attr("dumps")(obj, py::arg("allow_nan") = false));
  } catch (py::error_already_set& e) {
    throw py::value_error(std::string("not a JSON value: ") + e.what());
  }
  return nlohmann::json::parse(text);
}

py::object from_json(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

std::vector<std::string> to_texts(py::handle obj, const char* what) {
  std::vector<std::string> out;
  auto one = [&](py::handle h, size_t i) {
    if (!py::isinstance<py::str>(h))
      throw py::value_error(std::string(what) + "[" + std::to_string(i) + "] is a " +
                            std::string(py::str(h.get_type().attr("__name__"))) +
                            ", not a str");
    PyObject* bytes = PyUnicode_AsUTF8String(h.ptr());
    if (!bytes) {
      PyErr_Clear();
      throw py::value_error(std::string(what) + "[" + std::to_string(i) +
                            "] cannot be encoded as UTF-8 (a lone surrogate?)");
    }
    out.emplace_back(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
    Py_DECREF(bytes);
  };
  if (py::isinstance<py::str>(obj)) {
    one(obj, 0);
    return out;
  }
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::bytes>(obj))
    throw py::value_error(std::string(what) + " must be a str or a list of str, got a " +
                          std::string(py::str(obj.get_type().attr("__name__"))));
  py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
  const Py_ssize_t len = PySequence_Size(seq.ptr());
  if (len < 0) {  // e.g. a 0-d numpy array
    PyErr_Clear();
    throw py::value_error(std::string(what) + " must be a str or a list of str");
  }
  const size_t n = static_cast<size_t>(len);
  if (n == 0) throw py::value_error(std::string(what) + " is empty: give at least one text");
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) one(seq[i], i);
  return out;
}

py::array_t<float> new_f32(const std::vector<int64_t>& shape) {
  return py::array_t<float>(std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

ThreadCount::ThreadCount(int threads) : saved_(threads > 0 ? omp_get_max_threads() : 0) {
  if (threads > 0) omp_set_num_threads(threads);
}
ThreadCount::~ThreadCount() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

int parse_threads(py::handle threads) {
  if (threads.is_none()) return 0;
  if (!py::isinstance<py::int_>(threads) || py::isinstance<py::bool_>(threads))
    throw py::value_error("threads must be None or an int >= 1");
  const long long t = threads.cast<long long>();
  if (t < 1 || t > 4096)
    throw py::value_error("threads must be None or in [1, 4096], got " + std::to_string(t));
  return static_cast<int>(t);
}

}  // namespace lfpy

PYBIND11_MODULE(_ext, m) {
  using namespace lfpy;
  m.doc() = "The compiled part of the linformer module (import linformer instead).";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NotFound& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    } catch (const BadValue& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const lf::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "out of memory");
    }
  });
  m.def(
      "precisions",
      [](bool peaks) -> py::object {
        if (peaks) {
          std::vector<lf::ProductPeak> measured;
          {
            py::gil_scoped_release nogil;
            measured = lf::product_peaks();
          }
          py::dict d;
          for (const lf::ProductPeak& p : measured)
            d[lf::compute_type_name(p.precision)] = p.gflops;
          return d;
        }
        py::list out;
        out.append("f32");
        if (lf::compute_type_supported(lf::ComputeType::bf16)) out.append("bf16");
        if (lf::compute_type_supported(lf::ComputeType::int8)) out.append("int8");
        return out;
      },
      py::arg("peaks") = false,
      "The precisions this CPU runs, for Model(..., precision=...): always \"f32\"; \"bf16\"\n"
      "where oneDNN has a bf16 matmul (AVX-512); \"int8\" where it has an int8 matmul (AVX2\n"
      "and newer). Model refuses any other with RuntimeError. peaks=True: a dict of each of\n"
      "them to its measured product peak on this CPU in GFLOP/s (int8: GOP/s; a 2048 x 3072 x\n"
      "768 product, about a second), as `linformer info --peaks` prints; what \"auto\" stands\n"
      "for (linformer.auto_precision()).");
  m.def(
      "auto_precision",
      [] {
        const lf::AutoPrecision a = lf::auto_precision();
        py::dict d;
        d["precision"] = lf::compute_type_name(a.precision);
        d["reason"] = a.reason;
        return d;
      },
      "What precision=\"auto\" runs on this CPU: {\"precision\": \"f32\" or \"bf16\",\n"
      "\"reason\": why}. bf16 where its products run faster than f32's (AMX, AMD Zen 4/5), f32\n"
      "everywhere else (an Intel CPU with AVX512-BF16 but no AMX runs them at half the f32 rate);\n"
      "never int8, which is only used when asked for.");
  m.def(
      "models",
      [] {
        py::list out;
        for (const lf::InstalledModel& im : lf::installed_models()) {
          py::dict d;
          d["name"] = im.name;
          d["path"] = im.path;
          d["attention"] = im.attention;
          d["max_len"] = im.max_len;
          d["bytes"] = im.bytes;
          d["card"] = im.has_card;
          out.append(d);
        }
        return out;
      },
      "The installed models, whose names Model(...) accepts in place of a path: a list of\n"
      "dicts (name, path, attention, max_len, bytes, card), in the order `linformer models`\n"
      "prints them. LINFORMER_MODELS (':'-separated folders) is searched first.");
  m.def(
      "cpu_paths",
      [] {
        const lf::CpuPaths p = lf::cpu_paths();
        py::dict d;
        d["kernels"] = p.kernels;
        d["supported"] = p.supported;
        d["forced"] = p.forced;
        d["onednn"] = p.onednn;
        return d;
      },
      "The code paths this CPU runs: 'kernels', the instruction-set level of the engine's own\n"
      "kernels (baseline, avx2, avx512, avx512bf16: the best the CPU has, or the lower one the\n"
      "environment variable LINFORMER_ISA forces); 'supported', every level it could run;\n"
      "'forced'; 'onednn', oneDNN's instruction set for the matrix products.");
  // The kernels' level is decided at import: LINFORMER_ISA naming a level this CPU lacks
  // makes the import fail with the reason (RuntimeError), before any work.
  lf::cpu_paths();
  register_model(m);
  register_tokenizer(m);
  register_training(m);
}
