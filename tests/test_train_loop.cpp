// The one training loop (src/train/train_loop.h) with a small task of its own: when progress
// lines, evaluations and checkpoints happen, what a progress line averages, the dropout seeds,
// and that a run stopped by a limit and resumed equals the uninterrupted run (records and
// weights, bitwise), whatever the command.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "test_util.h"
#include "train/train_loop.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// MLM on fixed random sequences, 2 micro-batches a step (1 in the last step of each epoch of
// 4 steps), recording what the loop asks of it.
class ToyTask final : public TrainTask {
 public:
  explicit ToyTask(Model& m) : model_(m) {}

  int64_t begin_step(int64_t step) override {
    begun.push_back(step);
    return step % 4 == 3 ? 1 : 2;
  }
  double micro_batch(int64_t step, int64_t micro, uint64_t dropout_seed, LogWindow& w) override {
    seeds.insert(dropout_seed);
    const int64_t B = 2, N = 8;
    std::vector<int32_t> ids(B * N), labels(B * N);
    for (int64_t i = 0; i < B * N; ++i) {
      ids[i] = static_cast<int32_t>(rng_bits(5, static_cast<uint64_t>(step * 2 + micro), i) %
                                    model_.config().vocab_size);
      labels[i] = (i % 3 == 0) ? ids[i] : -100;
    }
    model_.forward(Batch{ids.data(), nullptr, B, N}, true, dropout_seed);
    int64_t c = 0;
    const double l = model_.mlm_loss(labels.data(), true, 0.5f, &c);
    model_.backward();
    w.tokens += static_cast<double>(B * N);
    const double share = l / c / 2;
    step_loss[step] += share;
    return share;
  }
  void progress(const Progress& p, json& record) override {
    record["window_steps"] = p.window->steps;
    record["tokens"] = p.window->tokens;
  }
  void evaluate(int64_t done) override { evaluated.push_back(done); }
  json checkpoint_state() const override { return json{{"kind", "toy"}}; }

  std::vector<int64_t> begun, evaluated;
  std::set<uint64_t> seeds;
  std::map<int64_t, double> step_loss;

 private:
  Model& model_;
};

Config toy_config() {
  Config c = test::tiny_config();
  c.dropout = c.attention_dropout = 0.1f;  // the dropout stream must resume too
  return c;
}

// The toy task's model (seed 1) with its optimiser, for runs of 10 steps.
struct ToyModel {
  static OptimOptions optim() {
    OptimOptions oo;
    oo.total_steps = 10;
    return oo;
  }
  ToyModel() : model(toy_config()), adam((model.init(1), model), optim()) {}
  Model model;
  AdamW adam;
  // A fresh run of the toy task with options lo (task: the task it ran).
  LoopResult run(const LoopOptions& lo, std::unique_ptr<ToyTask>& task) {
    TrainLoop loop(model, adam, lo);
    loop.start(false);
    task = std::make_unique<ToyTask>(model);
    return loop.run(*task);
  }
};

LoopOptions toy_options(const std::string& dir) {
  LoopOptions lo;
  lo.cmd = "toy";
  lo.run_dir = dir;
  lo.total_steps = 10;
  lo.grad_accum = 2;
  lo.seed = 7;
  lo.epoch_steps = 4;
  lo.log_every = 3;
  lo.checkpoint_every = 5;
  lo.quiet = true;
  return lo;
}

std::vector<json> train_records(const std::string& dir) {
  std::vector<json> out;
  for (json r : read_metrics(dir + "/metrics.jsonl")) {
    if (r["split"] != "train") continue;
    r.erase("elapsed_s");
    out.push_back(r);
  }
  return out;
}

TEST(TrainLoop, LinesEvaluationsCheckpointsAndSeeds) {
  const std::string d = test::temp_dir("run");
  Model m(toy_config());
  m.init(1);
  OptimOptions oo;
  oo.total_steps = 10;
  AdamW adam(m, oo);
  TrainLoop loop(m, adam, toy_options(d));
  EXPECT_TRUE(loop.start(false).is_null());
  ToyTask task(m);
  const LoopResult r = loop.run(task);
  EXPECT_EQ(r.steps_done, 10);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.last_loss, task.step_loss[9]);
  EXPECT_EQ(task.begun, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // One dropout seed per micro-batch, all different.
  EXPECT_EQ(task.seeds.size(), 18u);
  // Evaluations at each epoch's end (4 steps) and at the end.
  EXPECT_EQ(task.evaluated, (std::vector<int64_t>{4, 8, 10}));
  // Progress lines every 3 steps, at epoch ends and at the end, each the mean of its window.
  const std::vector<json> lines = train_records(d);
  std::vector<int64_t> at;
  int64_t prev = 0;
  for (const json& l : lines) {
    const int64_t s = l["step"].get<int64_t>();
    at.push_back(s);
    double sum = 0;
    for (int64_t k = prev; k < s; ++k) sum += task.step_loss[k];
    EXPECT_EQ(l["window_steps"].get<int64_t>(), s - prev);
    EXPECT_DOUBLE_EQ(l["loss"].get<double>(), sum / (s - prev)) << "step " << s;
    EXPECT_EQ(l["tokens"].get<double>(), 16.0 * (2 * (s - prev) - (s / 4 - prev / 4)));
    prev = s;
  }
  EXPECT_EQ(at, (std::vector<int64_t>{3, 4, 6, 8, 9, 10}));
  // Checkpoints every 5 steps and at the end; the newest two are kept.
  EXPECT_EQ(latest_checkpoint(d), d + "/checkpoints/step-00000010");
  EXPECT_TRUE(fs::exists(d + "/checkpoints/step-00000005"));
}

// Stopped by --stop-after (between progress lines), resumed by a new loop in a new model: the
// progress window in flight is restored, so every line and the final weights equal the
// uninterrupted run's. A time limit stops after the first step, with an evaluation when the
// command asks for one.
TEST(TrainLoop, StopThenResumeEqualsUninterrupted) {
  const std::string d = test::temp_dir("runs");
  auto session = [&](const std::string& run, bool resume, int64_t stop_after,
                     std::vector<float>* weights) {
    fs::create_directories(run);
    ToyModel t;
    Model& m = t.model;
    LoopOptions lo = toy_options(run);
    lo.stop_after = stop_after;
    TrainLoop loop(m, t.adam, lo);
    const json st = loop.start(resume);
    if (resume) {
      EXPECT_EQ(st.at("kind"), "toy");
    }
    ToyTask task(m);
    const LoopResult r = loop.run(task);
    weights->assign(m.param_data(), m.param_data() + m.num_params());
    return r;
  };
  std::vector<float> ref, first, resumed;
  EXPECT_EQ(session(d + "/ref", false, 0, &ref).steps_done, 10);
  const LoopResult r1 = session(d + "/b", false, 5, &first);
  EXPECT_TRUE(r1.stopped);
  EXPECT_EQ(r1.steps_done, 5);
  EXPECT_EQ(latest_checkpoint(d + "/b"), d + "/b/checkpoints/step-00000005");
  const LoopResult r2 = session(d + "/b", true, 0, &resumed);
  EXPECT_FALSE(r2.stopped);
  EXPECT_EQ(r2.steps_done, 10);
  EXPECT_EQ(train_records(d + "/b"), train_records(d + "/ref"));
  ASSERT_EQ(resumed.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(resumed[i], ref[i]) << "parameter " << i;

  // A time limit every step outlasts.
  ToyModel t;
  fs::create_directories(d + "/t");
  LoopOptions lo = toy_options(d + "/t");
  lo.time_limit = 1e-9;
  lo.evaluate_at_stop = true;
  std::unique_ptr<ToyTask> task;
  const LoopResult r = t.run(lo, task);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.steps_done, 1);
  EXPECT_EQ(task->evaluated, std::vector<int64_t>{1});
  EXPECT_EQ(latest_checkpoint(d + "/t"), d + "/t/checkpoints/step-00000001");
}

// RunHooks (library callers such as the Python module): on_record sees every record written
// to metrics.jsonl, in order; stop_requested stops the run at the step it first answers true,
// with a checkpoint, as a limit does.
TEST(TrainLoop, HooksSeeEveryRecordAndStopOnRequest) {
  const std::string d = test::temp_dir("hooks");
  fs::create_directories(d);
  ToyModel t;
  LoopOptions lo = toy_options(d);
  std::vector<json> seen;
  int asked = 0;
  lo.hooks.on_record = [&](const json& r) { seen.push_back(r); };
  lo.hooks.stop_requested = [&] { return ++asked == 4; };
  std::unique_ptr<ToyTask> task;
  const LoopResult r = t.run(lo, task);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.steps_done, 4);
  EXPECT_EQ(asked, 4);
  EXPECT_EQ(latest_checkpoint(d), d + "/checkpoints/step-00000004");
  EXPECT_EQ(seen, read_metrics(d + "/metrics.jsonl"));
  ASSERT_EQ(seen.size(), 2u);  // the progress lines of steps 3 and 4 (the end of an epoch)
  EXPECT_EQ(seen[0].at("step"), 3);
  EXPECT_EQ(seen[1].at("step"), 4);
}

}  // namespace
}  // namespace lf
