// gbx-synth table: the opcode table as a 16x16 grid.
#include <cstdio>

#include "commands.h"
#include "synth_common.h"

namespace gbx::tool {
namespace {

int cmd_table(bool cb) {
  auto bundle = load_bundle();
  if (!bundle) return fail(bundle.error());
  std::string grid = render_opcode_grid(*bundle, cb);
  std::fwrite(grid.data(), 1, grid.size(), stdout);
  return 0;
}

}  // namespace

void register_table(CLI::App& app, Commands& cmds) {
  static bool cb = false;
  auto* t = app.add_subcommand("table", "print the opcode table as a 16x16 grid");
  t->add_flag("--cb", cb, "the CB-prefixed table");
  cmds.emplace_back(t, [] { return cmd_table(cb); });
}

}  // namespace gbx::tool
