// gbx-run testrom: PASS/FAIL per test ROM by its suite's pass rule (gbx/measure/verify/testrom.h).
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "gbx/measure/verify/testrom.h"
#include "gbx/runtime/roms/rom.h"
#include "tool_common.h"
#include "tool_options.h"

namespace {

using namespace gbx;

struct TestRomCli {
  // The declared options (--ppu), with the declaration's defaults (add_declared sets them).
  OptionValues opts;
  std::vector<std::string> roms;
  long long frames = 3600;
  std::string backend = "cpu";
  std::string expect_png;
  std::string rule = "auto";
  std::string screen_out;
  bool verbose = false;
};

// The PNG an image test compares with: --expect-png FILE for one ROM, or --expect-png DIR
// for any number, each ROM paired with DIR/<name>.png (<name>: the file name without its
// extension; for builtin:NAME, NAME in lower case).
std::string expected_png_for(const std::string& expect, const std::string& rom) {
  if (expect.empty() || !std::filesystem::is_directory(expect)) return expect;
  std::string name;
  if (rom.rfind("builtin:", 0) == 0)
    for (char ch : rom.substr(8)) name += (char)std::tolower((unsigned char)ch);
  else
    name = std::filesystem::path(rom).stem().string();
  return (std::filesystem::path(expect) / (name + ".png")).string();
}

int cmd_testrom(const TestRomCli& c) {
  if (c.frames < 1) return tool::fail(make_error(ErrorKind::Usage, "--frames must be at least 1"));
  if (!c.expect_png.empty() && !std::filesystem::is_directory(c.expect_png) && c.roms.size() > 1)
    return tool::fail(make_error(ErrorKind::Usage,
                                 "--expect-png FILE takes one ROM; for several, give a folder "
                                 "holding <rom name>.png for each"));
  auto rule = parse_test_rom_rule(c.rule);
  if (!rule) return tool::fail(rule.error());
  TestRomOptions o;
  o.backend = c.backend;
  o.max_frames = c.frames;
  o.verbose = c.verbose;
  o.options = c.opts;
  int passed = 0, failed = 0, skipped = 0;
  for (const std::string& path : c.roms) {
    const std::string png = expected_png_for(c.expect_png, path);
    TestRomPlan plan = resolve_test_rom(path, rule.value(), png);
    // --expect-png DIR without this ROM's PNG (Mealybug has none for 7 of its DMG ROMs):
    // skipped, not failed.
    if (plan.skip.empty() && png != c.expect_png && !std::filesystem::exists(png))
      plan.skip = "no expectation: " + png + " does not exist";
    if (!plan.skip.empty()) {
      std::printf("SKIP  %s  (%s)\n", path.c_str(), plan.skip.c_str());
      ++skipped;
      continue;
    }
    auto rom = load_rom(path);
    if (!rom) {
      std::printf("FAIL  %s  (error: %s)\n", path.c_str(), rom.error().message.c_str());
      ++failed;
      continue;
    }
    tool::print_warnings(rom->warnings);
    o.rule = plan.rule;
    o.expect_png = plan.expect_png;
    if (!c.screen_out.empty()) {
      std::filesystem::create_directories(c.screen_out);
      o.screen_out = (std::filesystem::path(c.screen_out) /
                      (std::filesystem::path(path).stem().string() + ".png"))
                         .string();
    }
    auto r = run_test_rom(rom.value(), o);
    if (!r) {
      if (r.error().kind == ErrorKind::Usage) return tool::fail(r.error());
      std::printf("FAIL  %s  (error: %s)\n", path.c_str(), r.error().message.c_str());
      ++failed;
      continue;
    }
    const TestRomResult& t = r.value();
    if (t.convention.empty())  // no verdict: the detail says after how many frames
      std::printf("FAIL  %s  (%s)\n", path.c_str(), t.detail.c_str());
    else
      std::printf("%s  %s  (%s: %s, %lld frames)\n", t.passed ? "PASS" : "FAIL", path.c_str(),
                  t.convention.c_str(), t.detail.c_str(), (long long)t.frames);
    (t.passed ? passed : failed)++;
  }
  if (skipped)
    std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else
    std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

namespace gbx::tool {

void register_testrom(CLI::App& app, Commands& cmds) {
  static TestRomCli cli;
  auto* t = app.add_subcommand(
      "testrom",
      "run test ROMs and report PASS/FAIL by each suite's rule (mooneye LD B,B registers, "
      "blargg serial, $A000 or screen text, the screen at LD B,B against a PNG, gbmicrotest "
      "HRAM FF82)");
  t->add_option("roms", cli.roms, "ROM paths or builtin:NAME")->required();
  t->add_option("--frames", cli.frames, "frames to wait for a result per ROM")
      ->capture_default_str();
  t->add_option("--backend", cli.backend, "cpu | cuda")->capture_default_str();
  t->add_option("--expect-png", cli.expect_png,
                "image test: compare the screen at LD B,B with this PNG (one ROM), or with "
                "DIR/<rom name>.png for each ROM");
  t->add_option("--rule", cli.rule,
                "auto (from the ROM's path: mooneye, blargg, dmg-acid2, mealybug, gbmicrotest "
                "folders; else any) | mooneye | blargg | image | gbmicrotest (HRAM FF82 01 "
                "pass, FF fail, within 60 frames) | any (the first convention the ROM shows)")
      ->capture_default_str();
  add_declared(t, kTestrom, "ppu", cli.opts);
  add_declared(t, kTestrom, "dispatch", cli.opts);
  add_declared(t, kTestrom, "warp_majority", cli.opts);
  add_declared(t, kTestrom, "max_registers", cli.opts);
  t->add_option("--screen-out", cli.screen_out,
                "image tests: also write each ROM's screen at LD B,B to DIR/<rom name>.png");
  t->add_flag("--verbose", cli.verbose, "backend logs");
  cmds.emplace_back(t, [] { return cmd_testrom(cli); });
}

}  // namespace gbx::tool
