// The runner of the op cases (harness.h): every case through the checks below, and the perf
// table (OpsPerf.Table, with LF_OPS_PERF=1; docs/design.md "Tests").
#include "ops/harness.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "gradcheck_util.h"

namespace lf::ops {
namespace {

std::vector<CaseMaker> all_makers() {
  std::vector<CaseMaker> all;
  for (auto list : {product_cases, linear_cases, row_cases, dropout_cases, attention_cases,
                    projection_cases, attention_block_cases, int8_cases})
    for (CaseMaker& m : list()) all.push_back(std::move(m));
  return all;
}

// The cases at test size that `keep` selects (made once per process; the tests' parameters
// point into that list).
std::vector<const OpCase*> test_cases(bool (*keep)(const OpCase&)) {
  static const std::vector<OpCase> all = [] {
    std::vector<OpCase> v;
    for (const CaseMaker& m : all_makers()) v.push_back(m(false));
    return v;
  }();
  std::vector<const OpCase*> v;
  for (const OpCase& c : all)
    if (keep(c)) v.push_back(&c);
  return v;
}
bool any_case(const OpCase&) { return true; }
bool has_backward(const OpCase& c) { return bool(c.backward); }
bool works_in_place(const OpCase& c) { return c.in_place; }
std::string case_name(const ::testing::TestParamInfo<const OpCase*>& info) {
  return info.param->name + "_" + prec_name(info.param->t);
}

// Why c cannot run here, or "".
std::string unavailable(const OpCase& c) {
  if (c.needs_bf16_matmul && !compute_type_supported(ComputeType::bf16))
    return "this CPU has no bf16 matmul in oneDNN (bf16 needs AVX-512)";
  return c.unavailable ? c.unavailable() : std::string();
}
bool runs_here(const OpCase& c) { return unavailable(c).empty(); }

#define LF_SKIP_UNLESS_RUNS_HERE(c)         \
  do {                                      \
    const std::string why = unavailable(c); \
    if (!why.empty()) GTEST_SKIP() << why;  \
  } while (0)

std::vector<float> run_case(const OpCase& c) {
  std::vector<float> out(c.out_size, std::numeric_limits<float>::quiet_NaN());
  c.run(c.in, out.data());
  return out;
}

// sum_j r_j ref_j(in) over the differentiated outputs, in double.
double ref_loss(const OpCase& c, const Inputs& in, const std::vector<float>& r) {
  std::vector<double> ref(c.out_size);
  c.reference(in, ref.data());
  double s = 0;
  for (size_t j = 0; j < std::min(c.out_size, c.out_diff); ++j) s += r[j] * ref[j];
  return s;
}

std::vector<float> loss_weights(const OpCase& c) {
  std::vector<float> r = rnd(c.out_size, 99);
  for (size_t j = std::min(c.out_size, c.out_diff); j < c.out_size; ++j) r[j] = 0.f;
  return r;
}

Grads run_backward(const OpCase& c, const std::vector<float>& dout, Grads g, GradInto into) {
  c.backward(c.in, dout.data(), g, into);
  return g;
}

// Every case; the cases with a backward; the cases whose output may alias their input.
class Ops : public ::testing::TestWithParam<const OpCase*> {};
class OpsBackward : public ::testing::TestWithParam<const OpCase*> {};
class OpsInPlace : public ::testing::TestWithParam<const OpCase*> {};

TEST_P(Ops, MatchesReference) {
  const OpCase& c = *GetParam();
  LF_SKIP_UNLESS_RUNS_HERE(c);
  const std::vector<float> out = run_case(c);
  std::vector<double> ref(c.out_size);
  c.reference(c.in, ref.data());
  double num = 0, den = 0, worst = 0, largest = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < c.out_size; ++i) {
    const double d = std::abs(out[i] - ref[i]);
    num += d * d;
    den += ref[i] * ref[i];
    largest = std::max(largest, std::abs(ref[i]));
    if (!(d <= worst)) worst = d, worst_at = i;  // NaN (an output never written) wins
  }
  if (!c.zero_reference) {
    ASSERT_GT(den, 0.0) << "the reference is all zeros: the case tests nothing";
  }
  const double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LE(err, c.tol) << "worst element " << worst_at << ": " << out[worst_at] << " vs "
                        << ref[worst_at];
  if (c.min_err > 0) {
    EXPECT_GT(err, c.min_err) << "as exact as f32: the bf16 path was not taken";
  }
  if (c.max_abs_tol > 0) {
    EXPECT_LE(worst, c.max_abs_tol * std::max(1.0, largest))
        << "worst element " << worst_at << ": " << out[worst_at] << " vs " << ref[worst_at];
  }
  if (c.check) {
    const std::string wrong = c.check(c.in, out, ref);
    EXPECT_TRUE(wrong.empty()) << wrong;
  }
  ::testing::Test::RecordProperty("rel_error", std::to_string(err));
}

// The backward with dout = r against central differences of the double reference.
TEST_P(OpsBackward, GradientMatchesFiniteDifferences) {
  const OpCase& c = *GetParam();
  LF_SKIP_UNLESS_RUNS_HERE(c);
  const std::vector<float> r = loss_weights(c);
  const Grads g = run_backward(c, r, zero_grads(c.in), GradInto::add);
  Inputs in = c.in;
  bool any = false;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k].diff) continue;
    double num = 0, den = 0, worst = 0;
    size_t worst_at = 0;
    for (size_t i : gradcheck::pick(in[k].v.size(), c.fd_entries, 7 + k)) {
      const float x0 = in[k].v[i], xp = x0 + float(c.fd_h), xm = x0 - float(c.fd_h);
      in[k].v[i] = xp;
      const double lp = ref_loss(c, in, r);
      in[k].v[i] = xm;
      const double lm = ref_loss(c, in, r);
      in[k].v[i] = x0;
      const double fd = (lp - lm) / (double(xp) - double(xm)), d = std::abs(g[k][i] - fd);
      num += d * d;
      den += fd * fd;
      if (!(d <= worst)) worst = d, worst_at = i;
    }
    any = any || den > 0;
    const double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    EXPECT_LT(err, c.grad_tol) << "d" << in[k].name << ": worst at " << worst_at << ", off by "
                               << worst;
  }
  EXPECT_TRUE(any) << "every checked gradient is zero: the case tests nothing";
}

// Backward adds into its gradients: from buffers holding a constant it gives that constant plus
// the gradient from zeros. GradInto::overwrite ignores what the overwritten buffers held (NaN)
// and gives, bit for bit, the gradient added into zeros.
TEST_P(OpsBackward, AddsOrOverwrites) {
  const OpCase& c = *GetParam();
  LF_SKIP_UNLESS_RUNS_HERE(c);
  const std::vector<float> r = loss_weights(c);
  const Grads g0 = run_backward(c, r, zero_grads(c.in), GradInto::add);
  const float k = 0.375f, nan = std::numeric_limits<float>::quiet_NaN();
  if (!c.writes_grad) {
    Grads start = zero_grads(c.in);
    for (auto& v : start) std::fill(v.begin(), v.end(), k);
    const Grads g1 = run_backward(c, r, start, GradInto::add);
    for (size_t i = 0; i < c.in.size(); ++i)
      for (size_t j = 0; c.in[i].diff && j < g0[i].size(); ++j)
        ASSERT_NEAR(g1[i][j], g0[i][j] + k, 1e-5 * (1 + std::abs(g0[i][j])))
            << "d" << c.in[i].name << " does not accumulate at " << j;
  }
  if (c.overwrite.empty()) return;
  Grads start = zero_grads(c.in);
  for (int i : c.overwrite) std::fill(start[i].begin(), start[i].end(), nan);
  const Grads g2 = run_backward(c, r, start, GradInto::overwrite);
  for (int i : c.overwrite)
    for (size_t j = 0; j < g0[i].size(); ++j)
      ASSERT_EQ(g2[i][j], g0[i][j]) << "d" << c.in[i].name << " overwritten, at " << j;
}

// Kernels whose output may alias their input give the same output in place.
TEST_P(OpsInPlace, EqualsOutOfPlace) {
  const OpCase& c = *GetParam();
  LF_SKIP_UNLESS_RUNS_HERE(c);
  ASSERT_EQ(c.in[0].v.size(), c.out_size);
  Inputs in = c.in;
  c.run(in, in[0].v.data());
  EXPECT_EQ(in[0].v, run_case(c));
}

INSTANTIATE_TEST_SUITE_P(Registry, Ops, ::testing::ValuesIn(test_cases(any_case)), case_name);
INSTANTIATE_TEST_SUITE_P(Registry, OpsBackward, ::testing::ValuesIn(test_cases(has_backward)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Registry, OpsInPlace, ::testing::ValuesIn(test_cases(works_in_place)),
                         case_name);

// Best time of fn in seconds: one warm-up call, then calls until 0.3 s or 200 calls.
double best_seconds(const std::function<void()>& fn) {
  using clk = std::chrono::steady_clock;
  fn();
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 200 && total < 0.3; ++rep) {
    const auto t0 = clk::now();
    fn();
    const double dt = std::chrono::duration<double>(clk::now() - t0).count();
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

// A rate in units of 1e9 per second, or blank when the case counts no such work.
std::string rate(double work, double s) {
  char buf[32] = "";
  if (work > 0) std::snprintf(buf, sizeof buf, "%.2f", work / s / 1e9);
  return buf;
}

void print_row(const OpCase& c, const char* pass, double s, double work_scale) {
  std::printf("| %-34s | %-4s | %-24s | %-4s | %10.1f | %8s | %8s |\n", c.name.c_str(),
              prec_name(c.t), c.shape.c_str(), pass, s * 1e6, rate(c.flops * work_scale, s).c_str(),
              rate(c.bytes * work_scale, s).c_str());
}

// LF_OPS_PERF=1: every case at its perf size, forward and (where there is one) backward, which
// includes the forward it needs (its work counted as 3x the forward's: a product's two
// gradient products, or recomputation plus gradient for the row kernels). LF_OPS_PERF_FILTER:
// only cases whose name contains it.
TEST(OpsPerf, Table) {
  const char* env = std::getenv("LF_OPS_PERF");
  if (!env || std::string(env) != "1") GTEST_SKIP() << "set LF_OPS_PERF=1 to time the ops";
  const char* filter = std::getenv("LF_OPS_PERF_FILTER");
  std::printf("| %-34s | %-4s | %-24s | %-4s | %10s | %8s | %8s |\n", "case", "prec", "shape",
              "pass", "us", "GFLOP/s", "GB/s");
  std::printf("|%s|------|%s|------|------------|----------|----------|\n",
              std::string(36, '-').c_str(), std::string(26, '-').c_str());
  for (const CaseMaker& m : all_makers()) {
    const OpCase c = m(true);
    if (filter && c.name.find(filter) == std::string::npos) continue;
    if (!runs_here(c)) {
      std::printf("| %-34s | %-4s | %-24s | skipped: %s\n", c.name.c_str(), prec_name(c.t),
                  c.shape.c_str(), unavailable(c).c_str());
      continue;
    }
    std::vector<float> out(c.out_size);
    print_row(c, "fwd", best_seconds([&] { c.run(c.in, out.data()); }), 1.0);
    if (!c.backward) continue;
    const std::vector<float> dout = rnd(c.out_size, 5);
    Grads g = zero_grads(c.in);
    print_row(c, "bwd", best_seconds([&] { c.backward(c.in, dout.data(), g, GradInto::add); }),
              3.0);
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace lf::ops
