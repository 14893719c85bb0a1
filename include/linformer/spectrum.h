// `linformer spectrum`: the singular-value spectrum of a trained model's attention matrices on
// real text (paper Figure 1), and the measured error of low-rank replacements of P (Theorem 1).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/model.h"


namespace lf::analysis {

struct SpectrumOptions {
  std::string model_dir;          // model folder with tokenizer.model
  std::vector<std::string> text;  // text files or folders (one document per line)
  int64_t n = 512;                // tokens per sequence (<= the model's max_len)
  int64_t sequences = 8;          // full-length sequences analysed, spread over the text
  std::string out;                // output folder
  int64_t k_ref = 0;              // share of the first k_ref singular values; 0: rank / 4
  std::vector<int64_t> ks;        // widths of the low-rank check; empty: 16, 32, ..., 256
  bool lowrank = true;            // run the low-rank check (standard attention only)
  int64_t batch = 2;              // sequences per forward pass
  uint64_t seed = 0;              // JL projections
  bool quiet = false;
};

struct SpectrumResult {
  std::string attention;  // "standard" or "linformer"
  int64_t layers = 0, heads = 0, n = 0, lk = 0, rank = 0, k_ref = 0, sequences = 0;
  std::vector<int64_t> sequence_ids;       // which packed sequences were used
  std::vector<std::vector<double>> share;  // [L][H] share of the first k_ref values
  std::vector<double> layer_share;         // [L] mean over heads
  std::vector<std::vector<std::vector<double>>> cumulative;  // [L][H][rank], mean over seqs
  std::vector<std::vector<std::vector<double>>> sigma;       // [L][H][rank], mean over seqs
  std::vector<std::vector<double>> layer_cumulative;         // [L][rank], mean over heads
  // Low-rank check (empty when not run). Means over heads and sequences.
  std::vector<int64_t> ks;
  std::vector<std::vector<double>> svd_error;    // [L][ks] ||PV - P_k V|| / ||PV||
  std::vector<std::vector<double>> jl_error;     // [L][ks] ||PV - P R^T R V|| / ||PV||
  std::vector<std::vector<double>> jl_error_sd;  // [L][ks] spread over heads and sequences
  std::vector<std::vector<double>> svd_p_error;  // [L][ks] ||P - P_k||_F / ||P||_F
  std::vector<double> svd_error_all, jl_error_all, jl_error_sd_all, svd_p_error_all;  // [ks]
  // Max |P - softmax(s Q K^T)| with Q, K recomputed from the recorded attention inputs:
  // shows that the V used by the low-rank check is the layer's real V. -1 when not computed.
  double probs_check = -1;
  double seconds = 0;

  nlohmann::json spectrum_json() const;
  nlohmann::json lowrank_json() const;
};

// Runs the analysis and writes into opt.out: spectrum.csv, spectrum_layers.csv, share.csv,
// spectrum.json, spectrum_cumulative.svg (also with a log x axis: spectrum_cumulative_logx.svg),
// spectrum_share_heatmap.svg, and (low-rank check)
// lowrank.csv, lowrank.json, lowrank_error.svg.
SpectrumResult run_spectrum(const SpectrumOptions& opt);

// Records the input of every layer's self-attention during a forward pass (post-norm: the
// layer input x_l; pre-norm: LN_attn(x_l)): x[l] is [B*N*D].
class AttentionInputs final : public ForwardObserver {
 public:
  std::vector<std::vector<float>> x;
  void layer_input(int64_t layer, const float* x_in, const float* attn_in, int64_t rows,
                   int64_t D) override;
};

}  // namespace lf::analysis
