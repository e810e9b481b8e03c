#pragma once
// Test ROMs for the scanline renderer, one per PPU feature, hand-assembled with gbx::Asm.
// Each sets up VRAM / OAM with the LCD off, turns it on and sleeps; raster scenes change
// registers between lines from an LYC interrupt that waits for that line's HBlank.
// tests/data/ppu_*.png hold what each must show (drawn by scripts/ppu_goldens.py from Pan
// Docs semantics, not by this renderer).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

// One register write from the raster interrupt: at LY == line's HBlank, (0xFF00 + reg) = value,
// so it takes effect from line + 1 on.
struct RasterWrite {
  uint8_t line;
  uint8_t reg;
  uint8_t value;
};

struct PpuScene {
  std::string title = "GBX PPU";  // cartridge header title (at most 16 characters)
  std::vector<std::pair<uint16_t, std::vector<uint8_t>>> copies;  // bytes into VRAM/OAM/WRAM
  std::vector<std::pair<uint8_t, uint8_t>> regs;                  // (0xFF00 + reg) = value
  uint8_t lcdc = 0x91;
  std::vector<RasterWrite> raster;  // in line order, lines 0-143, at most one per line
  // Benchmark load: the CPU runs an ALU loop instead of sleeping, and a VBlank handler moves
  // the BG (SCX + 1) and copies shadow OAM at 0xC000 with OAM DMA every frame.
  bool busy = false;
  int lcd_off_after_frames = 0;  // > 0: the main loop turns the LCD off (in VBlank) after this
  // > 0: after this many VBlanks the main loop executes LD B,B with B,C,D,E,H,L =
  // 3,5,8,13,21,34 (the mooneye pass signal), so `gbx-run testrom --expect-png` compares the
  // screen there. The frame before it is complete, so the screen is the scene.
  int ldbb_after_frames = 0;
};

Result<std::vector<uint8_t>> build_ppu_scene_rom(const PpuScene& scene);

// Tile data helpers: 16 bytes per 8x8 tile, pixel (r, c) colour from f(r, c).
std::vector<uint8_t> make_tile(int (*colour)(int r, int c));
std::vector<uint8_t> solid_tile(int colour);

// The scenes of tests/test_pixels.cpp and the pixels benchmark (names as in tests/data).
std::vector<std::string> ppu_rom_names();
Result<std::vector<uint8_t>> build_ppu_rom(const std::string& name);

}  // namespace gbx
