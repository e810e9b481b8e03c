// gbx-run: run ROMs on a backend, build the micro-ROMs, run the SM83 conformance suite.
// Thin: options in plain structs, all logic in the runtime.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "gbx/runtime/backend.h"
#include "gbx/runtime/conformance.h"
#include "gbx/runtime/cpu_backend.h"
#include "gbx/runtime/rom.h"
#include "gbx/runtime/rom_builder.h"
#include "tool_common.h"

namespace {

using namespace gbx;

struct RunOptions {
  std::string rom = "builtin:ALU_LOOP";
  std::string backend = "cpu";
  std::string stage = "full_step";
  long long envs = 1;
  long long frames = 60;
  int frames_per_step = 1;
  int threads = 0;
  int device_index = 0;
  int env = 0;
  bool print_state = false;
  bool serial = false;
  bool verbose = false;
};

struct RomBuildOptions {
  std::string out = "artifacts/roms";
};

struct ConformanceCli {
  std::string dir;
  std::vector<std::string> only;
  int threads = 0;
};

void print_state(int env, const CpuState& s) {
  std::printf(
      "env %d: PC=%04X SP=%04X A=%02X F=%02X B=%02X C=%02X D=%02X E=%02X H=%02X L=%02X "
      "IME=%d flags=%c%c%c%c cycles=%lld instrs=%lld%s\n",
      env, s.pc, s.sp, s.a, s.f, s.b, s.c, s.d, s.e, s.h, s.l, s.ime, (s.f & 0x80) ? 'Z' : '-',
      (s.f & 0x40) ? 'N' : '-', (s.f & 0x20) ? 'H' : '-', (s.f & 0x10) ? 'C' : '-',
      (long long)s.cycle_count, (long long)s.instr_count,
      s.trap_kind ? " TRAPPED" : (s.run_state == 1 ? " HALTED" : s.run_state == 2 ? " STOPPED" : ""));
  if (s.trap_kind)
    std::printf("env %d: trapped: illegal opcode %02X at %04X\n", env, s.trap_opcode, s.trap_pc);
}

int cmd_run(const RunOptions& o) {
  auto stage = parse_stage(o.stage);
  if (!stage) return tool::fail(make_error(ErrorKind::Usage, "unknown stage '" + o.stage + "'"));
  if (o.envs < 1 || o.envs > 0x7fffffff)
    return tool::fail(make_error(ErrorKind::Usage, "--envs must be between 1 and 2147483647"));
  if (o.frames < 1) return tool::fail(make_error(ErrorKind::Usage, "--frames must be at least 1"));
  if (o.frames_per_step < 1)
    return tool::fail(make_error(ErrorKind::Usage, "--frames-per-step must be at least 1"));
  auto rom = load_rom(o.rom);
  if (!rom) return tool::fail(rom.error());
  BackendConfig cfg;
  cfg.num_envs = (int)o.envs;
  cfg.frames_per_step = o.frames_per_step;
  cfg.stage = *stage;
  cfg.threads = o.threads;
  cfg.device_index = o.device_index;
  cfg.verbose = o.verbose;
  auto backend = make_backend(o.backend, rom.value(), cfg);
  if (!backend) return tool::fail(backend.error());
  Backend& be = *backend.value();
  if (o.env < 0 || o.env >= be.num_envs())
    return tool::fail(make_error(ErrorKind::Usage, "--env " + std::to_string(o.env) + " out of range"));
  const long long steps = (o.frames + o.frames_per_step - 1) / o.frames_per_step;
  const auto t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < steps; ++i)
    if (auto st = be.step({}); !st) return tool::fail(st.error());
  if (auto st = be.sync(); !st) return tool::fail(st.error());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double frames = (double)steps * o.frames_per_step * (double)o.envs;
  std::printf("rom %s (%s, %zu bytes)  backend %s  envs %lld  frames %lld  stage %s\n",
              rom->name.c_str(), rom->sha256.substr(0, 12).c_str(), rom->bytes.size(),
              be.name().c_str(), o.envs, steps * o.frames_per_step, o.stage.c_str());
  std::printf("ran %.0f env-frames in %.3f s: %.0f frames/s\n", frames, secs, frames / secs);
  if (!be.kernel_key().empty()) std::printf("kernel %s\n", be.kernel_key().c_str());
  if (o.print_state || !o.serial) {
    auto s = be.get_cpu_state(o.env);
    if (!s) return tool::fail(s.error());
    print_state(o.env, s.value());
  }
  if (o.serial) {
    for (int i = 0; i < be.num_envs(); ++i) {
      auto text = be.serial_output(i);
      if (!text) return tool::fail(text.error());
      std::printf("serial[%d]: %s\n", i, text.value().c_str());
    }
  }
  return 0;
}

int cmd_rom_build(const RomBuildOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) return tool::fail(make_error(ErrorKind::Input, "cannot create " + o.out + ": " + ec.message()));
  for (const auto& r : builtin_roms()) {
    const auto bytes = r.build();
    const auto path = std::filesystem::path(o.out) / (r.name + ".gb");
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
    if (!f) return tool::fail(make_error(ErrorKind::Input, "cannot write " + path.string()));
    std::printf("%-14s %7zu bytes  %s  %s\n", r.name.c_str(), bytes.size(), path.string().c_str(),
                r.description.c_str());
  }
  return 0;
}

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

int main(int argc, char** argv) {
  CLI::App app{"gbx-run: run, verify and benchmark GBX"};
  app.require_subcommand(1);

  RunOptions run;
  auto* r = app.add_subcommand("run", "run a ROM for some frames and print the final state");
  r->add_option("--rom", run.rom, "ROM path or builtin:NAME")->capture_default_str();
  r->add_option("--backend", run.backend, "cpu | cuda | mgba")->capture_default_str();
  r->add_option("--stage", run.stage, "emulate_only | reward_only | obs_only | full_step")
      ->capture_default_str();
  r->add_option("--envs", run.envs, "number of emulated Game Boys")->capture_default_str();
  r->add_option("--frames", run.frames, "frames to run each env")->capture_default_str();
  r->add_option("--frames-per-step", run.frames_per_step, "frames per step() call")
      ->capture_default_str();
  r->add_option("--threads", run.threads, "cpu threads (0 = all cores)")->capture_default_str();
  r->add_option("--device-index", run.device_index, "cuda device")->capture_default_str();
  r->add_option("--env", run.env, "env whose state is printed")->capture_default_str();
  r->add_flag("--print-state", run.print_state, "print env registers");
  r->add_flag("--serial", run.serial, "print each env's serial output");
  r->add_flag("--verbose", run.verbose, "backend logs");

  auto* rom = app.add_subcommand("rom", "micro-ROMs");
  rom->require_subcommand(1);
  RomBuildOptions rb;
  auto* rbuild = rom->add_subcommand("build", "write the built-in ROMs as .gb files");
  rbuild->add_option("--out", rb.out, "output directory")->capture_default_str();

  auto* conf = app.add_subcommand("conformance", "per-instruction conformance suites");
  conf->require_subcommand(1);
  ConformanceCli cc;
  auto* sm83 = conf->add_subcommand("sm83", "SingleStepTests SM83 suite (flat64k kernel)");
  sm83->add_option("--dir", cc.dir, "extracted suite directory")->required();
  sm83->add_option("--only", cc.only, "file stems to run, e.g. 00 'cb 7e'");
  sm83->add_option("--threads", cc.threads, "cpu threads (0 = all cores)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*r) return cmd_run(run);
  if (*rbuild) return cmd_rom_build(rb);
  if (*sm83) return cmd_conformance(cc);
  return 2;
}
