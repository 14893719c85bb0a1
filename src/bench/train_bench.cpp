// `linformer bench --train`: timed MLM training steps, the same step as pretraining, with the
// phase timers of core/profile.h giving the breakdown of the median step.
#include <algorithm>

#include "core/profile.h"
#include "data/mlm_data.h"
#include "linformer/bench.h"
#include "linformer/error.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "linformer/tokenizer.h"
#include "train/optim.h"

namespace lf::bench {

double mlm_head_flops(const Config& cfg) {
  const double D = static_cast<double>(cfg.d_model), V = static_cast<double>(cfg.vocab_size);
  return 2.0 * D * D + 2.0 * D * V;
}

double training_flops(const Config& cfg, int64_t n, int64_t B, double masked) {
  return 3.0 * (static_cast<double>(B) * encoder_flops(cfg, n) + masked * mlm_head_flops(cfg));
}

namespace {

// What one step recorded.
struct StepRecord {
  double seconds = 0;
  double masked = 0;
  profile::Totals totals;
};

// The phases of a step (the mean of several), "other" last: the step time not in any phase.
std::vector<PhaseTime> phase_times(const std::vector<const StepRecord*>& steps) {
  std::vector<PhaseTime> out(kPhaseCount + 1);
  const double w = 1.0 / static_cast<double>(steps.size());
  double step = 0;
  for (const StepRecord* s : steps) step += w * s->seconds;
  double named = 0;
  for (int p = 0; p < kPhaseCount; ++p) {
    out[p].name = phase_name(static_cast<Phase>(p));
    for (const StepRecord* s : steps) {
      out[p].seconds += w * s->totals.seconds[p];
      out[p].calls += w * static_cast<double>(s->totals.calls[p]);
    }
    named += out[p].seconds;
  }
  out[kPhaseCount].name = "other";
  out[kPhaseCount].seconds = std::max(0.0, step - named);
  return out;
}

}  // namespace

TrainBenchResult time_training(const Config& cfg, int64_t n, const TrainBenchOptions& o) {
  LF_CHECK(n >= 3 && n <= cfg.max_len, "bench --train: n = ", n, " must be in [3, max_len = ",
           cfg.max_len, "]");
  LF_CHECK(o.batch > 0 && o.steps > 0 && o.warmup_steps >= 0,
           "bench --train: need batch > 0, steps > 0 and warm-up steps >= 0");
  LF_CHECK(cfg.vocab_size > Tokenizer::kNumSpecial, "bench --train: the vocabulary needs more than ",
           Tokenizer::kNumSpecial, " entries");
  Model model(cfg);
  model.set_train_compute_type(o.compute);
  model.init(o.seed);
  OptimOptions oo;
  oo.total_steps = o.warmup_steps + o.steps;
  AdamW adam(model, oo);

  // Random tokens cut into 2B full sequences (no padding), visited in order; every pass over
  // them draws new masks (the epoch), as pretraining does.
  const int64_t S = 2 * o.batch, body = n - 2;
  std::vector<int32_t> tokens(static_cast<size_t>(S * body));
  const uint64_t range = static_cast<uint64_t>(cfg.vocab_size - Tokenizer::kNumSpecial);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = Tokenizer::kNumSpecial + static_cast<int32_t>(rng_bits(o.seed, 31, i) % range);
  const TokenStream stream = TokenStream::from_tokens(std::move(tokens));
  const PackedSequences seqs{&stream, 0, stream.size(), n};
  MaskingOptions mo;
  mo.vocab_size = cfg.vocab_size;
  mo.mask_id = Tokenizer::kMask;
  mo.first_normal_id = Tokenizer::kNumSpecial;
  MlmBatch batch;

  TrainBenchResult res;
  res.params = model.num_params();
  res.tokens_per_step = o.batch * n;
  std::vector<StepRecord> rec;
  for (int step = 0; step < o.warmup_steps + o.steps; ++step) {
    const bool timed = step >= o.warmup_steps;
    if (timed && o.phases) {
      profile::reset();
      profile::set_enabled(true);
    }
    const double t0 = now_seconds();
    std::vector<int64_t> which, epochs;
    for (int64_t b = 0; b < o.batch; ++b) {
      const int64_t g = step * o.batch + b;
      which.push_back(g % S);
      epochs.push_back(g / S);
    }
    make_mlm_batch(seqs, which, epochs, mo, o.seed, &batch);
    model.zero_grad();
    model.forward(Batch{batch.ids.data(), batch.mask.data(), o.batch, n}, true,
                  mix64(o.seed ^ mix64(static_cast<uint64_t>(step))));
    int64_t masked = 0;
    const double loss = model.mlm_loss(batch.labels.data(), true, 1.f, &masked);
    model.backward();
    adam.step(lr_at(oo, step), clip_scale(grad_norm(model), oo.clip_norm));
    const double dt = now_seconds() - t0;
    profile::set_enabled(false);
    res.final_loss = masked ? loss / static_cast<double>(masked) : 0.0;
    if (timed) rec.push_back({dt, static_cast<double>(masked), profile::totals()});
  }

  // The median step: the middle one, or the middle two (their mean) for an even count.
  std::vector<const StepRecord*> order;
  for (const StepRecord& r : rec) order.push_back(&r);
  std::sort(order.begin(), order.end(),
            [](const StepRecord* a, const StepRecord* b) { return a->seconds < b->seconds; });
  const size_t m = order.size() / 2;
  const std::vector<const StepRecord*> mid =
      order.size() % 2 ? std::vector<const StepRecord*>{order[m]}
                       : std::vector<const StepRecord*>{order[m - 1], order[m]};
  for (const StepRecord* r : mid) {
    res.seconds_per_step += r->seconds / static_cast<double>(mid.size());
    res.masked_median_step += r->masked / static_cast<double>(mid.size());
    res.matmul_flops_counted += r->totals.matmul_flops / static_cast<double>(mid.size());
  }
  if (o.phases) res.phases = phase_times(mid);
  for (const StepRecord& r : rec) {
    res.step_seconds.push_back(r.seconds);
    res.masked_per_step += r.masked / static_cast<double>(rec.size());
  }
  res.flops_per_step = training_flops(cfg, n, o.batch, res.masked_per_step);
  const ParamInfo& last = model.params().back();  // AdamW moments span the flat buffer
  res.engine_bytes = model.param_bytes() + 2 * (last.offset + last.numel) * sizeof(float) +
                     model.activation_bytes();
  return res;
}

}  // namespace lf::bench
