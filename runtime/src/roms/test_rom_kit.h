// What the built-in test ROMs share (core_test_roms.cpp, timing_test_roms.cpp): an assembler
// with serial print routines, HRAM scratch addresses and the frame budget of a printed text.
//
// Conventions shared by the test ROMs:
// - Each starts with DI and SP = 0xFFFE and ends in `done: JR done` (18 FE) with IME = 0.
// - A byte is printed by writing SB, then 0x81 to SC (internal clock), then waiting until
//   SC bit 7 reads 0. A DMG (and mGBA) takes 4096 T-cycles per byte, GBX completes at once;
//   waiting makes the program's course the same on both. Completion sets IF bit 3, so
//   programs that enable interrupts keep IE bit 3 clear except where the test is about it.
// - Scratch variables live in HRAM (0xFF80...), the stack below 0xFFFE.
// - Nothing but PPU_TIMING depends on the PPU: IF is cleared (or set) explicitly before
//   interrupts are enabled, and IE enables only the sources under test.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom_builder.h"

namespace gbx::test_rom_kit {

constexpr uint16_t kCount = 0xFF80;  // HRAM: interrupts taken
constexpr uint16_t kSeenB = 0xFF81;  // HRAM: B as the ISR saw it
constexpr int kCyclesPerFrame = 70224;

// Frames to print `text`: 4096 T-cycles per serial byte (DMG internal clock, 8192 Hz) plus
// a generous allowance for the code around each byte and for set-up.
inline int frames_for(const std::string& text, int extra_cycles = 0) {
  const long cycles = static_cast<long>(text.size()) * (4096 + 400) + 20000 + extra_cycles;
  return static_cast<int>((cycles + kCyclesPerFrame - 1) / kCyclesPerFrame) + 1;
}

// An assembler with the serial print routines and a pool of strings appended at the end.
class Program {
 public:
  Asm a;

  // Main code at 0x0150, where the entry point jumps.
  void begin() {
    a.org(0x0150);
    a.op("DI").op("LD SP,d16", 0xFFFE);
  }
  // Prints `text` (clobbers A, HL).
  void print(const std::string& text) {
    const std::string label = "str" + std::to_string(strings_.size());
    strings_.emplace_back(label, text);
    a.op("LD HL,d16", label).op("CALL a16", "print_str");
  }
  // Prints A as two hex digits (clobbers A).
  void print_hex_a() { a.op("CALL a16", "print_hex"); }
  void print_hex_at(uint16_t hram) { a.op("LDH A,(a8)", hram).op("CALL a16", "print_hex"); }

  std::vector<uint8_t> finish(RomSpec spec) {
    a.label("done").op("JR r8", "done");
    emit_serial_lib();
    for (const auto& [label, text] : strings_) a.label(label).asciz(text);
    if (auto st = a.place(spec); !st) {
      std::fprintf(stderr, "gbx: internal error: builtin ROM %s: %s\n", spec.title.c_str(),
                   st.error().message.c_str());
      std::abort();
    }
    return build_rom(spec);
  }

 private:
  void emit_serial_lib() {
    // print_char: A = byte. Clobbers A.
    a.label("print_char")
        .op("LDH (a8),A", io::kSB)
        .op("LD A,d8", 0x81)
        .op("LDH (a8),A", io::kSC)
        .label("print_char_wait")
        .op("LDH A,(a8)", io::kSC)
        .op("AND d8", 0x80)
        .op("JR NZ,r8", "print_char_wait")
        .op("RET");
    // print_str: HL = zero-terminated string. Clobbers A, HL.
    a.label("print_str")
        .op("LD A,(HL+)")
        .op("AND A")
        .op("RET Z")
        .op("CALL a16", "print_char")
        .op("JR r8", "print_str");
    // print_hex: A as two upper-case hex digits. Clobbers A.
    a.label("print_hex")
        .op("PUSH BC")
        .op("LD B,A")
        .op("SWAP A")
        .op("CALL a16", "print_nibble")
        .op("LD A,B")
        .op("CALL a16", "print_nibble")
        .op("POP BC")
        .op("RET");
    a.label("print_nibble")
        .op("AND d8", 0x0F)
        .op("CP d8", 10)
        .op("JR C,r8", "print_nibble_digit")
        .op("ADD A,d8", 'A' - '0' - 10)
        .label("print_nibble_digit")
        .op("ADD A,d8", '0')
        .op("JP a16", "print_char");
  }

  std::vector<std::pair<std::string, std::string>> strings_;
};

inline RomSpec spec_named(const char* title) {
  RomSpec s;
  s.title = title;
  return s;
}

// The table entries of each family, in table order.
void add_core_test_roms(std::vector<BuiltinRom>& t);
void add_timing_test_roms(std::vector<BuiltinRom>& t);

}  // namespace gbx::test_rom_kit
