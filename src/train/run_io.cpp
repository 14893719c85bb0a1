#include "train/run_io.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "io/json_read.h"
#include "layers/attention_path.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/safetensors.h"

namespace lf {

namespace fs = std::filesystem;
using json = nlohmann::json;

void create_run_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LF_CHECK(!ec, "cannot create run folder ", dir, ": ", ec.message());
}

std::string run_args_path(const std::string& run_dir) {
  return (fs::path(run_dir) / "train_args.json").string();
}

json read_run_args(const char* cmd, const char* kind, const std::string& run_dir, bool resume) {
  LF_CHECK(!run_dir.empty(), cmd, ": no run folder (--out)");
  if (!resume) return json();
  const std::string path = run_args_path(run_dir);
  LF_CHECK(fs::exists(path), cmd, " --resume: ", path, " not found; is ", run_dir, " a ", kind,
           " run folder?");
  return read_json_file(path);
}

int64_t rank_batch(const char* cmd, const char* what, const json& saved, int64_t batch,
                   int ranks, bool quiet) {
  const int64_t run_ranks = saved.is_object() ? saved.value("ranks", int64_t{1}) : ranks;
  if (run_ranks == ranks) return batch;
  const int64_t G = run_ranks * batch;
  LF_CHECK(run_ranks >= 1 && G % ranks == 0, cmd, " --resume: the run's micro-batch of ", G,
           " ", what, " (", run_ranks, " rank(s) x ", batch, ") cannot be split evenly over ",
           ranks, " ranks; resume it with a number of ranks that divides ", G);
  say(quiet, "resume: the run's micro-batch of %lld %s is split over %d rank(s) x %lld\n",
      static_cast<long long>(G), what, ranks, static_cast<long long>(G / ranks));
  return G / ranks;
}

void write_run_args(const std::string& run_dir, json args, int ranks) {
  if (ranks > 1) args["ranks"] = ranks;
  write_file_atomic(run_args_path(run_dir), args.dump(2) + "\n");
}

void save_checkpoint(const std::string& run_dir, int64_t step, Model& model, AdamW& opt,
                     const json& state, int keep_last) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  const fs::path final_dir = root / name;
  const fs::path tmp_dir = root / (std::string(name) + ".tmp");
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  fs::create_directories(tmp_dir, ec);
  LF_CHECK(!ec, "cannot create ", tmp_dir.string(), ": ", ec.message());
  save_model(model, tmp_dir.string());
  SafeTensorsWriter w;
  for (const ParamInfo& p : model.params()) {
    w.add_f32("m." + p.name, p.shape, opt.m_data() + p.offset);
    w.add_f32("v." + p.name, p.shape, opt.v_data() + p.offset);
  }
  w.set_metadata("adam_steps", std::to_string(opt.steps_done()));
  w.write((tmp_dir / "optimizer.safetensors").string());
  json st = state;
  st["step"] = step;
  st["adam_steps"] = opt.steps_done();
  write_file_atomic((tmp_dir / "state.json").string(), st.dump(2) + "\n");
  fs::remove_all(final_dir, ec);
  fs::rename(tmp_dir, final_dir, ec);
  LF_CHECK(!ec, "cannot rename ", tmp_dir.string(), " to ", final_dir.string(), ": ",
           ec.message());
  write_file_atomic((root / "latest").string(), std::string(name) + "\n");
  // Keep the newest `keep_last` checkpoints.
  std::vector<fs::path> all;
  for (auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && n.find(".tmp") == std::string::npos)
      all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + keep_last < all.size(); ++i) fs::remove_all(all[i], ec);
}

namespace {
// What a training run writes in its folder (all of it goes with --overwrite).
const char* const kRunEntries[] = {
    "train_args.json", "config.json", "tokenizer.model", "tokenizer.json", "vocab.json",
    "merges.txt",      "vocab.txt",   "labels.json",     "metrics.jsonl", "loss.svg",
    "dev.svg",         "checkpoints", "model",           "best"};
}  // namespace

std::unique_ptr<RunLock> take_run_folder(const std::string& dir, const char* cmd, bool resume,
                                         bool overwrite, const NamedPaths& inputs) {
  for (const char* e : kRunEntries)
    check_not_an_input((fs::path(dir) / e).string(), std::string(cmd) + ": --out", inputs);
  auto lock = std::make_unique<RunLock>(dir, cmd);
  remove_stale_temporaries(dir);
  if (resume) return lock;
  std::error_code ec;
  const bool holds_run = fs::exists(fs::path(dir) / "train_args.json") ||
                         fs::exists(fs::path(dir) / "checkpoints") ||
                         fs::exists(fs::path(dir) / "model") || fs::exists(fs::path(dir) / "best");
  if (!holds_run) return lock;
  LF_CHECK(overwrite, cmd, ": ", dir,
           " already holds a run; continue it with --resume, choose another --out, or give "
           "--overwrite to replace it");
  for (const char* e : kRunEntries) {
    fs::remove_all(fs::path(dir) / e, ec);
    LF_CHECK(!ec, cmd, ": --overwrite: cannot remove ", (fs::path(dir) / e).string(), ": ",
             ec.message());
  }
  return lock;
}

std::string latest_checkpoint(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const fs::path latest = root / "latest";
  if (!fs::exists(latest)) return "";
  std::string name = read_file(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  const fs::path dir = root / name;
  LF_CHECK(fs::exists(dir / "state.json"), "checkpoint ", dir.string(),
           " named by ", latest.string(), " is incomplete");
  return dir.string();
}

json load_checkpoint(const std::string& ckpt_dir, Model& model, AdamW& opt) {
  LoadOptions lo;
  lo.init_missing = false;
  load_weights(model, (fs::path(ckpt_dir) / "model.safetensors").string(), lo);
  SafeTensorsReader r((fs::path(ckpt_dir) / "optimizer.safetensors").string());
  for (const ParamInfo& p : model.params()) {
    r.read_f32("m." + p.name, p.shape, opt.m_data() + p.offset);
    r.read_f32("v." + p.name, p.shape, opt.v_data() + p.offset);
  }
  const json st = read_json_file((fs::path(ckpt_dir) / "state.json").string());
  opt.set_steps_done(st.at("adam_steps").get<int64_t>());
  return st;
}

ComputeType trained_precision(const char* cmd, const Config& cfg, ComputeType t, bool automatic,
                              bool quiet) {
  const AttentionPath& kind = attention_path(cfg);
  if (!automatic || kind.runs_precision(t, true)) return t;
  say(quiet, "%s: --precision auto: f32 (attention '%s' trains in f32 only)\n", cmd, kind.name());
  return ComputeType::f32;
}

json resume_latest(const std::string& run_dir, Model& model, AdamW& opt, bool quiet) {
  const std::string ck = latest_checkpoint(run_dir);
  if (ck.empty()) {
    if (!quiet) std::fprintf(stderr, "resume: no checkpoint yet; starting from step 0\n");
    return json();
  }
  json st = load_checkpoint(ck, model, opt);
  if (!quiet)
    std::fprintf(stderr, "resume: continuing from %s (step %lld)\n", ck.c_str(),
                 static_cast<long long>(st.at("step").get<int64_t>()));
  return st;
}

void check_step_finite(const char* cmd, double loss, double grad_norm, int64_t step,
                       const std::string& run_dir) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) return;
  const std::string ck = latest_checkpoint(run_dir);
  fail(cmd, ": the ", std::isfinite(loss) ? "gradient norm" : "loss", " became ",
       std::isfinite(loss) ? grad_norm : loss, " at step ", step,
       "; stopped before updating the weights. ",
       ck.empty() ? std::string("No checkpoint was written yet")
                  : "The last good checkpoint is " + ck + " (continue it with --resume)",
       "; lower --lr or check the data");
}

std::vector<json> read_metrics(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      out.push_back(parse_json_bounded(line, path));
    } catch (const Error&) {
      break;  // a torn final line from a killed run
    }
  }
  return out;
}

MetricsLog::MetricsLog(const std::string& path, int64_t keep_until_step) : path_(path) {
  std::string kept;
  if (keep_until_step >= 0)
    for (const json& r : read_metrics(path))
      if (r.value("step", int64_t{0}) <= keep_until_step) kept += r.dump() + "\n";
  write_file_atomic(path, kept);
}

void MetricsLog::write(const json& record) {
  if (path_.empty()) return;
  std::ofstream out(path_, std::ios::app);
  out << record.dump() << "\n";
  out.flush();
  if (listener_) listener_(record);
}

void LogWindow::save(nlohmann::json& state) const {
  state["window_loss"] = loss;
  state["window_time"] = time;
  state["window_tokens"] = tokens;
  state["window_steps"] = steps;
  state["window_examples"] = examples;
  state["window_correct"] = correct;
}

void LogWindow::load(const nlohmann::json& state) {
  clear();
  if (!state.is_object() || !state.contains("window_steps")) return;
  loss = state.at("window_loss").get<double>();
  time = state.at("window_time").get<double>();
  tokens = state.value("window_tokens", 0.0);
  steps = state.at("window_steps").get<int64_t>();
  examples = state.value("window_examples", int64_t{0});
  correct = state.value("window_correct", int64_t{0});
}

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e8) return "?";
  const long long t = static_cast<long long>(s + 0.5);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%lldh%02lldm%02llds", t / 3600, (t / 60) % 60, t % 60);
  else if (t >= 60)
    std::snprintf(b, sizeof b, "%lldm%02llds", t / 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%llds", t);
  return b;
}

}  // namespace lf
