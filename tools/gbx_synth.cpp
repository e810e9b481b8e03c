// gbx-synth: emit generated kernels, compile them into the cache, inspect the cache, print the
// opcode table and export kernel variants for datasets. Thin: each subcommand is a synth_*.cpp
// (options in plain structs, all logic in the engine; they only parse, loop and print).
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gbx-synth: generate, compile and inspect GBX kernels"};
  app.require_subcommand(1);
  gbx::tool::Commands cmds;
  gbx::tool::register_emit(app, cmds);
  gbx::tool::register_profile(app, cmds);
  gbx::tool::register_compile(app, cmds);
  gbx::tool::register_cache(app, cmds);
  gbx::tool::register_table(app, cmds);
  gbx::tool::register_export(app, cmds);
  gbx::tool::register_matrix(app, cmds);
  gbx::tool::register_options(app, cmds);
  return gbx::tool::dispatch(app, cmds, argc, argv);
}
