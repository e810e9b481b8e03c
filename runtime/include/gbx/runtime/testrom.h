#pragma once
// Test-ROM runner: runs a ROM on one env until it reports a result by one of the common
// conventions of public Game Boy test suites, or until a frame limit.
//  - mooneye: `LD B,B` (opcode 0x40) executed with B,C,D,E,H,L = 3,5,8,13,21,34 is a pass,
//    with all six = 0x42 a failure. Detected with the kernel debug option "ldbb_trap".
//  - blargg (serial): the text sent over the serial port contains "Passed" or "Failed".
//  - blargg (memory): A001-A003 hold DE B0 61; A000 is 0x80 while running (0x81: wants a
//    reset), else the result code (0 = pass); zero-terminated text from A004.
//  - image: with `expect_png`, the verdict at `LD B,B` is the screen instead of the registers
//    (dmg-acid2 and similar suites signal "drawn" with LD B,B): the last complete frame must
//    equal the PNG, 160x144, whose pixels are taken as the nearest of the four greys
//    (0xFF, 0xAA, 0x55, 0x00 = shades 0-3; colour PNGs by their luminance).
#include <cstdint>
#include <string>

#include "gbx/engine/result.h"
#include "gbx/runtime/rom.h"

namespace gbx {

struct TestRomOptions {
  std::string backend = "cpu";
  int64_t max_frames = 3600;  // one emulated minute
  int frames_per_check = 10;  // results are looked for between steps of this many frames
  bool verbose = false;
  std::string expect_png;  // image test: compare the screen at LD B,B with this PNG
};

struct TestRomResult {
  bool passed = false;
  std::string convention;  // "mooneye", "blargg-serial", "blargg-memory", "" (no verdict)
  std::string detail;      // what was seen (registers, text, result code, timeout)
  int64_t frames = 0;      // frames run until the verdict
};

Result<TestRomResult> run_test_rom(const Rom& rom, const TestRomOptions& options);

// Shade (0-3) of an 8-bit grey: the nearest of kShadeGrey.
uint8_t shade_of_grey(uint8_t grey);

}  // namespace gbx
