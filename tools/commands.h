#pragma once
// Each gbx-run / gbx-synth subcommand lives in its own cmd_*.cpp and registers itself here:
// it adds its CLI11 subcommand and the action to run when that subcommand was chosen.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <utility>
#include <vector>

namespace gbx::tool {

using Commands = std::vector<std::pair<CLI::App*, std::function<int()>>>;

// gbx-run
void register_run(CLI::App& app, Commands& cmds);
void register_rom(CLI::App& app, Commands& cmds);
void register_conformance(CLI::App& app, Commands& cmds);
void register_verify(CLI::App& app, Commands& cmds);      // cmd_verify.cpp
void register_bench(CLI::App& app, Commands& cmds);       // cmd_bench.cpp (bench + report)
void register_cuda_info(CLI::App& app, Commands& cmds);   // cmd_cuda_info.cpp
void register_testrom(CLI::App& app, Commands& cmds);     // cmd_testrom.cpp
void register_divergence(CLI::App& app, Commands& cmds);  // cmd_divergence.cpp

// gbx-synth (synth_*.cpp; their shared helpers: synth_common.h)
void register_emit(CLI::App& app, Commands& cmds);
void register_profile(CLI::App& app, Commands& cmds);
void register_compile(CLI::App& app, Commands& cmds);
void register_cache(CLI::App& app, Commands& cmds);  // cache list / show / path / clear
void register_table(CLI::App& app, Commands& cmds);
void register_export(CLI::App& app, Commands& cmds);
void register_matrix(CLI::App& app, Commands& cmds);   // synth_matrix.cpp
void register_options(CLI::App& app, Commands& cmds);  // synth_options.cpp

// Runs the chosen subcommand; a command-line error is one stderr line and exit code 2, an
// exception out of the subcommand one line and exit code 1.
inline int dispatch(CLI::App& app, Commands& cmds, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming the problem, like every other error of the tools.
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  }
  for (auto& [sub, action] : cmds) {
    if (!sub->parsed()) continue;
    // Sizes are checked up front where they are known (env state: check_env_count); an
    // allocation that still fails, or another standard exception, is one line and exit 1,
    // not an abort.
    try {
      return action();
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr,
                   "error: %s: out of memory (an allocation failed: std::bad_alloc); ask for "
                   "fewer envs, or raise the process's memory limit (ulimit -v)\n",
                   sub->get_name().c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s: %s\n", sub->get_name().c_str(), e.what());
    }
    return 1;
  }
  return 2;
}

}  // namespace gbx::tool
