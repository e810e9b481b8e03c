// I/O registers 0xFF00-0xFF7F and IE (Pan Docs "Memory Map", "I/O Ranges"). Registers with
// side effects are dispatched here; the rest are plain bytes in the env's I/O page.
GBX_FN void events_reschedule(Bus& b) {
  i64 next = b.timer_event < b.ppu_event ? b.timer_event : b.ppu_event;
  b.next_event = b.serial_event < next ? b.serial_event : next;
}

// Bits that read as 1 whatever was written (unused bits, write-only registers, unmapped
// registers); measured on mGBA, matching Pan Docs' register descriptions.
GBX_FN u8 io_read_mask(u32 addr) {
  const u32 r = addr & 0xFFu;
  switch (r) {
    case 0x02: return 0x7E;
    case 0x07: return 0xF8;
    case 0x0F: return 0xE0;
    case 0x10: return 0x80;
    case 0x11: case 0x16: return 0x3F;
    case 0x13: case 0x18: case 0x1B: case 0x1D: case 0x20: return 0xFF;
    case 0x14: case 0x19: case 0x1E: case 0x23: return 0xBF;
    case 0x1A: return 0x7F;
    case 0x1C: return 0x9F;
    case 0x26: return 0x70;
    case 0x41: return 0x80;
    case 0x03: case 0x15: case 0x1F: return 0xFF;
    default:
      if ((r >= 0x08 && r <= 0x0E) || (r >= 0x27 && r <= 0x2F) || (r >= 0x4C && r <= 0x7F))
        return 0xFF;
      return 0x00;
  }
}

GBX_FN u8 joyp_read(Bus& b) {
  const u8 sel = *io_reg(b, 0xFF00) & 0x30;
  u8 pressed = 0;  // active-high here, inverted on the way out
  if (!(sel & 0x10)) pressed |= (u8)(b.joyp_buttons >> 4);    // P14: directions
  if (!(sel & 0x20)) pressed |= (u8)(b.joyp_buttons & 0x0F);  // P15: buttons
  return (u8)(0xC0 | sel | (~pressed & 0x0F));
}

GBX_NOINLINE u8 io_read(Bus& b, u32 addr) {
  switch (addr) {
    case 0xFF00: return joyp_read(b);
    case 0xFF04: return timer_read_div(b);
    case 0xFF05: timer_sync(b, io_time(b)); return *io_reg(b, addr);
    case 0xFF0F: timer_sync(b, io_time(b)); return (u8)(0xE0 | b.iflag);
    case 0xFF41: return ppu_stat(b);
    case 0xFF44: return ppu_ly(b);
    case 0xFFFF: return b.ie;
    default: return *io_reg(b, addr);
  }
}

GBX_NOINLINE void io_write(Bus& b, u32 addr, u8 v);

GBX_FN void oam_dma(Bus& b, u8 page);

GBX_NOINLINE void io_write(Bus& b, u32 addr, u8 v) {
  if (addr - 0xFF40u < 0x0Cu) lcd_before_write(b);
  switch (addr) {
    case 0xFF00: *io_reg(b, addr) = (u8)(0xC0 | (v & 0x30) | 0x0F); return;
    case 0xFF02:
      serial_write_sc(b, v);
      events_reschedule(b);
      return;
    case 0xFF04:
      timer_write_div(b, io_time(b));
      break;
    case 0xFF05:
    case 0xFF06:
      timer_sync(b, io_time(b));
      *io_reg(b, addr) = v;
      break;
    case 0xFF07:
      timer_sync(b, io_time(b));
      *io_reg(b, addr) = (u8)(0xF8 | v);
      break;
    case 0xFF0F: b.iflag = v & 0x1F; return;
    case 0xFF40:
      ppu_service(b, io_time(b));  // interrupts due before this write happen first
      ppu_write_lcdc(b, v);
      lcd_lcdc_written(b);
      break;
    case 0xFF41:
      ppu_service(b, io_time(b));
      *io_reg(b, addr) = (u8)(0x80 | (v & 0x78));
      ppu_schedule(b, io_time(b));
      break;
    case 0xFF44: return;  // LY is read-only
    case 0xFF45:
      ppu_service(b, io_time(b));
      *io_reg(b, addr) = v;
      ppu_schedule(b, io_time(b));
      break;
    case 0xFF46:
      *io_reg(b, addr) = v;
      oam_dma(b, v);
      return;
    case 0xFFFF: b.ie = v; return;
    case 0xFF26: *io_reg(b, addr) = (u8)(0x70 | (v & 0x80)); return;  // APU not emulated
    default: *io_reg(b, addr) = (u8)(v | io_read_mask(addr)); return;
  }
  timer_schedule(b);
  events_reschedule(b);
}
