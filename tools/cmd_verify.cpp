// gbx-run verify: differential check of a backend against a reference, one env.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "gbx/measure/verify/verify.h"
#include "tool_common.h"
#include "tool_options.h"

namespace {

using namespace gbx;

struct VerifyCli {
  // The declared options (--frames-per-step, --stage, --ppu, --layout, --rtc-lock), with the
  // declaration's defaults (add_declared sets them).
  OptionValues opts;
  std::string ref = "mgba";
  std::string dut = "cpu";
  std::string dut_specialize = "off";
  std::string rom = "builtin:ALU_LOOP";
  long long steps = 1024;
  long long compare_every = 1;
  std::vector<std::string> regions;
  std::string actions = "noop";
  uint64_t seed = 0;
  std::string fault;
  std::string out = "artifacts";
  std::string dut_layout;
  bool screen = false;
};

// Exit codes: 0 match, 1 mismatch (and nothing else, so scripts can rely on it), 2 usage
// or input errors, 3 no CUDA device, 4 any other failure.
int verify_fail(const Error& e) {
  tool::fail(e);
  switch (e.kind) {
    case ErrorKind::Usage:
    case ErrorKind::Input:
      return 2;
    case ErrorKind::NoDevice:
      return 3;
    default:
      return 4;
  }
}

// This process's arguments after the program name, exactly as given: repro.sh replays them
// rather than a reconstruction (defaults may change between versions).
std::vector<std::string> command_line_args() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  if (!args.empty()) args.erase(args.begin());
  return args;
}

int cmd_verify(const VerifyCli& c, const std::vector<std::string>& args) {
  VerifyOptions o;
  o.ref = c.ref;
  o.dut = c.dut;
  o.dut_specialize = c.dut_specialize;
  o.rom = c.rom;
  o.steps = c.steps;
  o.options = c.opts;
  o.compare_every = c.compare_every;
  o.seed = c.seed;
  o.out_dir = c.out;
  if (!c.dut_layout.empty()) {
    o.dut_layout = parse_mem_layout(c.dut_layout);
    if (!o.dut_layout)
      return verify_fail(make_error(ErrorKind::Usage, "unknown --dut-layout '" + c.dut_layout +
                                                          "' (env_major, interleaved)"));
  }
  o.screen = c.screen;
  for (const std::string& r : c.regions) {
    auto region = parse_mem_region(r);
    if (!region) return verify_fail(region.error());
    o.regions.push_back(region.value());
  }
  auto actions = parse_action_schedule(c.actions);
  if (!actions) return verify_fail(actions.error());
  o.actions = *actions;
  if (!c.fault.empty()) {
    auto f = parse_fault_spec(c.fault);
    if (!f) return verify_fail(f.error());
    o.fault = f.value();
  }
  std::error_code ec;
  o.tool_path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) o.tool_path = "gbx-run";
  o.cwd = std::filesystem::current_path(ec);
  o.args = args;
  if (isatty(STDERR_FILENO))
    o.progress = [](const std::string& line) { std::fprintf(stderr, "\r%s\033[K", line.c_str()); };

  o.warn = [](const std::string& w) { tool::print_warnings({w}); };
  auto rep = run_verify(o);
  if (o.progress) std::fprintf(stderr, "\r\033[K");
  if (!rep) return verify_fail(rep.error());
  std::printf("%s\n", rep->verdict().c_str());
  return rep->match ? 0 : 1;
}

}  // namespace

namespace gbx::tool {

void register_verify(CLI::App& app, Commands& cmds) {
  static VerifyCli v;
  auto* c = app.add_subcommand(
      "verify",
      "run one env on a reference and a backend under test and compare them step by step\n"
      "exit: 0 match, 1 mismatch (bundle written under OUT/mismatch/), 2 usage or input "
      "error, 3 no CUDA device, 4 other failure");
  c->add_option(
       "--ref", v.ref,
       "reference backend: mgba | gambatte | cpu | cuda (gambatte: Debian's "
       "libretro-gambatte core; screens and memory only: libretro exposes no CPU "
       "registers and stops only at Gambatte's own frame ends; --screen is implied without "
       "--mem-region)")
      ->capture_default_str();
  c->add_option("--dut", v.dut, "backend under test: cpu | cuda")->capture_default_str();
  c->add_option("--dut-specialize", v.dut_specialize,
                "the dut's ROM-specialized kernel: off | profile:FILE | auto[:N]")
      ->capture_default_str();
  c->add_option("--rom", v.rom, "ROM path or builtin:NAME")->capture_default_str();
  c->add_option("--steps", v.steps, "steps to run")->capture_default_str();
  add_declared(c, kVerify, "frames_per_step", v.opts);
  c->add_option("--compare-every", v.compare_every,
                "compare every K steps (and after the last); a mismatch is then narrowed to "
                "its first step")
      ->capture_default_str();
  c->add_option("--mem-region", v.regions,
                "also compare a SHA-256 of bus bytes LO:HI (hex, HI exclusive); repeatable");
  c->add_option("--actions", v.actions,
                "action generator: noop | seeded_random | striped | hold:H:R (one seeded "
                "random button held H frames, then none for R frames, e.g. hold:8:16)")
      ->capture_default_str();
  c->add_option("--seed", v.seed, "seed for reset, seeded_random and hold")->capture_default_str();
  add_declared(c, kVerify, "rtc_lock", v.opts);
  add_declared(c, kVerify, "ppu", v.opts);
  add_declared(c, kVerify, "dispatch", v.opts);
  add_declared(c, kVerify, "warp_majority", v.opts);
  add_declared(c, kVerify, "max_registers", v.opts);
  add_declared(c, kVerify, "layout", v.opts);
  c->add_option("--dut-layout", v.dut_layout, "the DUT's layout when it differs from --layout");
  c->add_flag("--screen", v.screen,
              "also compare the screens (last complete frame, shades 0-3); both backends draw");
  add_declared(c, kVerify, "stage", v.opts);
  c->add_option("--inject-fault", v.fault,
                "TEST ONLY: corrupt dut register REG after step STEP (STEP:REG, e.g. 37:A) to "
                "exercise the mismatch path");
  c->add_option("--out", v.out, "output root (bundles go to OUT/mismatch/)")->capture_default_str();
  cmds.emplace_back(c, [] { return cmd_verify(v, command_line_args()); });
}

}  // namespace gbx::tool
