#pragma once
// ARROWS: the micro-game an agent learns to play (issue [E].8, README "The ARROWS game").
// The screen shows one big arrow (7x7 solid BG tiles, 56x56 pixels, centred); pressing the
// matching direction scores a point, any other direction does not; every direction press
// starts a new round with a new arrow drawn from an 8-bit LFSR that advances once per frame,
// so the arrows an agent meets depend on when it presses (and on reset no-op frames).
#include <array>
#include <cstdint>
#include <vector>

namespace gbx::arrows {

// Game state in WRAM (read it with ram()/ram16() in reward expressions or read_memory).
constexpr uint16_t kScore = 0xC000;    // u16 LE: correct presses since reset
constexpr uint16_t kArrow = 0xC002;    // current arrow: 0 right, 1 left, 2 up, 3 down
constexpr uint16_t kRng = 0xC003;      // LFSR state (never 0)
constexpr uint16_t kPrevPad = 0xC004;  // direction bits held at the last frame (P1 sense, 1 = down)
constexpr uint16_t kRounds = 0xC005;   // u16 LE: direction presses since reset (right or wrong)

// The arrow occupies BG map tiles (kTileRow..+6, kTileCol..+6) of 0x9800 with SCX = SCY = 0:
// screen pixels x in [kTileCol*8, kTileCol*8+56), y in [kTileRow*8, kTileRow*8+56).
constexpr int kTileRow = 5;
constexpr int kTileCol = 6;
constexpr int kSize = 7;

// 1 where arrow `index` has a solid (shade 3) tile, row-major 7x7.
std::array<uint8_t, kSize * kSize> arrow_cells(int index);

std::vector<uint8_t> build_rom();

}  // namespace gbx::arrows
