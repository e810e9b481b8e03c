// gbx-run conformance sm83: the SingleStepTests suite through the flat64k kernel.
#include <chrono>
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "gbx/measure/verify/conformance.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "tool_common.h"

namespace {

using namespace gbx;

struct ConformanceCli {
  std::string dir;
  std::vector<std::string> only;
  int threads = 0;
};

int cmd_conformance(const ConformanceCli& o) {
  ConformanceOptions opts;
  opts.dir = o.dir;
  opts.only = o.only;
  opts.threads = o.threads;
  auto report = run_sm83_conformance(opts);
  if (!report) return tool::fail(report.error());
  for (const auto& f : report->files) {
    if (f.failed_cases)
      std::printf("FAIL %-12s %4d/%d cases failed; first: %s\n", f.name.c_str(), f.failed_cases,
                  f.cases, f.first_diff.c_str());
  }
  for (const auto& f : report->files)
    if (!f.exception.empty())
      std::printf("note %-12s documented exception: %s\n", f.name.c_str(), f.exception.c_str());
  std::printf("%d passed, %d failed\n", report->passed(), report->failed());
  return report->failed() ? 1 : 0;
}

}  // namespace

namespace gbx::tool {

void register_conformance(CLI::App& app, Commands& cmds) {
  static ConformanceCli cc;
  auto* conf = app.add_subcommand("conformance", "per-instruction conformance suites");
  conf->require_subcommand(1);
  auto* sm83 = conf->add_subcommand("sm83", "SingleStepTests SM83 suite (flat64k kernel)");
  sm83->add_option("--dir", cc.dir, "extracted suite directory")->required();
  sm83->add_option("--only", cc.only, "file stems to run, e.g. 00 'cb 7e'");
  sm83->add_option("--threads", cc.threads, "cpu threads (0 = all cores)");
  cmds.emplace_back(sm83, [] { return cmd_conformance(cc); });
}

}  // namespace gbx::tool
