// PPU timing (Pan Docs "Rendering", "LCD Status Registers"), caught up lazily like the timer:
// LY, the STAT mode and the LYC flag are computed from the cycle counter on access; the
// VBlank and STAT interrupts are events. A frame is 154 lines of 456 dots; mode 2 (OAM scan)
// takes dots 0-79, mode 3 (drawing) a fixed 172 dots, then mode 0 (HBlank); lines 144-153
// are mode 1 (VBlank). Pixels are not rendered yet.
#define GBX_LINE_DOTS 456
#define GBX_MODE3_END 252

GBX_FN bool ppu_lcd_on(Bus& b) { return (*io_reg(b, 0xFF40) & 0x80) != 0; }

// Dots since the start of the current frame (0..70223); 0 when the LCD is off.
GBX_FN i64 ppu_pos(Bus& b, i64 at) {
  if (!ppu_lcd_on(b)) return 0;
  return (at - b.ppu_epoch) % GBX_FRAME_CYCLES;
}

GBX_FN u8 ppu_mode_at(i64 pos) {
  const i64 line = pos / GBX_LINE_DOTS, dot = pos % GBX_LINE_DOTS;
  if (line >= 144) return 1;
  return dot < 80 ? 2 : dot < GBX_MODE3_END ? 3 : 0;
}

GBX_FN u8 ppu_ly(Bus& b) { return (u8)(ppu_pos(b, io_time(b)) / GBX_LINE_DOTS); }

GBX_FN u8 ppu_stat(Bus& b) {
  const u8 stat = *io_reg(b, 0xFF41);
  const i64 pos = ppu_pos(b, io_time(b));
  const u8 mode = ppu_lcd_on(b) ? ppu_mode_at(pos) : 0;
  const u8 coincidence = (u8)(pos / GBX_LINE_DOTS) == *io_reg(b, 0xFF45) ? 4 : 0;
  return (u8)(0x80 | (stat & 0x78) | coincidence | mode);
}

// IF bits the PPU raises at exactly this frame position.
GBX_FN u8 ppu_irq_at(Bus& b, i64 pos) {
  const u8 stat = *io_reg(b, 0xFF41);
  const i64 line = pos / GBX_LINE_DOTS, dot = pos % GBX_LINE_DOTS;
  u8 irq = 0;
  if (dot == 0) {
    if (line == 144) {
      irq |= 0x01;
      if (stat & 0x10) irq |= 0x02;
    }
    if ((stat & 0x40) && line == *io_reg(b, 0xFF45)) irq |= 0x02;
    if ((stat & 0x20) && line < 144) irq |= 0x02;
  } else if (dot == GBX_MODE3_END && line < 144 && (stat & 0x08)) {
    irq |= 0x02;
  }
  return irq;
}

// The next cycle after `after` at which the PPU raises an interrupt (VBlank at least once
// a frame while the LCD is on).
GBX_FN void ppu_schedule(Bus& b, i64 after) {
  if (!ppu_lcd_on(b)) {
    b.ppu_event = GBX_NEVER;
    return;
  }
  const i64 pos = ppu_pos(b, after);
  const i64 frame_start = after - pos;
  // Points of interest are dot 0 and dot 252 of each line; look at most one frame ahead.
  const i64 first_line = pos / GBX_LINE_DOTS;
  for (i64 line = first_line; line <= first_line + 154; ++line) {
    for (i64 d = 0; d <= GBX_MODE3_END; d += GBX_MODE3_END) {
      const i64 at = line * GBX_LINE_DOTS + d;
      if (at > pos && ppu_irq_at(b, at % GBX_FRAME_CYCLES)) {
        b.ppu_event = frame_start + at;
        return;
      }
    }
  }
  b.ppu_event = GBX_NEVER;
}

GBX_FN void ppu_service(Bus& b, i64 now) {
  while (b.ppu_event <= now) {
    b.iflag |= ppu_irq_at(b, ppu_pos(b, b.ppu_event));
    ppu_schedule(b, b.ppu_event);
  }
}

GBX_FN void ppu_write_lcdc(Bus& b, u8 v) {
  const bool was_on = ppu_lcd_on(b);
  *io_reg(b, 0xFF40) = v;
  // Switching the LCD on starts a frame at line 0.
  if (!was_on && (v & 0x80)) b.ppu_epoch = io_time(b);
  ppu_schedule(b, io_time(b));
}
