// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 packet transposes
// (_mm512_undefined_*), inlined into this file; it is not about this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include "analysis/heatmap_svg.h"
#include "analysis/spectrum.h"
#include "data/corpus.h"
#include "data/mlm_data.h"
#include "layers/attention_path.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/plot.h"
#include "linformer/rng.h"
#include "linformer/spectrum.h"
#include "linformer/tokenizer.h"

namespace lf::analysis {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string layer_prefix(int64_t l) { return "roberta.encoder.layer." + std::to_string(l) + "."; }

// Head h of sequence b in a batch of sequences of N rows of D features, Dh per head.
struct HeadSlice {
  int64_t b = 0, h = 0, N = 0, D = 0, Dh = 0;
};

// Columns [h*Dh, (h+1)*Dh) of X W^T + bias for the rows of sequence b: [N, Dh] in double.
Mat head_projection(const float* X, const float* W, const float* bias, const HeadSlice& s) {
  const int64_t b = s.b, h = s.h, N = s.N, D = s.D, Dh = s.Dh;
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMat> x(X + b * N * D, N, D);
  Eigen::Map<const RowMat> w(W + h * Dh * D, Dh, D);  // rows h*Dh .. of W [D_out, D_in]
  Eigen::Map<const Eigen::VectorXf> bb(bias + h * Dh, Dh);
  Mat y = x.cast<double>() * w.cast<double>().transpose();
  y.rowwise() += bb.cast<double>().transpose();
  return y;
}

std::string fmt(double v, int prec = 6) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*g", prec, v);
  return b;
}

std::vector<double> mean_over(const std::vector<std::vector<double>>& rows) {
  std::vector<double> m(rows.empty() ? 0 : rows[0].size(), 0.0);
  for (const auto& r : rows)
    for (size_t i = 0; i < m.size(); ++i) m[i] += r[i] / rows.size();
  return m;
}

// What both reports say of the run: the attention, n, the sequences and the check of P.
json run_json(const SpectrumResult& r) {
  json j;
  j["attention"] = r.attention;
  j["n"] = r.n;
  j["sequences"] = r.sequences;
  j["probs_check_max_abs_diff"] = r.probs_check;
  return j;
}

}  // namespace

void AttentionInputs::layer_input(int64_t layer, const float*, const float* attn_in, int64_t rows,
                                  int64_t D) {
  if (x.size() <= static_cast<size_t>(layer)) x.resize(static_cast<size_t>(layer) + 1);
  x[static_cast<size_t>(layer)].assign(attn_in, attn_in + rows * D);
}

json SpectrumResult::spectrum_json() const {
  json j = run_json(*this);
  j["layers"] = layers;
  j["heads"] = heads;
  j["lk"] = lk;
  j["rank"] = rank;
  j["k_ref"] = k_ref;
  j["sequence_ids"] = sequence_ids;
  j["share_first_k_ref"] = share;
  j["layer_share_first_k_ref"] = layer_share;
  j["layer_cumulative"] = layer_cumulative;
  // Share held by the first m values for a few absolute m (comparable across models).
  json at = json::object();
  for (int64_t m : {8, 16, 32, 64, 128, 256}) {
    if (m > rank) break;
    std::vector<double> v;
    for (const auto& c : layer_cumulative) v.push_back(share_of_first(c, m));
    at[std::to_string(m)] = v;
  }
  j["layer_share_first_m"] = at;
  j["seconds"] = seconds;
  return j;
}

json SpectrumResult::lowrank_json() const {
  json j = run_json(*this);
  j["ks"] = ks;
  j["value_vectors"] = "real: V = (attention input) W_v^T + b_v of each head";
  j["jl"] = "R in R^{k x n}, entries N(0, 1/k), one independent R per matrix and k";
  j["mean"] = {{"rank_k_error", svd_error_all},
               {"jl_error", jl_error_all},
               {"jl_error_sd", jl_error_sd_all},
               {"rank_k_error_P", svd_p_error_all}};
  j["per_layer"] = {{"rank_k_error", svd_error},
                    {"jl_error", jl_error},
                    {"jl_error_sd", jl_error_sd},
                    {"rank_k_error_P", svd_p_error}};
  return j;
}

SpectrumResult run_spectrum(const SpectrumOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = [&](const std::string& s) {
    if (!opt.quiet) std::fprintf(stderr, "spectrum: %s\n", s.c_str());
  };
  LF_CHECK(!opt.model_dir.empty(), "spectrum: give --model");
  LF_CHECK(!opt.text.empty(), "spectrum: give --text");
  LF_CHECK(!opt.out.empty(), "spectrum: give --out");
  LF_CHECK(opt.sequences >= 1, "spectrum: --sequences must be at least 1, got ", opt.sequences);
  LF_CHECK(opt.batch >= 1, "spectrum: --batch must be at least 1, got ", opt.batch);
  const std::string tok_path = opt.model_dir;
  LF_CHECK(!Tokenizer::files_in(tok_path).empty(), "spectrum: ", tok_path,
           " has no tokenizer (tokenizer.model, tokenizer.json, vocab.json + merges.txt or "
           "vocab.txt): the model folder must hold the tokenizer it was trained with");

  // The model, with every dropout zeroed (forward(train = true) keeps the probabilities).
  Config cfg;
  std::unique_ptr<Model> model;
  {
    std::unique_ptr<Model> loaded = load_model(opt.model_dir);
    cfg = loaded->config();
    cfg.dropout = 0.f;
    cfg.attention_dropout = 0.f;
    model = std::make_unique<Model>(cfg);
    std::memcpy(model->param_data(), loaded->param_data(), loaded->num_params() * sizeof(float));
  }
  const int64_t N = opt.n;
  LF_CHECK(N >= 3 && N <= cfg.max_len, "spectrum: --n must be in [3, max_len = ", cfg.max_len,
           "], got ", N);
  const AttentionPath& kind = attention_path(cfg);
  LF_CHECK(kind.has_softmax_probs(), "spectrum: attention '", kind.name(),
           "' has no softmax probability matrix P to analyse (its attention weights are not one "
           "softmax); spectrum runs standard and Linformer models");
  // Exact attention (no projection): P is n x n.
  const bool standard = kind.projected_length(cfg, 0) == 0;
  const int64_t L = cfg.n_layers, H = cfg.n_heads, D = cfg.d_model, Dh = cfg.d_head();
  std::vector<int64_t> lks(static_cast<size_t>(L));
  // Linformer: the projected rows a sequence of N tokens forms (fewer than k when N < max_len
  // and empty rows are masked).
  for (int64_t l = 0; l < L; ++l) lks[l] = kind.key_count(cfg, l, N);
  for (int64_t l = 1; l < L; ++l)
    LF_CHECK(lks[l] == lks[0], "spectrum: layers with different k are not supported");
  const int64_t Lk = lks[0];
  const int64_t rank = std::min(N, Lk);
  const int64_t k_ref = opt.k_ref > 0 ? std::min(opt.k_ref, rank) : std::max<int64_t>(1, rank / 4);

  // Text -> tokens -> packed sequences, exactly as pretraining packs them.
  Tokenizer tok(tok_path);
  LF_CHECK(tok.vocab_size() <= cfg.vocab_size, "spectrum: the tokenizer has ", tok.vocab_size(),
           " pieces but the model's vocabulary is ", cfg.vocab_size);
  std::vector<int32_t> tokens;
  const int64_t cap = 50'000'000;
  for_each_line(list_corpus_files(opt.text), [&](const std::string& line) {
    std::vector<int32_t> ids = tok.encode(line);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    tokens.push_back(tok.special().sep);
    return static_cast<int64_t>(tokens.size()) < cap;
  });
  TokenStream stream = TokenStream::from_tokens(std::move(tokens));
  PackedSequences seqs{&stream, 0, stream.size(), N};
  seqs.set_frame(tok.special());
  const int64_t full = stream.size() / (N - 2);  // sequences without padding
  LF_CHECK(full >= 1, "spectrum: the text has ", stream.size(), " tokens, fewer than one ",
           "sequence of n = ", N, " needs (", N - 2, ")");
  const int64_t S = std::min(opt.sequences, full);
  if (S < opt.sequences)
    log("the text holds only " + std::to_string(full) + " full sequences of " + std::to_string(N) +
        "; using them all");
  std::vector<int64_t> chosen(static_cast<size_t>(S));
  for (int64_t j = 0; j < S; ++j) chosen[j] = j * full / S;  // spread over the text

  std::vector<int64_t> ks;
  const bool lowrank = opt.lowrank && standard;
  if (opt.lowrank && !standard)
    log("low-rank check skipped: it needs standard attention (P is n x n)");
  if (lowrank) {
    std::vector<int64_t> want = opt.ks;
    if (want.empty()) want = {16, 32, 64, 128, 256};
    for (int64_t k : want) {
      LF_CHECK(k >= 1, "spectrum: --ks values must be positive, got ", k);
      if (k <= N)
        ks.push_back(k);
      else
        log("k = " + std::to_string(k) + " > n = " + std::to_string(N) + " dropped");
    }
    LF_CHECK(!ks.empty(), "spectrum: no low-rank width k <= n = ", N);
  }
  const int64_t nk = static_cast<int64_t>(ks.size());

  std::ostringstream head;
  head << "model " << opt.model_dir << " (" << to_string(cfg.attention) << ", " << L << " layers x "
       << H << " heads), " << S << " sequences of n = " << N << " from " << stream.size()
       << " tokens; P is " << N << " x " << Lk << "; share of the first k_ref = " << k_ref << " of "
       << rank << " singular values";
  log(head.str());

  // Per (sequence, layer, head) results, summed in a fixed order afterwards.
  struct Job {
    std::vector<double> cum, sig;
    std::vector<double> svd, jl, svdp;
  };
  const int64_t per_seq = L * H;
  std::vector<Job> jobs(static_cast<size_t>(S * per_seq));
  double probs_check = -1;

  std::vector<int32_t> ids;
  std::vector<float> mask(static_cast<size_t>(N));
  for (int64_t s0 = 0; s0 < S; s0 += opt.batch) {
    const int64_t B = std::min(opt.batch, S - s0);
    ids.assign(static_cast<size_t>(B * N), 0);
    for (int64_t b = 0; b < B; ++b) {
      seqs.get(chosen[s0 + b], ids.data() + b * N, mask.data());
      for (float m : mask) LF_CHECK(m == 1.f, "spectrum: internal: a padded sequence was chosen");
    }
    Batch batch;
    batch.ids = ids.data();
    batch.B = B;
    batch.N = N;
    // The low-rank check needs each layer's V: the inputs of its attention, recorded.
    AttentionInputs inputs;
    model->forward(batch, true, 0, lowrank ? &inputs : nullptr);
    const std::vector<std::vector<float>>& xin = inputs.x;

    // Check on the first batch: softmax(s Q K^T) from the recorded inputs equals P.
    if (lowrank && s0 == 0) {
      double worst = 0;
      const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
      for (int64_t l = 0; l < L; ++l) {
        const std::string p = layer_prefix(l) + "attention.self.";
        const float* P = model->attention_probs(l);
        for (int64_t h = 0; h < H; ++h) {
          const HeadSlice at{/*b=*/0, /*h=*/h, /*N=*/N, /*D=*/D, /*Dh=*/Dh};
          const Mat q = head_projection(xin[l].data(), model->param(p + "query.weight"),
                                        model->param(p + "query.bias"), at);
          const Mat k = head_projection(xin[l].data(), model->param(p + "key.weight"),
                                        model->param(p + "key.bias"), at);
          Mat sc = scale * q * k.transpose();
          for (int64_t i = 0; i < N; ++i) {
            const double mx = sc.row(i).maxCoeff();
            sc.row(i) = (sc.row(i).array() - mx).exp().matrix();
            sc.row(i) /= sc.row(i).sum();
          }
          const float* Ph = P + (0 * H + h) * N * Lk;
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = 0; j < N; ++j)
              worst = std::max(worst, std::fabs(sc(i, j) - Ph[i * Lk + j]));
        }
      }
      probs_check = worst;
      log("recorded attention inputs: max |P - softmax(QK^T/sqrt(d))| = " + fmt(worst, 3));
      if (worst > 1e-3)
        log("warning: the recorded inputs do not reproduce P; V may not be the layer's V");
    }

    std::vector<const float*> wv(L, nullptr), bv(L, nullptr), probs(L, nullptr);
    for (int64_t l = 0; l < L; ++l) {
      probs[l] = model->attention_probs(l);
      if (!lowrank) continue;
      wv[l] = model->param(layer_prefix(l) + "attention.self.value.weight");
      bv[l] = model->param(layer_prefix(l) + "attention.self.value.bias");
    }
    const int64_t njobs = B * per_seq;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t j = 0; j < njobs; ++j) {
      const int64_t b = j / per_seq, l = (j / H) % L, h = j % H;
      const float* Ph = probs[l] + (b * H + h) * N * Lk;
      Mat P(N, Lk);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < Lk; ++c) P(r, c) = Ph[r * Lk + c];
      Job& out = jobs[static_cast<size_t>((s0 + b) * per_seq + l * H + h)];
      Vec s;
      if (lowrank) {
        const Svd svd = thin_svd(P);
        s = svd.s;
        const Mat V = head_projection(xin[l].data(), wv[l], bv[l],
                                      HeadSlice{/*b=*/b, /*h=*/h, /*N=*/N, /*D=*/D, /*Dh=*/Dh});
        const double pn = s.norm();
        for (int64_t ki = 0; ki < nk; ++ki) {
          const int64_t k = ks[ki];
          out.svd.push_back(rank_k_product_error(svd, P, V, k));
          out.svdp.push_back(pn > 0 ? tail_frobenius(s, k) / pn : 0.0);
          const uint64_t stream_id =
              rng_stream(0x4A4C /* "JL" */, static_cast<uint64_t>(chosen[s0 + b]),
                         static_cast<uint64_t>(l * H + h), static_cast<uint64_t>(k));
          out.jl.push_back(jl_product_error(P, V, jl_matrix(k, N, opt.seed, stream_id)));
        }
      } else {
        s = singular_values(P);
      }
      out.cum = normalised_cumsum(s);
      out.sig.assign(s.data(), s.data() + s.size());
    }
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log("sequences " + std::to_string(s0 + B) + "/" + std::to_string(S) + " done, " + fmt(el, 3) +
        " s");
  }

  // Means over sequences (and over heads for the per-layer values).
  SpectrumResult r;
  r.attention = to_string(cfg.attention);
  r.layers = L, r.heads = H, r.n = N, r.lk = Lk, r.rank = rank, r.k_ref = k_ref, r.sequences = S;
  r.sequence_ids = chosen;
  r.probs_check = probs_check;
  r.ks = ks;
  r.share.assign(L, std::vector<double>(H, 0.0));
  r.cumulative.assign(L, std::vector<std::vector<double>>(H, std::vector<double>(rank, 0.0)));
  r.sigma = r.cumulative;
  r.layer_share.assign(L, 0.0);
  r.layer_cumulative.assign(L, std::vector<double>(rank, 0.0));
  if (lowrank) {
    r.svd_error.assign(L, std::vector<double>(nk, 0.0));
    r.jl_error = r.svd_p_error = r.jl_error_sd = r.svd_error;
  }
  const double inv_s = 1.0 / S, inv_sh = 1.0 / (S * H);
  for (int64_t q = 0; q < S; ++q)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) {
        const Job& jb = jobs[static_cast<size_t>(q * per_seq + l * H + h)];
        for (int64_t i = 0; i < rank; ++i) {
          r.cumulative[l][h][i] += jb.cum[i] * inv_s;
          r.sigma[l][h][i] += jb.sig[i] * inv_s;
          r.layer_cumulative[l][i] += jb.cum[i] * inv_sh;
        }
        r.share[l][h] += share_of_first(jb.cum, k_ref) * inv_s;
        r.layer_share[l] += share_of_first(jb.cum, k_ref) * inv_sh;
        for (int64_t ki = 0; ki < (lowrank ? nk : 0); ++ki) {
          r.svd_error[l][ki] += jb.svd[ki] * inv_sh;
          r.jl_error[l][ki] += jb.jl[ki] * inv_sh;
          r.svd_p_error[l][ki] += jb.svdp[ki] * inv_sh;
        }
      }
  if (lowrank) {
    // Standard deviation of the JL error over heads and sequences.
    for (int64_t q = 0; q < S; ++q)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h) {
          const Job& jb = jobs[static_cast<size_t>(q * per_seq + l * H + h)];
          for (int64_t ki = 0; ki < nk; ++ki) {
            const double d = jb.jl[ki] - r.jl_error[l][ki];
            r.jl_error_sd[l][ki] += d * d * inv_sh;
          }
        }
    std::vector<double> sd_all(nk, 0.0);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t ki = 0; ki < nk; ++ki) {
        // Pooled variance over all layers = mean within-layer variance + variance of means.
        sd_all[ki] += r.jl_error_sd[l][ki] / L;
      }
    r.svd_error_all = mean_over(r.svd_error);
    r.jl_error_all = mean_over(r.jl_error);
    r.svd_p_error_all = mean_over(r.svd_p_error);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t ki = 0; ki < nk; ++ki) {
        const double d = r.jl_error[l][ki] - r.jl_error_all[ki];
        sd_all[ki] += d * d / L;
      }
    for (auto& row : r.jl_error_sd)
      for (double& v : row) v = std::sqrt(v);
    for (double& v : sd_all) v = std::sqrt(v);
    r.jl_error_sd_all = sd_all;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Files.
  fs::create_directories(opt.out);
  auto path = [&](const char* name) { return (fs::path(opt.out) / name).string(); };
  write_file_atomic(path("spectrum.csv"), [&](std::ostream& o) {
    o << "layer,head,index,singular_value,cumulative\n";
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < rank; ++i)
          o << l << ',' << h << ',' << i + 1 << ',' << fmt(r.sigma[l][h][i]) << ','
            << fmt(r.cumulative[l][h][i]) << '\n';
  });
  write_file_atomic(path("spectrum_layers.csv"), [&](std::ostream& o) {
    o << "layer,index,cumulative\n";
    for (int64_t l = 0; l < L; ++l)
      for (int64_t i = 0; i < rank; ++i)
        o << l << ',' << i + 1 << ',' << fmt(r.layer_cumulative[l][i]) << '\n';
  });
  write_file_atomic(path("share.csv"), [&](std::ostream& o) {
    o << "layer,head,k_ref,share\n";
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h)
        o << l << ',' << h << ',' << k_ref << ',' << fmt(r.share[l][h]) << '\n';
  });
  json sj = r.spectrum_json();
  sj["model"] = opt.model_dir;
  sj["text"] = opt.text;
  write_file_atomic(path("spectrum.json"), sj.dump(2) + "\n");

  std::vector<PlotSeries> curves;
  for (int64_t l = 0; l < L; ++l) {
    PlotSeries ps;
    ps.name = "layer " + std::to_string(l);
    for (int64_t i = 0; i < rank; ++i) {
      ps.x.push_back(static_cast<double>(i + 1));
      ps.y.push_back(r.layer_cumulative[l][i]);
    }
    curves.push_back(ps);
  }
  PlotOptions po;
  po.title = "Normalised cumulative singular values of P (" + r.attention +
             ", n = " + std::to_string(N) + ", " + std::to_string(N) + " x " + std::to_string(Lk) +
             ")";
  po.x_label = "singular value index";
  po.y_label = "cumulative share";
  write_svg_line_plot(path("spectrum_cumulative.svg"), curves, po);
  po.log_x = true;  // the same curves with the first values spread out
  write_svg_line_plot(path("spectrum_cumulative_logx.svg"), curves, po);

  HeatmapOptions ho;
  ho.title = "Share of the first " + std::to_string(k_ref) + " of " + std::to_string(rank) +
             " singular values (" + r.attention + ")";
  ho.row_label = "layer";
  ho.col_label = "head";
  for (int64_t l = 0; l < L; ++l) ho.row_names.push_back("layer " + std::to_string(l));
  for (int64_t h = 0; h < H; ++h) ho.col_names.push_back("head " + std::to_string(h));
  write_svg_heatmap(path("spectrum_share_heatmap.svg"), r.share, ho);

  if (lowrank) {
    write_file_atomic(path("lowrank.csv"), [&](std::ostream& o) {
      o << "layer,k,rank_k_error,jl_error,jl_error_sd,rank_k_error_P\n";
      for (int64_t l = 0; l <= L; ++l)
        for (int64_t ki = 0; ki < nk; ++ki) {
          const bool all = l == L;
          o << (all ? std::string("all") : std::to_string(l)) << ',' << ks[ki] << ','
            << fmt(all ? r.svd_error_all[ki] : r.svd_error[l][ki]) << ','
            << fmt(all ? r.jl_error_all[ki] : r.jl_error[l][ki]) << ','
            << fmt(all ? r.jl_error_sd_all[ki] : r.jl_error_sd[l][ki]) << ','
            << fmt(all ? r.svd_p_error_all[ki] : r.svd_p_error[l][ki]) << '\n';
        }
    });
    json lj = r.lowrank_json();
    lj["model"] = opt.model_dir;
    lj["text"] = opt.text;
    write_file_atomic(path("lowrank.json"), lj.dump(2) + "\n");
    std::vector<PlotSeries> es;
    auto series = [&](const std::string& name, const std::vector<double>& y, bool dashed) {
      PlotSeries ps;
      ps.name = name;
      ps.dashed = dashed;
      for (int64_t ki = 0; ki < nk; ++ki) {
        ps.x.push_back(static_cast<double>(ks[ki]));
        ps.y.push_back(std::max(y[ki], 1e-12));
      }
      es.push_back(ps);
    };
    series("rank-k SVD, mean", r.svd_error_all, false);
    series("JL R^T R, mean", r.jl_error_all, false);
    for (int64_t l = 0; l < L; ++l) series("SVD layer " + std::to_string(l), r.svd_error[l], true);
    for (int64_t l = 0; l < L; ++l) series("JL layer " + std::to_string(l), r.jl_error[l], true);
    PlotOptions eo;
    eo.title = "Relative error ||PV - P~V|| / ||PV|| (n = " + std::to_string(N) + ")";
    eo.x_label = "k";
    eo.y_label = "relative error";
    eo.log_x = true;
    eo.log_y = true;
    write_svg_line_plot(path("lowrank_error.svg"), es, eo);
  }
  return r;
}

}  // namespace lf::analysis
