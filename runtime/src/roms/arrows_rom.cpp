// The ARROWS micro-game (arrows_rom.h), hand-assembled with gbx::Asm. Hardware facts from
// Pan Docs: P1 (FF00) with bit 4 = 0 selects the d-pad, whose lines read 0 when pressed
// (bit 0 right, 1 left, 2 up, 3 down); VRAM is free to write in VBlank (mode 1) and with the
// LCD off; the LCD may be turned off only in VBlank; the VBlank interrupt vector is 0x0040.
#include "gbx/runtime/roms/arrows_rom.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom_builder.h"

namespace gbx::arrows {
namespace {

// The right-pointing arrow; the others are its mirror and transposes.
constexpr const char* kRight[kSize] = {
    "...#...",  //
    "...##..",  //
    "######.",  //
    "#######",  //
    "######.",  //
    "...##..",  //
    "...#...",  //
};

constexpr uint16_t kMap = 0x9800;
constexpr uint16_t kArrowMap = kMap + kTileRow * 32 + kTileCol;

}  // namespace

std::array<uint8_t, kSize * kSize> arrow_cells(int index) {
  std::array<uint8_t, kSize * kSize> c{};
  for (int r = 0; r < kSize; ++r)
    for (int k = 0; k < kSize; ++k) {
      int rr = r, kk = k;
      if (index == 2 || index == 3) std::swap(rr, kk);    // up/down: transposed left/right
      if (index == 1 || index == 2) kk = kSize - 1 - kk;  // left: mirrored right
      c[r * kSize + k] = kRight[rr][kk] == '#';
    }
  return c;
}

std::vector<uint8_t> build_rom() {
  Asm a;
  a.org(0x0040).op("RETI");  // VBlank: only wakes the HALT in the main loop
  a.org(0x0150);
  a.op("DI").op("LD SP,d16", 0xFFFE);
  a.label("wait_vblank").op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR NZ,r8", "wait_vblank");
  a.op("XOR A").op("LDH (a8),A", io::kLCDC);
  // Tile 0 blank, tile 1 solid shade 3 (tile data at 0x8000, LCDC bit 4 = 1).
  a.op("LD HL,d16", 0x8000).op("LD B,d8", 16).op("XOR A");
  a.label("tile0").op("LD (HL+),A").op("DEC B").op("JR NZ,r8", "tile0");
  a.op("LD B,d8", 16).op("LD A,d8", 0xFF);
  a.label("tile1").op("LD (HL+),A").op("DEC B").op("JR NZ,r8", "tile1");
  // The whole 32x32 BG map blank.
  a.op("LD HL,d16", kMap).op("LD BC,d16", 0x400);
  a.label("clear").op("XOR A").op("LD (HL+),A").op("DEC BC").op("LD A,B").op("OR C");
  a.op("JR NZ,r8", "clear");
  // Game state: score 0, rounds 0, arrow 0 (right), LFSR 1, no direction held.
  a.op("XOR A");
  for (uint16_t addr :
       {kScore, (uint16_t)(kScore + 1), kArrow, kPrevPad, kRounds, (uint16_t)(kRounds + 1)})
    a.op("LD (a16),A", addr);
  a.op("INC A").op("LD (a16),A", kRng);
  a.op("CALL a16", "draw");
  a.op("XOR A").op("LDH (a8),A", 0x42).op("LDH (a8),A", 0x43);  // SCY = SCX = 0
  a.op("LD A,d8", 0xE4).op("LDH (a8),A", 0x47);                 // BGP: shade = colour
  a.op("LD A,d8", 0x91).op("LDH (a8),A", io::kLCDC);            // LCD, BG on; tiles 0x8000
  a.op("LD A,d8", 0x01).op("LDH (a8),A", io::kIE);              // VBlank only
  a.op("XOR A").op("LDH (a8),A", io::kIF).op("EI");

  // Once per frame, at the start of VBlank.
  a.label("main").op("HALT").op("NOP");
  // 8-bit Galois LFSR (taps 0xB8: x^8+x^6+x^5+x^4+1, period 255), one step a frame.
  a.op("LD A,(a16)", kRng).op("SRL A").op("JR NC,r8", "rng_done").op("XOR d8", 0xB8);
  a.label("rng_done").op("LD (a16),A", kRng);
  // B = directions held now (1 = pressed), C = those newly pressed since the last frame.
  a.op("LD A,d8", 0x20).op("LDH (a8),A", 0x00);
  a.op("LDH A,(a8)", 0x00).op("LDH A,(a8)", 0x00);  // the second read lets the lines settle
  a.op("CPL").op("AND d8", 0x0F).op("LD B,A");
  a.op("LD A,d8", 0x30).op("LDH (a8),A", 0x00);
  a.op("LD A,(a16)", kPrevPad).op("CPL").op("AND B").op("LD C,A");
  a.op("LD A,B").op("LD (a16),A", kPrevPad);
  a.op("LD A,C").op("AND A").op("JR Z,r8", "main");
  // A round: count it, score it if C is exactly the arrow's direction, draw a new arrow.
  a.op("LD HL,d16", kRounds).op("INC (HL)").op("JR NZ,r8", "rounds_done").op("INC HL");
  a.op("INC (HL)");
  a.label("rounds_done");
  a.op("LD A,(a16)", kArrow).op("LD E,A").op("LD D,d8", 0).op("LD HL,d16", "masks");
  a.op("ADD HL,DE").op("LD A,(HL)").op("CP C").op("JR NZ,r8", "new_arrow");
  a.op("LD HL,d16", kScore).op("INC (HL)").op("JR NZ,r8", "new_arrow").op("INC HL");
  a.op("INC (HL)");
  a.label("new_arrow").op("LD A,(a16)", kRng).op("AND d8", 3).op("LD (a16),A", kArrow);
  a.op("CALL a16", "draw").op("JP a16", "main");

  // draw: copies arrow kArrow's 7x7 tile numbers into the BG map (VBlank or LCD off only).
  a.label("draw").op("LD A,(a16)", kArrow).op("LD HL,d16", "shapes");
  a.op("LD DE,d16", kSize * kSize).op("AND A");
  a.label("draw_seek").op("JR Z,r8", "draw_found").op("ADD HL,DE").op("DEC A");
  a.op("JR r8", "draw_seek");
  a.label("draw_found").op("LD DE,d16", kArrowMap).op("LD C,d8", kSize);
  a.label("draw_row").op("LD B,d8", kSize);
  a.label("draw_cell").op("LD A,(HL+)").op("LD (DE),A").op("INC DE").op("DEC B");
  a.op("JR NZ,r8", "draw_cell");
  a.op("LD A,E").op("ADD A,d8", 32 - kSize).op("LD E,A").op("JR NC,r8", "draw_next");
  a.op("INC D");
  a.label("draw_next").op("DEC C").op("JR NZ,r8", "draw_row").op("RET");

  a.label("masks").db({0x01, 0x02, 0x04, 0x08});  // P1 bit of right, left, up, down
  a.label("shapes");
  for (int i = 0; i < 4; ++i) {
    const auto cells = arrow_cells(i);
    a.bytes(std::vector<uint8_t>(cells.begin(), cells.end()));
  }

  RomSpec spec;
  spec.title = "ARROWS";
  if (auto st = a.place(spec); !st) {
    std::fprintf(stderr, "gbx: internal error: builtin ROM ARROWS: %s\n",
                 st.error().message.c_str());
    std::abort();
  }
  return build_rom(spec);
}

}  // namespace gbx::arrows
