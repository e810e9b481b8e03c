#pragma once
// Test-ROM runner: runs a ROM on one env until it reports a result by its suite's own pass
// rule, or until a frame limit. The rules:
//  - mooneye: `LD B,B` (opcode 0x40) executed with B,C,D,E,H,L = 3,5,8,13,21,34 is a pass,
//    anything else a failure (all six = 0x42: the test's own failure signal). Detected with
//    the kernel debug option "ldbb_trap".
//  - blargg: the text sent over the serial port contains "Passed" or "Failed"; or A001-A003
//    hold DE B0 61 and A000 is the result code (0 = pass; 0x80 running, 0x81 wants a reset),
//    zero-terminated text from A004; or, for the ROMs that only print to the screen
//    (halt_bug), the text on the screen (the background tile map read as ASCII: blargg's
//    console writes each character's code as its tile number) contains "Passed" or "Failed".
//    `LD B,B` is ordinary code here (cpu_instrs and instr_timing execute it).
//  - image: at `LD B,B` the last complete frame must equal a PNG, 160x144, whose pixels are
//    taken as the nearest of the four greys (0xFF, 0xAA, 0x55, 0x00 = shades 0-3; colour PNGs
//    by their luminance). dmg-acid2 and Mealybug Tearoom signal "drawn" with LD B,B.
//  - gbmicrotest (aappleby/gbmicrotest's own rule): HRAM FF82 = 0x01 is a pass, 0xFF a
//    failure (FF80: the value the test read, FF81: the value hardware reads); looked for after
//    every frame, for at most 60 frames from power-on (the suite's limit; --frames can lower it).
//  - any: for ROMs of no known suite (the project's own): the first of the conventions
//    above that the ROM shows (LD B,B is the mooneye verdict, or the image one with a PNG).
// The rule is chosen per suite from the ROM's path (resolve_test_rom), or given explicitly.
#include <cstdint>
#include <string>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx {

enum class TestRomRule { Auto, Mooneye, Blargg, Image, Gbmicrotest, Any };

// "auto" | "mooneye" | "blargg" | "image" | "gbmicrotest" | "any"; a usage error names the
// choices.
Result<TestRomRule> parse_test_rom_rule(const std::string& name);
const char* test_rom_rule_name(TestRomRule rule);

// The suite a ROM path belongs to, from its folders and file name (the innermost match
// wins): "mooneye", "blargg" (a folder named blargg, or one of blargg's test names:
// cpu_instrs, instr_timing, mem_timing, halt_bug, oam_bug, dmg_sound, cgb_sound,
// interrupt_time), "dmg-acid2" (a name holding "acid2"), "mealybug"; "" if none. A folder
// named gbmicrotest anywhere in the path wins over the others (its ROM names overlap blargg's:
// halt_bug).
std::string test_rom_suite(const std::string& path);

// What one ROM is judged by: its rule and, for an image test, the PNG.
struct TestRomPlan {
  std::string suite;  // test_rom_suite of the path
  TestRomRule rule = TestRomRule::Any;
  std::string expect_png;
  std::string skip;  // not empty: the ROM has no expectation to judge it by (why)
};

// Resolves `rule` (Auto: from the suite; an explicit --expect-png makes it Image) and the
// PNG of an image test: `expect_png` if given, else the suite's own (dmg-acid2:
// reference-dmg.png beside the ROM; Mealybug: expected-dmg/<name>.png beside it, and a ROM
// without one is skipped, as Mealybug has no DMG expectation for 7 of its ROMs).
TestRomPlan resolve_test_rom(const std::string& path, TestRomRule rule,
                             const std::string& expect_png);

// The most frames a gbmicrotest ROM runs (the suite's rule).
constexpr int64_t kGbmicrotestFrames = 60;

struct TestRomOptions {
  std::string backend = "cpu";
  int64_t max_frames = 3600;  // one emulated minute
  int frames_per_check = 10;  // results are looked for between steps of this many frames
  bool verbose = false;
  TestRomRule rule = TestRomRule::Any;  // Auto is taken as Any: resolve it first
  std::string expect_png;               // image rule: compare the screen at LD B,B with this PNG
  // The declared options of gbx-run testrom (gbx/runtime/backends/options.h: --ppu); one
  // absent takes the command line's default (with_defaults). The backend's BackendConfig is
  // made from them (apply_options), then the suite's rule sets what it needs to watch.
  OptionValues options;
  std::string screen_out;  // image rule: also write the screen at LD B,B here (PNG)
};

struct TestRomResult {
  bool passed = false;
  // "mooneye", "blargg-serial", "blargg-memory", "blargg-screen", "image", "gbmicrotest", ""
  // (no verdict)
  std::string convention;
  std::string detail;  // what was seen (registers, text, result code, timeout)
  int64_t frames = 0;  // frames run until the verdict
};

Result<TestRomResult> run_test_rom(const Rom& rom, const TestRomOptions& options);

// Shade (0-3) of an 8-bit grey: the nearest of kShadeGrey.
uint8_t shade_of_grey(uint8_t grey);

// The text of a 32x32 background tile map (1024 tile numbers, row-major) as blargg's console
// writes it: rows of printable ASCII tile numbers, other tiles as spaces, trailing spaces and
// empty rows at the end dropped, rows joined with '\n'.
std::string tile_map_text(const uint8_t* map);

}  // namespace gbx
