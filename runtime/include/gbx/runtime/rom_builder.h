#pragma once
// The project's ROM builder: valid DMG cartridge images from program bytes, plus the
// built-in micro-ROMs (never downloaded). Programs are hand-assembled with gbx::Asm.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gbx {

struct RomSpec {
  std::string title = "GBX";
  uint8_t cart_type = 0x00;
  uint8_t rom_size_code = 0x00;  // 0 = 32 KiB, n = 32 KiB << n
  uint8_t ram_size_code = 0x00;
  std::vector<uint8_t> program;  // placed at 0x0150; entry at 0x0100 is `00 C3 50 01`
  // Extra bytes at absolute ROM offsets (interrupt vectors, code in other banks).
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> patches;
};

// A full image: entry, header, header and global checksums (no logo bytes).
std::vector<uint8_t> build_rom(const RomSpec& spec);

struct BuiltinRom {
  std::string name;
  std::string description;
  std::function<std::vector<uint8_t>()> build;
};

// ALU_LOOP, MEM_RWB (the design's micro-ROMs) and the project's own test ROMs.
const std::vector<BuiltinRom>& builtin_roms();
const BuiltinRom* find_builtin_rom(const std::string& name);

}  // namespace gbx
