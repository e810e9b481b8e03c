// ROMs the specializer tests share: assembled() places an Asm program in a 32 KiB ROM, and
// phase_rom() runs two loops one after the other, as a title screen and a game.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"

namespace gbx::test {

inline Rom assembled(const std::string& title, Asm& a) {
  RomSpec spec;
  spec.title = title;
  auto placed = a.place(spec);
  REQUIRE_MESSAGE(placed.ok(), (placed.ok() ? "" : placed.error().message));
  auto rom = rom_from_bytes(title, build_rom(spec));
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  return rom.value();
}

// Two phases, as a title screen and a game: ~14 frames of one loop (0x5000 rounds of 12
// M-cycles), then another loop for ever.
inline Rom phase_rom() {
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD HL,d16", 0x5000).op("LD C,d8", 0);
  a.label("title")
      .op("INC C")
      .op("LD A,C")
      .op("ADD A,d8", 3)
      .op("LD C,A")
      .op("DEC HL")
      .op("LD A,H")
      .op("OR L")
      .op("JR NZ,r8", "title");
  a.label("game")
      .op("INC D")
      .op("LD A,D")
      .op("XOR d8", 0x5A)
      .op("LD D,A")
      .op("INC E")
      .op("JR r8", "game");
  return assembled("PHASES", a);
}

}  // namespace gbx::test
