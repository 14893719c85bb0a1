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
  // The commands, in the order `linformer --help` lists them.
  using namespace lf::cli;
  for (auto add :
       {add_init, add_forward, add_info, add_bench, add_tokenizer, add_pretrain, add_finetune,
        add_evaluate, add_predict, add_embed, add_spectrum, add_perplexity})
    add(app);
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
