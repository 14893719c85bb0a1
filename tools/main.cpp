// linformer: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "linformer/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "linformer: Linformer (linear-complexity self-attention) Transformer encoders in C++.\n"
      "Run `linformer <command> --help` for the options of each command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "linformer " LINFORMER_VERSION);
  lf::cli::add_init(app);
  lf::cli::add_forward(app);
  lf::cli::add_info(app);
  lf::cli::add_bench(app);
  lf::cli::add_tokenizer(app);
  lf::cli::add_pretrain(app);
  lf::cli::add_finetune(app);
  lf::cli::add_evaluate(app);
  lf::cli::add_predict(app);
  lf::cli::add_embed(app);
  lf::cli::add_spectrum(app);
  lf::cli::add_perplexity(app);
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "linformer: unknown command '%s'; commands: %s\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const lf::Error& e) {
    std::fprintf(stderr, "linformer: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linformer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
