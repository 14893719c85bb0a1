#include "train/train_loop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "linformer/rng.h"

namespace lf {

using json = nlohmann::json;

std::string comm_note(const Progress& p) {
  if (p.ranks <= 1) return "";
  char s[96];
  std::snprintf(s, sizeof s, " | %d ranks, comm wait %.1f ms/step", p.ranks, 1e3 * p.comm_wait);
  return s;
}

TrainLoop::TrainLoop(Model& model, AdamW& adam, const LoopOptions& o)
    : model_(model), adam_(adam), o_(o), comm_(o.comm ? o.comm : &dist::world()) {}

json TrainLoop::start(bool resume) {
  json state;
  if (resume) {
    state = resume_latest(o_.run_dir, model_, adam_, o_.quiet);
    if (!state.is_null()) start_ = state.at("step").get<int64_t>();
  }
  window_.load(state);
  // Rank 0 alone writes the run folder.
  if (comm_->root()) {
    log_ = MetricsLog((std::filesystem::path(o_.run_dir) / "metrics.jsonl").string(),
                      resume ? start_ : -1);
    log_.set_listener(o_.hooks.on_record);
  }
  return state;
}

bool TrainLoop::limit_reached(int64_t done) const {
  return (o_.time_limit > 0 && clock_.seconds() >= o_.time_limit) ||
         (o_.stop_after > 0 && done - start_ >= o_.stop_after);
}

bool TrainLoop::stop_requested() const {
  return comm_->root() && o_.hooks.stop_requested && o_.hooks.stop_requested();
}

LoopResult TrainLoop::run(TrainTask& task) {
  clock_ = Stopwatch();
  const OptimOptions& oo = adam_.options();
  const int64_t total = o_.total_steps;
  const bool multi = comm_->size() > 1;
  if (multi) {
    // Bucket size: LINFORMER_GRAD_BUCKET_KB (docs/distributed.md), else 2 MiB.
    int64_t bucket = dist::GradReducer::kDefaultBucketFloats;
    if (const char* kb = std::getenv("LINFORMER_GRAD_BUCKET_KB"))
      bucket = std::max<int64_t>(1, std::atoll(kb)) * 256;
    reducer_ = std::make_unique<dist::GradReducer>(model_, *comm_, bucket);
    // Every rank initialised or loaded the same weights: make sure before spending time.
    dist::check_same_weights(*comm_, model_, start_);
    if (!o_.quiet)
      std::fprintf(stderr, "%s: data-parallel on %d ranks (%s), %s\n", o_.cmd, comm_->size(),
                   comm_->describe().c_str(), reducer_->describe().c_str());
  }
  LoopResult res;
  res.steps_done = start_;
  for (int64_t step = start_; step < total; ++step) {
    Stopwatch st;
    const int64_t micro_batches = task.begin_step(step);
    model_.zero_grad();
    double step_loss = 0;
    LogWindow counts;  // what this step adds to the progress window
    for (int64_t m = 0; m < micro_batches; ++m) {
      // Dropout masks are a function of (seed, step, micro-batch): resuming needs only the step.
      const uint64_t dropout_seed =
          mix64(o_.seed ^ mix64(static_cast<uint64_t>(step * o_.grad_accum + m)));
      // The last micro-batch completes the gradients: its backward starts the all-reduce.
      if (multi && m + 1 == micro_batches) reducer_->arm();
      step_loss += task.micro_batch(step, m, dropout_seed, counts);
    }
    if (multi) {
      add_comm_wait(reducer_->finish());
      double v[4] = {step_loss, counts.tokens, static_cast<double>(counts.examples),
                     static_cast<double>(counts.correct)};
      comm_->sum(v, 4, "the step's loss and counts");
      step_loss = v[0];
      counts.tokens = v[1];
      counts.examples = std::llround(v[2]);
      counts.correct = std::llround(v[3]);
    }
    window_.tokens += counts.tokens;
    window_.examples += counts.examples;
    window_.correct += counts.correct;
    const double gnorm = grad_norm(model_);
    check_step_finite(o_.cmd, step_loss, gnorm, step + 1, o_.run_dir);
    const float lr = lr_at(oo, step);
    adam_.step(lr, clip_scale(gnorm, oo.clip_norm));  // clipping applied in AdamW's pass
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
      p.ranks = comm_->size();
      p.comm_wait = comm_window_ / std::max<int64_t>(window_.steps, 1);
      json record{{"step", done},  {"split", "train"},     {"loss", p.mean_loss},
                  {"lr", lr},      {"grad_norm", gnorm},  {"elapsed_s", p.elapsed}};
      if (multi) {
        record["ranks"] = p.ranks;
        record["comm_wait_s"] = p.comm_wait;
      }
      task.progress(p, record);
      log_.write(record);
      window_.clear();
      comm_window_ = 0;
    }
    const bool requested = stop_requested();
    bool stop = limit_reached(done) || requested;
    if (multi && (o_.time_limit > 0 || o_.hooks.stop_requested)) {
      // The ranks' clocks differ: stop when any of them reaches the limit, all at the same step.
      int64_t s = stop;
      comm_->max(&s, 1, "the time-limit decision");
      stop = s != 0;
    }
    const bool eval_now = (o_.eval_every > 0 && done % o_.eval_every == 0) || epoch_end ||
                          done == total || (stop && o_.evaluate_at_stop);
    if (eval_now) task.evaluate(done);
    const bool checkpoint = (o_.checkpoint_every > 0 && done % o_.checkpoint_every == 0) ||
                            done == total || stop || (eval_now && o_.checkpoint_at_eval);
    if (multi && (checkpoint || done % kWeightCheckEvery == 0))
      dist::check_same_weights(*comm_, model_, done);
    if (checkpoint && comm_->root()) {
      json state = task.checkpoint_state();
      window_.save(state);
      save_checkpoint(o_.run_dir, done, model_, adam_, state, o_.keep_checkpoints);
    }
    if (stop && done < total) {
      if (!o_.quiet)
        std::fprintf(stderr,
                     "stopping after %lld steps (%s); continue with `linformer %s --out %s "
                     "--resume`\n",
                     static_cast<long long>(done),
                     requested ? "stop request"
                     : o_.stop_after > 0 && done - start_ >= o_.stop_after ? "step limit"
                                                                            : "time limit",
                     o_.cmd, o_.run_dir.c_str());
      res.stopped = true;
      break;
    }
  }
  res.comm_wait = comm_total_;
  reducer_.reset();
  return res;
}

}  // namespace lf
