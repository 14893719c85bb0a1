// linformer.init, linformer.pretrain and linformer.finetune: the training commands with their
// command-line options as keyword arguments, progress records handed to a Python callback,
// and Ctrl-C (or an exception in the callback) stopping the run at the end of a step with a
// checkpoint, so the run folder stays complete and resume=True continues it.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "linformer/config.h"
#include "linformer/finetune.h"
#include "linformer/model.h"
#include "linformer/pretrain.h"
#include "linformer/tokenizer.h"
#include "model.h"
#include "module.h"

namespace lfpy {

namespace {

// Options not stored in train_args.json, so absent from to_json(), but set by keyword.
struct RunFlags {
  bool quiet = false, overwrite = false;
  int64_t stop_after = 0;
};

// The options of a command: its defaults as the command line has them, then each keyword in
// turn. Unknown keywords and values of the wrong type raise ValueError naming them.
template <typename Options>
Options options_from(const Options& defaults, const py::dict& kw, RunFlags* flags,
                     const std::vector<std::string>& lists) {
  nlohmann::json j = defaults.to_json();
  for (auto item : kw) {
    const std::string key = py::str(item.first);
    py::handle v = item.second;
    if (key == "quiet" || key == "overwrite") {
      (key == "quiet" ? flags->quiet : flags->overwrite) = py::cast<bool>(v);
      continue;
    }
    if (key == "stop_after" && std::is_same<Options, lf::FinetuneOptions>::value) {
      if (!py::isinstance<py::int_>(v)) throw py::value_error("stop_after must be an int");
      flags->stop_after = v.cast<int64_t>();
      continue;
    }
    if (!j.contains(key)) {
      std::string known;
      for (auto it = j.begin(); it != j.end(); ++it) known += (known.empty() ? "" : ", ") + it.key();
      throw py::value_error("unknown option '" + key + "'; the options are: " + known +
                            ", quiet, overwrite");
    }
    nlohmann::json value = to_json(v);
    // A list option (train, valid, sets) also takes one str.
    if (value.is_string() && std::find(lists.begin(), lists.end(), key) != lists.end())
      value = nlohmann::json::array({value});
    if (!value.is_null() && j[key].type() != value.type() &&
        !(j[key].is_number() && value.is_number()))
      throw py::value_error("option '" + key + "' must be " +
                            (j[key].is_string()   ? std::string("a str")
                             : j[key].is_array()  ? std::string("a list of str")
                             : j[key].is_boolean() ? std::string("a bool")
                                                   : std::string("a number")) +
                            ", got " + std::string(py::repr(v)));
    if (j[key].is_number_integer() && value.is_number_float())
      throw py::value_error("option '" + key + "' must be an int, got " + std::string(py::repr(v)));
    if (!value.is_null()) j[key] = value;
  }
  return as_value_error([&] { return Options::from_json(j); });
}

py::dict defaults_dict(const nlohmann::json& j) {
  py::dict d = from_json(j);
  d["quiet"] = false;
  d["overwrite"] = false;
  return d;
}

// The files a run reads must exist (FileNotFoundError), before anything is written.
void require_inputs(const std::vector<std::pair<const char*, std::string>>& paths) {
  for (const auto& [what, p] : paths)
    if (!p.empty()) require_path(p, what, false);
}

// The fields both commands' results have; each adds its own.
py::dict result_dict(int64_t steps_done, bool stopped, double seconds, const std::string& out) {
  py::dict d;
  d["steps_done"] = steps_done;
  d["stopped"] = stopped;
  d["seconds"] = seconds;
  d["out"] = out;
  return d;
}

// Runs a training function without the GIL; the hooks take it back to call the Python
// callback and to look for Ctrl-C. A Python exception from either (KeyboardInterrupt from the
// signal handler, or the callback's own) stops the run at the end of the step, with its
// checkpoint, and is raised once the run has returned. Returns the result's fields both
// commands have (result_dict) and the whole result in *r.
template <typename Result, typename Options>
py::dict run_training(Options& o, py::object callback, int threads,
                      Result (*train)(const Options&, bool), bool resume, Result* r) {
  std::optional<py::error_already_set> pending;  // read and written with the GIL held
  auto keep = [&](py::error_already_set&& e) {
    if (!pending) pending.emplace(std::move(e));
  };
  if (!callback.is_none())
    o.hooks.on_record = [&](const nlohmann::json& record) {
      py::gil_scoped_acquire gil;
      if (pending) return;
      try {
        callback(from_json(record));
      } catch (py::error_already_set& e) {
        keep(std::move(e));
      }
    };
  o.hooks.stop_requested = [&]() {
    py::gil_scoped_acquire gil;
    if (!pending && PyErr_CheckSignals() != 0) keep(py::error_already_set());
    return pending.has_value();
  };
  {
    py::gil_scoped_release nogil;
    ThreadCount tc(threads);
    *r = train(o, resume);
  }
  o.hooks = {};
  if (pending) throw std::move(*pending);
  return result_dict(r->steps_done, r->stopped, r->seconds, o.out);
}

// The options of a run from the keywords, with what both commands check first: the run
// folder given (and there, to resume), the options in range.
template <typename Options>
Options run_options(const char* cmd, const Options& defaults, const py::dict& kw, bool resume,
                    const py::object& callback, const std::vector<std::string>& lists,
                    RunFlags* flags) {
  Options o = options_from(defaults, kw, flags, lists);
  o.quiet = flags->quiet || (!callback.is_none() && !kw.contains("quiet"));
  o.overwrite = flags->overwrite;
  o.precision_given = kw.contains("precision");  // resume=True runs this call in it
  if (o.out.empty()) throw py::value_error(std::string(cmd) + ": out (the run folder) is required");
  as_value_error([&] { o.validate(); });
  if (resume) require_path(o.out, "run folder", true);
  return o;
}

py::dict pretrain_py(py::dict kw, bool resume, py::object callback, py::handle threads_obj) {
  const int threads = parse_threads(threads_obj);
  RunFlags flags;
  lf::PretrainOptions o = run_options("pretrain", lf::PretrainOptions{}, kw, resume, callback,
                                      {"train", "valid", "sets"}, &flags);
  if (!resume && o.train.empty()) throw py::value_error("pretrain: train (a corpus) is required");
  if (!resume && o.config.empty() && o.init_from.empty())
    throw py::value_error("pretrain: give config (a config.json) or init_from (a model folder)");
  for (const std::string& t : o.train) require_path(t, "train", false);
  for (const std::string& t : o.valid) require_path(t, "valid", false);
  require_inputs({{"config", o.config}, {"init_from", o.init_from}, {"tokenizer", o.tokenizer}});
  lf::PretrainResult r;
  py::dict d = run_training(o, callback, threads, &lf::pretrain, resume, &r);
  d["final_train_loss"] = r.final_train_loss;
  // None when nothing was measured (a resumed run that had already finished).
  d["final_valid_loss"] = r.evaluated ? py::object(py::float_(r.final_valid_loss)) : py::none();
  d["final_valid_ppl"] = r.evaluated ? py::object(py::float_(r.final_valid_ppl)) : py::none();
  d["tokens_per_second"] = r.tokens_per_second;
  return d;
}

lf::FinetuneOptions finetune_defaults() {
  lf::FinetuneOptions o;
  o.optim.lr = 1e-4f;  // the command line's default (tools/cmd_finetune.cpp)
  return o;
}

py::dict finetune_py(py::dict kw, bool resume, py::object callback, py::handle threads_obj) {
  const int threads = parse_threads(threads_obj);
  RunFlags flags;
  lf::FinetuneOptions o =
      run_options("finetune", finetune_defaults(), kw, resume, callback, {"sets"}, &flags);
  o.stop_after = flags.stop_after;
  if (!resume && o.train.empty()) throw py::value_error("finetune: train (the data) is required");
  if (!o.init_from.empty() && !o.config.empty())
    throw py::value_error("finetune: init_from's config is used; config applies to training from "
                          "scratch (sets may still override keys)");
  require_inputs({{"train", o.train}, {"dev", o.dev}, {"config", o.config},
                  {"tokenizer", o.tokenizer}});
  if (!o.init_from.empty()) require_path(o.init_from, "init_from", true);
  lf::FinetuneResult r;
  py::dict d = run_training(o, callback, threads, &lf::finetune, resume, &r);
  d["total_steps"] = r.total_steps;
  d["metric"] = r.metric;
  d["best_metric"] = r.best_metric;
  d["best_step"] = r.best_step;
  d["best_epoch"] = r.best_epoch;
  d["last_dev"] = from_json(r.last_dev);
  d["examples_per_second"] = r.examples_per_second;
  return d;
}

std::unique_ptr<PyModel> init_py(py::handle config, uint64_t seed, py::handle tokenizer,
                                 const std::string& precision) {
  const lf::ComputeType ct = parse_precision(precision);
  if (!py::isinstance<py::dict>(config))
    throw py::value_error("config must be a dict (the keys of config.json, docs/config.md)");
  const std::string text = to_json(config).dump();
  const lf::Config cfg = as_value_error([&] {
    lf::Config c = lf::Config::from_json(text);
    c.validate();
    return c;
  });
  std::shared_ptr<lf::Tokenizer> tok;
  if (!tokenizer.is_none()) {
    tok = py::cast<std::shared_ptr<lf::Tokenizer>>(tokenizer);
    if (tok->vocab_size() > cfg.vocab_size)
      throw py::value_error("the tokenizer has " + std::to_string(tok->vocab_size()) +
                            " pieces but the config's vocab_size is " +
                            std::to_string(cfg.vocab_size));
  }
  std::unique_ptr<lf::Model> m;
  {
    py::gil_scoped_release nogil;
    m = std::make_unique<lf::Model>(cfg);
    m->init(seed);
  }
  m->set_compute_type(ct);
  return std::make_unique<PyModel>(std::move(m), tok);
}

}  // namespace

void register_training(py::module_& m) {
  m.def("init", &init_py, py::arg("config"), py::arg("seed") = 0,
        py::arg("tokenizer") = py::none(), py::arg("precision") = "f32",
        R"doc(A new model with fresh weights (as `linformer init`): a linformer.Model.

config     a dict of configuration keys (docs/config.md); absent keys take their
           defaults. Unknown keys or values out of range raise ValueError.
seed       the weights depend only on it (not on the thread count).
tokenizer  an optional linformer.Tokenizer to attach (for texts, and saved with it).
Model.save(path) writes the folder.)doc");
  m.def("_pretrain", &pretrain_py, py::arg("options"), py::arg("resume"), py::arg("callback"),
        py::arg("threads"));
  m.def("_finetune", &finetune_py, py::arg("options"), py::arg("resume"), py::arg("callback"),
        py::arg("threads"));
  m.def("_pretrain_defaults", [] { return defaults_dict(lf::PretrainOptions{}.to_json()); });
  m.def("_finetune_defaults", [] {
    py::dict d = defaults_dict(finetune_defaults().to_json());
    d["stop_after"] = 0;
    return d;
  });
}

}  // namespace lfpy
