#include "train/train_loop.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "linformer/rng.h"

namespace lf {

using json = nlohmann::json;

TrainLoop::TrainLoop(Model& model, AdamW& adam, const LoopOptions& o)
    : model_(model), adam_(adam), o_(o) {}

json TrainLoop::start(bool resume) {
  json state;
  if (resume) {
    state = resume_latest(o_.run_dir, model_, adam_, o_.quiet);
    if (!state.is_null()) start_ = state.at("step").get<int64_t>();
  }
  window_.load(state);
  log_ = MetricsLog((std::filesystem::path(o_.run_dir) / "metrics.jsonl").string(),
                    resume ? start_ : -1);
  return state;
}

bool TrainLoop::limit_reached(int64_t done) const {
  return (o_.time_limit > 0 && clock_.seconds() >= o_.time_limit) ||
         (o_.stop_after > 0 && done - start_ >= o_.stop_after);
}

LoopResult TrainLoop::run(TrainTask& task) {
  clock_ = Stopwatch();
  const OptimOptions& oo = adam_.options();
  const int64_t total = o_.total_steps;
  LoopResult res;
  res.steps_done = start_;
  for (int64_t step = start_; step < total; ++step) {
    Stopwatch st;
    const int64_t micro_batches = task.begin_step(step);
    model_.zero_grad();
    double step_loss = 0;
    for (int64_t m = 0; m < micro_batches; ++m) {
      // Dropout masks are a function of (seed, step, micro-batch): resuming needs only the step.
      const uint64_t dropout_seed =
          mix64(o_.seed ^ mix64(static_cast<uint64_t>(step * o_.grad_accum + m)));
      step_loss += task.micro_batch(step, m, dropout_seed, window_);
    }
    const double gnorm = clip_grad_norm(model_, oo.clip_norm);
    check_step_finite(o_.cmd, step_loss, gnorm, step + 1, o_.run_dir);
    const float lr = lr_at(oo, step);
    adam_.step(lr);
    window_.add_step(step_loss, st.seconds());
    const int64_t done = step + 1;
    res.steps_done = done;
    res.last_loss = step_loss;

    const bool epoch_end = o_.epoch_steps > 0 && done % o_.epoch_steps == 0;
    if (done % o_.log_every == 0 || epoch_end || done == total) {
      Progress p;
      p.done = done;
      p.total = total;
      p.mean_loss = window_.mean_loss();
      p.lr = lr;
      p.grad_norm = gnorm;
      p.elapsed = clock_.seconds();
      p.left = (total - done) * window_.seconds_per_step();
      p.window = &window_;
      json record{{"step", done},  {"split", "train"},     {"loss", p.mean_loss},
                  {"lr", lr},      {"grad_norm", gnorm},  {"elapsed_s", p.elapsed}};
      task.progress(p, record);
      log_.write(record);
      window_.clear();
    }
    const bool stop = limit_reached(done);
    const bool eval_now = (o_.eval_every > 0 && done % o_.eval_every == 0) || epoch_end ||
                          done == total || (stop && o_.evaluate_at_stop);
    if (eval_now) task.evaluate(done);
    if ((o_.checkpoint_every > 0 && done % o_.checkpoint_every == 0) || done == total || stop ||
        (eval_now && o_.checkpoint_at_eval)) {
      json state = task.checkpoint_state();
      window_.save(state);
      save_checkpoint(o_.run_dir, done, model_, adam_, state, o_.keep_checkpoints);
    }
    if (stop && done < total) {
      if (!o_.quiet)
        std::fprintf(stderr,
                     "stopping after %lld steps (%s limit); continue with `linformer %s --out %s "
                     "--resume`\n",
                     static_cast<long long>(done),
                     o_.stop_after > 0 && done - start_ >= o_.stop_after ? "step" : "time",
                     o_.cmd, o_.run_dir.c_str());
      res.stopped = true;
      break;
    }
  }
  return res;
}

}  // namespace lf
