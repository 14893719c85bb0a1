#include <omp.h>

#include <cstdio>
#include <memory>
#include <set>

#include "cli_util.h"
#include "commands.h"
#include "linformer/checkpoint.h"
#include "linformer/cpu.h"
#include "linformer/model.h"
#include "linformer/safetensors.h"

namespace lf::cli {

namespace {

// The configuration, every parameter tensor with its shape, and what the file lacks or adds.
void describe_model(const std::string& dir) {
  LoadOptions lo;
  lo.init_missing = true;
  LoadReport rep;
  auto model = load_model(dir, lo, &rep);
  const std::set<std::string> absent(rep.initialised.begin(), rep.initialised.end());
  std::printf("%s", model->config().to_json().c_str());
  size_t total = 0;
  for (const ParamInfo& p : model->params()) {
    std::printf("%-64s %-16s%s\n", p.name.c_str(), shape_to_string(p.shape).c_str(),
                absent.count(p.name) ? " absent (freshly initialised on load)" : "");
    total += p.numel;
  }
  std::printf("%zu tensors, %zu parameters\n", model->params().size(), total);
  if (!absent.empty())
    std::printf(
        "%zu tensor(s) absent from the file; `linformer init --from` writes a complete "
        "folder\n",
        absent.size());
  if (!rep.ignored.empty()) {
    std::printf("%zu tensor(s) in the file not used by this model:\n", rep.ignored.size());
    for (const std::string& n : rep.ignored) std::printf("  %s\n", n.c_str());
  }
}

}  // namespace

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "info", "Describe a model folder (configuration and tensors) and the code paths this CPU runs.");
  cmd->footer(
      "Prints the configuration, then every parameter tensor with its shape, marking those the\n"
      "file lacks (they would be freshly initialised on load), then the file's tensors the\n"
      "model does not use. Fails with the reason when the folder does not load\n"
      "(docs/checkpoint.md). Then, and alone without --model, the instruction-set level the\n"
      "engine's kernels run on this CPU (the best it has; LINFORMER_ISA=baseline|avx2|avx512|\n"
      "avx512bf16 forces a lower one), every level it could run, and oneDNN's choice for the\n"
      "matrix products, and what --precision auto runs here. With --peaks, each precision's\n"
      "measured product peak on this CPU (about a second).");
  auto dir = std::make_shared<std::string>();
  cmd->add_option("--model", *dir,
                  "Model folder (config.json + model.safetensors), an installed model's name or "
                  "a run folder")
      ->transform(model_folder())
      ->check(CLI::ExistingDirectory);
  auto peaks = std::make_shared<bool>(false);
  cmd->add_flag("--peaks", *peaks,
                "Measure each precision's matrix-product peak on this CPU (GFLOP/s; int8 GOP/s), "
                "the figures --precision auto's rule stands for");
  cmd->callback([dir, peaks] {
    if (!dir->empty()) describe_model(*dir);
    const CpuPaths p = cpu_paths();
    std::printf("cpu: kernels %s%s\n", p.kernels.c_str(),
                p.forced ? " (forced by LINFORMER_ISA)" : " (the best this CPU runs)");
    std::string all;
    for (const std::string& l : p.supported) all += (all.empty() ? "" : " ") + l;
    std::printf("cpu: kernel levels this CPU runs: %s\n", all.c_str());
    std::printf("cpu: oneDNN (matrix products) %s\n", p.onednn.c_str());
    const AutoPrecision a = auto_precision();
    std::printf("cpu: --precision auto runs %s (%s)\n", compute_type_name(a.precision),
                a.reason.c_str());
    if (*peaks)
      for (const ProductPeak& pk : product_peaks())
        std::printf("cpu: product peak %s %.0f %s (2048 x 3072 x 768, %d threads)\n",
                    compute_type_name(pk.precision), pk.gflops,
                    pk.precision == ComputeType::int8 ? "GOP/s" : "GFLOP/s", omp_get_max_threads());
  });
}

}  // namespace lf::cli