// Scanline renderer (Pan Docs "Rendering", "Tile Data", "Tile Maps", "Window", "OAM",
// "LCD Control", "Palettes"). Line L is drawn from the VRAM, OAM and register values in force
// when its mode 3 ends; the renderer is caught up lazily, like the PPU timing: before every
// write to a PPU register (FF40-FF4B), VRAM or OAM, and at the end of the step, so changes made
// between lines (SCX per line, window splits, palettes from LYC / HBlank interrupts) land on
// the right lines. Changes in the middle of a line's mode 3 are not modelled.
//
// Framebuffer: two 5760-byte buffers per env (state field lcd_fb), 160x144 shade indices at
// 2 bits a pixel, 40 bytes a row, leftmost pixel in the high bits. The back buffer is drawn,
// the two swap at VBlank (line 144, dot 0); the front buffer is the last complete frame and is
// all shade 0 while the LCD is off. The first frame after the LCD is switched on is not shown
// (Pan Docs "LCDC.7"; gbdev wiki LCDC: "the screen will stay blank during the first frame";
// SameBoy's GB_FRAMESKIP_LCD_TURNED_ON, Gambatte, little-things-gb firstwhite on DMG
// hardware): it is not drawn, and its VBlank does not swap, so the front buffer stays the
// blank one the switch-off left (GBX_LCD_FLAG_SKIP, set by lcd_lcdc_written).
//
// Only kernels with GBX_RENDER draw. In frames mode they draw only the frames that can be the
// last complete frame at the end of some step (every step ends at this step's target plus a
// multiple of the step length), so a step of 24 frames draws about one frame.
#define GBX_LCD_ROW_BYTES 40
#define GBX_LCD_FLAG_FRONT 0x01   // which of the two buffers is the front (last complete frame)
#define GBX_LCD_FLAG_WY_HIT 0x02  // LY equalled WY on some line of this frame (window may show)
#define GBX_LCD_FLAG_SKIP 0x04    // this frame is the first after LCD on: not drawn, not shown
// A kernel that draws nothing leaves both buffers as they were, so once it has run an env its
// buffers are not the screen; these two bits say so in the state, for the drawing env that
// loads it (docs/guide/states.md). Kernels that draw nothing set both at the end of a step
// that ran; a drawing kernel's VBlank swap passes BACK_STALE on to NO_SCREEN (the frame it
// shows was drawn from its top line only if the back buffer was not stale) and clears
// BACK_STALE (the next frame is drawn from line 0); switching the LCD off, which blanks both
// buffers, clears both. Nothing else reads them: no emulated behaviour depends on them.
#define GBX_LCD_FLAG_NO_SCREEN 0x08   // the front buffer is not the screen a drawing env showed
#define GBX_LCD_FLAG_BACK_STALE 0x10  // the frame in progress lacks lines drawn before it ran
// A step can end a little after its target (the last instruction or interrupt dispatch runs
// to completion); frames whose VBlank falls in that overshoot must be drawn too.
#define GBX_LCD_STEP_SLACK 256

#if GBX_RENDER

// Dot of a visible line at which it is drawn: the earliest end of mode 3 (mode 2 + 172 dots).
// ppu_mode3_end gives the exact end (SCX, window and object penalties), but it depends on
// registers a program may still change before the line; a write between the two points falls
// inside mode 3, a mid-line effect this renderer does not model either way, and the fixed
// point keeps catching up cheap on lines that are not drawn.
GBX_FN i64 lcd_draw_dot(Machine& b, i64 line) {
  (void)b;
  (void)line;
  return GBX_MODE2_DOTS + GBX_MODE3_MIN_DOTS;
}

#if GBX_PPU_FIFO
// ppu=fifo: hw/ppu_fifo.h defines these two (and draws lines whole with lcd_draw_line only
// where that is exact).
GBX_FN i64 lcd_next_after(Machine& b, i64 after);
GBX_NOINLINE void lcd_catch_up_slow(Machine& b, i64 now);
GBX_FN void lcd_fifo_idle(Machine& b);
#else
// First renderer event (a visible line's draw point or the VBlank swap) strictly after `after`.
GBX_FN i64 lcd_next_after(Machine& b, i64 after) {
  if (after < GBX_COLD(b, ppu_epoch)) return GBX_COLD(b, ppu_epoch) + lcd_draw_dot(b, 0);
  const i64 pos = (after - GBX_COLD(b, ppu_epoch)) % GBX_FRAME_CYCLES;
  const i64 frame_start = after - pos;
  const i64 line = pos / GBX_LINE_DOTS;
  if (line < 144) {
    if (pos < line * GBX_LINE_DOTS + lcd_draw_dot(b, line))
      return frame_start + line * GBX_LINE_DOTS + lcd_draw_dot(b, line);
    if (line < 143) return frame_start + (line + 1) * GBX_LINE_DOTS + lcd_draw_dot(b, line + 1);
    return frame_start + 144 * GBX_LINE_DOTS;
  }
  return frame_start + GBX_FRAME_CYCLES + lcd_draw_dot(b, 0);
}
#endif  // !GBX_PPU_FIFO

// Whether the frame whose VBlank starts at `vblank` can be the front buffer at a step's end.
// Besides the frames ending at this step's end plus a multiple of its length, the frame in
// progress when this step ends is drawn up to that end: the next call may be shorter (a
// 1-frame step, no-op frames after a reset, a state loaded where steps are shorter) and then
// finishes and shows that frame; its first lines must not be left from an older frame.
GBX_FN bool lcd_frame_needed(const Machine& b, i64 vblank) {
  if (b.lcd_period <= 0) return true;
  if (vblank > b.lcd_step_end && vblank <= b.lcd_step_end + GBX_FRAME_CYCLES + GBX_LCD_STEP_SLACK)
    return true;
  i64 r = (b.lcd_step_end + GBX_LCD_STEP_SLACK - vblank) % b.lcd_period;
  if (r < 0) r += b.lcd_period;
  return r < GBX_FRAME_CYCLES + GBX_LCD_STEP_SLACK;
}

// lcd_flags after a VBlank (both renderers): the drawn frame becomes the front one, except the
// first after LCD on, whose VBlank leaves the blank front buffer in place.
GBX_FN u8 lcd_vblank_flags(u8 f) {
  const u8 keep = (u8)(f & ~(GBX_LCD_FLAG_WY_HIT | GBX_LCD_FLAG_SKIP | GBX_LCD_FLAG_BACK_STALE));
  if (f & GBX_LCD_FLAG_SKIP) return keep;
  const u8 stale = (f & GBX_LCD_FLAG_BACK_STALE) ? (u8)GBX_LCD_FLAG_NO_SCREEN : (u8)0;
  return (u8)(((keep ^ GBX_LCD_FLAG_FRONT) & ~GBX_LCD_FLAG_NO_SCREEN) | stale);
}

GBX_FN u8 lcd_vram(const Machine& b, u32 addr) { return mem_at(b, GBX_MEM_VRAM + addr); }
GBX_FN u8 lcd_oam(const Machine& b, u32 i) { return mem_at(b, GBX_MEM_OAM + i); }

GBX_FN u32 lcd_tile_pixel(const Machine& b, u32 addr, u32 bit) {
  return (((u32)lcd_vram(b, addr + 1) >> bit) & 1u) << 1 | (((u32)lcd_vram(b, addr) >> bit) & 1u);
}

// BG / window tile row address in VRAM: LCDC bit 4 picks 0x8000 unsigned or 0x9000 signed.
GBX_FN u32 lcd_bg_tile_row(const Machine& b, u8 lcdc, u32 map, u32 tx, u32 ty, u32 row) {
  const u8 tile = lcd_vram(b, map + (ty & 31u) * 32u + (tx & 31u));
  const u32 base = (lcdc & 0x10) ? (u32)tile * 16u : (u32)(0x1000 + (i32)(i8)tile * 16);
  return base + row * 2u;
}

GBX_NOINLINE void lcd_draw_line(Machine& b, u32 ly, u8* GBX_RESTRICT row) {
  const u8 lcdc = *io_reg(b, 0xFF40);
  const u8 bgp = *io_reg(b, 0xFF47);
  u8 color[160];  // BG / window colour index before the palette (0 where they are blank)
  for (u32 x = 0; x < 160u; ++x) color[x] = 0;

  if (lcdc & 0x01) {
    const u32 scx = *io_reg(b, 0xFF43), y = (ly + *io_reg(b, 0xFF42)) & 0xFFu;
    const u32 map = (lcdc & 0x08) ? 0x1C00u : 0x1800u;
    u32 addr = 0;
    for (u32 x = 0; x < 160u; ++x) {
      const u32 bx = (x + scx) & 0xFFu;
      if (x == 0 || (bx & 7u) == 0) addr = lcd_bg_tile_row(b, lcdc, map, bx >> 3, y >> 3, y & 7u);
      color[x] = (u8)lcd_tile_pixel(b, addr, 7u - (bx & 7u));
    }
    // Window: shown from WX-7 on lines after LY matched WY in this frame; its own line
    // counter advances only on lines where it is drawn.
    const u32 wx = *io_reg(b, 0xFF4B);
    if (ly == *io_reg(b, 0xFF4A)) b.lcd_flags |= GBX_LCD_FLAG_WY_HIT;
    if ((lcdc & 0x20) && (b.lcd_flags & GBX_LCD_FLAG_WY_HIT) && wx <= 166u) {
      const u32 wmap = (lcdc & 0x40) ? 0x1C00u : 0x1800u, wy = b.lcd_win_line;
      const u32 x0 = wx >= 7u ? wx - 7u : 0u;
      for (u32 x = x0; x < 160u; ++x) {
        const u32 wxp = x + 7u - wx;
        if (x == x0 || (wxp & 7u) == 0)
          addr = lcd_bg_tile_row(b, lcdc, wmap, wxp >> 3, wy >> 3, wy & 7u);
        color[x] = (u8)lcd_tile_pixel(b, addr, 7u - (wxp & 7u));
      }
      b.lcd_win_line++;
    }
  } else if (ly == *io_reg(b, 0xFF4A)) {
    b.lcd_flags |= GBX_LCD_FLAG_WY_HIT;
  }

  u8 shade[160];
  for (u32 x = 0; x < 160u; ++x) shade[x] = (lcdc & 0x01) ? (u8)((bgp >> (2u * color[x])) & 3u) : 0;

  if (lcdc & 0x02) {
    // OAM scan: the first 10 objects (OAM order) on this line, then ordered by X, ties by OAM
    // index; at each pixel the first opaque object in that order wins, and its OBJ-to-BG
    // priority bit then decides against BG / window colours 1-3.
    const u32 height = (lcdc & 0x04) ? 16u : 8u;
    u32 sel[10];
    u32 n = 0;
    for (u32 i = 0; i < 40u && n < 10u; ++i) {
      const u32 top = lcd_oam(b, i * 4u);
      if (ly + 16u >= top && ly + 16u < top + height) sel[n++] = i;
    }
    for (u32 i = 1; i < n; ++i) {
      const u32 v = sel[i];
      u32 j = i;
      for (; j > 0 && lcd_oam(b, sel[j - 1] * 4u + 1u) > lcd_oam(b, v * 4u + 1u); --j)
        sel[j] = sel[j - 1];
      sel[j] = v;
    }
    u8 obj[160];  // winning object's colour index (0 = none) and its attributes
    u8 attr[160];
    for (u32 x = 0; x < 160u; ++x) obj[x] = 0;
    for (u32 k = 0; k < n; ++k) {
      const u32 o = sel[k] * 4u;
      const u32 ox = lcd_oam(b, o + 1), flags = lcd_oam(b, o + 3);
      u32 line = ly + 16u - lcd_oam(b, o);
      if (flags & 0x40) line = height - 1u - line;
      const u32 tile = height == 16u ? (lcd_oam(b, o + 2) & 0xFEu) : lcd_oam(b, o + 2);
      const u32 addr = tile * 16u + line * 2u;
      for (u32 px = 0; px < 8u; ++px) {
        const i32 sx = (i32)ox - 8 + (i32)px;
        if (sx < 0 || sx >= 160 || obj[sx]) continue;
        const u32 c = lcd_tile_pixel(b, addr, (flags & 0x20) ? px : 7u - px);
        if (!c) continue;
        obj[sx] = (u8)c;
        attr[sx] = (u8)flags;
      }
    }
    const u8 obp0 = *io_reg(b, 0xFF48), obp1 = *io_reg(b, 0xFF49);
    for (u32 x = 0; x < 160u; ++x) {
      if (!obj[x] || ((attr[x] & 0x80) && color[x])) continue;
      const u8 pal = (attr[x] & 0x10) ? obp1 : obp0;
      shade[x] = (u8)((pal >> (2u * obj[x])) & 3u);
    }
  }

  for (u32 i = 0; i < (u32)GBX_LCD_ROW_BYTES; ++i)
    row[i] =
        (u8)(shade[4 * i] << 6 | shade[4 * i + 1] << 4 | shade[4 * i + 2] << 2 | shade[4 * i + 3]);
}

GBX_FN u8* lcd_buffer(Machine& b, bool front) {
  const u32 idx = (b.lcd_flags & GBX_LCD_FLAG_FRONT) ? 1u : 0u;
  return b.lcd_fb + (front ? idx : 1u - idx) * GBX_FRAMEBUFFER_BYTES;
}

GBX_FN void lcd_clear(u8* GBX_RESTRICT buf) {
  for (u32 i = 0; i < (u32)GBX_FRAMEBUFFER_BYTES; ++i) buf[i] = 0;
}

// At a VBlank, after the swap: a frame that will be drawn starts on a blank back buffer, so
// the rows it has not reached yet hold nothing from an older frame. Which older frame that
// would be depends on which frames were drawn, i.e. on the step length: a step's end (the
// frame in progress is always drawn, lcd_frame_needed) then saves the same state whether the
// frames were run in steps of 1 or of 24.
GBX_FN void lcd_vblank_swapped(Machine& b, i64 vblank) {
  if (lcd_frame_needed(b, vblank + GBX_FRAME_CYCLES)) lcd_clear(lcd_buffer(b, false));
}

#if !GBX_PPU_FIFO
// Processes every line end and VBlank at or before `now`.
GBX_NOINLINE void lcd_catch_up_slow(Machine& b, i64 now) {
  if (!ppu_lcd_on(b)) {
    b.lcd_next = GBX_NEVER;
    return;
  }
  while (b.lcd_next <= now) {
    const i64 t = b.lcd_next;
    const i64 pos = (t - GBX_COLD(b, ppu_epoch)) % GBX_FRAME_CYCLES;
    const i64 line = pos / GBX_LINE_DOTS;
    if (line < 144) {
      const i64 vblank = t - pos + 144 * GBX_LINE_DOTS;
      if (!(b.lcd_flags & GBX_LCD_FLAG_SKIP) && lcd_frame_needed(b, vblank))
        lcd_draw_line(b, (u32)line, lcd_buffer(b, false) + line * GBX_LCD_ROW_BYTES);
    } else {
      b.lcd_flags = lcd_vblank_flags(b.lcd_flags);
      b.lcd_win_line = 0;
      lcd_vblank_swapped(b, t);
    }
    b.lcd_next = lcd_next_after(b, t);
  }
}
#endif  // !GBX_PPU_FIFO

GBX_FN void lcd_catch_up(Machine& b, i64 now) {
  if (GBX_UNLIKELY(now >= b.lcd_next)) lcd_catch_up_slow(b, now);
}

// Hook: before a write to VRAM, OAM or FF40-FF4B.
GBX_FN void lcd_before_write(Machine& b) { lcd_catch_up(b, io_time(b)); }

// Hook: after LCDC was written. Off: the screen goes blank. On: a frame starts at line 0, and
// is not shown (GBX_LCD_FLAG_SKIP).
GBX_NOINLINE void lcd_lcdc_written(Machine& b) {
  const bool on = ppu_lcd_on(b), was_on = b.lcd_next != GBX_NEVER;
#if GBX_PPU_FIFO
  if (on != was_on) lcd_fifo_idle(b);
#endif
  if (was_on && !on) {
    // Both buffers: the front shows the blank screen, the back keeps no half-drawn frame.
    lcd_clear(lcd_buffer(b, true));
    lcd_clear(lcd_buffer(b, false));
    b.lcd_flags &= (u8) ~(GBX_LCD_FLAG_SKIP | GBX_LCD_FLAG_NO_SCREEN | GBX_LCD_FLAG_BACK_STALE);
    b.lcd_next = GBX_NEVER;
  } else if (!was_on && on) {
    b.lcd_flags = (u8)((b.lcd_flags & ~GBX_LCD_FLAG_WY_HIT) | GBX_LCD_FLAG_SKIP);
    b.lcd_win_line = 0;
    b.lcd_next = lcd_next_after(b, io_time(b));
  }
}
#else
GBX_FN void lcd_catch_up(Machine& b, i64 now) {
  (void)b;
  (void)now;
}
GBX_FN void lcd_before_write(Machine& b) { (void)b; }
GBX_FN void lcd_lcdc_written(Machine& b) { (void)b; }
#endif
