// gbx-synth profile: run a ROM on the profiling interpreter, write its hot blocks; with
// --report, what its code does and how much of it the specialized kernel covers.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "gbx/measure/bench/game_profile.h"
#include "gbx/runtime/backends/specialize.h"
#include "synth_common.h"
#include "tool_options.h"

namespace gbx::tool {
namespace {

struct ProfileOptions {
  // The profiling run: --frames, --actions, --seed, --load-state and the declared options
  // (--envs, --frames-per-step, --release-after-frames) with the declaration's defaults
  // (add_declared sets them).
  ProfileRunOptions run;
  std::string rom;
  std::string out;
  bool report = false;
  bool no_plan = false;
};

int cmd_report(const ProfileOptions& o, const Rom& rom) {
  GameProfileOptions go;
  go.run = o.run;
  go.frames = o.run.frames;
  go.plan = !o.no_plan;
  const auto t0 = Clock::now();
  auto g = profile_game(rom, go);
  if (!g) return fail(g.error());
  const std::string name = o.rom.rfind("builtin:", 0) == 0
                               ? o.rom.substr(8)
                               : std::filesystem::path(o.rom).stem().string();
  const std::string text = game_profile_text(name, *g);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fprintf(stderr, "profiled %lld frames in %.0f ms\n", (long long)g->frames, ms_since(t0));
  if (o.out.empty()) return 0;
  std::ofstream f(o.out, std::ios::binary);
  f << game_profile_json(name, *g);
  if (!f) return fail(make_error(ErrorKind::Input, "cannot write " + o.out));
  return 0;
}

int cmd_profile(const ProfileOptions& o) {
  // frames < 1 and frames_per_step < 1 are profile_rom's to refuse.
  const int64_t frames_per_step = option_int(o.run.options, "frames_per_step");
  if (o.run.frames >= 1 && frames_per_step >= 1)
    if (auto st = check_whole_steps(o.run.frames, frames_per_step); !st) return fail(st.error());
  auto rom = load_rom(o.rom);
  if (!rom) return fail(rom.error());
  if (o.no_plan && !o.report) return fail(make_error(ErrorKind::Usage, "--no-plan needs --report"));
  if (o.report) return cmd_report(o, *rom);
  const auto t0 = Clock::now();
  auto prof = profile_rom(*rom, o.run);
  if (!prof) return fail(prof.error());
  const std::string text = spec_profile_to_json(*prof);
  auto plan = spec_plan_for(*rom, *prof);
  if (!plan) return fail(plan.error());
  uint64_t hot = 0;
  for (const auto& b : (*plan)->blocks) hot += b.weight;
  std::fprintf(
      stderr,
      "profiled %d frames x %d env(s) in %.0f ms: %llu instructions from ROM, %zu blocks; hot set "
      "%zu blocks covering %.1f%%\n",
      o.run.frames, (int)option_int(o.run.options, "num_envs"), ms_since(t0),
      (unsigned long long)prof->total_instructions, prof->blocks.size(), (*plan)->blocks.size(),
      prof->total_instructions ? 100.0 * (double)hot / (double)prof->total_instructions : 0.0);
  if (o.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream f(o.out, std::ios::binary);
  f << text;
  if (!f) return fail(make_error(ErrorKind::Input, "cannot write " + o.out));
  return 0;
}

}  // namespace

void register_profile(CLI::App& app, Commands& cmds) {
  static ProfileOptions prof;
  auto* pr = app.add_subcommand(
      "profile",
      "run a ROM on the profiling interpreter, write its blocks (JSON) for --specialize");
  pr->add_option("--rom", prof.rom, "builtin:NAME or a path")->required();
  pr->add_option("--frames", prof.run.frames,
                 "frames to profile (per env; a multiple of --frames-per-step)")
      ->capture_default_str();
  pr->add_option("--actions", prof.run.actions, "random (a random byte per env per step) | none")
      ->capture_default_str();
  pr->add_option("--seed", prof.run.seed, "seed of the random actions")->capture_default_str();
  add_declared(pr, kProfile, "num_envs", prof.run.options);
  add_declared(pr, kProfile, "frames_per_step", prof.run.options);
  add_declared(pr, kProfile, "release_after_frames", prof.run.options);
  pr->add_option("--load-state", prof.run.load_state,
                 "save state every env starts from (gbx-run run --save-state): profile mid-game");
  pr->add_option("--out", prof.out,
                 "output file (default: stdout; with --report: the report as JSON)");
  pr->add_flag("--report", prof.report,
               "print what the code does (instructions per frame, halted share, instruction "
               "classes, where the code runs, MBC/I/O writes) and the specialized plan's "
               "coverage and block ends, instead of the profile (docs/benchmarks/games.md)");
  pr->add_flag("--no-plan", prof.no_plan, "with --report: leave out the specialized plan");
  cmds.emplace_back(pr, [] { return cmd_profile(prof); });
}

}  // namespace gbx::tool
