// Pixel-FIFO renderer (synthesis parameter ppu=fifo; docs/machine/ppu-fifo.md). Only fifo kernels
// include this file and hw/ppu_fifo_run.h after it (the generator's PPU_FIFO site in
// kernel/step.tmpl); it replaces the
// scanline renderer's lcd_next_after / lcd_catch_up_slow (hw/lcd.h) and keeps the rest of
// hw/lcd.h (framebuffers, VBlank swap, which frames are drawn).
//
// Model (Pan Docs "Rendering", "Pixel FIFO", "OBJ penalty algorithm"; Mealybug Tearoom's "The
// Comprehensive Game Boy PPU Documentation" and test sources; the dot constants below were
// fitted to Mealybug's expected DMG screens): mode 3 of a visible line is run dot by dot from
// its start (line dot 80, where hw/ppu.h starts mode 3).
//   - Dots 0-5: the first background fetch, whose tile is thrown away.
//   - The background/window fetcher then takes 2 dots per step: tile number (step 1), tile
//     data low (step 3), tile data high (step 5), and pushes 8 pixels into the background FIFO
//     from step 6 on, at the first dot the FIFO is empty. Registers are read at those steps:
//     LCDC bits 3/4/6, SCX (coarse, bits 3-7) and SCY at the tile-number step, LCDC bit 4 and
//     SCY again at each data step (Mealybug: SCY and TILE_SEL are read during the data
//     steps, so changing them mid-fetch mixes bitplanes).
//   - One pixel a dot leaves the FIFO (after the fetcher's step in the same dot); the first
//     SCX % 8 are dropped (fine scroll), the rest go to the screen with BGP, OBP0/1 and LCDC
//     bits 0/1 as they are at that dot. The first pixel leaves at dot 12 + SCX % 8, so mode 3
//     lasts 172 + SCX % 8 dots without window or objects (hw/ppu.h ppu_mode3_end).
//   - Window (Pan Docs "Window"): when LCDC bit 5 is set, LY has equalled WY on a line of
//     this frame and the next pixel's x + 7 equals WX, the FIFO is cleared and the fetcher
//     restarts on the window map (6 dots). WX 0-6 start before pixel 0, while the first
//     tile's pixels are dropped (lcd_fifo_run); a late start (x + 6) and the pixel inserted
//     when WX matches again follow SameBoy's DMG rules. A second start on the same line draws
//     the window's next row (Mealybug WIN_EN notes). With LCDC bit 5 cleared, the next tile
//     fetched is background again.
//   - Objects: the OAM scan's first 10 objects on the line (OAM order), fetched one at a time
//     in X order when the pixel about to leave is at OAM X - 8 (left of x 0: the dropped
//     pixels) with LCDC bit 1 set. The pixels wait by Pan Docs' "OBJ penalty algorithm"
//     (6 dots, plus 5 - min(5, (X + SCX) % 8) for the first object in a background tile, 5 at
//     X 0), the same sum hw/ppu.h's mode-3 end uses, so the pixels and STAT's mode 0 agree;
//     the background fetcher goes on meanwhile. The object's two data reads are at the
//     wait's last dots; its pixels go into the object FIFO where it holds transparent ones
//     (earlier objects win).
// A register write is seen from line dot (write's io_time - mode-3 start + GBX_FIFO_WRITE_DOT)
// on, i.e. from the first dot of the write's M-cycle (io_time is its second), the dot at which
// an LCDC write switches the LCD on (hw/ppu.h ppu_write_lcdc; Mealybug's m3_* screens, DMG): the
// renderer is caught up to that dot before every write to FF40-FF4B, VRAM and OAM.
//
// Per-env state (GbxState::lcd_fifo, GBX_LCD_FIFO_BYTES): LcdFifo below, all bytes, so that a
// step ending inside mode 3 (steps end on the CPU's frame grid, not the PPU's) goes on
// exactly in the next one.
#if GBX_RENDER
#define GBX_FIFO_WRITE_DOT (-1)
// Dots from mode 3's start (where SCX % 8, the object size for the OAM scan's result and
// WY = LY are latched) to the first fetch, then the first fetch's 6 (Mealybug m3_bgp_change
// puts the first pixel 13 + 12 dots after mode 3's start as hw/ppu.h times it, with
// io_time 1 dot into the writing M-cycle; m3_scx_low_3_bits the SCX latch at its start).
#define GBX_FIFO_LATCH_DOTS 7
#define GBX_FIFO_FIRST_FETCH_DOTS (GBX_FIFO_LATCH_DOTS + 6)
// The fine scroll (SCX % 8) is taken during the first fetch: Mealybug m3_scx_low_3_bits
// writes SCX 4 dots apart on its two halves, the first taken, the second not.
#define GBX_FIFO_SCX_LATCH_DOT 10
// The line's first tile number (SCY, SCX >> 3, LCDC bit 3) is read 2 dots before that fetch's
// tile-number step; its data at the usual steps. Mealybug m3_scy_change: SCY written at dot 12
// is not seen by the first tile's map row but is by its data rows. SameBoy display.c reads it
// at its mode-3 loop's first dot, 8 dots before pixel 0 as ours is 8 dots after dot 11.
#define GBX_FIFO_TILE0_DOT (GBX_FIFO_FIRST_FETCH_DOTS - 2)
#define GBX_FIFO_IDLE_LINE 0xFF
#define GBX_FIFO_WIN_FETCHING 0x01   // LcdFifo::win: the fetcher is on the window map
#define GBX_FIFO_WIN_SHOWN 0x02      // the window started on this line
#define GBX_FIFO_WIN_WX_NEW 0x04     // WX was written at this dot (no late start)
#define GBX_FIFO_WIN_SHIFT 0x08      // a late window start shifted the line a pixel left
#define GBX_FIFO_WIN_OBJ 0x10        // an object fetch (sel[obj_next - 1]) is under way
#define GBX_FIFO_WIN_OBJ_LO 0x20     // ... and its data low byte is in LcdFifo::tile
#define GBX_FIFO_WIN_OBJ_EARLY 0x40  // ... fetched before pixel 0 (lcd_fifo_object_reads)
#define GBX_FIFO_WIN_EN_NEW 0x80     // LCDC bit 5 was set at the dot before
// Dots from an object fetch's data low read to its data high read.
#define GBX_FIFO_OBJ_LO_LEFT 2
#define GBX_FIFO_LCDC_X0 1
#define GBX_FIFO_WX_INSERT 1
// WX written during mode 3 is seen this many dots after the write's dot (SameBoy's DMG WX
// conflict: 2 dots after the palettes' old | new dot).
#define GBX_FIFO_WX_DELAY 2

struct LcdFifo {
  u8 active;              // 1 while line `line` is in mode 3 with pixels still to draw
  u8 line;                // line being drawn or last drawn (GBX_FIFO_IDLE_LINE: none this frame)
  u8 dot_lo, dot_hi;      // dots of mode 3 run so far
  u8 bg_lo, bg_hi, bg_n;  // background FIFO: bitplanes, bit 7 leaves first; count
  u8 ob_lo, ob_hi, ob_pal, ob_prio;  // object FIFO: 8 slots (colour 0 = empty), bit 7 first
  u8 fstep;                          // fetcher step (0-5 fetching, 6 waiting to push)
  u8 fx;                             // tiles fetched since the line (or the window) started
  u8 tile, dlo, dhi;                 // the fetch in progress
  u8 x;                              // screen x of the next pixel drawn (160: done)
  u8 discard;    // pixels still to drop, a dot each: SCX % 8, or the window's left of x 0
  u8 win;        // GBX_FIFO_WIN_*
  u8 obj_next;   // objects of the line fetched or passed, in X order
  u8 stall;      // dots the whole pipeline still waits (first fetch, object fetches)
  u8 last_tile;  // background tile of the last object fetched (0xFF: none yet)
  u8 scx7;       // SCX % 8 at the line's start
  u8 scan_lcdc;  // LCDC at the line's start: its object size chose the line's objects; bit 5
                 // cleared when the window is switched off while fetched (no pixel inserted)
};

GBX_FN u8* lcd_fifo_bytes(Machine& b) {
#if GBX_CORE_SPLIT
  return b.p->s.lcd_fifo + (u64)b.env * GBX_LCD_FIFO_BYTES;
#else
  return b.lcd_fifo;
#endif
}

GBX_FN void lcd_fifo_load(Machine& b, LcdFifo& f) {
  const u8* src = lcd_fifo_bytes(b);
  u8* dst = (u8*)&f;
  for (u32 i = 0; i < (u32)sizeof(LcdFifo); ++i) dst[i] = src[i];
}

// Between lines only `line` means anything (lcd_fifo_start_line sets the rest afresh), so the
// rest is stored as zeros: which earlier lines ran through the pipeline depends on which
// frames were drawn, i.e. on the step length, and must not show in a saved state.
GBX_FN void lcd_fifo_store(Machine& b, const LcdFifo& f) {
  LcdFifo idle;
  const u8* src = (const u8*)&f;
  if (!f.active) {
    u8* z = (u8*)&idle;
    for (u32 i = 0; i < (u32)sizeof(LcdFifo); ++i) z[i] = 0;
    idle.line = f.line;
    src = z;
  }
  u8* dst = lcd_fifo_bytes(b);
  for (u32 i = 0; i < (u32)sizeof(LcdFifo); ++i) dst[i] = src[i];
}

// Forgets the line in progress (LCD switched off or on, VBlank).
GBX_FN void lcd_fifo_idle(Machine& b) {
  LcdFifo f;
  lcd_fifo_load(b, f);
  f.active = 0;
  f.line = GBX_FIFO_IDLE_LINE;
  lcd_fifo_store(b, f);
}

// The cycle at which line `line`'s pipeline starts, in the frame starting at `frame_start`:
// GBX_FIFO_START_DOT into the line, GBX_FIFO_LINE0_DOTS later on line 0. The pipeline starts
// where the PPU takes VRAM (hw/ppu.h ppu_vram_locked, mooneye lcdon_timing-GS), 4 dots before
// STAT shows mode 3: the lead of the PPU's interrupt sources over STAT (hw/ppu.h
// ppu_stat_line) dispatches Mealybug's handlers, run from the mode-2 STAT interrupt after the
// LCD is switched on, one M-cycle before STAT's mode 2 would, and their expected screens put
// the pixels that much earlier too. Mealybug's raster handlers write 4 cycles earlier on line 0
// than on the others ("line 0 timing is different by 4 cycles", m3_bgp_change.asm) and expect
// the same pixels on every line: measured against that interrupt, line 0's pixels leave 4 dots
// earlier.
#define GBX_FIFO_START_DOT (GBX_MODE2_DOTS - 4)
#define GBX_FIFO_LINE0_DOTS (-4)
GBX_FN i64 lcd_fifo_line_start(i64 frame_start, i64 line) {
  return frame_start + line * GBX_LINE_DOTS + GBX_FIFO_START_DOT +
         (line == 0 ? GBX_FIFO_LINE0_DOTS : 0);
}

// lcd_next for a line whose pipeline has run `dots` dots: the first cycle at which a catch-up
// has one more dot to run (dot d runs once now >= start + d + 1 - GBX_FIFO_WRITE_DOT).
GBX_FN i64 lcd_fifo_due(i64 start, i64 dots) { return start + dots + 1 - GBX_FIFO_WRITE_DOT; }

// The next line's pipeline start or the VBlank swap after line `line` of frame `frame_start`.
GBX_FN i64 lcd_fifo_after_line(i64 frame_start, i64 line) {
  if (line < 143) return lcd_fifo_due(lcd_fifo_line_start(frame_start, line + 1), 0);
  return lcd_fifo_due(frame_start + 144 * GBX_LINE_DOTS, 0);
}

// First renderer work at or after `after` (step start, LCD switched on): the line in progress
// if the state holds one for this line, else this line if its mode 3 can still be under way
// (a state written by the line renderer, or a reset one: the line is drawn from its start),
// else the next line or VBlank.
GBX_FN i64 lcd_next_after(Machine& b, i64 after) {
  const i64 epoch = GBX_COLD(b, ppu_epoch);
  LcdFifo f;
  lcd_fifo_load(b, f);
  if (after < epoch) {
    // Before the frame starts no line is in progress (never so on a valid state: the LCD's
    // switch-on idles the record); a loaded one is forgotten, as a stale line is below.
    if (f.active) {
      f.active = 0;
      lcd_fifo_store(b, f);
    }
    return lcd_fifo_due(lcd_fifo_line_start(epoch, 0), 0);
  }
  const i64 pos = (after - epoch) % GBX_FRAME_CYCLES;
  const i64 frame_start = after - pos;
  const i64 line = pos / GBX_LINE_DOTS, dot = pos % GBX_LINE_DOTS;
  if (line >= 144) return lcd_fifo_due(lcd_fifo_line_start(frame_start + GBX_FRAME_CYCLES, 0), 0);
  const i64 start = lcd_fifo_line_start(frame_start, line);
  if (f.line == (u8)line) {
    if (f.active) return lcd_fifo_due(start, (i64)f.dot_lo | (i64)f.dot_hi << 8);
    return lcd_fifo_after_line(frame_start, line);
  }
  if (f.active) {  // a stale line: forget it
    f.active = 0;
    lcd_fifo_store(b, f);
  }
  if (dot < GBX_MODE3_MAX_END) return lcd_fifo_due(start, 0);
  return lcd_fifo_after_line(frame_start, line);
}

// x is 0-159 on every valid trajectory; the clamp keeps a write inside the row whatever a
// loaded state holds (the loader refuses such states: runtime/src/states/state_rules.cpp).
GBX_FN void lcd_fifo_put_pixel(u8* GBX_RESTRICT row, u32 x, u32 shade) {
  x = x < 159u ? x : 159u;
  const u32 shift = 6u - 2u * (x & 3u);
  row[x >> 2] = (u8)((row[x >> 2] & ~(3u << shift)) | (shade << shift));
}

// The line's objects (OAM scan: the first 10 in OAM order whose rows cover it), ordered by X,
// ties by OAM index, as lcd_draw_line orders them. Returns how many.
GBX_FN u32 lcd_fifo_objects(Machine& b, u32 ly, u8 lcdc, u8* sel) {
  const u32 height = (lcdc & 0x04) ? 16u : 8u;
  u32 n = 0;
  for (u32 i = 0; i < 40u && n < 10u; ++i) {
    const u32 top = lcd_oam(b, i * 4u);
    if (ly + 16u >= top && ly + 16u < top + height) sel[n++] = (u8)i;
  }
  for (u32 i = 1; i < n; ++i) {
    const u8 v = sel[i];
    u32 j = i;
    for (; j > 0 && lcd_oam(b, sel[j - 1] * 4u + 1u) > lcd_oam(b, v * 4u + 1u); --j)
      sel[j] = sel[j - 1];
    sel[j] = v;
  }
  return n;
}

// Tile data address (low byte) of object `o`'s row on line `ly`, with LCDC `lcdc`'s object
// size (Mealybug m3_lcdc_obj_size_change: the size is read at each of the two data reads).
GBX_FN u32 lcd_fifo_object_addr(Machine& b, u32 ly, u8 lcdc, u32 o) {
  const u32 y = lcd_oam(b, o * 4u), flags = lcd_oam(b, o * 4u + 3u);
  const bool tall = (lcdc & 0x04) != 0;
  u32 row = ly + 16u - y;
  if (flags & 0x40) row = (tall ? 15u : 7u) - row;
  row &= tall ? 15u : 7u;
  const u32 tile = tall ? (lcd_oam(b, o * 4u + 2u) & 0xFEu) : lcd_oam(b, o * 4u + 2u);
  return tile * 16u + row * 2u;
}

// Object row `lo`/`hi` (OAM X `ox`, attributes `flags`) into the object FIFO, whose next
// pixel is screen x f.x: into its transparent slots (earlier objects win).
GBX_FN void lcd_fifo_merge_object(LcdFifo& f, u32 ox, u32 flags, u32 lo, u32 hi) {
  for (u32 p = 0; p < 8u; ++p) {
    const i32 sx = (i32)ox - 8 + (i32)p;  // screen x of this object pixel
    const i32 slot = sx - (i32)f.x;
    if (slot < 0 || slot > 7) continue;
    const u32 bit = (flags & 0x20) ? p : 7u - p;
    const u32 c = ((hi >> bit) & 1u) << 1 | ((lo >> bit) & 1u);
    const u32 m = 0x80u >> slot;
    if (!c || ((f.ob_lo | f.ob_hi) & m)) continue;  // transparent, or an earlier object's
    if (c & 1u) f.ob_lo = (u8)(f.ob_lo | m);
    if (c & 2u) f.ob_hi = (u8)(f.ob_hi | m);
    if (flags & 0x10)
      f.ob_pal = (u8)(f.ob_pal | m);
    else
      f.ob_pal = (u8)(f.ob_pal & ~m);
    if (flags & 0x80)
      f.ob_prio = (u8)(f.ob_prio | m);
    else
      f.ob_prio = (u8)(f.ob_prio & ~m);
  }
}

// Background / window tile data address of the fetch in progress, row `row` (0-7).
GBX_FN u32 lcd_fifo_data_addr(u8 lcdc, u32 tile, u32 row) {
  const u32 base = (lcdc & 0x10) ? tile * 16u : (u32)(0x1000 + (i32)(i8)tile * 16);
  return base + row * 2u;
}

// The fetcher's read at its current step (0: tile number, 2: data low, 4: data high).
GBX_FN void lcd_fifo_fetch_read(Machine& b, LcdFifo& f, u32 ly, u8 lcdc) {
  if (f.fstep == 0) {
    if ((f.win & GBX_FIFO_WIN_FETCHING) && !(lcdc & 0x20)) {
      // Window switched off: the fetcher goes back to the background, on a tile boundary
      // (Mealybug WIN_EN notes: SCX's low bits have no effect there).
      f.win = (u8)(f.win & ~GBX_FIFO_WIN_FETCHING);
      f.fx = (u8)((f.x + f.bg_n + 7u) >> 3);
    }
    if (f.win & GBX_FIFO_WIN_FETCHING) {
      const u32 map = (lcdc & 0x40) ? 0x1C00u : 0x1800u;
      f.tile = lcd_vram(b, map + ((u32)b.lcd_win_line >> 3) * 32u + (f.fx & 31u));
    } else {
      const u32 map = (lcdc & 0x08) ? 0x1C00u : 0x1800u;
      const u32 y = (ly + *io_reg(b, 0xFF42)) & 0xFFu;
      const u32 col = ((u32)(*io_reg(b, 0xFF43) >> 3) + f.fx) & 31u;
      f.tile = lcd_vram(b, map + (y >> 3) * 32u + col);
    }
  } else if (f.fstep == 2 || f.fstep == 4) {
    const u32 r = (f.win & GBX_FIFO_WIN_FETCHING) ? ((u32)b.lcd_win_line & 7u)
                                                  : ((ly + *io_reg(b, 0xFF42)) & 7u);
    const u8 d = lcd_vram(b, lcd_fifo_data_addr(lcdc, f.tile, r) + (f.fstep == 4 ? 1u : 0u));
    if (f.fstep == 2)
      f.dlo = d;
    else
      f.dhi = d;
  }
}

// The background/window fetcher's dot: a push when its tile is ready and the FIFO is empty;
// then the read of its current step (tile number at step 0, data low at 2, data high at 4),
// 2 dots a step.
GBX_FN void lcd_fifo_fetcher_step(Machine& b, LcdFifo& f, u32 ly, u8 lcdc, bool may_push) {
  if (f.fstep >= 6 && f.bg_n == 0 && may_push && (f.scan_lcdc & ~lcdc & 0x20) &&
      (b.lcd_flags & GBX_LCD_FLAG_WY_HIT) && !(f.discard & 7u) && *io_reg(b, 0xFF4B) == f.x + 7u) {
    // The window switched off during this line and WX matching the next pixel at a push: the
    // DMG puts one colour-0 pixel in front of the tile, pushed a dot later (SameBoy
    // display.c, its issue 278; Mealybug m3_lcdc_win_en_change_multiple_wx, x 8 and 32).
    f.bg_lo = 0;
    f.bg_hi = 0;
    f.bg_n = 1;
    return;
  }
  if (f.fstep >= 6 && f.bg_n == 0 && may_push) {
    f.bg_lo = f.dlo;
    f.bg_hi = f.dhi;
    f.bg_n = 8;
    f.fstep = 0;  // the push dot is the next fetch's first
    ++f.fx;
  }
  if (f.fstep < 6) {
    lcd_fifo_fetch_read(b, f, ly, lcdc);
    ++f.fstep;
  }
}

// Dots of an early object fetch's wait (before pixel 0) left after its data high read.
// SameBoy display.c matches such an object m = X + SCX % 8 dots into its mode-3 loop (X 0: at
// its first dot), while the first fetch's pixels are still being dropped, reads its data low
// and high 8 + max(0, m - 5) and 10 + max(0, m - 5) dots into the loop and drops the rest
// after: in this wait, data low at its first dots, data high 8 - m dots before its end
// (Mealybug m3_lcdc_obj_size_change: the size written 5 dots before the end of an X 1
// object's wait does not reach its data).
GBX_FN u32 lcd_fifo_object_hi_left(Machine& b, const LcdFifo& f, u32 o) {
  const u32 ox = lcd_oam(b, o * 4u + 1u);
  return 8u - (ox ? ox + f.scx7 : 0u);
}

// Starts the fetch of the line's next object if it is due at the pixel about to leave the
// FIFO (position x, or -(pixels still dropped) before x 0; `early`: before the first tile's
// push, every object left of the fine scroll's first pixel). The pipeline then waits by Pan
// Docs' penalty, the object's data read at its last dots (lcd_fifo_run). Objects passed
// (left of the position) or with OBJ disabled are skipped.
GBX_FN bool lcd_fifo_object_due(Machine& b, LcdFifo& f, const u8* sel, u32 nobj, u8 lcdc,
                                bool early) {
  while (f.obj_next < nobj) {
    const u32 o = sel[f.obj_next];
    const u32 ox = lcd_oam(b, o * 4u + 1u);
    const i32 po = (i32)ox - 8;
    if (ox >= 168u) return false;
    if (early) {
      if (po >= -(i32)f.scx7) return false;
    } else {
      const i32 pos = (i32)f.x - (i32)(f.discard & 7u);
      if (po > pos) return false;
      if (po < pos) {
        ++f.obj_next;
        continue;
      }
    }
    ++f.obj_next;
    if (!(lcdc & 0x02)) continue;
    const u32 t = (ox + f.scx7) >> 3;
    u32 pen = 6;
    if (t != f.last_tile) {
      const u32 off = (ox + f.scx7) & 7u;
      pen += ox == 0 ? 5u : (off < 5u ? 5u - off : 0u);
      f.last_tile = (u8)t;
    }
    f.stall = (u8)(pen - 1u);  // this dot is the first
    f.win = (u8)((f.win & ~(GBX_FIFO_WIN_OBJ_LO | GBX_FIFO_WIN_OBJ_EARLY)) | GBX_FIFO_WIN_OBJ);
    if (early && lcd_fifo_object_hi_left(b, f, o) <= f.stall)
      f.win = (u8)(f.win | GBX_FIFO_WIN_OBJ_EARLY);
    return true;
  }
  return false;
}

// An object fetch OBJ off can still abandon: one that has not read its data low yet.
GBX_FN bool lcd_fifo_object_abortable(const LcdFifo& f) {
  return f.stall && (f.win & (GBX_FIFO_WIN_OBJ | GBX_FIFO_WIN_OBJ_LO)) == GBX_FIFO_WIN_OBJ;
}

// The object fetch's data reads at a dot of its wait (f.stall: the wait's dots left after this
// one): data low GBX_FIFO_OBJ_LO_LEFT dots before data high, each with the object size then
// in LCDC; data high at the wait's last dot, the pixels then merged. An object fetched before
// pixel 0 reads them earlier in its wait (lcd_fifo_object_hi_left).
GBX_FN void lcd_fifo_object_reads(Machine& b, LcdFifo& f, u32 ly, u8 lcdc, const u8* sel) {
  if (!(f.win & GBX_FIFO_WIN_OBJ)) return;
  // obj_next is 1-10 while a fetch is under way; clamped, and the OAM index masked to 0-63,
  // so no loaded state reads outside sel or OAM (the loader refuses such states).
  const u32 k = f.obj_next - 1u;
  const u32 o = sel[k < 9u ? k : 9u] & 63u;
  const u32 hi = (f.win & GBX_FIFO_WIN_OBJ_EARLY) ? lcd_fifo_object_hi_left(b, f, o) : 0u;
  if (f.stall == hi + GBX_FIFO_OBJ_LO_LEFT && f.fstep >= 5) {
    // Data low, kept in the fetcher's tile number (read already: the wait lets the fetcher
    // reach its data-high step first).
    f.tile = lcd_vram(b, lcd_fifo_object_addr(b, ly, lcdc, o));
    f.win = (u8)(f.win | GBX_FIFO_WIN_OBJ_LO);
  }
  if (f.stall == hi) {
    const u32 addr = lcd_fifo_object_addr(b, ly, lcdc, o);
    const u8 lo = (f.win & GBX_FIFO_WIN_OBJ_LO) ? f.tile : lcd_vram(b, addr);
    lcd_fifo_merge_object(f, lcd_oam(b, o * 4u + 1u), lcd_oam(b, o * 4u + 3u), lo,
                          lcd_vram(b, addr + 1u));
    f.win = (u8)(f.win & ~(GBX_FIFO_WIN_OBJ | GBX_FIFO_WIN_OBJ_LO | GBX_FIFO_WIN_OBJ_EARLY));
  }
}
#endif  // GBX_RENDER
