// What `linformer bench` writes besides its grids: the CSV, the plots, and with
// --compare-precision the table that sets each configuration's time in every precision beside
// the others.
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "linformer/bench.h"
#include "linformer/file_util.h"
#include "linformer/plot.h"

namespace lf::cli::benchcli {

namespace {
bool ok(const json* r) { return r && r->value("status", "") == "ok"; }
}  // namespace

void write_csv(const std::string& path, const std::vector<json>& runs) {
  std::ostringstream os;
  os << "attention,n,k,batch,max_batch,layers,seconds_per_sequence,peak_bytes_engine,"
        "peak_rss_bytes,gflops,bytes_per_sequence,status,compute\n";
  for (const json& r : runs) {
    auto num = [&](const char* key) -> std::string {
      if (!r.contains(key) || r[key].is_null()) return "";
      std::ostringstream v;
      v.precision(9);
      v << r[key].get<double>();
      return v.str();
    };
    os << r.value("attention", "") << "," << num("n") << "," << num("k") << "," << num("batch")
       << "," << num("max_batch") << "," << num("layers") << "," << num("seconds_per_sequence")
       << "," << num("peak_bytes_engine") << "," << num("peak_rss_bytes") << "," << num("gflops")
       << "," << num("bytes_per_sequence") << "," << r.value("status", "") << ","
       << r.value("compute", "f32") << "\n";
  }
  write_file_atomic(path, os.str());
}

void write_plots(const std::string& dir, const std::vector<json>& runs,
                 const std::vector<int64_t>& ks) {
  std::vector<PlotSeries> time, mem;
  auto add = [&](const std::string& name, const std::string& kind, int64_t k, bool dashed) {
    PlotSeries t{name, {}, {}, dashed}, m{name, {}, {}, dashed};
    for (const json& r : runs) {
      if (r.value("attention", "") != kind) continue;
      if (k > 0 && !(r.contains("k") && r["k"].is_number() && r["k"].get<int64_t>() == k))
        continue;
      const double n = r.value("n", 0.0);
      if (ok(&r)) {
        t.x.push_back(n);
        t.y.push_back(1e3 * r.value("seconds_per_sequence", 0.0));
      }
      m.x.push_back(n);
      m.y.push_back(r.value("activation_bytes_batch1", 0.0) / (1024.0 * 1024.0));
    }
    if (!t.x.empty()) time.push_back(t);
    if (!m.x.empty()) mem.push_back(m);
  };
  // Every attention the registry offers (bench::attention_choices): the exact ways other than
  // the kind's own (tiled, streaming) dashed, a projected kind once per k.
  for (const bench::AttentionChoice& c : bench::attention_choices()) {
    if (!c.projected)
      add(c.name, c.name, 0, !c.trains());
    else
      for (int64_t k : ks) add(c.name + " k=" + std::to_string(k), c.name, k, false);
  }
  PlotOptions po;
  po.log_x = po.log_y = true;
  po.x_label = "sequence length n";
  po.title = "Inference time per sequence";
  po.y_label = "ms per sequence";
  write_svg_line_plot(dir + "/bench_time.svg", time, po);
  po.title = "Activations + scratch of a batch of 1 (engine accounting)";
  po.y_label = "MiB at batch 1";
  write_svg_line_plot(dir + "/bench_memory.svg", mem, po);
}


std::vector<json> runs_in(const std::vector<json>& runs, const std::string& compute) {
  std::vector<json> v;
  for (const json& r : runs)
    if (r.value("compute", "f32") == compute) v.push_back(r);
  return v;
}

std::string precisions_table(const std::vector<json>& runs, const json& meta) {
  const json& peaks = meta.at("peaks");
  std::vector<std::string> names;
  for (const auto& p : meta.at("precisions")) names.push_back(p.get<std::string>());
  const std::string& first = names.front();
  std::ostringstream os;
  os << "## Precisions: time per sequence\n\n"
     << "Each configuration in every precision of this run. Speed-up: " << first
     << " time / this precision's time. Rate: the model's FLOPs (multiply-adds x 2; for int8 "
        "operations) per second, and its share of the same precision's product peak measured "
        "in this run:";
  for (const std::string& p : names)
    os << " " << p << " " << fmt("%.0f", peaks.value(p, 0.0)) << (p == "int8" ? " GOP/s" : " GFLOP/s")
       << (&p == &names.back() ? "." : ",");
  os << "\n\n| attention | n | k |";
  for (const std::string& p : names) os << " " << p << " ms/seq |";
  for (size_t i = 1; i < names.size(); ++i) os << " " << names[i] << " speed-up |";
  for (const std::string& p : names) os << " " << p << " rate (% of peak) |";
  os << "\n|---|---|---|";
  for (size_t i = 0; i < 3 * names.size() - 1; ++i) os << "---|";
  os << "\n";
  // One row per configuration, in the order of the first precision's runs.
  for (const json& base : runs_in(runs, first)) {
    const std::string kind = base.value("attention", "?");
    const int64_t n = base.value("n", int64_t(0));
    const json k = base.contains("k") ? base["k"] : json(nullptr);
    std::vector<const json*> row;
    for (const std::string& p : names) {
      const json* hit = nullptr;
      for (const json& r : runs)
        if (r.value("compute", "f32") == p && r.value("attention", "") == kind &&
            r.value("n", int64_t(0)) == n && (k.is_null() || r.value("k", json(nullptr)) == k))
          hit = &r;
      row.push_back(hit);
    }
    const auto good = [](const json* r) { return r && r->value("status", "") == "ok"; };
    os << "| " << kind << " | " << n << " | " << (k.is_null() ? "-" : std::to_string(k.get<int64_t>()))
       << " |";
    for (const json* r : row)
      os << " " << (good(r) ? fmt("%.2f", 1e3 * r->value("seconds_per_sequence", 0.0))
                           : r ? r->value("status", "?") : std::string("-"))
         << " |";
    for (size_t i = 1; i < row.size(); ++i)
      os << " "
         << (good(row[0]) && good(row[i])
                 ? fmt("%.2fx", row[0]->value("seconds_per_sequence", 0.0) /
                                    row[i]->value("seconds_per_sequence", 1.0))
                 : std::string("-"))
         << " |";
    for (size_t i = 0; i < row.size(); ++i) {
      if (!good(row[i])) {
        os << " - |";
        continue;
      }
      const double rate = row[i]->value("gflops", 0.0),
                   peak = row[i]->value("sgemm_gflops_now", peaks.value(names[i], 0.0));
      os << " " << fmt("%.0f", rate) << " (" << fmt("%.0f%%", 100.0 * rate / std::max(peak, 1e-9))
         << ") |";
    }
    os << "\n";
  }
  return os.str() + "\n";
}

}  // namespace lf::cli::benchcli
