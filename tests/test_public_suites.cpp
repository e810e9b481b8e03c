// The public test-ROM suites (../shared/testroms: mooneye-test-suite, blargg's ROMs, dmg-acid2,
// Mealybug Tearoom, gbmicrotest), each ROM judged by its own suite's rule
// (gbx/measure/verify/testrom.h, chosen from the ROM's path as `gbx-run testrom` does), held
// against tests/data/public_suites.tsv: a regression AND an unexpected pass fail the test, so the
// file stays true. One summary line per suite. Skips, saying so, when the ROMs are not there
// ($GBX_TESTROMS_DIR overrides the place).
//
// The pixel-FIFO renderer (ppu=fifo, docs/machine/ppu-fifo.md) runs the mooneye, dmg-acid2 and
// Mealybug ROMs again (gbmicrotest's register timing is the line renderer's, hw/ppu.h), held
// against its own file, tests/data/public_suites_fifo.tsv, the same way.
//
// GBX_PUBLIC_SUITES_WRITE=FILE (GBX_PUBLIC_SUITES_FIFO_WRITE=FILE for the fifo file) writes
// today's results in the expectations format (the reasons of failures that stay are kept; a
// new failure gets its verdict as a reason to edit).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gbx/measure/verify/testrom.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "skip.h"

namespace fs = std::filesystem;
using namespace gbx;

namespace {

const fs::path kExpectations = fs::path(GBX_TEST_SOURCE_DIR) / "data" / "public_suites.tsv";
const fs::path kFifoExpectations =
    fs::path(GBX_TEST_SOURCE_DIR) / "data" / "public_suites_fifo.tsv";

fs::path testroms_dir() {
  if (const char* env = std::getenv("GBX_TESTROMS_DIR")) return env;
  return fs::weakly_canonical(fs::path(GBX_TEST_SOURCE_DIR) / ".." / ".." / "shared" / "testroms");
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Every .gb under `dir` (recursive), as paths relative to `root`, sorted.
std::vector<std::string> roms_under(const fs::path& root, const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(root / dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root / dir))
    if (e.is_regular_file() && e.path().extension() == ".gb")
      out.push_back(fs::relative(e.path(), root).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

// The DMG-applicable ROMs of each suite (issue 19): mooneye acceptance/, phase2/ and
// emulator-only/ without the model suffixes of other machines (SGB, MGB, DMG0, AGB, CGB);
// blargg without the CGB-only cgb_sound and interrupt_time, dmg_sound as its singles;
// dmg-acid2; every Mealybug ROM (those without a DMG expectation are skipped); every gbmicrotest
// ROM (gbmicrotest/bin: all DMG, each verified on a DMG-CPU-08 by its author).
std::vector<std::string> dmg_applicable(const fs::path& root) {
  static const char* const kOtherModels[] = {"-S", "-sgb", "-sgb2", "-mgb",  "-dmg0",
                                             "-A", "-C",   "-cgb",  "-cgb0", "-cgbABCDE"};
  std::vector<std::string> out;
  for (const char* dir : {"mooneye/acceptance", "mooneye/phase2", "mooneye/emulator-only"})
    for (const std::string& r : roms_under(root, dir)) {
      bool other = false;
      for (const char* suffix : kOtherModels)
        other = other || ends_with(r, std::string(suffix) + ".gb");
      if (!other) out.push_back(r);
    }
  for (const std::string& r : roms_under(root, "blargg"))
    if (r.rfind("blargg/cgb_sound/", 0) != 0 && r.rfind("blargg/interrupt_time/", 0) != 0 &&
        r != "blargg/dmg_sound/dmg_sound.gb")
      out.push_back(r);
  for (const char* dir : {"dmg-acid2", "mealybug", "gbmicrotest"})
    for (const std::string& r : roms_under(root, dir)) out.push_back(r);
  return out;
}

struct Expectation {
  std::string verdict;  // PASS | FAIL | SKIP
  std::string why;      // for FAIL and SKIP
  int line = 0;
};

std::map<std::string, Expectation> read_expectations(const fs::path& file) {
  std::map<std::string, Expectation> out;
  std::ifstream in(file);
  REQUIRE_MESSAGE(in, "cannot read " << file.string());
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string rom, verdict, why;
    std::getline(fields, rom, '\t');
    std::getline(fields, verdict, '\t');
    std::getline(fields, why);
    INFO(file.string() << ":" << n << ": " << line);
    CHECK((verdict == "PASS" || verdict == "FAIL" || verdict == "SKIP"));
    CHECK_MESSAGE((verdict == "PASS" || !why.empty()), "an expected FAIL or SKIP says why");
    CHECK_MESSAGE(out.count(rom) == 0, "listed twice");
    out[rom] = {verdict, why, n};
  }
  return out;
}

// Frames a ROM may take: mooneye tests end within a second or two; cpu_instrs runs about a
// minute of emulated time.
int64_t frame_limit(const std::string& suite) {
  if (suite == "blargg") return 7200;
  if (suite == "gbmicrotest") return kGbmicrotestFrames;
  return 600;
}

struct Outcome {
  std::string verdict;  // PASS | FAIL | SKIP
  std::string detail;
};

Outcome run_one(const fs::path& root, const std::string& rel, PpuModel ppu, Dispatch dispatch) {
  const std::string path = (root / rel).string();
  const TestRomPlan plan = resolve_test_rom(path, TestRomRule::Auto, "");
  if (!plan.skip.empty()) return {"SKIP", plan.skip};
  auto rom = load_rom(path);
  if (!rom) return {"FAIL", "error: " + rom.error().message};
  TestRomOptions o;
  o.rule = plan.rule;
  o.expect_png = plan.expect_png;
  o.max_frames = frame_limit(plan.suite);
  o.options["ppu"] = std::string(to_string(ppu));
  o.options["dispatch"] = std::string(to_string(dispatch));
  auto r = run_test_rom(rom.value(), o);
  if (!r) return {"FAIL", "error: " + r.error().message};
  const std::string how = r->convention.empty() ? "" : r->convention + ": ";
  return {r->passed ? "PASS" : "FAIL", how + r->detail};
}

// Runs `roms` with the pixel model `ppu` and holds them against `file`; `write_env` names the
// variable that writes today's results.
void check_suites(const fs::path& root, const std::vector<std::string>& roms, PpuModel ppu,
                  const fs::path& file, const char* write_env,
                  Dispatch dispatch = Dispatch::Switch) {
  const auto expected = read_expectations(file);
  REQUIRE(!roms.empty());

  // Two workers (CI has two cores) take ROMs from one queue; each ROM has its own backend
  // (one env, one thread). The first ROM of each rule runs before them, alone, so that its
  // kernel is compiled once and the others find it in the cache.
  std::vector<Outcome> outcomes(roms.size());
  std::vector<size_t> queue;
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<TestRomRule> warm;
    for (size_t i = 0; i < roms.size(); ++i) {
      const TestRomPlan plan = resolve_test_rom((root / roms[i]).string(), TestRomRule::Auto, "");
      if (plan.skip.empty() && std::find(warm.begin(), warm.end(), plan.rule) == warm.end()) {
        warm.push_back(plan.rule);
        outcomes[i] = run_one(root, roms[i], ppu, dispatch);
      } else {
        queue.push_back(i);
      }
    }
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t k; (k = next.fetch_add(1)) < queue.size();)
        outcomes[queue[k]] = run_one(root, roms[queue[k]], ppu, dispatch);
    };
    std::vector<std::thread> workers;
    const unsigned n = std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
    for (unsigned t = 0; t < n; ++t) workers.emplace_back(work);
    for (auto& w : workers) w.join();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  struct Count {
    int pass = 0, judged = 0, skipped = 0, regressions = 0, unexpected_passes = 0;
  };
  std::map<std::string, Count> suites;
  std::ostringstream mismatches;
  for (size_t i = 0; i < roms.size(); ++i) {
    const std::string& rom = roms[i];
    const Outcome& got = outcomes[i];
    Count& c = suites[test_rom_suite(rom)];
    if (got.verdict == "SKIP")
      ++c.skipped;
    else
      ++c.judged;
    c.pass += got.verdict == "PASS";
    auto want = expected.find(rom);
    if (want == expected.end()) {
      mismatches << rom << ": not in the expectations file (got " << got.verdict << ": "
                 << got.detail << ")\n";
      continue;
    }
    if (want->second.verdict == got.verdict) continue;
    if (got.verdict == "PASS") ++c.unexpected_passes;
    if (want->second.verdict == "PASS") ++c.regressions;
    mismatches << rom << ": expected " << want->second.verdict << ", got " << got.verdict << " ("
               << got.detail << ")\n";
  }
  for (const auto& [rom, want] : expected)
    if (std::find(roms.begin(), roms.end(), rom) == roms.end())
      mismatches << rom << ": in the expectations file (line " << want.line
                 << ") but not among the ROMs\n";

  for (const auto& [suite, c] : suites) {
    std::ostringstream line;
    line << suite << " " << c.pass << "/" << c.judged;
    if (c.skipped) line << " (" << c.skipped << " skipped: no DMG expectation)";
    line << ", " << c.regressions << " regressions, " << c.unexpected_passes
         << " unexpected passes";
    std::printf("%s\n", line.str().c_str());
  }
  std::printf("public suites (ppu=%s, dispatch=%s): %zu ROMs in %.1f s\n",
              std::string(to_string(ppu)).c_str(), std::string(to_string(dispatch)).c_str(),
              roms.size(), secs);

  if (const char* out = std::getenv(write_env)) {
    std::ofstream f(out);
    f << "# ROM (relative to ../shared/testroms)\tPASS|FAIL|SKIP\twhy (FAIL, SKIP)\n";
    for (size_t i = 0; i < roms.size(); ++i) {
      auto want = expected.find(roms[i]);
      const bool same = want != expected.end() && want->second.verdict == outcomes[i].verdict;
      f << roms[i] << "\t" << outcomes[i].verdict;
      if (outcomes[i].verdict != "PASS")
        f << "\t" << (same ? want->second.why : outcomes[i].detail);
      f << "\n";
    }
    std::printf("wrote %s\n", out);
  }
  const std::string m = mismatches.str();
  CHECK_MESSAGE(m.empty(), "results that differ from " << file.string() << ":\n" << m);
}

}  // namespace

TEST_CASE("public suites: every DMG-applicable ROM against tests/data/public_suites.tsv") {
  const fs::path root = testroms_dir();
  if (!fs::is_directory(root)) {
    GBX_SKIP("no test ROMs at " + root.string() + " (../shared/testroms; or set GBX_TESTROMS_DIR)");
  }
  check_suites(root, dmg_applicable(root), PpuModel::Line, kExpectations,
               "GBX_PUBLIC_SUITES_WRITE");
}

// dispatch=uniform (sm83/uniform.h): the same ROMs, the same expected results. Its M-cycles
// are the families' own in their order, which the timing ROMs (mooneye's, gbmicrotest's,
// blargg's instr_timing and mem_timing) check access by access.
TEST_CASE("public suites under dispatch=uniform: tests/data/public_suites.tsv as the switch") {
  const fs::path root = testroms_dir();
  if (!fs::is_directory(root)) {
    GBX_SKIP("no test ROMs at " + root.string() + " (../shared/testroms; or set GBX_TESTROMS_DIR)");
  }
  check_suites(root, dmg_applicable(root), PpuModel::Line, kExpectations, "GBX_PUBLIC_SUITES_WRITE",
               Dispatch::Uniform);
}

// ppu=fifo: the suites that look at the PPU. Mooneye's results must include every one the
// line renderer passes (its mode-3 timing is the same, hw/ppu.h), the screens are the FIFO's.
TEST_CASE(
    "public suites: mooneye, dmg-acid2 and Mealybug with ppu=fifo against "
    "tests/data/public_suites_fifo.tsv") {
  const fs::path root = testroms_dir();
  if (!fs::is_directory(root)) {
    GBX_SKIP("no test ROMs at " + root.string() + " (../shared/testroms; or set GBX_TESTROMS_DIR)");
  }
  std::vector<std::string> roms;
  for (const std::string& r : dmg_applicable(root))
    if (test_rom_suite(r) != "blargg" && test_rom_suite(r) != "gbmicrotest") roms.push_back(r);
  check_suites(root, roms, PpuModel::Fifo, kFifoExpectations, "GBX_PUBLIC_SUITES_FIFO_WRITE");
  // Every ROM that passes with the line renderer passes with the FIFO.
  const auto line = read_expectations(kExpectations);
  const auto fifo = read_expectations(kFifoExpectations);
  for (const auto& [rom, want] : line) {
    if (want.verdict != "PASS" || test_rom_suite(rom) == "blargg" ||
        test_rom_suite(rom) == "gbmicrotest")
      continue;
    auto f = fifo.find(rom);
    CHECK_MESSAGE((f != fifo.end() && f->second.verdict == "PASS"),
                  rom << " passes with ppu=line but is not expected to pass with ppu=fifo");
  }
}

TEST_CASE("public suites: the rule is the suite's, from the ROM's path") {
  CHECK(test_rom_suite("/x/testroms/mooneye/acceptance/timer/tim00.gb") == "mooneye");
  CHECK(test_rom_suite("/x/testroms/blargg/cpu_instrs/individual/01-special.gb") == "blargg");
  CHECK(test_rom_suite("/x/roms/cpu_instrs.gb") == "blargg");  // by blargg's test name
  CHECK(test_rom_suite("/x/Halt_Bug.gb") == "blargg");
  CHECK(test_rom_suite("/x/testroms/dmg-acid2/dmg-acid2.gb") == "dmg-acid2");
  CHECK(test_rom_suite("/x/mealybug/m3_scy_change.gb") == "mealybug");
  CHECK(test_rom_suite("/x/mooneye/blargg_copy/halt_bug.gb") == "blargg");  // innermost wins
  CHECK(test_rom_suite("/x/roms/game.gb") == "");
  // gbmicrotest's folder wins over blargg's test names (it has its own halt_bug.gb).
  CHECK(test_rom_suite("/x/testroms/gbmicrotest/bin/halt_bug.gb") == "gbmicrotest");
  CHECK(test_rom_suite("/x/GBMicroTest/bin/poweron_ly_119.gb") == "gbmicrotest");
  CHECK(test_rom_suite("/x/gbmicrotests/halt_bug.gb") == "blargg");  // not the suite's folder
  CHECK(test_rom_suite("builtin:TIMER_RELOAD") == "");

  CHECK(resolve_test_rom("/t/mooneye/a.gb", TestRomRule::Auto, "").rule == TestRomRule::Mooneye);
  CHECK(resolve_test_rom("/t/blargg/a.gb", TestRomRule::Auto, "").rule == TestRomRule::Blargg);
  CHECK(resolve_test_rom("/t/other/a.gb", TestRomRule::Auto, "").rule == TestRomRule::Any);
  CHECK(resolve_test_rom("/t/gbmicrotest/bin/a.gb", TestRomRule::Auto, "").rule ==
        TestRomRule::Gbmicrotest);
  CHECK(resolve_test_rom("/t/blargg/a.gb", TestRomRule::Mooneye, "").rule == TestRomRule::Mooneye);
  const TestRomPlan acid = resolve_test_rom("/t/dmg-acid2/dmg-acid2.gb", TestRomRule::Auto, "");
  CHECK(acid.rule == TestRomRule::Image);
  CHECK(acid.expect_png == "/t/dmg-acid2/reference-dmg.png");
  const TestRomPlan own = resolve_test_rom("/t/other/a.gb", TestRomRule::Auto, "/p/a.png");
  CHECK(own.rule == TestRomRule::Image);
  CHECK(own.expect_png == "/p/a.png");
  // A Mealybug ROM without its DMG PNG is skipped, not failed.
  const TestRomPlan meal = resolve_test_rom("/nonexistent/mealybug/m3_x.gb", TestRomRule::Auto, "");
  CHECK(meal.rule == TestRomRule::Image);
  CHECK(meal.skip.rfind("no DMG expectation (/nonexistent/mealybug/expected-dmg/m3_x.png", 0) == 0);
  CHECK(resolve_test_rom("/t/a.gb", TestRomRule::Image, "").skip ==
        "the image rule needs --expect-png");

  CHECK(parse_test_rom_rule("blargg").value() == TestRomRule::Blargg);
  CHECK(parse_test_rom_rule("gbmicrotest").value() == TestRomRule::Gbmicrotest);
  auto bad = parse_test_rom_rule("blarg");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().kind == ErrorKind::Usage);
  CHECK(bad.error().message ==
        "unknown --rule 'blarg' (auto, mooneye, blargg, image, gbmicrotest or any)");
}

TEST_CASE("public suites: a tile map read as blargg's console text") {
  std::vector<uint8_t> map(1024, 0x20);
  auto put = [&](int row, int col, const std::string& text) {
    for (size_t i = 0; i < text.size(); ++i) map[row * 32 + col + i] = (uint8_t)text[i];
  };
  put(0, 0, "halt bug");
  put(3, 0, "Passed");
  map[3 * 32 + 31] = 0x80;  // not ASCII: a space
  map[5 * 32 + 2] = 0x00;
  CHECK(tile_map_text(map.data()) == "halt bug\n\n\nPassed");
  CHECK(tile_map_text(std::vector<uint8_t>(1024, 0).data()).empty());
}

// The screen rule reads the tile map as ASCII. cpu_instrs' singles print the same text to the
// serial port and the screen, so the two must agree; halt_bug prints only to the screen.
TEST_CASE("public suites: blargg's screen text is its serial text") {
  const fs::path root = testroms_dir();
  if (!fs::is_directory(root / "blargg")) {
    GBX_SKIP("no blargg ROMs at " + (root / "blargg").string());
  }
  auto run = [&](const std::string& rel, std::string* serial) {
    auto rom = load_rom((root / rel).string());
    REQUIRE(rom.ok());
    BackendConfig cfg;
    cfg.threads = 1;
    cfg.stage = Stage::EmulateOnly;
    cfg.frames_per_step = 10;
    auto be = make_backend("cpu", rom.value(), cfg);
    REQUIRE(be.ok());
    std::string text;
    for (int frames = 0; frames < 1200; frames += 10) {
      REQUIRE(be.value()->step({}).ok());
      auto lcdc = be.value()->read_memory(0, 0xFF40, 0xFF41);
      REQUIRE(lcdc.ok());
      const uint32_t at = (lcdc->at(0) & 0x08) ? 0x9C00 : 0x9800;
      auto map = be.value()->read_memory(0, at, at + 0x400);
      REQUIRE(map.ok());
      text = tile_map_text(map->data());
      if (text.find("Passed") != std::string::npos) break;
    }
    *serial = be.value()->serial_output(0).value();
    return text;
  };
  auto words = [](const std::string& s) {  // whitespace-separated words, one space apart
    std::istringstream in(s);
    std::string w, out;
    while (in >> w) out += (out.empty() ? "" : " ") + w;
    return out;
  };
  std::string serial;
  const std::string special = run("blargg/cpu_instrs/individual/01-special.gb", &serial);
  CHECK(words(special) == "01-special Passed");
  CHECK(words(special) == words(serial));
  const std::string halt = run("blargg/halt_bug.gb", &serial);
  CHECK(halt.rfind("halt bug\n", 0) == 0);
  CHECK(halt.find("\nPassed") != std::string::npos);
  CHECK(serial.empty());
}
