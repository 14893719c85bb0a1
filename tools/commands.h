// Subcommand registration. Each add_* defines options and a callback that does the work.
#pragma once
#include <CLI/CLI.hpp>

namespace lf::cli {
void add_init(CLI::App& app);
void add_forward(CLI::App& app);
void add_info(CLI::App& app);
void add_bench(CLI::App& app);
void add_tokenizer(CLI::App& app);
void add_pretrain(CLI::App& app);
void add_finetune(CLI::App& app);
void add_evaluate(CLI::App& app);
void add_predict(CLI::App& app);
void add_embed(CLI::App& app);
void add_spectrum(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_serve(CLI::App& app);
void add_models(CLI::App& app);
}  // namespace lf::cli
