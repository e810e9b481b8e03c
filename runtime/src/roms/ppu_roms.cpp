#include "gbx/runtime/roms/ppu_roms.h"

#include <cctype>

#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom_builder.h"

namespace gbx {

std::vector<uint8_t> make_tile(int (*colour)(int r, int c)) {
  std::vector<uint8_t> t(16, 0);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      const int v = colour(r, c);
      if (v & 1) t[2 * r] |= (uint8_t)(0x80 >> c);
      if (v & 2) t[2 * r + 1] |= (uint8_t)(0x80 >> c);
    }
  return t;
}

std::vector<uint8_t> solid_tile(int colour) {
  std::vector<uint8_t> t(16);
  for (int r = 0; r < 8; ++r) {
    t[2 * r] = (colour & 1) ? 0xFF : 0x00;
    t[2 * r + 1] = (colour & 2) ? 0xFF : 0x00;
  }
  return t;
}

namespace {

constexpr uint16_t kDataStart = 0x1000;   // ROM address of the scene's data blocks
constexpr uint16_t kRasterPtr = 0xFF80;   // HRAM: pointer to the next raster table entry
constexpr uint16_t kDmaRoutine = 0xFF82;  // HRAM: OAM DMA routine (the ROM bus is busy)

}  // namespace

Result<std::vector<uint8_t>> build_ppu_scene_rom(const PpuScene& scene) {
  Asm a;
  int n = 0;
  auto uniq = [&](const char* stem) { return std::string(stem) + std::to_string(n++); };
  // Data blocks first, so the program knows their addresses.
  std::vector<uint16_t> src;
  uint16_t at = kDataStart;
  for (const auto& c : scene.copies) {
    src.push_back(at);
    at = (uint16_t)(at + c.second.size());
  }
  const uint16_t table = at;
  std::vector<uint8_t> raster;  // entries: reg, value, LYC of the next entry; then a 0 reg
  for (size_t i = 0; i < scene.raster.size(); ++i) {
    const auto& w = scene.raster[i];
    raster.insert(raster.end(), {w.reg, w.value, scene.raster[(i + 1) % scene.raster.size()].line});
  }
  raster.push_back(0);

  a.op("DI");
  // The LCD goes off only in VBlank (Pan Docs "LCDC.7").
  const std::string vb = uniq("vblank");
  a.label(vb).op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR NZ,r8", vb);
  a.op("XOR A").op("LDH (a8),A", 0x40);
  for (size_t i = 0; i < scene.copies.size(); ++i) {
    const std::string loop = uniq("copy");
    a.op("LD HL,d16", scene.copies[i].first).op("LD DE,d16", src[i]);
    a.op("LD BC,d16", (int)scene.copies[i].second.size());
    a.label(loop).op("LD A,(DE)").op("LD (HL+),A").op("INC DE").op("DEC BC");
    a.op("LD A,B").op("OR C").op("JR NZ,r8", loop);
  }
  for (const auto& r : scene.regs) a.op("LD A,d8", r.second).op("LDH (a8),A", r.first);
  uint8_t ie = 0;
  if (!scene.raster.empty()) {
    a.op("LD A,d8", table & 0xFF).op("LDH (a8),A", kRasterPtr & 0xFF);
    a.op("LD A,d8", table >> 8).op("LDH (a8),A", (kRasterPtr + 1) & 0xFF);
    a.op("LD A,d8", scene.raster[0].line).op("LDH (a8),A", 0x45);
    a.op("LD A,d8", 0x40).op("LDH (a8),A", 0x41);  // STAT: LYC interrupt
    ie |= 0x02;
  }
  if (scene.busy) {
    const uint8_t dma[] = {0xE0, 0x46, 0x3E, 0x28, 0x3D, 0x20, 0xFD, 0xC9};
    for (int i = 0; i < 8; ++i) a.op("LD A,d8", dma[i]).op("LDH (a8),A", (kDmaRoutine + i) & 0xFF);
    ie |= 0x01;
  }
  a.op("LD A,d8", scene.lcdc).op("LDH (a8),A", 0x40);
  a.op("XOR A").op("LDH (a8),A", 0x0F);
  a.op("LD A,d8", ie).op("LDH (a8),A", 0xFF);
  a.op("EI");
  if (scene.lcd_off_after_frames > 0) {
    const std::string w1 = uniq("w"), w2 = uniq("w");
    a.op("LD B,d8", scene.lcd_off_after_frames);
    a.label(w1).op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR NZ,r8", w1);
    a.label(w2).op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR Z,r8", w2);
    a.op("DEC B").op("JR NZ,r8", w1);
    const std::string w3 = uniq("w");
    a.label(w3).op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR NZ,r8", w3);
    a.op("LD A,d8", scene.lcdc & 0x7F).op("LDH (a8),A", 0x40);
  }
  if (scene.ldbb_after_frames > 0) {
    const std::string w1 = uniq("w"), w2 = uniq("w");
    a.op("LD B,d8", scene.ldbb_after_frames);
    a.label(w1).op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR NZ,r8", w1);
    a.label(w2).op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR Z,r8", w2);
    a.op("DEC B").op("JR NZ,r8", w1);
    a.op("LD B,d8", 3).op("LD C,d8", 5).op("LD D,d8", 8).op("LD E,d8", 13);
    a.op("LD H,d8", 21).op("LD L,d8", 34).op("LD B,B");
  }
  if (scene.busy) {
    a.label("main").op("INC A").op("ADD A,B").op("INC B").op("JR r8", "main");
  } else {
    a.label("main").op("HALT").op("JR r8", "main");
  }

  // VBlank (busy load): scroll, then OAM DMA from the shadow OAM at 0xC000.
  a.label("vblank_isr").op("PUSH AF").op("LDH A,(a8)", 0x43).op("INC A").op("LDH (a8),A", 0x43);
  a.op("LD A,d8", 0xC0).op("CALL a16", kDmaRoutine).op("POP AF").op("RETI");
  // LYC: wait for this line's HBlank, apply the entry, arm the next line.
  a.label("stat_isr").op("PUSH AF").op("PUSH BC").op("PUSH HL");
  a.op("LDH A,(a8)", kRasterPtr & 0xFF).op("LD L,A").op("LDH A,(a8)", (kRasterPtr + 1) & 0xFF);
  a.op("LD H,A");
  // Mode 3 first, then mode 0: STAT also reads mode 0 for the last M-cycle of line 153
  // (hw/ppu.h ppu_mode), where the LYC-0 handler starts; this line's HBlank comes after its
  // mode 3.
  a.label("drawing").op("LDH A,(a8)", 0x41).op("AND d8", 3).op("CP d8", 3);
  a.op("JR NZ,r8", "drawing");
  a.label("hblank").op("LDH A,(a8)", 0x41).op("AND d8", 3).op("JR NZ,r8", "hblank");
  a.op("LD A,(HL+)").op("LD C,A").op("LD A,(HL+)").op("LDH (C),A");
  a.op("LD A,(HL+)").op("LDH (a8),A", 0x45);
  a.op("LD A,(HL)").op("OR A").op("JR NZ,r8", "keep").op("LD HL,d16", table);
  a.label("keep").op("LD A,L").op("LDH (a8),A", kRasterPtr & 0xFF).op("LD A,H");
  a.op("LDH (a8),A", (kRasterPtr + 1) & 0xFF);
  a.op("POP HL").op("POP BC").op("POP AF").op("RETI");

  a.org(0x40).op("JP a16", "vblank_isr");
  a.org(0x48).op("JP a16", "stat_isr");
  a.org(kDataStart);
  for (const auto& c : scene.copies) a.bytes(c.second);
  a.bytes(raster);

  RomSpec spec;
  spec.title = scene.title;
  if (auto st = a.place(spec); !st) return st.take_error();
  return try_build_rom(spec);
}

namespace {

int arrow(int r, int c) { return r == 0 ? 3 : c == 0 ? 2 : r == c ? 1 : 0; }

// Tiles 0-3 solid colours 0-3, 4 the asymmetric arrow (flips show), 5 solid 0, 6 solid 1,
// 7 solid 3.
std::vector<uint8_t> tile_set() {
  std::vector<uint8_t> t;
  for (int c : {0, 1, 2, 3}) {
    auto s = solid_tile(c);
    t.insert(t.end(), s.begin(), s.end());
  }
  auto p = make_tile(arrow);
  t.insert(t.end(), p.begin(), p.end());
  for (int c : {0, 1, 3}) {
    auto s = solid_tile(c);
    t.insert(t.end(), s.begin(), s.end());
  }
  return t;
}

std::vector<uint8_t> tile_map(int (*tile)(int tx, int ty)) {
  std::vector<uint8_t> m(1024);
  for (int ty = 0; ty < 32; ++ty)
    for (int tx = 0; tx < 32; ++tx) m[ty * 32 + tx] = (uint8_t)tile(tx, ty);
  return m;
}

std::vector<uint8_t> oam(const std::vector<std::vector<int>>& objs) {  // {x, y, tile, attr}
  std::vector<uint8_t> o(160, 0);
  for (size_t i = 0; i < objs.size() && i < 40; ++i) {
    const auto& s = objs[i];
    o[i * 4] = (uint8_t)(s[1] + 16);
    o[i * 4 + 1] = (uint8_t)(s[0] + 8);
    o[i * 4 + 2] = (uint8_t)s[2];
    o[i * 4 + 3] = (uint8_t)s[3];
  }
  return o;
}

int diagonal(int tx, int ty) { return (tx + ty) % 4; }

PpuScene bg_scroll() {
  PpuScene s;
  std::vector<uint8_t> signed_tiles;  // tiles 0-3 at 0x9000 (LCDC.4 = 0): colours 3-0
  for (int c : {3, 2, 1, 0}) {
    auto t = solid_tile(c);
    signed_tiles.insert(signed_tiles.end(), t.begin(), t.end());
  }
  s.copies = {{0x8000, tile_set()},
              {0x9000, signed_tiles},
              {0x9800, tile_map(diagonal)},
              {0x9C00, tile_map(diagonal)}};
  s.regs = {{0x42, 5}, {0x43, 3}, {0x47, 0xE4}};
  s.lcdc = 0x91;
  // Lower half: map 0x9C00 and signed tile data at 0x9000.
  s.raster = {{71, 0x40, 0x89}, {143, 0x40, 0x91}};
  return s;
}

PpuScene window() {
  PpuScene s;
  s.copies = {{0x8000, tile_set()},
              {0x9800, tile_map([](int, int) { return 0; })},
              {0x9C00, tile_map([](int, int ty) { return 1 + ty % 3; })}};
  s.regs = {{0x47, 0xE4}, {0x4A, 16}, {0x4B, 39}};
  s.lcdc = 0xF1;
  // Window off for lines 40-59: its line counter stops there and goes on from 24 at line 60.
  s.raster = {{39, 0x40, 0xD1}, {59, 0x40, 0xF1}};
  return s;
}

PpuScene sprites() {
  PpuScene s;
  std::vector<std::vector<int>> o = {
      {8, 8, 4, 0x00},   {24, 8, 4, 0x20}, {40, 8, 4, 0x40}, {56, 8, 4, 0x60}, {84, 30, 1, 0x00},
      {80, 30, 3, 0x00}, {100, 30, 1, 0},  {100, 30, 3, 0},  {72, 8, 4, 0x10}, {0, -16, 0, 0}};
  for (int k = 0; k < 10; ++k) o.push_back({16 + 8 * k, 60, 2, 0});
  o.push_back({0, 60, 2, 0});
  o.push_back({112, 60, 2, 0});
  o.push_back({20, 84, 4, 0x80});
  o.push_back({44, 84, 4, 0x80});
  o.push_back({28, 84, 4, 0x00});
  o.push_back({30, 100, 3, 0x80});
  o.push_back({34, 100, 2, 0x00});
  s.copies = {{0x8000, tile_set()},
              {0x9800, tile_map([](int tx, int ty) {
                 return tx >= 2 && tx <= 5 && ty >= 10 && ty <= 13 ? 1 : 0;
               })},
              {0xFE00, oam(o)}};
  s.regs = {{0x47, 0xE4}, {0x48, 0xE4}, {0x49, 0x6C}};
  s.lcdc = 0x93;
  return s;
}

PpuScene sprites_8x16() {
  PpuScene s;
  s.copies = {
      {0x8000, tile_set()},
      {0x9800, tile_map([](int, int) { return 0; })},
      {0xFE00, oam({{8, 8, 7, 0x00}, {24, 8, 6, 0x40}, {40, 8, 4, 0x40}, {56, 8, 5, 0x20}})}};
  s.regs = {{0x47, 0xE4}, {0x48, 0xE4}};
  s.lcdc = 0x97;
  return s;
}

PpuScene raster_scx() {
  PpuScene s;
  s.copies = {{0x8000, tile_set()}, {0x9800, tile_map([](int tx, int) { return tx % 4; })}};
  s.regs = {{0x47, 0xE4}};
  s.lcdc = 0x91;
  for (int line = 0; line < 143; ++line)
    s.raster.push_back({(uint8_t)line, 0x43, (uint8_t)(line + 1)});
  s.raster.push_back({143, 0x43, 0});
  return s;
}

PpuScene lcd_off() {
  PpuScene s = bg_scroll();
  s.raster.clear();
  s.lcd_off_after_frames = 8;
  return s;
}

// Pixels benchmark load: full-screen BG, a window over the lower right quarter, 40 objects,
// a busy CPU and per-frame scroll + OAM DMA.
PpuScene bench() {
  PpuScene s;
  std::vector<std::vector<int>> o;
  for (int i = 0; i < 40; ++i) o.push_back({4 + (i % 8) * 19, 4 + (i / 8) * 28, 4, (i & 3) << 5});
  s.copies = {{0x8000, tile_set()},
              {0x9800, tile_map(diagonal)},
              {0x9C00, tile_map([](int tx, int ty) { return 1 + (tx * 3 + ty) % 3; })},
              {0xC000, oam(o)},
              {0xFE00, oam(o)}};
  s.regs = {{0x47, 0xE4}, {0x48, 0xE4}, {0x49, 0x6C}, {0x4A, 72}, {0x4B, 87}};
  s.lcdc = 0xF3;
  s.busy = true;
  return s;
}

}  // namespace

std::vector<std::string> ppu_rom_names() {
  return {"ppu_bg_scroll",  "ppu_window",  "ppu_sprites", "ppu_sprites_8x16",
          "ppu_raster_scx", "ppu_lcd_off", "ppu_bench"};
}

Result<std::vector<uint8_t>> build_ppu_rom(const std::string& name) {
  PpuScene scene;
  if (name == "ppu_bg_scroll")
    scene = bg_scroll();
  else if (name == "ppu_window")
    scene = window();
  else if (name == "ppu_sprites")
    scene = sprites();
  else if (name == "ppu_sprites_8x16")
    scene = sprites_8x16();
  else if (name == "ppu_raster_scx")
    scene = raster_scx();
  else if (name == "ppu_lcd_off")
    scene = lcd_off();
  else if (name == "ppu_bench")
    scene = bench();
  else
    return make_error(ErrorKind::Usage, "unknown PPU test ROM '" + name + "'");
  // The still scenes end with the mooneye signal, so they double as image tests.
  if (!scene.busy && scene.lcd_off_after_frames == 0) scene.ldbb_after_frames = 3;
  scene.title.clear();
  for (char c : name.substr(0, 15)) scene.title += (char)std::toupper((unsigned char)c);
  return build_ppu_scene_rom(scene);
}

}  // namespace gbx
