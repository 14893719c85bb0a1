// What `linformer bench` writes besides its grids: the CSV, the plots, and with
// --compare-precision the table that sets each configuration's time in every precision beside
// the others.
#include <algorithm>
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
const json* find_run(const std::vector<json>& runs, const std::string& kind, int64_t n, int64_t k) {
  for (const json& r : runs)
    if (r.value("attention", "") == kind && r.value("n", int64_t(0)) == n &&
        (k == 0 || (r.contains("k") && r["k"].is_number() && r["k"].get<int64_t>() == k)))
      return &r;
  return nullptr;
}

bool fits(const json* r) { return r && r->value("max_batch", int64_t(0)) > 0; }

// Ratio cell of the grids: `what` is "time" (base s/seq / the kind's s/seq), "memory" (the
// kind's max batch / base max batch) or "flops" (base FLOPs / the kind's FLOPs per sequence:
// the time saved when both run at the same FLOP rate).
std::string cell(const json* base, const json* eff, const std::string& base_name,
                 const std::string& eff_name, const std::string& what) {
  if (!eff) return "";
  if (what == "flops") {
    if (!base) return "n/a";
    return fmt("%.1fx", base->value("flops_per_sequence", 0.0) /
                            std::max(eff->value("flops_per_sequence", 1.0), 1.0));
  }
  if (!fits(eff))
    return eff_name + " " +
           (eff->contains("max_batch") ? "does not fit" : eff->value("status", "?"));
  if (!base) return "n/a";
  if (!fits(base))
    return base_name + " does not fit (" + gib(base->value("bytes_batch1", 0.0)) +
           " GiB at batch 1)";
  if (what == "memory")
    return fmt("%.1fx", eff->value("max_batch", 1.0) / base->value("max_batch", 1.0));
  if (!ok(base)) return base_name + " " + base->value("status", "?");
  if (!ok(eff)) return eff_name + " " + eff->value("status", "?");
  return fmt("%.1fx",
             base->value("seconds_per_sequence", 0.0) / eff->value("seconds_per_sequence", 1.0));
}

// A column of the grids: an efficient kind (every attention choice of the registry other than
// standard attention's ways, which are the baselines) that ran, a projected one once per k.
struct Column {
  std::string kind, head;
  int64_t k = 0;  // 0: not projected
};
std::vector<Column> columns(const std::vector<json>& runs, const std::vector<int64_t>& ks,
                            bool* by_k) {
  std::vector<const bench::AttentionChoice*> kinds;
  for (const bench::AttentionChoice& c : bench::attention_choices()) {
    if (c.attention == AttentionKind::standard) continue;
    for (const json& r : runs)
      if (r.value("attention", "") == c.name) {
        kinds.push_back(&c);
        break;
      }
  }
  // One projected kind alone: the paper's grid of n by k.
  *by_k = kinds.size() == 1 && kinds[0]->projected;
  std::vector<Column> cols;
  for (const bench::AttentionChoice* c : kinds) {
    if (!c->projected) {
      cols.push_back({c->name, c->name, 0});
      continue;
    }
    for (int64_t k : ks)
      cols.push_back({c->name, *by_k ? std::to_string(k) : c->name + " k=" + std::to_string(k), k});
  }
  return cols;
}

// The grid of cells over n (rows) and the efficient kinds (columns), against the runs of the
// baseline `base`.
std::string grid(const std::vector<json>& runs, const std::vector<int64_t>& ns,
                 const std::vector<int64_t>& ks, const std::string& base, const std::string& what) {
  bool by_k = false;
  const std::vector<Column> cols = columns(runs, ks, &by_k);
  std::ostringstream os;
  os << (by_k ? "| n \\ k |" : "| n |");
  for (const Column& c : cols) os << " " << c.head << " |";
  os << "\n|---|";
  for (size_t i = 0; i < cols.size(); ++i) os << "---|";
  os << "\n";
  for (int64_t n : ns) {
    os << "| " << n << " |";
    const json* b = find_run(runs, base, n, 0);
    for (const Column& c : cols)
      os << " " << (c.k < n ? cell(b, find_run(runs, c.kind, n, c.k), base, c.kind, what) : "")
         << " |";
    os << "\n";
  }
  return os.str();
}

}  // namespace

std::string markdown(const std::vector<json>& all_runs, const json& meta, const Opts& o,
                     const std::vector<int64_t>& ns, const std::vector<int64_t>& ks) {
  // The grids describe the main precision; --compare-precision adds the others' table.
  const std::vector<json> runs = runs_in(all_runs, meta.value("compute", "f32"));
  const bool several = meta.contains("precisions") && meta["precisions"].size() > 1;
  std::ostringstream os;
  const double peak = meta.value("sgemm_gflops", 0.0);
  os << "# Inference efficiency: the efficient attention kinds vs standard and streaming "
        "attention\n\n";
  os << "Baselines, all exact: `standard` holds the [B, H, n, n] attention matrices of the "
        "batch (as PyTorch and fairseq do, the paper's baseline); `tiled` is the engine's "
        "standard attention (one n x n tile per thread); `streaming` is the online softmax "
        "over key blocks (FlashAttention's idea, O(n) memory).\n\n";
  os << "Model: " << o.layers << " layer(s), d_model " << o.d_model << ", " << o.heads
     << " heads, d_ff " << o.d_ff << ", vocab " << o.vocab << ", Linformer "
     << meta.value("sharing", "layerwise") << " sharing, " << meta.value("projection", "linear")
     << " projection. Random token ids, no padding.\n";
  os << "Memory budget " << fmt("%.1f", meta.value("budget_bytes", 0.0) / kGiB)
     << " GiB (engine accounting: parameters + activations + scratch + ids). "
     << meta.value("threads", 0) << " threads. Compute type " << meta.value("compute", "f32")
     << (meta.value("compute", "f32") == "bf16"
             ? " (linear maps in bf16, packed weights; attention's products on bf16 operands "
               "where the CPU has AVX512-BF16, else f32; softmax, LayerNorm in f32); "
               "oneDNN bf16 matmul peak in this run "
         : meta.value("compute", "f32") == "int8"
             ? " (linear maps in int8: packed int8 weights, inputs quantized per token, int32 "
               "accumulation; attention's products on bf16 operands where bf16 products "
               "are the faster ones (AMX, AMD Zen 4/5), else f32; softmax, LayerNorm in f32); int8 "
               "linear-map peak "
               "(quantize, product, dequantize) in this run "
             : "; oneDNN sgemm peak in this run ")
     << fmt("%.0f", peak) << " GFLOP/s (" << meta.value("sgemm_shape", "") << ").\n";
  os << "Time: median of repetitions after a warm-up, at the timed batch (the largest that fits, "
     << (o.at_max_batch ? "as here" : "capped at " + std::to_string(o.batch_tokens) + " tokens")
     << "); per sequence.\n\n";
  // The grids: a heading, a note under it, the baseline and the ratio (cell()).
  const struct {
    const char *heading, *note, *base, *what;
  } grids[] = {
      {"Time saved (standard s/seq / the kind's s/seq)", "", "standard", "time"},
      {"Memory saved (the kind's max batch / standard max batch in the budget)", "", "standard",
       "memory"},
      {"FLOP ratio (standard FLOPs / the kind's FLOPs per sequence)",
       "The time saved of two implementations running at the same FLOP rate: the ceiling of the "
       "time saved when both are GEMM-bound.\n\n",
       "standard", "flops"},
      {"Time saved against the engine's tiled standard attention", "", "tiled", "time"},
      {"Memory saved against the engine's tiled standard attention (max batch ratio)", "", "tiled",
       "memory"},
      {"Time saved against exact streaming attention", "", "streaming", "time"},
      {"Memory saved against exact streaming attention (max batch ratio)", "", "streaming",
       "memory"},
  };
  for (const auto& g : grids)
    os << "## " << g.heading << "\n\n" << g.note << grid(runs, ns, ks, g.base, g.what) << "\n";
  if (several) os << precisions_table(all_runs, meta);
  os << "## All runs\n\n"
     << "% of sgemm: against the same precision's product measured in the same child just "
        "before the run.\n\n"
     << "| attention | n | k | max batch | timed batch | ms/seq | GFLOP/s | % of sgemm | "
        "engine GiB | peak RSS GiB | activation MiB/seq |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const json& r : several ? all_runs : runs) {
    const bool g = ok(&r);
    os << "| " << r.value("attention", "?")
       << (several ? std::string(" (") + r.value("compute", "f32") + ")" : std::string()) << " | "
       << r.value("n", 0) << " | "
       << (r.contains("k") && !r["k"].is_null() ? std::to_string(r["k"].get<int64_t>()) : "-")
       << " | " << r.value("max_batch", 0) << " | "
       << (r.contains("batch") ? std::to_string(r["batch"].get<int64_t>()) : "-") << " | ";
    if (g) {
      os << fmt("%.2f", 1e3 * r.value("seconds_per_sequence", 0.0)) << " | "
         << fmt("%.0f", r.value("gflops", 0.0)) << " | "
         << fmt("%.0f%%",
                100.0 * r.value("gflops", 0.0) / std::max(r.value("sgemm_gflops_now", peak), 1e-9))
         << " | " << gib(r.value("peak_bytes_engine", 0.0)) << " | "
         << gib(r.value("peak_rss_bytes", 0.0));
    } else {
      std::string why = r.value("status", "?");
      if (why == "does_not_fit")
        why = "does not fit batch 1 (needs " + gib(r.value("bytes_batch1", 0.0)) + " GiB)";
      if (why == "skipped")
        why = "skipped (predicted " + fmt("%.0f", r.value("predicted_seconds", 0.0)) + " s)";
      if (why == "error" || why == "refused") why += ": " + r.value("error", "");
      os << why << " | | | | ";
    }
    os << " | " << fmt("%.1f", r.value("bytes_per_sequence", 0.0) / (1024.0 * 1024.0)) << " |\n";
  }
  return os.str();
}

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
      if (k > 0 && !(r.contains("k") && r["k"].is_number() && r["k"].get<int64_t>() == k)) continue;
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
    os << " " << p << " " << fmt("%.0f", peaks.value(p, 0.0))
       << (p == "int8" ? " GOP/s" : " GFLOP/s") << (&p == &names.back() ? "." : ",");
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
    os << "| " << kind << " | " << n << " | "
       << (k.is_null() ? "-" : std::to_string(k.get<int64_t>())) << " |";
    for (const json* r : row)
      os << " "
         << (good(r) ? fmt("%.2f", 1e3 * r->value("seconds_per_sequence", 0.0))
             : r     ? r->value("status", "?")
                     : std::string("-"))
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
