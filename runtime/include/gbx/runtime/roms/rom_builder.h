#pragma once
// The project's ROM builder: valid DMG cartridge images from program bytes, plus the
// built-in micro-ROMs (never downloaded). Programs are hand-assembled with gbx::Asm.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gbx/engine/result.h"

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

// A full image: entry, header, header and global checksums (no logo bytes). Unused bytes
// are 0x00. Errors: size code above 8 MiB, title too long or not printable ASCII, program or
// patch outside the image, a patch over the header (0x0100-0x014F) or over other bytes.
Result<std::vector<uint8_t>> try_build_rom(const RomSpec& spec);
// The same for specs known to be valid (the built-in table): a bad spec is a programming
// error and aborts with the message.
std::vector<uint8_t> build_rom(const RomSpec& spec);

struct BuiltinRom {
  std::string name;
  std::string description;
  std::function<std::vector<uint8_t>()> build;
  // Exact text the ROM sends over the serial port (SB, then 0x81 to SC, per byte), derived
  // from Pan Docs semantics; "" for ROMs that print nothing.
  std::string expected_serial;
  // Frames after which the ROM has printed everything and sits in its final `JR -2` loop,
  // with room for the slowest serial (a real DMG and mGBA take 4096 T-cycles per byte); 0
  // for ROMs that loop forever by design (ALU_LOOP, MEM_RWB).
  int frames_to_finish = 0;
};

// ALU_LOOP, MEM_RWB (micro-ROMs: an endless ALU loop, an endless WRAM walk) and the
// project's own test ROMs.
const std::vector<BuiltinRom>& builtin_roms();
const BuiltinRom* find_builtin_rom(const std::string& name);

}  // namespace gbx
