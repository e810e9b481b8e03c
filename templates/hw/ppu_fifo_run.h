// Pixel-FIFO renderer, second half (synthesis parameter ppu=fifo; docs/machine/ppu-fifo.md):
// the dot loop of a line's mode 3, the catch-up that replaces the scanline renderer's, and the
// register-write hook. The generator's PPU_FIFO site includes it right after hw/ppu_fifo.h
// (the model, the state, the fetcher and the object fetch's helpers are there).
#if GBX_RENDER
// Runs line `ly`'s pipeline until it has run `until` dots of mode 3 or drawn its 160 pixels.
GBX_NOINLINE void lcd_fifo_run(Machine& b, LcdFifo& f, u32 ly, i64 until, u8* GBX_RESTRICT row) {
  u8 sel[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};  // defined past nobj (lcd_fifo_object_reads)
  const u32 nobj = lcd_fifo_objects(b, ly, f.scan_lcdc, sel);
  i64 dot = (i64)f.dot_lo | (i64)f.dot_hi << 8;
  for (; dot < until && f.x < 160u; ++dot) {
    if (dot == GBX_FIFO_SCX_LATCH_DOT) {
      f.scx7 = (u8)(*io_reg(b, 0xFF43) & 7u);
      f.discard = f.scx7;
    }
    const u8 lcdc = *io_reg(b, 0xFF40);
    bool insert0 = false;
    if (f.x == 0 && !(f.win & (GBX_FIFO_WIN_FETCHING | GBX_FIFO_WIN_OBJ)) && (lcdc & 0x20) &&
        (b.lcd_flags & GBX_LCD_FLAG_WY_HIT) && dot >= GBX_FIFO_FIRST_FETCH_DOTS - 1) {
      // The window at WX 0-6 starts before pixel 0, while the first tile's pixels (and the
      // fine scroll's) are still being dropped: at the dot where WX matches the dropped
      // pixel's x + 7 (SameBoy display.c, position_in_line < 0), its first 7 - WX pixels
      // then dropped a dot each. WX 0 goes by its own table on SCX % 8 (SameBoy's
      // scx_to_wx0_comparisons: with fine scroll a dot later, SCX % 8 pixels dropped, 6 at 7).
      const u32 wx = *io_reg(b, 0xFF4B);
      const i64 base = GBX_FIFO_FIRST_FETCH_DOTS - 1;
      bool go = false, later = false;
      u32 drop = 0;
      if (wx == 0) {
        if (f.scx7 == 0) {
          go = dot == base;
          drop = 7;
        } else {
          go = dot == base + 7 + (f.scx7 == 7u ? 1 : 0);
          drop = f.scx7 == 7u ? 6u : f.scx7;
          later = true;
        }
      } else if (wx < 7u) {
        go = dot == base + (i64)wx + (i64)f.scx7;
        drop = 7u - wx;
      }
      if (go) {
        f.win = (u8)(GBX_FIFO_WIN_FETCHING | GBX_FIFO_WIN_SHOWN);
        f.stall = 0;
        f.bg_n = 0;
        f.fx = 0;
        f.fstep = 0;
        f.discard = (u8)drop;
        if (!later) {
          lcd_fifo_fetch_read(b, f, ly, lcdc);
          f.fstep = 1;
        }
        continue;
      }
    }
    if (lcd_fifo_object_abortable(f) && !(lcdc & 0x02)) {
      // OBJ disabled during an object fetch that has not read its data low yet: the fetch is
      // abandoned and this dot goes on as a pixel's (SameBoy: object_fetch_aborted). One that
      // has read it completes (Mealybug m3_lcdc_obj_en_change_variant: objects at X 0 and 1,
      // their data read early in the wait, wait their full penalty).
      f.stall = 0;
      f.win = (u8)(f.win & ~(GBX_FIFO_WIN_OBJ | GBX_FIFO_WIN_OBJ_LO | GBX_FIFO_WIN_OBJ_EARLY));
    }
    if (f.stall) {
      --f.stall;
      // The line's first tile number, read before the fetch's data steps (below).
      if (dot == GBX_FIFO_TILE0_DOT) lcd_fifo_fetch_read(b, f, ly, lcdc);
      // The first fetch stops everything; an object fetch only the pixels: the background
      // fetcher goes on with its tile (reading the registers at its own dots) and waits to
      // push (SameBoy display.c: the object fetch waits for the fetcher, which is not held).
      if (dot >= GBX_FIFO_FIRST_FETCH_DOTS) {
        lcd_fifo_fetcher_step(b, f, ly, lcdc, false);
        lcd_fifo_object_reads(b, f, ly, lcdc, sel);
      }
      continue;
    }
    // Objects left of x 8 whose pixels all fall in the first tile's dropped part: fetched
    // before that tile is pushed (SameBoy: while the first fetch's pixels are dropped).
    if (f.x == 0 && f.fx == 0 && f.bg_n == 0 && f.fstep >= 6 && !(f.win & GBX_FIFO_WIN_FETCHING) &&
        lcd_fifo_object_due(b, f, sel, nobj, lcdc, true)) {
      lcd_fifo_object_reads(b, f, ly, lcdc, sel);
      continue;
    }
    if (dot == GBX_FIFO_FIRST_FETCH_DOTS && f.fstep == 0 && !(f.win & GBX_FIFO_WIN_FETCHING))
      f.fstep = 1;  // the first tile's number step: read at GBX_FIFO_TILE0_DOT
    else
      lcd_fifo_fetcher_step(b, f, ly, lcdc, true);
    if (f.bg_n == 0) continue;
    if (!(f.discard & 7u)) {
      // Window start.
      const u32 wx = *io_reg(b, 0xFF4B);
      const bool late = f.x && f.x + 6u == wx && !(f.win & GBX_FIFO_WIN_WX_NEW);
      if ((lcdc & 0x20) && (b.lcd_flags & GBX_LCD_FLAG_WY_HIT) &&
          !(f.win & GBX_FIFO_WIN_FETCHING) && (f.x + 7u == wx || late)) {
        // A start one pixel late (WX written to a pixel just drawn, the window enabled there):
        // the DMG's LCD goes back a pixel, so the line from here on is drawn a pixel left
        // (SameBoy display.c's "LCD-PPU horizontal desync").
        if (late && !(f.win & GBX_FIFO_WIN_EN_NEW)) f.win = (u8)(f.win | GBX_FIFO_WIN_SHIFT);
        if (f.win & GBX_FIFO_WIN_SHOWN) b.lcd_win_line++;  // a second start: the next row
        f.win = (u8)((f.win & GBX_FIFO_WIN_SHIFT) | GBX_FIFO_WIN_FETCHING | GBX_FIFO_WIN_SHOWN);
        f.bg_n = 0;
        f.fx = 0;
        f.fstep = 0;  // this dot is the window fetch's first
        lcd_fifo_fetch_read(b, f, ly, lcdc);
        f.fstep = 1;
        continue;
      }
      // WX matched again by the window's pixel x just after a window tile's push: the DMG
      // puts a colour-0 pixel in front of the tile (SameBoy display.c "Insert a pixel right
      // at the FIFO's end"; Mealybug m3_wx_4_change).
      if ((f.win & GBX_FIFO_WIN_FETCHING) && f.fx >= 2u && f.bg_n == 8u && f.fstep == 1u &&
          f.x + 7u == wx && GBX_FIFO_WX_INSERT)
        insert0 = true;
    }
    // An object fetch due at this pixel (one at a time, in X order).
    if (lcd_fifo_object_due(b, f, sel, nobj, lcdc, false)) continue;
    if (!f.bg_n) continue;
    // One pixel leaves the FIFOs.
    u32 bgc = ((f.bg_hi >> 7) & 1u) << 1 | ((f.bg_lo >> 7) & 1u);
    const u32 oc = ((f.ob_hi >> 7) & 1u) << 1 | ((f.ob_lo >> 7) & 1u);
    const bool opal = (f.ob_pal & 0x80) != 0, oprio = (f.ob_prio & 0x80) != 0;
    if (insert0) {
      bgc = 0;
    } else {
      f.bg_lo = (u8)(f.bg_lo << 1);
      f.bg_hi = (u8)(f.bg_hi << 1);
      --f.bg_n;
    }
    if (f.discard & 7u) {
      --f.discard;
      continue;
    }
    f.ob_lo = (u8)(f.ob_lo << 1);
    f.ob_hi = (u8)(f.ob_hi << 1);
    f.ob_pal = (u8)(f.ob_pal << 1);
    f.ob_prio = (u8)(f.ob_prio << 1);
    const u32 c = (lcdc & 0x01) ? bgc : 0u;
    u32 shade = (lcdc & 0x01) ? ((u32)*io_reg(b, 0xFF47) >> (2u * c)) & 3u : 0u;
    if ((lcdc & 0x02) && oc && !(oprio && c)) {
      const u8 pal = *io_reg(b, opal ? 0xFF49 : 0xFF48);
      shade = ((u32)pal >> (2u * oc)) & 3u;
    }
    if (f.win & GBX_FIFO_WIN_SHIFT) {
      lcd_fifo_put_pixel(row, f.x - 1u, shade);
      if (f.x == 159u) lcd_fifo_put_pixel(row, f.x, shade);  // the LCD repeats the last
    } else {
      lcd_fifo_put_pixel(row, f.x, shade);
    }
    ++f.x;
  }
  f.dot_lo = (u8)dot;
  f.dot_hi = (u8)(dot >> 8);
  if (f.x >= 160u) {
    f.active = 0;
    if (f.win & GBX_FIFO_WIN_SHOWN) b.lcd_win_line++;
  }
}

GBX_FN void lcd_fifo_start_line(Machine& b, LcdFifo& f, u32 ly) {
  u8* bytes = (u8*)&f;
  for (u32 i = 0; i < (u32)sizeof(LcdFifo); ++i) bytes[i] = 0;
  f.active = 1;
  f.line = (u8)ly;
  f.stall = GBX_FIFO_FIRST_FETCH_DOTS;
  f.last_tile = 0xFF;
  f.scx7 = (u8)(*io_reg(b, 0xFF43) & 7u);
  f.discard = f.scx7;
  f.scan_lcdc = *io_reg(b, 0xFF40);
  if (ly == *io_reg(b, 0xFF4A)) b.lcd_flags |= GBX_LCD_FLAG_WY_HIT;
}

// Whether line `ly`, drawn whole with the registers as they are, comes out of the FIFO model
// exactly as lcd_draw_line draws it: always, but for the window's WX 0-6 start (dropped
// pixels) which lcd_draw_line does not model.
GBX_FN bool lcd_fifo_line_plain(Machine& b, u32 ly) {
  const u8 lcdc = *io_reg(b, 0xFF40);
  if (!(lcdc & 0x20) || !(lcdc & 0x01)) return true;
  const bool wy = (b.lcd_flags & GBX_LCD_FLAG_WY_HIT) || ly == *io_reg(b, 0xFF4A);
  return !wy || *io_reg(b, 0xFF4B) >= 7u;
}

// Runs the renderer up to `now`: the pipeline of the line in mode 3, lines that are over
// drawn whole, the VBlank swap.
GBX_NOINLINE void lcd_catch_up_slow(Machine& b, i64 now) {
  if (!ppu_lcd_on(b)) {
    b.lcd_next = GBX_NEVER;
    return;
  }
  LcdFifo f;
  lcd_fifo_load(b, f);
  const i64 epoch = GBX_COLD(b, ppu_epoch);
  while (b.lcd_next <= now) {
    const i64 done = f.active ? ((i64)f.dot_lo | (i64)f.dot_hi << 8) : 0;
    const i64 start = b.lcd_next - 1 + GBX_FIFO_WRITE_DOT - done;  // its mode 3 (or VBlank)
    i64 pos = (start - epoch) % GBX_FRAME_CYCLES;
    if (pos < 0) pos += GBX_FRAME_CYCLES;  // never on a valid state; keeps `row` in the buffer
    const i64 frame_start = start - pos;
    const i64 line = pos / GBX_LINE_DOTS;
    if (line >= 144) {
      // As the line renderer's (hw/lcd.h): the first frame after LCD on is not shown (its
      // VBlank leaves the blank front buffer in place).
      b.lcd_flags = lcd_vblank_flags(b.lcd_flags);
      b.lcd_win_line = 0;
      lcd_vblank_swapped(b, frame_start + 144 * GBX_LINE_DOTS);
      f.active = 0;
      f.line = GBX_FIFO_IDLE_LINE;
      b.lcd_next = lcd_fifo_due(lcd_fifo_line_start(frame_start + GBX_FRAME_CYCLES, 0), 0);
      continue;
    }
    const i64 until = now - start + GBX_FIFO_WRITE_DOT;  // dots of mode 3 to have run
    u8* row = lcd_buffer(b, false) + line * GBX_LCD_ROW_BYTES;
    if (!f.active) {
      if ((b.lcd_flags & GBX_LCD_FLAG_SKIP) ||
          !lcd_frame_needed(b, frame_start + 144 * GBX_LINE_DOTS)) {
        f.line = (u8)line;
        b.lcd_next = lcd_fifo_after_line(frame_start, line);
        continue;
      }
      // A line whose mode 3 is over with no write during it: the scanline renderer draws it
      // the same, much faster.
      if (until > GBX_MODE3_MAX_END - GBX_FIFO_START_DOT + GBX_FIFO_LATCH_DOTS &&
          lcd_fifo_line_plain(b, (u32)line)) {
        lcd_draw_line(b, (u32)line, row);
        f.line = (u8)line;
        b.lcd_next = lcd_fifo_after_line(frame_start, line);
        continue;
      }
      lcd_fifo_start_line(b, f, (u32)line);
    }
    lcd_fifo_run(b, f, (u32)line, until, row);
    if (f.active) {
      b.lcd_next = lcd_fifo_due(start, (i64)f.dot_lo | (i64)f.dot_hi << 8);
      break;
    }
    b.lcd_next = lcd_fifo_after_line(frame_start, line);
  }
  lcd_fifo_store(b, f);
}

GBX_FN void lcd_fifo_set_win_flag(Machine& b, u8 flag, bool on) {
  LcdFifo f;
  lcd_fifo_load(b, f);
  f.win = on ? (u8)(f.win | flag) : (u8)(f.win & ~flag);
  lcd_fifo_store(b, f);
}

// Hook (hw/io.h): before a write of `v` to PPU register `addr` (FF40-FF4B). The pipeline runs
// up to the write's dot; the register's new value is in force from there, but for one dot:
//  - DMG palettes (BGP, OBP0, OBP1): the pixel drawn at that dot sees the old and the new
//    value ORed (Mealybug m3_bgp_change / m3_obp0_change: a palette written back after a
//    change shows the new colours one pixel longer);
//  - LCDC: the fetcher sees the new bits at that dot, the pixel drawn then still the old BG
//    and OBJ enables (bits 0, 1), which take effect a dot later (Mealybug
//    m3_lcdc_bg_en_change, m3_lcdc_obj_en_change).
GBX_FN void lcd_fifo_before_reg_write(Machine& b, u32 addr, u8 v) {
  const i64 t = io_time(b);
  lcd_catch_up(b, t);
  u8* reg = io_reg(b, addr);
  const u8 old = *reg;
  if (addr == 0xFF4Bu) {
    // WX: the old value until GBX_FIFO_WX_DELAY dots after the write's, then one dot in which
    // the new value starts the window only on an exact match (no late start).
    lcd_catch_up(b, t + GBX_FIFO_WX_DELAY);
    *reg = v;
    lcd_fifo_set_win_flag(b, GBX_FIFO_WIN_WX_NEW, true);
    lcd_catch_up(b, t + GBX_FIFO_WX_DELAY + 1);
    lcd_fifo_set_win_flag(b, GBX_FIFO_WIN_WX_NEW, false);
    *reg = old;
    return;
  }
  if (addr - 0xFF47u < 3u)
    *reg = (u8)(old | v);
  else if (addr == 0xFF40u) {
    // BG and OBJ enables a dot later, but either cleared while pixel 0 is next: at once
    // (SameBoy's DMG LCDC conflict for OBJ, Mealybug m3_lcdc_obj_en_change; the same for BG,
    // m3_lcdc_bg_en_change: with an object at X 2, pixel 0 lands on the clearing write's dot
    // and is drawn without BG, pixel 1 at that dot with X 3 keeps it).
    u8 keep = (u8)(old & 0x83);
    LcdFifo f;
    lcd_fifo_load(b, f);
    if (f.active && f.x == 0 && GBX_FIFO_LCDC_X0) keep = (u8)(keep & (v | ~0x03));
    // So does OBJ enable cleared during an object fetch it abandons (Mealybug
    // m3_lcdc_obj_en_change_variant: with the object at X 16 the pixel at x 8 leaves at the
    // write's dot, not a dot later).
    if (f.active && lcd_fifo_object_abortable(f)) keep = (u8)(keep & (v | ~0x02));
    // The window switched off while its first tile is fetched: no pixel insertion on this line
    // (lcd_fifo_fetcher_step; SameBoy's disable_window_pixel_insertion_glitch; Mealybug
    // m3_lcdc_win_en_change_multiple_wx, rows 7 and 30-35).
    if (f.active && (old & ~v & 0x20) && (f.win & GBX_FIFO_WIN_FETCHING) && f.fx == 0) {
      f.scan_lcdc = (u8)(f.scan_lcdc & ~0x20);
      lcd_fifo_store(b, f);
    }
    // The window enabled: seen a dot later, and a late start it makes then (WX = x + 6) is
    // drawn without the LCD going back a pixel (m3_lcdc_win_en_change_multiple_wx: WX = x + 7
    // at the write's dot starts the window a pixel late, WX = x + 6 not at all).
    const bool en_new = !(old & 0x20) && (v & 0x20);
    *reg = (u8)(((v & 0x7C) | keep) & ~(en_new ? 0x20 : 0));
    if (en_new) {
      lcd_catch_up(b, t + 1);
      *reg = v;
      lcd_fifo_set_win_flag(b, GBX_FIFO_WIN_EN_NEW, true);
      lcd_catch_up(b, t + 2);
      lcd_fifo_set_win_flag(b, GBX_FIFO_WIN_EN_NEW, false);
      *reg = old;
      return;
    }
  } else
    return;
  lcd_catch_up(b, t + 1);
  *reg = old;
}
#endif  // GBX_RENDER
