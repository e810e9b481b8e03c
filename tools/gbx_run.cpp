// gbx-run: run, verify and benchmark GBX. Thin: each subcommand is a cmd_*.cpp.
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gbx-run: run, verify and benchmark GBX"};
  app.require_subcommand(1);
  gbx::tool::Commands cmds;
  gbx::tool::register_run(app, cmds);
  gbx::tool::register_rom(app, cmds);
  gbx::tool::register_conformance(app, cmds);
  gbx::tool::register_verify(app, cmds);
  gbx::tool::register_bench(app, cmds);
  gbx::tool::register_cuda_info(app, cmds);
  gbx::tool::register_testrom(app, cmds);
  gbx::tool::register_divergence(app, cmds);
  return gbx::tool::dispatch(app, cmds, argc, argv);
}
