// The attention-spectrum analysis (`linformer spectrum`): singular values and normalised
// cumulative sums on matrices built with known singular values and rank, the rank-k truncation
// error against the tail-singular-value formula, the JL projection error against k, the
// heat-map writer, the recorded attention input of each layer (and so V), and an
// end-to-end run of the command on a tiny model and tokenizer.
// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 packet transposes
// (_mm512_undefined_*), inlined into this file; it is not about this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "analysis/heatmap_svg.h"
#include "analysis/spectrum.h"  // first: it configures Eigen
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "linformer/spectrum.h"
#include "linformer/tokenizer.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using analysis::Mat;
using analysis::Vec;

Mat gaussian(int64_t rows, int64_t cols, uint64_t seed) {
  Mat g(rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) g(i, j) = rng_normal(seed, 99, i * cols + j);
  return g;
}

// A random matrix with orthonormal columns [rows, cols] (Householder QR of a Gaussian matrix).
Mat random_orthonormal(int64_t rows, int64_t cols, uint64_t seed) {
  Eigen::HouseholderQR<Mat> qr(gaussian(rows, cols, seed));
  return qr.householderQ() * Mat::Identity(rows, cols);
}

// U diag(s) V^T with random orthonormal U [rows, r], V [cols, r], r = s.size().
Mat with_singular_values(int64_t rows, int64_t cols, const Vec& s, uint64_t seed) {
  const Mat U = random_orthonormal(rows, s.size(), seed);
  const Mat V = random_orthonormal(cols, s.size(), seed + 1000);
  return U * s.asDiagonal() * V.transpose();
}

Vec decaying(int64_t r, double rate) {
  Vec s(r);
  for (int64_t i = 0; i < r; ++i) s[i] = 3.0 * std::pow(rate, static_cast<double>(i)) + 0.01;
  return s;
}

TEST(SpectrumMath, OrthonormalFactorsAreOrthonormal) {
  const Mat Q = random_orthonormal(40, 25, 3);
  EXPECT_LT((Q.transpose() * Q - Mat::Identity(25, 25)).norm(), 1e-12);
}

TEST(SpectrumMath, SingularValuesOfKnownMatrices) {
  // Square, tall and wide, with distinct singular values of very different sizes.
  struct Case {
    int64_t rows, cols;
  };
  for (const Case c : {Case{48, 48}, Case{64, 16}, Case{16, 40}}) {
    const int64_t r = std::min(c.rows, c.cols);
    const Vec s = decaying(r, 0.8);
    const Mat A = with_singular_values(c.rows, c.cols, s, 11 + c.rows);
    const Vec got = analysis::singular_values(A);
    ASSERT_EQ(got.size(), r);
    for (int64_t i = 0; i < r; ++i)
      EXPECT_NEAR(got[i], s[i], 1e-10 * s[0]) << c.rows << "x" << c.cols << " index " << i;
    const analysis::Svd svd = analysis::thin_svd(A);
    EXPECT_LT((svd.s - s).norm(), 1e-10);
    EXPECT_LT((svd.U * svd.s.asDiagonal() * svd.V.transpose() - A).norm(), 1e-10 * A.norm());
  }
}

TEST(SpectrumMath, NormalisedCumulativeSum) {
  const Vec s = decaying(30, 0.7);
  const Mat A = with_singular_values(30, 30, s, 5);
  const std::vector<double> c = analysis::normalised_cumsum(analysis::singular_values(A));
  ASSERT_EQ(c.size(), 30u);
  const double total = s.sum();
  double acc = 0;
  for (int64_t i = 0; i < 30; ++i) {
    acc += s[i];
    EXPECT_NEAR(c[i], acc / total, 1e-12) << i;
    if (i) {
      EXPECT_GE(c[i], c[i - 1]);
    }
  }
  EXPECT_NEAR(c.back(), 1.0, 1e-12);
  EXPECT_NEAR(analysis::share_of_first(c, 5), s.head(5).sum() / total, 1e-12);
  EXPECT_DOUBLE_EQ(analysis::share_of_first(c, 1000), c.back());  // clamped
  EXPECT_DOUBLE_EQ(analysis::share_of_first(c, 0), c.front());
  // A zero matrix holds its (empty) spectrum at once.
  const std::vector<double> z = analysis::normalised_cumsum(Vec::Zero(4));
  EXPECT_EQ(z, std::vector<double>(4, 1.0));
}

TEST(SpectrumMath, RankRMatrixReachesOneAtR) {
  const int64_t n = 64;
  for (int64_t r : {1, 5, 17}) {
    const Mat A = with_singular_values(n, n, decaying(r, 0.9), 21 + r);
    const Vec s = analysis::singular_values(A);
    for (int64_t i = r; i < n; ++i) EXPECT_LT(s[i], 1e-12) << "rank " << r << " index " << i;
    const std::vector<double> c = analysis::normalised_cumsum(s);
    EXPECT_NEAR(c[r - 1], 1.0, 1e-12) << "rank " << r;
    if (r > 1) {
      EXPECT_LT(c[r - 2], 1.0 - 1e-4) << "rank " << r;
    }
    EXPECT_NEAR(analysis::share_of_first(c, r), 1.0, 1e-12);
  }
  // n x k matrices (Linformer's context matrices): at most k values.
  const Mat A = with_singular_values(96, 12, decaying(4, 0.5), 8);
  const Vec s = analysis::singular_values(A);
  ASSERT_EQ(s.size(), 12);
  EXPECT_NEAR(analysis::normalised_cumsum(s)[3], 1.0, 1e-12);
}

TEST(SpectrumMath, TruncationErrorIsTheTailFormula) {
  const int64_t n = 50, d = 8;
  const Vec s = decaying(n, 0.85);
  const Mat U = random_orthonormal(n, n, 31), V = random_orthonormal(n, n, 32);
  const Mat A = U * s.asDiagonal() * V.transpose();
  const analysis::Svd svd = analysis::thin_svd(A);
  const Mat Y = gaussian(n, d, 33);
  for (int64_t k : {0, 1, 4, 10, 25, 49, 50}) {
    const Mat Ak = analysis::rank_k(svd, k);
    // Eckart-Young: ||A - A_k||_F = sqrt(sum_{i >= k} s_i^2), ||A - A_k||_2 = s_k.
    const double tail = std::sqrt(s.tail(n - k).squaredNorm());
    EXPECT_NEAR((A - Ak).norm(), tail, 1e-10) << k;
    EXPECT_NEAR(analysis::tail_frobenius(svd.s, k), tail, 1e-10) << k;
    if (k < n) {
      EXPECT_NEAR(analysis::singular_values(A - Ak)[0], s[k], 1e-10) << k;
    }
    // The product error with the true factors: (A - A_k) Y = U_tail diag(s_tail) V_tail^T Y,
    // whose norm is ||diag(s_tail) V_tail^T Y|| (U has orthonormal columns).
    const Mat W = V.rightCols(n - k).transpose() * Y;
    const double want = (s.tail(n - k).asDiagonal() * W).norm() / (A * Y).norm();
    EXPECT_NEAR(analysis::rank_k_product_error(svd, A, Y, k), want, 1e-10) << k;
  }
  EXPECT_NEAR(analysis::rank_k_product_error(svd, A, Y, n), 0.0, 1e-12);
}

TEST(SpectrumMath, JlMatrixHasVarianceOneOverK) {
  const Mat R = analysis::jl_matrix(64, 500, 7, 1);
  const double mean = R.mean();
  const double var = R.array().square().mean();
  EXPECT_NEAR(mean, 0.0, 3.0 * std::sqrt(1.0 / 64 / R.size()));
  EXPECT_NEAR(var * 64, 1.0, 0.03);
  // A pure function of (seed, stream): same numbers again, others with another stream.
  EXPECT_EQ((analysis::jl_matrix(64, 500, 7, 1) - R).norm(), 0.0);
  EXPECT_GT((analysis::jl_matrix(64, 500, 7, 2) - R).norm(), 1.0);
}

TEST(SpectrumMath, JlErrorDecreasesWithK) {
  // A row-stochastic matrix (like a softmax P) and Gaussian values.
  const int64_t n = 256, d = 16;
  Mat P = gaussian(n, n, 41).array().exp().matrix();
  for (int64_t i = 0; i < n; ++i) P.row(i) /= P.row(i).sum();
  const Mat Y = gaussian(n, d, 42);
  std::vector<double> err;
  const std::vector<int64_t> ks = {8, 16, 32, 64, 128, 256};
  for (int64_t k : ks) {
    double e = 0;
    const int draws = 12;
    for (int t = 0; t < draws; ++t)
      e += analysis::jl_product_error(P, Y, analysis::jl_matrix(k, n, 5, rng_stream(k, t))) / draws;
    err.push_back(e);
  }
  for (size_t i = 1; i < err.size(); ++i) EXPECT_LT(err[i], err[i - 1]) << "k = " << ks[i];
  // The error of a JL sketch falls like 1/sqrt(k): 32 times the width, about 1/5.7 the error.
  EXPECT_GT(err.front() / err.back(), 3.0);
  EXPECT_LT(err.front() / err.back(), 10.0);
  // The same matrix held exactly by its SVD: rank-k truncation is far better than JL here.
  const analysis::Svd svd = analysis::thin_svd(P);
  EXPECT_LT(analysis::rank_k_product_error(svd, P, Y, 64), err[3]);
}

TEST(SpectrumHeatmap, CellsLabelsAndRange) {
  analysis::HeatmapOptions o;
  o.title = "share <test>";
  o.row_names = {"layer 0", "layer 1", "layer 2"};
  const std::vector<std::vector<double>> v = {{0.1, 0.2}, {0.3, 0.4}, {0.5, 0.95}};
  const std::string svg = analysis::svg_heatmap(v, o);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("share &lt;test&gt;"), std::string::npos);
  size_t cells = 0;
  for (size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1))
    ++cells;
  EXPECT_EQ(cells, 6u);
  EXPECT_NE(svg.find(">0.950<"), std::string::npos);
  EXPECT_NE(svg.find("layer 2"), std::string::npos);
  EXPECT_THROW(analysis::svg_heatmap({{1.0}, {1.0, 2.0}}, o), Error);
  EXPECT_THROW(analysis::svg_heatmap({}, o), Error);
}

// ---------------------------------------------------------------------------------------------
// On models
// ---------------------------------------------------------------------------------------------

// Generated sentences over a small vocabulary.
std::string make_corpus(int lines) {
  static const char* words[] = {"river", "house",  "road",   "garden", "train",  "village",
                                "window", "bread", "letter", "market", "morning", "old",
                                "young",  "small", "quiet",  "red",    "walked", "found",
                                "opened", "the",   "a",      "and",    "with",   "after"};
  std::string s;
  for (int i = 0; i < lines; ++i) {
    const int len = 6 + static_cast<int>(rng_bits(3, i, 0) % 10);
    for (int w = 0; w < len; ++w) {
      if (w) s += ' ';
      s += words[rng_bits(3, i, w + 1) % (sizeof words / sizeof *words)];
    }
    s += ".\n";
  }
  return s;
}

// A model folder with a freshly initialised model and a tokenizer trained on the corpus.
void make_model_dir(const std::string& dir, const std::string& corpus, Config cfg, uint64_t seed) {
  fs::create_directories(dir);
  TokenizerTrainOptions to;
  to.vocab_size = 80;
  Tokenizer::train({corpus}, dir + "/tokenizer.model", to);
  Tokenizer tok(dir + "/tokenizer.model");
  cfg.vocab_size = tok.vocab_size();
  Model m(cfg);
  m.init(seed);
  // Larger query/key weights than the default init: sharper, less uniform attention.
  for (const ParamInfo& p : m.params())
    if (p.name.find("query.weight") != std::string::npos ||
        p.name.find("key.weight") != std::string::npos)
      for (size_t i = 0; i < p.numel; ++i) m.param_data()[p.offset + i] *= 8.f;
  save_model(m, dir);
}

Config small_config(bool linformer, NormPlacement norm) {
  Config c = test::tiny_config();
  c.max_len = 32;
  c.d_model = 16;
  c.n_heads = 2;
  c.n_layers = 3;
  c.k = {8};
  c.attention = linformer ? AttentionKind::linformer : AttentionKind::standard;
  c.sharing = Sharing::headwise;
  c.norm = norm;
  c.dropout = 0.1f;  // the command must switch these off
  c.attention_dropout = 0.1f;
  return c;
}

int64_t csv_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t n = -1;  // not counting the header
  while (std::getline(in, line))
    if (!line.empty()) ++n;
  return n;
}

// The attention inputs a forward observer records reproduce every layer's P (so the V built
// from them is the layer's real V), for post-norm and pre-norm models; an inference forward
// records the same inputs (to float rounding: it multiplies by packed weights).
TEST(SpectrumModel, RecordedInputsReproduceAttention) {
  for (NormPlacement norm : {NormPlacement::post, NormPlacement::pre}) {
    Config c = small_config(false, norm);
    c.dropout = c.attention_dropout = 0.f;
    c.position_offset = 2;
    Model m(c);
    m.init(17);
    const int64_t B = 2, N = 20, L = c.n_layers, H = c.n_heads, D = c.d_model, Dh = c.d_head();
    std::vector<int32_t> ids(B * N);
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<int32_t>(rng_bits(4, 0, i) % c.vocab_size);
    Batch batch;
    batch.ids = ids.data();
    batch.B = B;
    batch.N = N;
    analysis::AttentionInputs rec, rec_infer;
    m.forward(batch, false, 0, &rec_infer);
    m.forward(batch, true, 0, &rec);
    const auto& xin = rec.x;
    ASSERT_EQ(xin.size(), static_cast<size_t>(L));
    ASSERT_EQ(rec_infer.x.size(), static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) {
      ASSERT_EQ(xin[l].size(), static_cast<size_t>(B * N * D));
      ASSERT_EQ(rec_infer.x[l].size(), xin[l].size());
      for (size_t i = 0; i < xin[l].size(); ++i)
        ASSERT_NEAR(rec_infer.x[l][i], xin[l][i], 1e-4) << "layer " << l << " [" << i << "]";
    }
    double worst = 0;
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "roberta.encoder.layer." + std::to_string(l) + ".attention.self.";
      const float *wq = m.param(p + "query.weight"), *bq = m.param(p + "query.bias");
      const float *wk = m.param(p + "key.weight"), *bk = m.param(p + "key.bias");
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          const float* P = m.attention_probs(l) + (b * H + h) * N * N;
          for (int64_t i = 0; i < N; ++i) {
            std::vector<double> sc(N);
            for (int64_t j = 0; j < N; ++j) {
              double acc = 0;
              for (int64_t e = 0; e < Dh; ++e) {
                double q = bq[h * Dh + e], k = bk[h * Dh + e];
                for (int64_t f = 0; f < D; ++f) {
                  q += double(wq[(h * Dh + e) * D + f]) * xin[l][(b * N + i) * D + f];
                  k += double(wk[(h * Dh + e) * D + f]) * xin[l][(b * N + j) * D + f];
                }
                acc += q * k;
              }
              sc[j] = acc / std::sqrt(double(Dh));
            }
            const double mx = *std::max_element(sc.begin(), sc.end());
            double z = 0;
            for (double& v : sc) z += (v = std::exp(v - mx));
            for (int64_t j = 0; j < N; ++j)
              worst = std::max(worst, std::fabs(sc[j] / z - P[i * N + j]));
          }
        }
    }
    EXPECT_LT(worst, 1e-5) << (norm == NormPlacement::pre ? "pre-norm" : "post-norm");
    // Without dropout the observer changes nothing: the same hidden states either way.
    const std::vector<float> seen(m.hidden(), m.hidden() + B * N * D);
    m.forward(batch, true, 0);
    for (int64_t i = 0; i < B * N * D; ++i) ASSERT_EQ(m.hidden()[i], seen[i]);
  }
}

TEST(SpectrumModel, RunInProcessStandardPreNorm) {
  const std::string d = test::temp_dir("m");
  write_file_atomic(d + "/corpus.txt", make_corpus(300));
  make_model_dir(d + "/model", d + "/corpus.txt", small_config(false, NormPlacement::pre), 3);
  analysis::SpectrumOptions o;
  o.model_dir = d + "/model";
  o.text = {d + "/corpus.txt"};
  o.n = 32;
  o.sequences = 5;
  o.out = d + "/out";
  o.ks = {2, 4, 8, 16, 64};  // 64 > n is dropped
  o.quiet = true;
  const analysis::SpectrumResult r = analysis::run_spectrum(o);
  EXPECT_EQ(r.attention, "standard");
  EXPECT_EQ(r.rank, 32);
  EXPECT_EQ(r.k_ref, 8);
  EXPECT_EQ(r.sequences, 5);
  EXPECT_EQ(r.ks, (std::vector<int64_t>{2, 4, 8, 16}));
  EXPECT_GE(r.probs_check, 0.0);
  EXPECT_LT(r.probs_check, 1e-5);
  for (int64_t l = 0; l < r.layers; ++l) {
    EXPECT_GT(r.layer_share[l], 8.0 / 32 - 1e-9);  // a descending spectrum: at least uniform
    EXPECT_LE(r.layer_share[l], 1.0 + 1e-9);
    EXPECT_NEAR(r.layer_cumulative[l].back(), 1.0, 1e-9);
    for (size_t i = 1; i < r.ks.size(); ++i) {
      // Truncation error falls with k, and P's own error bounds nothing below zero.
      EXPECT_LE(r.svd_error[l][i], r.svd_error[l][i - 1] + 1e-12);
      EXPECT_LE(r.svd_p_error[l][i], r.svd_p_error[l][i - 1] + 1e-12);
    }
  }
  for (size_t i = 1; i < r.ks.size(); ++i) EXPECT_LT(r.jl_error_all[i], r.jl_error_all[i - 1]);
}

// A kind without a softmax P (Nystromformer) is refused with its name, before any work.
TEST(SpectrumModel, RefusesAKindWithoutSoftmaxProbabilities) {
  const std::string d = test::temp_dir("ny");
  write_file_atomic(d + "/corpus.txt", make_corpus(300));
  Config c = small_config(false, NormPlacement::post);
  c.attention = AttentionKind::nystrom;
  c.attention_dropout = 0.f;
  c.landmarks = 4;
  make_model_dir(d + "/model", d + "/corpus.txt", c, 4);
  analysis::SpectrumOptions o;
  o.model_dir = d + "/model";
  o.text = {d + "/corpus.txt"};
  o.n = 32;
  o.out = d + "/out";
  o.quiet = true;
  test::expect_error([&] { analysis::run_spectrum(o); }, {"nystrom", "softmax"}, "spectrum");
}

TEST(SpectrumCli, EndToEndStandardAndLinformer) {
  const std::string d = test::temp_dir("cli");
  write_file_atomic(d + "/corpus.txt", make_corpus(300));
  make_model_dir(d + "/std", d + "/corpus.txt", small_config(false, NormPlacement::post), 1);
  make_model_dir(d + "/lin", d + "/corpus.txt", small_config(true, NormPlacement::post), 2);
  const int64_t L = 3, H = 2, N = 32;

  // The exit status; stdout and stderr in d/stdout.txt and d/stderr.txt.
  auto run = [&](const std::string& args) { return test::run_cli(d, "spectrum " + args).code; };
  const std::string common = "--text '" + d + "/corpus.txt' --n 32 --sequences 4 --ks 4,8,16 ";
  ASSERT_EQ(run("--model '" + d + "/std' --out '" + d + "/out-std' " + common), 0)
      << read_file(d + "/stderr.txt");
  const std::string so = read_file(d + "/stdout.txt");
  EXPECT_NE(so.find("share of the first 8 of 32"), std::string::npos) << so;
  EXPECT_NE(so.find("rank-k SVD"), std::string::npos) << so;
  const std::string o = d + "/out-std/";
  for (const char* f : {"spectrum.csv", "spectrum_layers.csv", "share.csv", "spectrum.json",
                        "spectrum_cumulative.svg", "spectrum_cumulative_logx.svg",
                        "spectrum_share_heatmap.svg", "lowrank.csv",
                        "lowrank.json", "lowrank_error.svg"})
    EXPECT_TRUE(fs::exists(o + f)) << f;
  EXPECT_EQ(csv_rows(o + "spectrum.csv"), L * H * N);
  EXPECT_EQ(csv_rows(o + "spectrum_layers.csv"), L * N);
  EXPECT_EQ(csv_rows(o + "share.csv"), L * H);
  EXPECT_EQ(csv_rows(o + "lowrank.csv"), (L + 1) * 3);  // per layer and "all", 3 widths
  const auto sj = nlohmann::json::parse(read_file(o + "spectrum.json"));
  EXPECT_EQ(sj.at("k_ref").get<int64_t>(), 8);
  EXPECT_EQ(sj.at("sequences").get<int64_t>(), 4);
  EXPECT_EQ(sj.at("share_first_k_ref").size(), static_cast<size_t>(L));
  EXPECT_EQ(sj.at("share_first_k_ref")[0].size(), static_cast<size_t>(H));
  EXPECT_LT(sj.at("probs_check_max_abs_diff").get<double>(), 1e-5);
  const auto lj = nlohmann::json::parse(read_file(o + "lowrank.json"));
  EXPECT_EQ(lj.at("ks"), nlohmann::json({4, 8, 16}));
  EXPECT_EQ(lj.at("mean").at("jl_error").size(), 3u);
  const std::string heat = read_file(o + "spectrum_share_heatmap.svg");
  size_t cells = 0;
  for (size_t p = heat.find("<title>"); p != std::string::npos; p = heat.find("<title>", p + 1))
    ++cells;
  EXPECT_EQ(cells, static_cast<size_t>(L * H));

  // Linformer: P is n x k (k = 8), so 8 singular values; no low-rank check.
  ASSERT_EQ(run("--model '" + d + "/lin' --out '" + d + "/out-lin' " + common), 0)
      << read_file(d + "/stderr.txt");
  const std::string ol = d + "/out-lin/";
  EXPECT_EQ(csv_rows(ol + "spectrum.csv"), L * H * 8);
  EXPECT_EQ(csv_rows(ol + "share.csv"), L * H);
  EXPECT_TRUE(fs::exists(ol + "spectrum_cumulative.svg"));
  EXPECT_FALSE(fs::exists(ol + "lowrank.csv"));
  EXPECT_NE(read_file(d + "/stderr.txt").find("low-rank check skipped"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(read_file(ol + "spectrum.json")).at("k_ref").get<int64_t>(), 2);

  // Errors: a model folder without a tokenizer; text too short for one sequence.
  fs::remove(d + "/lin/tokenizer.model");
  EXPECT_NE(run("--model '" + d + "/lin' --out '" + d + "/x' " + common), 0);
  EXPECT_NE(read_file(d + "/stderr.txt").find("tokenizer.model"), std::string::npos);
  write_file_atomic(d + "/short.txt", "the river.\n");
  EXPECT_NE(run("--model '" + d + "/std' --out '" + d + "/x' --text '" + d + "/short.txt' --n 32"),
            0);
  EXPECT_NE(read_file(d + "/stderr.txt").find("fewer than one"), std::string::npos);
}

}  // namespace
}  // namespace lf
