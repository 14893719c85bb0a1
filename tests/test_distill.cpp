// Knowledge distillation in the MLM head (Model::mlm_loss with MlmDistill): the gradient of
// (1 - a) CE + a T^2 KL(softmax(t / T) || softmax(s / T)) against central finite differences
// of that objective computed independently here (double precision, from mlm_logits), and
// the limits: alpha = 0 is plain MLM bit for bit, a student equal to its teacher has KL 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gradcheck_util.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/pretrain.h"
#include "linformer/tokenizer.h"
#include "test_util.h"

namespace lf {
namespace {

using namespace gradcheck;

struct Data {
  int64_t B = 2, N = 10;
  std::vector<int32_t> ids, labels;
  std::vector<float> mask;
  std::vector<int64_t> rows;  // labelled positions, in order
  explicit Data(const Config& c) {
    ids.resize(B * N);
    labels.assign(B * N, -100);
    mask.assign(B * N, 1.f);
    for (int64_t i = 0; i < B * N; ++i) {
      ids[i] = static_cast<int32_t>(5 + rng_bits(9, 1, i) % (c.vocab_size - 5));
      if (i % 3 == 1) {
        labels[i] = static_cast<int32_t>(rng_bits(9, 2, i) % c.vocab_size);
        rows.push_back(i);
      }
    }
    for (int64_t t = 7; t < N; ++t) mask[N + t] = 0.f, ids[N + t] = c.pad_id, labels[N + t] = -100;
    rows.erase(std::remove_if(rows.begin(), rows.end(), [&](int64_t r) { return labels[r] == -100; }),
               rows.end());
  }
  Batch batch() const { return Batch{ids.data(), mask.data(), B, N}; }
};

// The objective, independently: logits of the labelled rows from mlm_logits, then CE and KL in
// double. Deterministic forward (train = true with dropout 0 in the config).
double objective(Model& m, const Data& d, const std::vector<float>& teacher, double alpha,
                 double T) {
  m.forward(d.batch(), true, 1);
  const int64_t V = m.config().vocab_size, M = static_cast<int64_t>(d.rows.size());
  std::vector<float> s(M * V);
  m.mlm_logits(s.data(), d.rows);
  double ce = 0, kl = 0;
  for (int64_t i = 0; i < M; ++i) {
    const float* si = s.data() + i * V;
    const float* ti = teacher.data() + i * V;
    double ms = si[0], mt = ti[0], m1 = si[0];
    for (int64_t v = 0; v < V; ++v) ms = std::max(ms, double(si[v])), mt = std::max(mt, double(ti[v]));
    m1 = ms;
    double z1 = 0, zs = 0, zt = 0;
    for (int64_t v = 0; v < V; ++v) {
      z1 += std::exp(si[v] - m1);
      zs += std::exp((si[v] - ms) / T);
      zt += std::exp((ti[v] - mt) / T);
    }
    ce += -(si[d.labels[d.rows[i]]] - m1 - std::log(z1));
    for (int64_t v = 0; v < V; ++v) {
      const double lp = (ti[v] - mt) / T - std::log(zt), lq = (si[v] - ms) / T - std::log(zs);
      kl += std::exp(lp) * (lp - lq);
    }
  }
  return ((1 - alpha) * ce + alpha * T * T * kl) / M;
}

Config tiny() {
  Config c = test::tiny_config();
  c.dropout = 0;
  c.attention_dropout = 0;
  return c;
}

std::vector<float> teacher_logits(const Config& c, const Data& d) {
  Model t(c);
  test::randomise(t, 41);
  t.forward(d.batch(), false);
  std::vector<float> out(d.rows.size() * c.vocab_size);
  t.mlm_logits(out.data(), d.rows);
  return out;
}

TEST(Distill, GradientMatchesFiniteDifferencesOfTheObjective) {
  const Config c = tiny();
  const Data d(c);
  const std::vector<float> teacher = teacher_logits(c, d);
  for (const auto& [alpha, T] : {std::pair<double, double>{0.5, 2.0}, {1.0, 1.0}, {0.3, 3.5}}) {
    Model m(c);
    test::randomise(m, 17);
    m.zero_grad();
    m.forward(d.batch(), true, 1);
    MlmDistill kd;
    kd.teacher_logits = teacher.data();
    kd.alpha = static_cast<float>(alpha);
    kd.temperature = static_cast<float>(T);
    int64_t count = 0;
    const double ce = m.mlm_loss(d.labels.data(), true, 1.f, &count, 0, &kd);
    m.backward();
    ASSERT_EQ(count, static_cast<int64_t>(d.rows.size()));
    // The returned loss is the cross-entropy alone, the KL term is reported beside it.
    const double whole = objective(m, d, teacher, alpha, T);
    EXPECT_NEAR(((1 - alpha) * ce + alpha * T * T * kd.soft_loss) / count, whole,
                1e-4 * std::abs(whole));
    const std::vector<float> grad(m.grad_data(), m.grad_data() + m.params().back().offset +
                                                     m.params().back().numel);
    OneThread one;
    int bad = 0, checked = 0;
    for (const ParamInfo& p : m.params()) {
      if (p.name.find("key.bias") != std::string::npos) continue;  // softmax-invariant
      float* w = m.param_data() + p.offset;
      for (size_t i : pick(p.numel, 6, p.offset + 5)) {
        const float x0 = w[i];
        w[i] = x0 + kH;
        m.weights_changed();
        const double lp = objective(m, d, teacher, alpha, T);
        w[i] = x0 - kH;
        m.weights_changed();
        const double lm = objective(m, d, teacher, alpha, T);
        w[i] = x0;
        m.weights_changed();
        const double num = (lp - lm) / (2 * double(kH));
        const double ana = grad[p.offset + i];
        ++checked;
        if (std::abs(num - ana) > 5e-4 + 2e-2 * std::abs(ana) && bad++ < 8)
          ADD_FAILURE() << "alpha " << alpha << " T " << T << ": " << p.name << "[" << i
                        << "] analytic " << ana << " numeric " << num;
      }
    }
    EXPECT_EQ(bad, 0) << bad << " of " << checked;
  }
}

TEST(Distill, AlphaZeroIsPlainMlmBitForBit) {
  const Config c = tiny();
  const Data d(c);
  const std::vector<float> teacher = teacher_logits(c, d);
  Model a(c), b(c);
  test::randomise(a, 3);
  test::randomise(b, 3);
  const size_t n = a.params().back().offset + a.params().back().numel;
  a.zero_grad();
  a.forward(d.batch(), true, 2);
  int64_t ca = 0, cb = 0;
  const double la = a.mlm_loss(d.labels.data(), true, 0.7f, &ca);
  a.backward();
  b.zero_grad();
  b.forward(d.batch(), true, 2);
  MlmDistill kd;
  kd.teacher_logits = teacher.data();
  kd.alpha = 0.f;
  const double lb = b.mlm_loss(d.labels.data(), true, 0.7f, &cb, 0, &kd);
  b.backward();
  EXPECT_EQ(la, lb);
  EXPECT_EQ(0, std::memcmp(a.grad_data(), b.grad_data(), n * sizeof(float)));
}

TEST(Distill, AStudentEqualToItsTeacherHasNoSoftLoss) {
  const Config c = tiny();
  const Data d(c);
  Model m(c);
  test::randomise(m, 41);  // the teacher's weights
  const std::vector<float> teacher = teacher_logits(c, d);
  m.forward(d.batch(), false);
  MlmDistill kd;
  kd.teacher_logits = teacher.data();
  kd.alpha = 1.f;
  kd.temperature = 3.f;
  int64_t count = 0;
  m.mlm_loss(d.labels.data(), false, 1.f, &count, 0, &kd);
  EXPECT_NEAR(kd.soft_loss, 0.0, 1e-5 * count);
  // And bad settings are refused with the reason.
  kd.alpha = 1.5f;
  test::expect_error([&] { m.mlm_loss(d.labels.data(), false, 1.f, &count, 0, &kd); },
                     {"alpha must be in [0, 1]"});
  kd.alpha = 0.5f;
  kd.temperature = 0.f;
  test::expect_error([&] { m.mlm_loss(d.labels.data(), false, 1.f, &count, 0, &kd); },
                     {"temperature must be > 0"});
}

// pretrain --teacher: the run stores its teacher, and a run stopped and resumed ends with the
// same weights, byte for byte, as one that ran through (the teacher runs inference only).
TEST(Distill, PretrainWithATeacherResumesExactly) {
  const std::string d = test::temp_dir("kd");
  {
    std::ofstream out(d + "/corpus.txt");
    static const char* words[] = {"river", "house", "road", "garden", "train", "old", "young",
                                  "walked", "found", "the", "a", "and", "with", "to", "of"};
    for (uint64_t i = 0; i < 400; ++i) {
      const int64_t len = 5 + static_cast<int64_t>(rng_bits(4, i, 0) % 10);
      for (int64_t w = 0; w < len; ++w) out << (w ? " " : "") << words[rng_bits(4, i, w + 1) % 15];
      out << ".\n";
    }
  }
  TokenizerTrainOptions to;
  to.vocab_size = 60;
  Tokenizer::train({d + "/corpus.txt"}, d + "/tok.model", to);
  auto options = [&](const std::string& out, const std::string& config, int64_t steps) {
    PretrainOptions o;
    o.train = {d + "/corpus.txt"};
    o.tokenizer = d + "/tok.model";
    o.config = config;
    o.out = out;
    o.steps = steps;
    o.batch_size = 2;
    o.optim.lr = 1e-3;
    o.optim.warmup_steps = 2;
    o.eval_every = 0;
    o.checkpoint_every = 4;
    o.log_every = 1;
    o.seed = 5;
    o.quiet = true;
    return o;
  };
  test::write_text(d + "/teacher.json", R"({"max_len": 64, "d_model": 32, "n_heads": 2,
      "d_ff": 64, "n_layers": 1, "attention": "standard", "dropout": 0})");
  test::write_text(d + "/student.json", R"({"max_len": 64, "d_model": 32, "n_heads": 2,
      "d_ff": 64, "n_layers": 1, "k": 8, "dropout": 0.1, "attention_dropout": 0.1})");
  pretrain(options(d + "/teacher", d + "/teacher.json", 10), false);
  PretrainOptions s = options(d + "/ref", d + "/student.json", 12);
  s.teacher = d + "/teacher/model";
  s.distill_alpha = 0.7;
  s.distill_temperature = 1.5;
  pretrain(s, false);
  const std::string args = read_file(d + "/ref/train_args.json");
  EXPECT_NE(args.find("\"teacher\": \"" + d + "/teacher/model\""), std::string::npos) << args;
  EXPECT_NE(args.find("\"distill_alpha\": 0.7"), std::string::npos) << args;

  PretrainOptions a = s;
  a.out = d + "/stopped";
  int steps_seen = 0;
  a.hooks.stop_requested = [&] { return ++steps_seen == 6; };
  const PretrainResult first = pretrain(a, false);
  EXPECT_TRUE(first.stopped);
  PretrainOptions r;
  r.out = d + "/stopped";
  r.quiet = true;
  pretrain(r, true);
  EXPECT_EQ(read_file(d + "/ref/model/model.safetensors"),
            read_file(d + "/stopped/model/model.safetensors"));

  // Without distillation the same run ends elsewhere: the teacher's targets were used.
  PretrainOptions plain = options(d + "/plain", d + "/student.json", 12);
  pretrain(plain, false);
  EXPECT_NE(read_file(d + "/ref/model/model.safetensors"),
            read_file(d + "/plain/model/model.safetensors"));

  // A teacher with another tokenizer is refused with the reason.
  test::write_text(d + "/other.txt", "zebra quokka narwhal axolotl pangolin okapi tapir\n"
                                      "quokka tapir zebra okapi narwhal pangolin axolotl\n");
  Tokenizer::train({d + "/other.txt"}, d + "/tok2.model", to);
  PretrainOptions t2 = options(d + "/teacher2", d + "/teacher.json", 2);
  t2.tokenizer = d + "/tok2.model";
  pretrain(t2, false);
  PretrainOptions bad = s;
  bad.out = d + "/bad";
  bad.teacher = d + "/teacher2/model";
  test::expect_error([&] { pretrain(bad, false); }, {"the teacher must use the same tokenizer"});
}

}  // namespace
}  // namespace lf
