// gbx-synth options: the option declaration (gbx/runtime/backends/options.h) as Markdown (the docs'
// options page, written by scripts/docs.sh) or JSON.
#include <cstdio>

#include "commands.h"
#include "gbx/runtime/backends/options.h"
#include "synth_common.h"

namespace gbx::tool {

void register_options(CLI::App& app, Commands& cmds) {
  static bool json = false;
  auto* c = app.add_subcommand(
      "options", "print every declared option (CLI flags, Python keywords) as Markdown tables");
  c->add_flag("--json", json, "the declaration as JSON instead");
  cmds.emplace_back(c, [] {
    const std::string text = json ? options_json() + "\n" : options_markdown();
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  });
}

}  // namespace gbx::tool
