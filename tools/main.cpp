// linformer: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

#include "commands.h"
#include "linformer/cpu.h"
#include "linformer/distributed.h"
#include "linformer/error.h"

namespace {

lf::DistributedInfo g_dist;

// Prints an error; with several ranks names the rank and ends the whole job (MPI_Abort), so
// that the other ranks do not wait for this one forever.
int fail_with(const char* what, int code) {
  if (g_dist.size > 1) {
    std::fprintf(stderr, "linformer: error (rank %d of %d): %s\n", g_dist.rank, g_dist.size,
                 what);
    lf::distributed_abort(code);
  }
  std::fprintf(stderr, "linformer: error: %s\n", what);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Launched by mpirun: join the job (MPI) before anything else (docs/distributed.md).
  try {
    g_dist = lf::distributed_info();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linformer: error: %s\n", e.what());
    return 1;
  }
  // The instruction-set level of the engine's kernels, decided before anything else runs:
  // LINFORMER_ISA naming a level this CPU lacks is refused here, with the reason.
  try {
    lf::cpu_paths();
  } catch (const std::exception& e) {
    return fail_with(e.what(), 1);
  }
  if (g_dist.size > 1 && argc > 1 && std::strcmp(argv[1], "pretrain") != 0 &&
      std::strcmp(argv[1], "finetune") != 0 && argv[1][0] != '-') {
    if (g_dist.rank == 0)
      std::fprintf(stderr,
                   "linformer: error: only pretrain and finetune run on several ranks; run "
                   "`linformer %s` as one process, without mpirun\n",
                   argv[1]);
    lf::distributed_abort(2);
  }
  CLI::App app{
      "linformer: Linformer (linear-complexity self-attention) Transformer encoders in C++.\n"
      "Run `linformer <command> --help` for the options of each command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>([] {
                         return "linformer " LINFORMER_VERSION "\n" + lf::cpu_paths_summary();
                       }));
  // The commands, in the order `linformer --help` lists them.
  using namespace lf::cli;
  for (auto add :
       {add_init, add_forward, add_info, add_bench, add_tokenizer, add_pretrain, add_finetune,
        add_evaluate, add_predict, add_embed, add_serve, add_spectrum, add_perplexity,
        add_models})
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
  } catch (const std::exception& e) {  // lf::Error and the rest
    return fail_with(e.what(), 1);
  }
  return 0;
}
