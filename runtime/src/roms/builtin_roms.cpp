// The built-in ROMs: the two micro-ROMs (ALU_LOOP, MEM_RWB), the project's hand-assembled test ROMs
// (core_test_roms.cpp, timing_test_roms.cpp; conventions in test_rom_kit.h) that report over
// the serial port, the PPU benchmark ROM and ARROWS. Each test ROM's expected output sits
// beside it as data and is derived from Pan Docs, not from any emulator, so the CPU core and
// mGBA can both be checked against it.
#include "gbx/runtime/roms/arrows_rom.h"
#include "gbx/runtime/roms/ppu_roms.h"
#include "test_rom_kit.h"

namespace gbx {
namespace {

using test_rom_kit::add_core_test_roms;
using test_rom_kit::add_timing_test_roms;
using test_rom_kit::spec_named;

std::vector<uint8_t> alu_loop() {
  RomSpec s = spec_named("ALU_LOOP");
  s.program = {0x3E, 0x00, 0x06, 0x00, 0x3C, 0x80, 0x04, 0x18, 0xFB};
  return build_rom(s);
}

std::vector<uint8_t> mem_rwb() {
  RomSpec s = spec_named("MEM_RWB");
  s.program = {0x21, 0x00, 0xC0, 0x3E, 0x00, 0x77, 0x3C, 0x46, 0x23, 0x18, 0xFA};
  return build_rom(s);
}

std::vector<BuiltinRom> make_table() {
  std::vector<BuiltinRom> t;
  t.push_back(
      {"ALU_LOOP", "micro-ROM: A += B, B += 1 in a tight loop (never ends)", alu_loop, "", 0});
  t.push_back({"MEM_RWB", "micro-ROM: write, read back and walk WRAM from 0xC000 (never ends)",
               mem_rwb, "", 0});
  add_core_test_roms(t);
  add_timing_test_roms(t);
  t.push_back({"PPU_BENCH",
               "pixels benchmark: full-screen BG, window, 40 objects, busy CPU, scroll + OAM DMA "
               "each frame (never ends)",
               [] { return build_ppu_rom("ppu_bench").value(); }, "", 0});
  t.push_back({"ARROWS",
               "micro-game: press the direction of the arrow on screen; score u16 at 0xC000 "
               "(never ends)",
               arrows::build_rom, "", 0});
  return t;
}

}  // namespace

const std::vector<BuiltinRom>& builtin_roms() {
  static const std::vector<BuiltinRom> table = make_table();
  return table;
}

const BuiltinRom* find_builtin_rom(const std::string& name) {
  for (const BuiltinRom& r : builtin_roms())
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace gbx