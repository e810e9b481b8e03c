// The gambatte reference (libretro-gambatte, dlopen()ed): a missing or bad core is one error
// line; with the core installed it runs as a DMG, replays exactly after a reset, and agrees
// with GBX where both are right (the games' screen checkpoints: test_game_screens.cpp).
// Cases that need the core or the games skip, saying why, without them (skip.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "test_reference_util.h"
#include "test_util.h"

using namespace gbx;
using namespace gbx::test;
namespace fs = std::filesystem;

TEST_CASE("a missing or unusable Gambatte core is one error line naming the fix") {
  const Rom rom = rom_or_fail("builtin:ALU_LOOP");
  BackendConfig cfg;
  auto missing = make_gambatte_backend(rom, cfg, "/nonexistent/gambatte_libretro.so");
  REQUIRE(!missing.ok());
  CHECK(missing.error().kind == ErrorKind::Usage);
  CHECK(missing.error().message.find("apt-get install libretro-gambatte") != std::string::npos);
  CHECK(missing.error().message.find('\n') == std::string::npos);
  // A file that is not a shared object at all.
  test::TempDir dir;
  const fs::path junk = dir.path / "junk.so";
  { std::ofstream(junk) << "not an ELF file\n"; }
  auto bad = make_gambatte_backend(rom, cfg, junk.string());
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("cannot load the gambatte core") != std::string::npos);
  CHECK(bad.error().message.find("apt-get install libretro-gambatte") != std::string::npos);

  // The command line: exit 2, one line.
  test::ScopedEnv env("GBX_GAMBATTE_CORE", "/nonexistent/gambatte_libretro.so");
  auto r = test::run_command(test::tool("gbx-run") +
                             " verify --ref gambatte --rom builtin:ALU_LOOP --steps 2");
  CAPTURE(r.output);
  CHECK(r.exit_code == 2);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.rfind("error: ", 0) == 0);
  CHECK(r.output.find("apt-get install libretro-gambatte") != std::string::npos);
  // Only as a reference.
  auto dut = test::run_command(test::tool("gbx-run") + " verify --dut gambatte --steps 2");
  CHECK(dut.exit_code == 2);
  CHECK(dut.output.find("serves as a reference only") != std::string::npos);
}

TEST_CASE("Gambatte runs a CGB-flagged cartridge as a DMG, one env per process") {
  if (!have_core()) return;
  // ALU_LOOP with the CGB-compatible flag (0x143 = 0x80) and its header checksum redone.
  Rom base = rom_or_fail("builtin:ALU_LOOP");
  std::vector<uint8_t> bytes = base.bytes;
  bytes[0x143] = 0x80;
  uint8_t sum = 0;
  for (int i = 0x134; i <= 0x14C; ++i) sum = (uint8_t)(sum - bytes[i] - 1);
  bytes[0x14D] = sum;
  auto rom = rom_from_bytes("ALU_LOOP_CGB_FLAG", bytes);
  REQUIRE(rom.ok());
  auto g = backend("gambatte", *rom);
  // The boot ROM hands over with A = 0x01 on a DMG and 0x11 on a CGB (Pan Docs, "Power Up
  // Sequence"); the state read back is the one right after loading.
  auto s = g->get_cpu_state(0);
  REQUIRE(s.ok());
  CHECK(s->a == 0x01);
  CHECK(s->pc == 0x0100);
  // I/O registers are refused in one line rather than shown stale.
  auto io = g->read_memory(0, 0xFF00, 0xFF80);
  REQUIRE(!io.ok());
  CHECK(io.error().message.find("I/O registers") != std::string::npos);
  // A libretro core is one emulator per process.
  BackendConfig cfg;
  auto second = make_backend("gambatte", *rom, cfg);
  REQUIRE(!second.ok());
  CHECK(second.error().message.find("one env per process") != std::string::npos);
}

TEST_CASE("Gambatte replays exactly after a reset and takes the actions") {
  if (!have_core()) return;
  auto path = game("libbet.gb");
  if (!path) return;
  const Rom rom = rom_or_fail(path->string());
  auto g = backend("gambatte", rom);
  auto hold = parse_action_schedule("hold:8:16");
  REQUIRE(hold.ok());
  const std::set<int> at = {150, 400};
  const auto first = screens_at(*g, *hold, at);
  CHECK(screens_at(*g, *hold, at) == first);
  // libbet leaves its title for the game only on a button press: no input, another screen.
  CHECK(screens_at(*g, ActionGen::Noop, at).at(400) != first.at(400));
}

TEST_CASE("MEM_RWB: Gambatte's WRAM starts zeroed and agrees with GBX's after the walk") {
  if (!have_core()) return;
  // MEM_RWB writes 00, 01, ... to every address from C000 up (40 cycles a byte). Gambatte's
  // state is from its frame end, ~4500 cycles before GBX's step end, so while the walk is in
  // WRAM (steps 1-4) the two differ by the ~112 bytes written in between; after it they
  // must agree on all of WRAM. (At FF46 the walk starts an OAM DMA from ROM and the three
  // emulators' programs part: README "Verify against Gambatte".)
  const Rom rom = rom_or_fail("builtin:MEM_RWB");
  auto g = backend("gambatte", rom);
  auto cpu = backend("cpu", rom);
  REQUIRE(g->reset(0).ok());
  REQUIRE(cpu->reset(0).ok());
  auto zero = g->read_memory(0, 0xC000, 0xE000);
  REQUIRE(zero.ok());
  CHECK(std::count(zero->begin(), zero->end(), 0) == 0x2000);  // not Gambatte's fill pattern
  for (int step = 1; step <= 120; ++step) {
    REQUIRE(g->step({0}).ok());
    REQUIRE(cpu->step({0}).ok());
    if (step < 5) continue;
    CAPTURE(step);
    auto r = g->read_memory(0, 0xC000, 0xE000);
    auto d = cpu->read_memory(0, 0xC000, 0xE000);
    REQUIRE(r.ok());
    REQUIRE(d.ok());
    CHECK(*r == *d);
    CHECK(std::count(d->begin(), d->end(), 0) < 0x1000);  // the walk's bytes, not zeros
  }
}

TEST_CASE("MEM_RWB: verify against Gambatte, 1024 steps on C000:C100, matches") {
  if (!have_core()) return;
  // The first definition of done's reference run. At step 10 the walk writes FF46 and the
  // loop keeps fetching from ROM during the OAM DMA from ROM page 0x46: on a DMG the CPU then
  // reads the byte the DMA moves (Pan Docs "OAM DMA bus conflicts"), which GBX and Gambatte
  // model and mGBA does not (it parts at step 10). GBX and Gambatte agree on WRAM's first page
  // for all 1024 steps, and on OAM and HRAM through step 14; their runaway programs part
  // later (HRAM at step 15: docs/machine/accuracy.md), where no hardware source decides.
  VerifyOptions o;
  o.ref = "gambatte";
  o.rom = "builtin:MEM_RWB";
  o.steps = 1024;
  o.regions = {{0xC000, 0xC100}};
  test::TempDir dir;
  o.out_dir = dir.path;
  auto rep = run_verify(o);
  REQUIRE_MESSAGE(rep.ok(), (rep ? "" : rep.error().message));
  CHECK_MESSAGE(rep->match, rep->verdict());
  CHECK(rep->steps == 1024);
  o.steps = 14;
  o.regions = {{0xC000, 0xC100}, {0xFE00, 0xFEA0}, {0xFF80, 0xFFFF}};
  auto dma = run_verify(o);
  REQUIRE_MESSAGE(dma.ok(), (dma ? "" : dma.error().message));
  CHECK_MESSAGE(dma->match, dma->verdict());
}

TEST_CASE("verify --ref gambatte compares screens when no region is given") {
  if (!have_core()) return;
  auto path = game("2048.gb");
  if (!path) return;
  // 2048 turns the LCD off in frame 1 and on again in frame 8; step 9 shows the first frame
  // after that, which hardware leaves blank (Pan Docs, LCDC.7: "the screen will stay blank
  // during the first frame"), as Gambatte and GBX do: no divergence in 40 steps (it parted
  // at step 9 while GBX drew that frame).
  VerifyOptions o;
  o.ref = "gambatte";
  o.rom = path->string();
  o.steps = 40;
  test::TempDir dir;
  o.out_dir = dir.path;
  auto rep = run_verify(o);
  REQUIRE_MESSAGE(rep.ok(), (rep ? "" : rep.error().message));
  CHECK_MESSAGE(rep->match, rep->verdict());
  CHECK(rep->comparisons == 40);
  CHECK(rep->verdict().find("ref gambatte: screens and memory only, no registers") !=
        std::string::npos);
  // The screens are what is compared: PPU_TIMING switches the LCD off and on inside one
  // Gambatte frame, where the backend cannot tell when it went off (README "Verify against
  // Gambatte", LCD off), and the two screens differ at step 5 in 30 pixels, memory aside.
  o.rom = "builtin:PPU_TIMING";
  o.steps = 8;
  auto timing = run_verify(o);
  REQUIRE_MESSAGE(timing.ok(), (timing ? "" : timing.error().message));
  REQUIRE_FALSE(timing->match);
  CHECK(timing->mismatch_step == 5);
  REQUIRE(!timing->diffs.empty());
  CHECK(timing->diffs[0].field == "screen");
}

TEST_CASE("built-in ROMs: Gambatte's screens and VRAM match GBX's") {
  if (!have_core()) return;
  // The ROMs that neither write VRAM inside their first frame (Gambatte's state is from its
  // frame end, ~4500 cycles before GBX's step end: PPU_MODES, PPU_BENCH, ARROWS) nor switch
  // the LCD off and on inside one Gambatte frame (PPU_TIMING; README "Verify against
  // Gambatte").
  for (const char* name : {"ALU_LOOP", "MEM_RWB", "SERIAL_HELLO", "IRQ_TIMER", "IRQ_PRIORITY",
                           "HALT_BUG", "EI_DELAY", "MBC1_BANKS", "TIMER_RELOAD", "STAT_BLOCK",
                           "DMA_CONFLICT", "IE_PUSH", "APU_REGS", "JOYPAD_IRQ"}) {
    CAPTURE(name);
    VerifyOptions o;
    o.ref = "gambatte";
    o.rom = std::string("builtin:") + name;
    o.steps = 60;
    o.screen = true;
    o.regions = {{0x8000, 0xA000}};
    test::TempDir dir;
    o.out_dir = dir.path;
    auto rep = run_verify(o);
    REQUIRE_MESSAGE(rep.ok(), (rep ? "" : rep.error().message));
    CHECK_MESSAGE(rep->match, rep->verdict());
  }
}
