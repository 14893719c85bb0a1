#include <cstdio>
#include <memory>

#include "cli_util.h"
#include "commands.h"
#include "linformer/distributed.h"
#include "linformer/finetune.h"
#include "linformer/run.h"

namespace lf::cli {

void add_finetune(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "finetune",
      "Finetune a text classifier (SST-2, QNLI, QQP, IMDB, any TSV with label and text columns).\n"
      "The data format is recognised from the header columns (docs/classification.md); a folder\n"
      "path reads the aclImdb layout (SPLIT/pos/*.txt, SPLIT/neg/*.txt).\n"
      "Writes into --out: train_args.json, labels.json, tokenizer.model, config.json,\n"
      "metrics.jsonl, loss.svg, dev.svg, checkpoints/ (resumable), best/ (the best model on the\n"
      "dev set, a folder for evaluate/predict/embed) and model/ (the final model).");
  cmd->footer(
      "Start from a pretrained model folder (--init-from RUN/model of `linformer pretrain`; its\n"
      "tokenizer.model is used, the classifier is freshly initialised with the data's class\n"
      "count), or from scratch (--config and --set; --tokenizer, or a tokenizer is trained on\n"
      "the training texts). Inputs are `<s> A </s>`, pairs `<s> A </s></s> B </s>`.\n"
      "Examples:\n"
      "  linformer finetune --init-from runs/pre/model --train sst2/train.tsv --dev sst2/dev.tsv "
      "\\\n"
      "      --max-len 128 --epochs 3 --out runs/sst2\n"
      "  linformer finetune --config configs/small-linformer.json --set max_len=4096 \\\n"
      "      --train imdb/train.tsv --dev imdb/val.tsv --truncate head+tail --out runs/imdb\n"
      "A killed run continues with `linformer finetune --out RUN --resume`; Ctrl-C or\n"
      "SIGTERM stops it after the current step with a checkpoint (exit 130/143).\n"
      "Data-parallel on several processes or machines (docs/distributed.md): `OMP_NUM_THREADS=1\n"
      "mpirun -np 2 linformer finetune ... --batch-size 16` runs 2 ranks; --batch-size is per\n"
      "rank (the global batch is ranks x batch x grad-accum) and the run equals one process\n"
      "with the global batch. Rank 0 prints and writes RUN.");
  auto o = std::make_shared<FinetuneOptions>();
  auto resume = std::make_shared<bool>(false);
  o->optim.lr = 1e-4f;
  cmd->add_option("--train", o->train, "Training data: TSV file with a header, or aclImdb folder")
      ->group("Data");
  cmd->add_option("--dev", o->dev,
                  "Dev data, evaluated each epoch; the best model is kept in RUN/best")
      ->group("Data");
  cmd->add_option("--bad-rows", o->bad_rows,
                  "Rows with a wrong column count, an unknown label or invalid UTF-8: stop with "
                  "FILE:LINE, or skip them and print the count")
      ->check(CLI::IsMember({"stop", "skip"}))
      ->capture_default_str()
      ->group("Data");
  cmd->add_option("--max-train", o->max_train, "Use an evenly spread subset of this many "
                                               "training examples (0: all)")
      ->capture_default_str()
      ->group("Data");
  cmd->add_option("--max-dev", o->max_dev, "Subset of the dev set (0: all)")
      ->capture_default_str()
      ->group("Data");
  cmd->add_option("--max-len", o->max_len,
                  "Tokens per example incl. <s>/</s> (0: the model's max_len; at most max_len)")
      ->capture_default_str()
      ->group("Data");
  cmd->add_option("--truncate", o->truncate,
                  "What a too-long text keeps: head (its start), tail (its end), head+tail "
                  "(first quarter and last three quarters of the budget)")
      ->check(CLI::IsMember({"head", "tail", "head+tail"}))
      ->capture_default_str()
      ->group("Data");
  cmd->add_flag("--lowercase", o->lowercase,
                "Lowercase ASCII letters before tokenizing (for an uncased tokenizer, e.g. one "
                "pretrained on lowercased text); recorded for evaluate/predict/embed")
      ->group("Data");
  cmd->add_flag("--pad-to-max", o->pad_to_max,
                "Pad every batch to --max-len (default: to the longest sequence in the batch)")
      ->group("Data");
  cmd->add_flag("!--no-bucket", o->bucket,
                "Do not sort examples by length within pools (bucketing reduces padding)")
      ->group("Data");
  cmd->add_option("--metric", o->metric,
                  "Dev metric that selects the best checkpoint (auto: F1 for QQP, else accuracy)")
      ->check(CLI::IsMember({"auto", "accuracy", "f1"}))
      ->capture_default_str()
      ->group("Data");
  cmd->add_option("--init-from", o->init_from,
                  "Pretrained model folder (config.json, model.safetensors, tokenizer files) or an "
                  "installed model's name (`linformer models`)")
      ->transform(model_folder("--init-from"))
      ->group("Model");
  cmd->add_option("--config", o->config, "From scratch: model configuration JSON (docs/config.md)")
      ->group("Model");
  cmd->add_option("--set", o->sets, "KEY=VALUE configuration override (repeatable), e.g. --set "
                                    "max_len=1024 --set attention=standard; with --init-from only "
                                    "keys that keep the pretrained tensor shapes (attention, k, "
                                    "sharing, dropout, ...); classifier_pooling=mean puts the "
                                    "head on the mean of the tokens' states instead of the "
                                    "first token's (docs/classification.md)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->group("Model");
  cmd->add_option("--dropout", o->dropout, "Override hidden and attention dropout")->group("Model");
  add_tokenizer_options(cmd, "Model", &o->tokenizer, "From scratch: use this tokenizer (file or folder: SentencePiece, tokenizer.json, vocab.json + merges.txt, vocab.txt)",
                        &o->vocab_size, "From scratch: pieces of a newly trained tokenizer",
                        &o->tokenizer_type);
  add_run_folder_options(cmd, &o->out, resume.get(), &o->overwrite);
  cmd->add_option("--epochs", o->epochs, "Passes over the training data")
      ->capture_default_str()
      ->group("Optimiser");
  add_batch_options(cmd, &o->batch_size, "Examples per micro-batch (per rank under mpirun)",
                    &o->grad_accum);
  cmd->add_option("--eval-batch-size", o->eval_batch_size, "Examples per inference batch")
      ->capture_default_str()
      ->group("Optimiser");
  cmd->add_option("--lr", o->optim.lr, "Peak learning rate")
      ->capture_default_str()
      ->group("Optimiser");
  cmd->add_option("--warmup-ratio", o->warmup_ratio,
                  "Share of the steps for linear warm-up, "
                  "then linear decay to 0")
      ->capture_default_str()
      ->group("Optimiser");
  cmd->add_option("--warmup-steps", o->optim.warmup_steps,
                  "Warm-up steps (overrides --warmup-ratio)")
      ->group("Optimiser");
  add_adamw_options(cmd, &o->optim);
  add_progress_options(cmd, &o->seed, "Seed: initial weights, data order, dropout", &o->log_every,
                       &o->eval_every, "Steps between dev evaluations (0: each epoch)");
  add_checkpoint_options(cmd, &o->checkpoint_every,
                         "Steps between checkpoints (0: at each evaluation)", &o->time_limit);
  add_train_compute_option(cmd, &o->precision, &o->precision_auto, &o->precision_given);
  cmd->add_option("--stop-after", o->stop_after,
                  "Stop after this many steps, with a checkpoint (0: run to the end; --resume "
                  "continues)")
      ->group("Run");
  cmd->add_flag("--quiet", o->quiet, "No progress output")->group("Run");
  cmd->callback([o, resume] {
    if (!*resume && o->train.empty()) throw CLI::ValidationError("--train", "training data is required");
    if (!o->init_from.empty() && !o->config.empty())
      throw CLI::ValidationError("--init-from", "the pretrained folder's config is used; "
                                                "--config applies to training from scratch "
                                                "(--set may still override keys)");
    const StopOnSignals stop(&o->hooks);
    FinetuneResult r = finetune(*o, *resume);
    if (distributed_info().rank != 0) return;  // rank 0 reports
    if (stop.signal() && r.stopped) exit_stopped("finetune", stop.signal(), r.steps_done, o->out);
    std::printf("finetune: %lld/%lld steps in %s, %.1f examples/s, activations %.1f MB",
                static_cast<long long>(r.steps_done), static_cast<long long>(r.total_steps),
                format_duration(r.seconds).c_str(), r.examples_per_second,
                r.activation_bytes / 1048576.0);
    if (r.best_metric >= 0)
      std::printf(", best dev %s %.2f%% at step %lld (epoch %.2f) in %s/best\n", r.metric.c_str(),
                  100 * r.best_metric, static_cast<long long>(r.best_step), r.best_epoch,
                  o->out.c_str());
    else
      std::printf(", model in %s/best\n", o->out.c_str());
  });
}

}  // namespace lf::cli
