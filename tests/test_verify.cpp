// gbx-run verify: a match against mGBA, cpu vs cpu on every built-in ROM, the mismatch path
// end to end (fault injection -> narrowed step -> complete bundle -> repro.sh), bad input.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gbx/measure/verify/verify.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/ppu_roms.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "test_util.h"

using namespace gbx;
using nlohmann::json;
using test::run_command;
using test::tool;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

json read_json(const fs::path& p) {
  json j = json::parse(read_text(p), nullptr, false);
  REQUIRE_MESSAGE(!j.is_discarded(), (p.string() + " is not JSON"));
  return j;
}

void check_one_line_error(const test::CommandResult& r, int exit_code, const std::string& needle) {
  CAPTURE(r.output);
  CHECK(r.exit_code == exit_code);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.rfind("error: ", 0) == 0);
  CHECK(r.output.find(needle) != std::string::npos);
}

using test::bundle_of;

}  // namespace

TEST_CASE("parse_fault_spec takes STEP:REG") {
  auto f = parse_fault_spec("37:a");
  REQUIRE(f.ok());
  CHECK(f->step == 37);
  CHECK(f->reg == "A");
  CHECK(parse_fault_spec("1:PC").ok());
  for (const std::string bad : {"37", "A:37", "0:A", "37:Q", "-1:A", ":A", "37:"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_fault_spec(bad).ok());
  }
}

TEST_CASE("action generators are pure functions of (seed, step)") {
  for (int64_t s = 1; s <= 20; ++s) CHECK(action_for_step(ActionGen::Noop, 1, s) == 0);
  CHECK(action_for_step(ActionGen::Striped, 0, 1) == 1);
  CHECK(action_for_step(ActionGen::Striped, 0, 8) == 0x80);
  CHECK(action_for_step(ActionGen::Striped, 0, 9) == 0);
  CHECK(action_for_step(ActionGen::Striped, 0, 10) == 1);
  std::set<int32_t> seen;
  bool differs = false;
  for (int64_t s = 1; s <= 64; ++s) {
    const int32_t a = action_for_step(ActionGen::SeededRandom, 7, s);
    CHECK(a == action_for_step(ActionGen::SeededRandom, 7, s));
    CHECK(a >= 0);
    CHECK(a <= 0xFF);
    seen.insert(a);
    differs |= a != action_for_step(ActionGen::SeededRandom, 8, s);
  }
  CHECK(seen.size() > 16);
  CHECK(differs);
}

TEST_CASE("hold:H:R presses one seeded button for H frames, then none for R") {
  auto a = parse_action_schedule("hold:8:16");
  REQUIRE(a.ok());
  CHECK(to_string(*a) == "hold:8:16");
  std::set<int32_t> buttons;
  bool seed_matters = false;
  for (int64_t press = 0; press < 40; ++press) {
    const int64_t first = press * 24 + 1;  // 1-based step of the press's first frame
    const int32_t b = action_for_step(*a, 5, first);
    CHECK(b != 0);
    CHECK((b & (b - 1)) == 0);  // exactly one button
    CHECK(b <= 0x80);
    for (int64_t k = 0; k < 8; ++k) CHECK(action_for_step(*a, 5, first + k) == b);
    for (int64_t k = 8; k < 24; ++k) CHECK(action_for_step(*a, 5, first + k) == 0);
    buttons.insert(b);
    seed_matters |= b != action_for_step(*a, 6, first);
  }
  CHECK(buttons.size() >= 6);
  CHECK(seed_matters);
  // With 4 frames per step, step s starts at frame 4(s-1): held for steps 1-2, released 3-6.
  CHECK(action_for_step(*a, 5, 2, 4) == action_for_step(*a, 5, 1, 4));
  CHECK(action_for_step(*a, 5, 3, 4) == 0);
  CHECK(action_for_step(*a, 5, 7, 4) != 0);
  CHECK(parse_action_schedule("hold:1:0").ok());
  for (const char* bad : {"hold", "hold:", "hold:8", "hold:8:", "hold:0:16", "hold:-1:2",
                          "hold:8:x", "hold:8:16:2", "holdx:8:16", "random"}) {
    CAPTURE(bad);
    auto r = parse_action_schedule(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == ErrorKind::Usage);
  }
  // Frame counts that a step would split are refused by verify.
  VerifyOptions o;
  o.actions = *a;
  o.options["frames_per_step"] = int64_t{3};
  o.steps = 2;
  auto rep = run_verify(o);
  REQUIRE_FALSE(rep.ok());
  CHECK(rep.error().message.find("multiples of --frames-per-step 3") != std::string::npos);
}

TEST_CASE("verify: ALU_LOOP matches between mgba and cpu") {
  test::TempDir d;
  const auto r =
      run_command(tool("gbx-run") +
                  " verify --ref mgba --dut cpu --rom builtin:ALU_LOOP --steps 64 "
                  "--frames-per-step 1 --compare-every 1 --mem-region C000:C100 --out '" +
                  d.path.string() + "'");
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output == "verify: match (64 steps, 64 comparisons, ref mgba, dut cpu, rom ALU_LOOP)\n");
  CHECK_FALSE(fs::exists(d.path / "mismatch"));
}

TEST_CASE("verify: cpu vs cpu agrees on every built-in ROM") {
  test::TempDir d;
  for (const BuiltinRom& b : builtin_roms()) {
    CAPTURE(b.name);
    VerifyOptions o;
    o.ref = "cpu";
    o.dut = "cpu";
    o.rom = "builtin:" + b.name;
    o.steps = std::max(8, std::min(b.frames_to_finish, 64));
    o.compare_every = 1;
    o.actions = ActionGen::SeededRandom;
    o.seed = 3;
    o.regions = {{0xC000, 0xE000}, {0xFF00, 0x10000}};
    o.out_dir = d.path;
    auto rep = run_verify(o);
    REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
    CHECK(rep->match);
    CHECK(rep->steps == o.steps);
    CHECK(rep->comparisons == o.steps);
    CHECK(rep->rom_name == b.name);
  }
  CHECK_FALSE(fs::exists(d.path / "mismatch"));
}

TEST_CASE("verify: a fault is narrowed to its step and written as a complete bundle") {
  test::TempDir d;
  // Compared only every 16 steps: the fault after step 37 is seen at 48 and must be
  // pinpointed to 37 by the replay.
  const std::string cmd = tool("gbx-run") +
                          " verify --ref mgba --dut cpu --rom builtin:ALU_LOOP --steps 100 "
                          "--compare-every 16 --mem-region C000:C100 --mem-region 8000:A000 "
                          "--actions seeded_random --seed 9 --inject-fault 37:A --out '" +
                          d.path.string() + "'";
  const auto r = run_command(cmd);
  CAPTURE(r.output);
  CHECK(r.exit_code == 1);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.rfind("verify: MISMATCH at step 37 (first diff: A ref=0x", 0) == 0);
  const fs::path bundle = bundle_of(r.output);
  REQUIRE(fs::is_directory(bundle));
  CHECK(bundle.parent_path() == d.path / "mismatch");
  CHECK(bundle.filename().string().find("_ALU_LOOP_mgba_vs_cpu") != std::string::npos);
  // Built aside and renamed: nothing half-written is left next to it.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(d.path / "mismatch")) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);

  for (const char* f :
       {"metadata.json", "ref_state.json", "dut_state.json", "diff.json", "actions.jsonl",
        "repro.sh", "ref_mem_C000_C100.bin", "dut_mem_C000_C100.bin"}) {
    CAPTURE(f);
    CHECK(fs::is_regular_file(bundle / f));
  }
  CHECK(fs::file_size(bundle / "ref_mem_C000_C100.bin") == 0x100);
  // The 8 KiB region is dumped as a 1024-byte window.
  int big_dumps = 0;
  for (const auto& e : fs::directory_iterator(bundle)) {
    const std::string name = e.path().filename().string();
    if (name.find("_mem_") != std::string::npos) CHECK(fs::file_size(e.path()) <= 1024);
    if (name.rfind("ref_mem_8", 0) == 0 || name.rfind("ref_mem_9", 0) == 0) {
      ++big_dumps;
      CHECK(fs::file_size(e.path()) == 1024);
    }
  }
  CHECK(big_dumps == 1);

  const json meta = read_json(bundle / "metadata.json");
  CHECK(meta["schema_version"] == 1);
  CHECK(meta["rom"]["name"] == "ALU_LOOP");
  CHECK(meta["rom"]["size"] == 32768);
  CHECK(meta["rom"]["sha256"].get<std::string>().size() == 64);
  CHECK(meta["backends"]["ref"] == "mgba");
  CHECK(meta["backends"]["dut"] == "cpu");
  CHECK(meta["step"] == 37);
  CHECK(meta["detected_at_step"] == 48);
  CHECK(meta["env"] == 0);
  CHECK(meta["settings"]["steps"] == 100);
  CHECK(meta["settings"]["compare_every"] == 16);
  CHECK(meta["settings"]["frames_per_step"] == 1);
  CHECK(meta["settings"]["stage"] == "full_step");
  CHECK(meta["settings"]["inject_fault"] == "37:A");
  CHECK(meta["settings"]["mem_regions"] == json::array({"C000:C100", "8000:A000"}));
  CHECK(meta["actions"]["generator"] == "seeded_random");
  CHECK(meta["actions"]["seed"] == 9);
  for (const std::string f : {"os", "kernel", "cpu_model", "gpu_name", "gpu_driver",
                              "nvrtc_version", "llvm_version", "host_compiler", "git_commit"}) {
    CAPTURE(f);
    REQUIRE(meta["system"].contains(f));
    CHECK(!meta["system"][f].get<std::string>().empty());
  }
  CHECK(meta["system"]["llvm_version"].get<std::string>().rfind("LLVM ", 0) == 0);
  CHECK(meta["kernel_cache_keys"]["ref"].is_null());
  CHECK(meta["kernel_cache_keys"]["dut"].get<std::string>().size() == 64);

  const json diff = read_json(bundle / "diff.json");
  CHECK(diff["step"] == 37);
  CHECK(diff["last_matching_step"] == 32);
  CHECK(diff["first"]["field"] == "A");
  const json ref = read_json(bundle / "ref_state.json");
  const json dut = read_json(bundle / "dut_state.json");
  CHECK(ref["backend"] == "mgba");
  CHECK(dut["backend"] == "cpu");
  CHECK(ref["registers"]["A"] == diff["first"]["ref"]);
  CHECK(dut["registers"]["A"] == diff["first"]["dut"]);
  CHECK(ref["registers"]["A"] != dut["registers"]["A"]);
  CHECK(dut["flags"].contains("Z"));

  // One action per step up to the divergent one, as the generator made them.
  std::istringstream actions(read_text(bundle / "actions.jsonl"));
  std::string line;
  int64_t n = 0;
  while (std::getline(actions, line)) {
    const json a = json::parse(line);
    ++n;
    CHECK(a["step"] == n);
    CHECK(a["action"] == action_for_step(ActionGen::SeededRandom, 9, n));
  }
  CHECK(n == 37);

  struct stat st {};
  REQUIRE(stat((bundle / "repro.sh").c_str(), &st) == 0);
  CHECK((st.st_mode & S_IXUSR) != 0);
  const auto again = run_command("'" + (bundle / "repro.sh").string() + "'");
  CAPTURE(again.output);
  CHECK(again.exit_code == 1);
  CHECK(again.output.rfind("verify: MISMATCH at step 37 (first diff: A ", 0) == 0);
  CHECK(bundle_of(again.output) != bundle);
  CHECK(fs::is_directory(bundle_of(again.output)));
}

TEST_CASE("verify: a fault in F shows the flags decoded") {
  test::TempDir d;
  VerifyOptions o;
  o.ref = "cpu";
  o.dut = "cpu";
  o.steps = 5;
  o.fault = FaultSpec{3, "F"};
  o.out_dir = d.path;
  auto rep = run_verify(o);
  REQUIRE(rep.ok());
  CHECK_FALSE(rep->match);
  CHECK(rep->mismatch_step == 3);
  REQUIRE_FALSE(rep->diffs.empty());
  CHECK(rep->diffs[0].field == "F");
  CHECK(rep->diffs[0].ref.find('(') != std::string::npos);  // "0xB0 (Z-HC)"
  CHECK(rep->diffs[0].ref != rep->diffs[0].dut);
  CHECK(rep->verdict().find("first diff: F ref=") != std::string::npos);
}

TEST_CASE("verify: bad input gives a one-line error and exit 2") {
  test::TempDir d;
  const std::string base = tool("gbx-run") + " verify --steps 4 --out '" + d.path.string() + "' ";
  check_one_line_error(run_command(base + "--mem-region C100:C000"), 2, "C100:C000");
  check_one_line_error(run_command(base + "--mem-region XYZ"), 2, "XYZ");
  check_one_line_error(run_command(base + "--mem-region 0:10001"), 2, "0:10001");
  check_one_line_error(run_command(base + "--ref nope"), 2, "unknown backend 'nope'");
  check_one_line_error(run_command(base + "--dut nope"), 2, "unknown backend 'nope'");
  check_one_line_error(run_command(tool("gbx-run") + " verify --steps 0"), 2, "--steps");
  check_one_line_error(run_command(base + "--compare-every 0"), 2, "--compare-every");
  check_one_line_error(run_command(base + "--inject-fault 9:A"), 2, "outside 1..4");
  check_one_line_error(run_command(base + "--inject-fault 2:Q"), 2, "REG");
  check_one_line_error(run_command(base + "--actions sometimes"), 2, "--actions");
  check_one_line_error(run_command(base + "--rom builtin:NOPE"), 2, "NOPE");
  CHECK_FALSE(fs::exists(d.path / "mismatch"));
}

// The screen differential: both backends draw, and verify compares their last complete
// frames as shades after every step. PPU_BENCH (BG, window, 40 objects, scroll and OAM DMA
// every frame) and the 8x16 scene agree with mGBA pixel for pixel; the objects scene does
// not, where mGBA 0.10 orders overlapping DMG objects by OAM index: Pan Docs "Object
// Priority": on a DMG the smaller X wins (tests/data/ppu_sprites.png, from the docs, agrees
// with GBX). The other scenes' CPUs leave mGBA's before their screens can differ (README).
// Compared every 5 steps: mGBA draws the first frame after the LCD is switched on, which
// hardware (and GBX, and Gambatte) leave blank (Pan Docs LCDC.7; docs/machine/accuracy.md).
// These ROMs switch it on in their first frames, so a comparison at that step would report
// that known mGBA fault; every 5 steps the compare points fall after it (a mismatch at a
// compare point is still narrowed to its first step, below).
VerifyOptions screen_verify(const std::string& rom, const fs::path& out, int64_t steps) {
  VerifyOptions o;
  o.ref = "mgba";
  o.dut = "cpu";
  o.rom = rom;
  o.steps = steps;
  o.screen = true;
  o.options["stage"] = std::string("emulate_only");
  o.out_dir = out;
  o.compare_every = 5;
  return o;
}

TEST_CASE("verify --screen: the PPU ROMs' screens against mGBA") {
  test::TempDir d;
  auto write = [&](const std::string& name) {
    auto bytes = build_ppu_rom(name);
    REQUIRE(bytes.ok());
    const auto rom = d.path / (name + ".gb");
    std::ofstream(rom, std::ios::binary)
        .write((const char*)bytes->data(), (std::streamsize)bytes->size());
    return rom.string();
  };
  for (const std::string& rom : {std::string("builtin:PPU_BENCH"), write("ppu_sprites_8x16")}) {
    CAPTURE(rom);
    auto rep = run_verify(screen_verify(rom, d.path, 12));
    REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
    CHECK_MESSAGE(rep->match, rep->verdict());
    CHECK(rep->comparisons == 3);  // steps 5, 10 and the last
  }
  // ppu_sprites differs at the step-5 compare point (objects at X 80, solid colour 3, and X
  // 84, colour 1, the latter first in OAM: mGBA and GBX order them differently), so verify
  // narrows to the first differing step: step 3, the frame after LCD on that mGBA draws.
  auto rep = run_verify(screen_verify(write("ppu_sprites"), d.path, 12));
  REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
  CAPTURE(rep->verdict());
  REQUIRE_FALSE(rep->match);
  REQUIRE(rep->diffs.size() == 1);
  CHECK(rep->diffs[0].field == "screen");
  CHECK(rep->verdict().find("MISMATCH at step 3") != std::string::npos);
  CHECK(rep->diffs[0].dut.rfind("x=8 y=8 shade 0", 0) == 0);  // GBX: the blank frame
}

// VRAM and OAM as memory holds them (the memory view, README "Reading env memory"): mGBA's
// adapter reads them as held too, so they agree whichever PPU mode a step ends in. Before the
// view ignored the PPU's locks, PPU_BENCH and ARROWS differed here at steps 3 and 2 (0xFF).
TEST_CASE("verify: VRAM and OAM against mGBA on the PPU ROM and the learning game") {
  test::TempDir d;
  for (const std::string rom : {"builtin:PPU_BENCH", "builtin:ARROWS"}) {
    CAPTURE(rom);
    VerifyOptions o = screen_verify(rom, d.path, 12);
    o.screen = false;
    o.compare_every = 1;  // no screens: every step
    o.actions = ActionGen::SeededRandom;
    o.regions = {parse_mem_region("8000:A000").value(), parse_mem_region("FE00:FEA0").value()};
    auto rep = run_verify(o);
    REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
    CHECK_MESSAGE(rep->match, rep->verdict());
    CHECK(rep->comparisons == 12);
  }
}

// A screen difference that no register shows: during an OAM DMA from C100 the program reads
// C100 (the DMA's bus) and writes what it got to BGP. Hardware (and GBX) read the byte the
// DMA is moving, 0x1B; mGBA 0.10 reads 0xFF (README "Verify against mGBA", DMA_CONFLICT).
// The boot screen's (R) tile (colour 1; the test ROM has no logo) then shows as shade 2 on GBX
// and shade 3 on mGBA; A, the other registers and the cycle counts agree again once the
// DMA's wait loop has run.
TEST_CASE("verify --screen: a differing screen is found and pictured in the bundle") {
  Asm a;
  a.op("LD HL,d16", 0xC100).op("LD A,d8", 0x1B);
  a.label("fill").op("LD (HL+),A").op("BIT 1,H").op("JR Z,r8", "fill");  // C100-C1FF
  // Wait for VBlank (HALT with IME = 0, IE = VBlank), so the new palette applies from a
  // frame's first line on both (a mid-line change is beyond GBX's renderer).
  a.op("LD A,d8", 0x01).op("LDH (a8),A", 0xFF).op("XOR A").op("LDH (a8),A", 0x0F).op("HALT");
  a.op("NOP");
  const uint8_t routine[] = {0xE0, 0x46,                    // LDH (46),A: DMA from page A
                             0x00, 0x00,                    // NOP NOP: the DMA has started
                             0xFA, 0x00, 0xC1,              // LD A,(C100): on the DMA's bus
                             0xE0, 0x47,                    // LDH (47),A: BGP
                             0x3E, 0x28, 0x3D, 0x20, 0xFD,  // wait 160 M-cycles
                             0xC9};
  for (size_t i = 0; i < sizeof routine; ++i)
    a.op("LD A,d8", routine[i]).op("LDH (a8),A", 0x80 + (int)i);
  a.op("LD A,d8", 0xC1).op("CALL a16", 0xFF80);
  // Then sleep for good (IE = 0), so that the steps end on the same cycle in both whatever
  // M-cycle the PPU starts in: mGBA hands over from its skipped boot ROM with the PPU one
  // M-cycle later in the frame than a DMG (gbmicrotest poweron_*, docs/machine/index.md), and
  // a loop here would end step 1 one instruction apart (cycle_count 70232 against 70224).
  a.op("XOR A").op("LDH (a8),A", 0xFF);
  a.label("end").op("HALT").op("JR r8", "end");
  RomSpec spec;
  REQUIRE(a.place(spec).ok());
  auto bytes = try_build_rom(spec);
  REQUIRE(bytes.ok());
  test::TempDir d;
  const auto rom = d.path / "dma_bgp.gb";
  std::ofstream(rom, std::ios::binary)
      .write((const char*)bytes->data(), (std::streamsize)bytes->size());

  VerifyOptions o;
  o.ref = "mgba";
  o.dut = "cpu";
  o.rom = rom.string();
  o.steps = 4;
  o.screen = true;
  o.options["stage"] = std::string("emulate_only");
  o.out_dir = d.path;
  auto rep = run_verify(o);
  REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
  CAPTURE(rep->verdict());
  REQUIRE_FALSE(rep->match);
  REQUIRE(rep->diffs.size() == 1);
  CHECK(rep->diffs[0].field == "screen");
  CHECK(rep->diffs[0].ref.rfind("x=130 y=64 shade 3", 0) == 0);
  CHECK(rep->diffs[0].dut.rfind("x=130 y=64 shade 2", 0) == 0);
  CHECK(fs::exists(rep->bundle / "ref_screen.png"));
  CHECK(fs::exists(rep->bundle / "dut_screen.png"));
  CHECK(read_json(rep->bundle / "metadata.json")["settings"]["screen"] == true);
}

// A DMG runs SGB- and CGB-compatible cartridges as DMG games, and verify's mGBA does too
// (issue 19 item 4): a built-in ROM with the SGB flag (0x146 = 0x03, licensee 0x33, which
// mGBA needs to call it SGB), and libbet.gb (0x143 = 0x80 and the SGB flag) when it is there.
TEST_CASE("verify --ref mgba: SGB- and CGB-compatible cartridges run as a DMG") {
  test::TempDir d;
  auto rom = load_rom("builtin:PPU_BENCH");
  REQUIRE(rom.ok());
  std::vector<uint8_t> bytes = rom->bytes;
  bytes[0x146] = 0x03;
  bytes[0x14B] = 0x33;
  bytes[0x14D] = compute_header_checksum(bytes);
  const fs::path sgb = d.path / "ppu_bench_sgb.gb";
  std::ofstream(sgb, std::ios::binary)
      .write((const char*)bytes.data(), (std::streamsize)bytes.size());
  auto rep = run_verify(screen_verify(sgb.string(), d.path, 12));
  REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
  CHECK_MESSAGE(rep->match, rep->verdict());

  const fs::path libbet =
      fs::path(GBX_TEST_SOURCE_DIR) / ".." / ".." / "shared" / "games" / "libbet.gb";
  if (!fs::exists(libbet)) {
    GBX_SKIP("libbet.gb not found at " + libbet.string() + ": its part is not run");
  }
  // 600 frames, screens compared every 5th: libbet's title and menu run as on a DMG. The
  // screens match; the first difference is a CPU one at step 44 (PC 0x0AD9, mGBA 0x0ADB: a
  // wait loop one iteration apart), from the PPU phase mGBA hands over with, one M-cycle off
  // a DMG's (gbmicrotest poweron_*, docs/machine/index.md). verify stops there.
  rep = run_verify(screen_verify(libbet.string(), d.path, 600));
  REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
  CAPTURE(rep->verdict());
  if (!rep->match) {
    CHECK(rep->mismatch_step >= 44);
    for (const auto& diff : rep->diffs) CHECK(diff.field != "screen");
  }
}
