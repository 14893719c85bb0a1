#include <cstdio>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "linformer/file_util.h"
#include "linformer/perplexity.h"

namespace lf::cli {

void add_perplexity(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "perplexity",
      "Masked-LM perplexity of a pretrained model on any text, with fixed seeded masks.");
  cmd->footer(
      "The text is tokenized with the model folder's tokenizer, packed into sequences of\n"
      "--seq-len tokens as in pretraining, and --mask-prob of its tokens are masked (80% <mask>,\n"
      "10% random, 10% kept) by a draw fixed by --seed: models that share a tokenizer and a\n"
      "sequence length are scored on exactly the same positions, and a pretraining run's\n"
      "validation loss is reproduced with its own --seed on its validation text.\n"
      "Prints `perplexity P (loss L nats over M masked tokens)`; --json prints the whole result.\n"
      "Example: linformer perplexity --model runs/mlm/model --text ptb.valid.txt --json");
  struct Opts {
    std::string model, json_out;
    bool json = false;
    PerplexityOptions p;
  };
  auto o = std::make_shared<Opts>();
  add_model_option(cmd, &o->model,
                   "Model folder (config.json, model.safetensors, tokenizer files)");
  cmd->add_option("--text", o->p.text, "Text files or folders, one document per line")->required();
  cmd->add_option("--seq-len", o->p.seq_len, "Tokens per sequence (default: the model's max_len)");
  cmd->add_option("--mask-prob", o->p.mask_prob, "Share of the tokens masked, in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--seed", o->p.seed, "Seed of the mask draw")->capture_default_str();
  cmd->add_option("--batch-size", o->p.batch_size, "Sequences per forward pass")
      ->capture_default_str();
  cmd->add_option("--max-sequences", o->p.max_sequences,
                  "Score only the first N sequences (0: the whole text)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_option("--json-out", o->json_out,
                  "Also write the JSON result to this file (atomically)");
  cmd->add_flag("--quiet", o->p.quiet, "No progress on stderr");
  add_compute_option(cmd, &o->p.precision, &o->p.float_layers);
  cmd->callback([o] {
    const PerplexityResult r = mlm_perplexity(o->model, o->p);
    nlohmann::json j = r.to_json();
    j["model"] = o->model;
    j["mask_prob"] = o->p.mask_prob;
    j["seed"] = o->p.seed;
    j["precision"] = compute_type_name(o->p.precision);
    if (!o->json_out.empty()) write_file_atomic(o->json_out, j.dump(2) + "\n");
    if (o->json)
      std::printf("%s\n", j.dump(2).c_str());
    else
      std::printf(
          "perplexity %.3f (loss %.4f nats over %lld masked tokens of %lld sequences x %lld, "
          "%.1f s)\n",
          r.ppl, r.loss, static_cast<long long>(r.masked), static_cast<long long>(r.sequences),
          static_cast<long long>(r.seq_len), r.seconds);
  });
}

}  // namespace lf::cli
