#include <cstdio>
#include <memory>

#include "cli_util.h"
#include "commands.h"
#include "linformer/distributed.h"
#include "linformer/pretrain.h"

namespace lf::cli {

void add_pretrain(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "pretrain",
      "Masked-language-model pretraining on plain text (one document per line).\n"
      "Writes into --out: the tokenizer, config.json, train_args.json, metrics.jsonl,\n"
      "loss.svg, checkpoints/ (resumable) and model/ (the final model).\n"
      "A killed run continues exactly with `linformer pretrain --out RUN --resume`;\n"
      "Ctrl-C or SIGTERM stops it after the current step with a checkpoint (exit 130/143).");
  cmd->footer(
      "Data-parallel on several processes or machines (docs/distributed.md):\n"
      "  OMP_NUM_THREADS=1 mpirun -np 2 linformer pretrain --train corpus.txt \\\n"
      "      --config configs/small-linformer.json --batch-size 4 --out runs/mlm\n"
      "runs 2 ranks; --batch-size is per rank (the global batch is ranks x batch x grad-accum)\n"
      "and the run equals one process with the global batch. Rank 0 prints and writes RUN;\n"
      "--resume works with any number of ranks that divides the run's ranks x batch.");
  auto o = std::make_shared<PretrainOptions>();
  auto resume = std::make_shared<bool>(false);
  cmd->add_option("--train", o->train, "Training corpus: files or folders")->group("Data");
  cmd->add_option("--valid", o->valid, "Validation files (default: hold out --valid-fraction)")
      ->group("Data");
  cmd->add_option("--valid-fraction", o->valid_fraction,
                  "Share of the training stream held out when --valid is not given")
      ->capture_default_str()
      ->group("Data");
  cmd->add_option("--cache-dir", o->cache_dir, "Token cache folder (default RUN/cache)")
      ->group("Data");
  cmd->add_option("--seq-len", o->seq_len, "Tokens per sequence (default: the model's max_len)")
      ->group("Data");
  add_tokenizer_options(cmd, "Tokenizer", &o->tokenizer,
                        "Use this tokenizer instead of training one (a file or folder of any "
                        "kind, docs/tokenizers.md; default: the --init-from folder's)",
                        &o->vocab_size,
                        "Vocabulary of a newly trained tokenizer", &o->tokenizer_type);
  cmd->add_option("--config", o->config, "Model configuration JSON (see docs/config.md)")
      ->group("Model");
  cmd->add_option("--init-from", o->init_from,
                  "Start from this model folder (or an installed model's name)")
      ->transform(model_folder("--init-from"))
      ->group("Model");
  cmd->add_option("--teacher", o->teacher,
                  "Distil from this model (same tokenizer; e.g. the standard-attention twin): its "
                  "MLM predictions on the masked tokens are soft targets beside the true tokens")
      ->transform(model_folder("--teacher"))
      ->group("Distillation");
  cmd->add_option("--distill-alpha", o->distill_alpha,
                  "Weight of the soft targets: the loss is (1 - a) CE + a T^2 KL(teacher || "
                  "student); the perplexity reported stays the true tokens' cross-entropy")
      ->capture_default_str()
      ->group("Distillation");
  cmd->add_option("--distill-temperature", o->distill_temperature,
                  "Temperature T of both softmaxes in the soft term")
      ->capture_default_str()
      ->group("Distillation");
  cmd->add_option("--set", o->sets,
                  "KEY=VALUE configuration override (repeatable), e.g. --set k=64 --set "
                  "projection_init=normal; with --init-from only keys that keep the tensor "
                  "shapes")
      ->group("Model");
  add_run_folder_options(cmd, &o->out, resume.get(), &o->overwrite);
  cmd->add_option("--steps", o->steps, "Optimizer steps")->capture_default_str()->group("Optimiser");
  add_batch_options(cmd, &o->batch_size, "Sequences per micro-batch (per rank under mpirun)",
                    &o->grad_accum);
  cmd->add_option("--lr", o->optim.lr, "Peak learning rate")->capture_default_str()->group("Optimiser");
  cmd->add_option("--warmup-steps", o->optim.warmup_steps, "Linear warm-up steps, then linear decay")
      ->capture_default_str()
      ->group("Optimiser");
  add_adamw_options(cmd, &o->optim);
  cmd->add_option("--mask-prob", o->mask_prob, "Share of tokens masked")
      ->capture_default_str()
      ->group("Optimiser");
  add_progress_options(cmd, &o->seed, "Seed: initial weights, data order, masks, dropout",
                       &o->log_every, &o->eval_every, "Steps between validation runs");
  cmd->add_option("--eval-batches", o->eval_batches, "Validation batches per evaluation")
      ->capture_default_str()
      ->group("Run");
  add_checkpoint_options(cmd, &o->checkpoint_every, "Steps between checkpoints", &o->time_limit);
  add_train_compute_option(cmd, &o->precision, &o->precision_auto, &o->precision_given);
  cmd->add_flag("--quiet", o->quiet, "No progress output")->group("Run");
  cmd->callback([o, resume] {
    if (!*resume && o->train.empty()) throw CLI::ValidationError("--train", "a corpus is required");
    if (!*resume && o->config.empty() && o->init_from.empty())
      throw CLI::ValidationError("--config", "give --config or --init-from");
    const StopOnSignals stop(&o->hooks);
    PretrainResult r = pretrain(*o, *resume);
    if (distributed_info().rank != 0) return;  // rank 0 reports
    if (stop.signal() && r.stopped) exit_stopped("pretrain", stop.signal(), r.steps_done, o->out);
    if (!r.evaluated)  // a resumed run that had finished: nothing ran, nothing was measured
      std::printf("pretrain: the run in %s had already finished its %lld steps; nothing ran "
                  "(its model is in %s/model)\n",
                  o->out.c_str(), static_cast<long long>(r.steps_done), o->out.c_str());
    else
      std::printf("pretrain: %lld steps in %.1f s, %.0f tokens/s, validation loss %.4f, "
                  "perplexity %.2f\n",
                  static_cast<long long>(r.steps_done), r.seconds,
                  r.tokens_per_second, r.final_valid_loss, r.final_valid_ppl);
    if (r.ranks > 1)
      std::printf("pretrain: %d ranks; rank 0 waited %.1f s for the others\n", r.ranks,
                  r.comm_wait_seconds);
  });
}

}  // namespace lf::cli
