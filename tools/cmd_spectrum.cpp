#include <cstdio>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "linformer/spectrum.h"

namespace lf::cli {

void add_spectrum(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "spectrum",
      "Singular-value spectrum of a trained model's attention matrices P on real text (the\n"
      "paper's Figure 1), per layer and head, and (standard attention) the measured error\n"
      "||PV - P~V|| / ||PV|| of replacing P by its best rank-k approximation or by a random\n"
      "Johnson-Lindenstrauss projection P R^T R of width k (Theorem 1).\n"
      "The text is tokenised with the model folder's tokenizer and packed into sequences of\n"
      "n tokens as in pretraining; dropout is off. Writes into --out: spectrum.csv,\n"
      "spectrum_layers.csv, share.csv, spectrum.json, spectrum_cumulative.svg (and _logx.svg),\n"
      "spectrum_share_heatmap.svg, and lowrank.csv, lowrank.json, lowrank_error.svg.");
  auto o = std::make_shared<analysis::SpectrumOptions>();
  auto no_lowrank = std::make_shared<bool>(false);
  add_model_option(cmd, &o->model_dir,
                   "Model folder (config.json, model.safetensors, tokenizer.model)");
  cmd->add_option("--text", o->text, "Text files or folders, one document per line")->required();
  cmd->add_option("--out", o->out, "Output folder")->required();
  cmd->add_option("--n", o->n, "Tokens per sequence (at most the model's max_len)")
      ->capture_default_str();
  cmd->add_option("--sequences", o->sequences,
                  "Full-length sequences analysed, spread evenly over the text")
      ->capture_default_str();
  cmd->add_option("--k-ref", o->k_ref,
                  "Report the share of the first k_ref singular values (default: a quarter of "
                  "min(n, k), i.e. 128 of 512)");
  cmd->add_option("--ks", o->ks, "Widths k of the low-rank check (default 16 32 64 128 256)")
      ->delimiter(',');
  cmd->add_flag("--no-lowrank", *no_lowrank, "Skip the low-rank error check");
  cmd->add_option("--batch", o->batch, "Sequences per forward pass")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random JL projections")->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No progress output");
  cmd->callback([o, no_lowrank] {
    o->lowrank = !*no_lowrank;
    const analysis::SpectrumResult r = analysis::run_spectrum(*o);
    std::printf("spectrum: %s attention, n = %lld, P is %lld x %lld, %lld sequences, %.1f s\n",
                r.attention.c_str(), static_cast<long long>(r.n), static_cast<long long>(r.n),
                static_cast<long long>(r.lk), static_cast<long long>(r.sequences), r.seconds);
    std::printf("share of the first %lld of %lld singular values (mean over heads):\n",
                static_cast<long long>(r.k_ref), static_cast<long long>(r.rank));
    for (int64_t l = 0; l < r.layers; ++l) {
      std::printf("  layer %lld: %.4f   heads:", static_cast<long long>(l), r.layer_share[l]);
      for (double v : r.share[l]) std::printf(" %.4f", v);
      std::printf("\n");
    }
    if (!r.ks.empty()) {
      std::printf("relative error ||PV - P~V|| / ||PV|| (mean over layers, heads, sequences):\n");
      std::printf("  %6s %12s %12s %14s\n", "k", "rank-k SVD", "JL", "||P-P_k||/||P||");
      for (size_t i = 0; i < r.ks.size(); ++i)
        std::printf("  %6lld %12.4g %12.4g %14.4g\n", static_cast<long long>(r.ks[i]),
                    r.svd_error_all[i], r.jl_error_all[i], r.svd_p_error_all[i]);
    }
    std::printf("wrote %s\n", o->out.c_str());
  });
}

}  // namespace lf::cli
