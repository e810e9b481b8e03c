#pragma once
// Each gbx-run / gbx-synth subcommand lives in its own cmd_*.cpp and registers itself here:
// it adds its CLI11 subcommand and the action to run when that subcommand was chosen.
#include <CLI/CLI.hpp>
#include <functional>
#include <utility>
#include <vector>

namespace gbx::tool {

using Commands = std::vector<std::pair<CLI::App*, std::function<int()>>>;

// gbx-run
void register_run(CLI::App& app, Commands& cmds);
void register_rom(CLI::App& app, Commands& cmds);
void register_conformance(CLI::App& app, Commands& cmds);
void register_verify(CLI::App& app, Commands& cmds);  // cmd_verify.cpp
void register_bench(CLI::App& app, Commands& cmds);   // cmd_bench.cpp (bench + report)
void register_cuda_info(CLI::App& app, Commands& cmds);  // cmd_cuda_info.cpp

// Runs the chosen subcommand; CLI errors exit 2 with CLI11's one-line message.
inline int dispatch(CLI::App& app, Commands& cmds, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto& [sub, action] : cmds)
    if (sub->parsed()) return action();
  return 2;
}

}  // namespace gbx::tool
