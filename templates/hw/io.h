// I/O registers 0xFF00-0xFF7F and IE (Pan Docs "Memory Map", "I/O Ranges"). Registers with
// side effects are dispatched here; the rest are plain bytes in the env's I/O page.
GBX_FN void events_reschedule(Bus& b) {
  b.next_event = b.timer_event < b.ppu_event ? b.timer_event : b.ppu_event;
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
    case 0xFF05: timer_sync(b, b.cycles); return *io_reg(b, addr);
    case 0xFF0F: timer_sync(b, b.cycles); return (u8)(0xE0 | b.iflag);
    case 0xFF41: return ppu_stat(b);
    case 0xFF44: return ppu_ly(b);
    case 0xFFFF: return b.ie;
    default: return *io_reg(b, addr);
  }
}

GBX_NOINLINE void io_write(Bus& b, u32 addr, u8 v);

GBX_FN void oam_dma(Bus& b, u8 page);

GBX_NOINLINE void io_write(Bus& b, u32 addr, u8 v) {
  switch (addr) {
    case 0xFF00: *io_reg(b, addr) = (u8)(0xC0 | (v & 0x30) | 0x0F); return;
    case 0xFF02: serial_write_sc(b, v); return;
    case 0xFF04:
      timer_write_div(b);
      break;
    case 0xFF05:
    case 0xFF06:
      timer_sync(b, b.cycles);
      *io_reg(b, addr) = v;
      break;
    case 0xFF07:
      timer_sync(b, b.cycles);
      *io_reg(b, addr) = (u8)(0xF8 | v);
      break;
    case 0xFF0F: b.iflag = v & 0x1F; return;
    case 0xFF40:
      ppu_service(b);  // interrupts due before this write happen first
      ppu_write_lcdc(b, v);
      break;
    case 0xFF41:
      ppu_service(b);
      *io_reg(b, addr) = (u8)(0x80 | (v & 0x78));
      ppu_schedule(b, b.cycles);
      break;
    case 0xFF44: return;  // LY is read-only
    case 0xFF45:
      ppu_service(b);
      *io_reg(b, addr) = v;
      ppu_schedule(b, b.cycles);
      break;
    case 0xFF46:
      *io_reg(b, addr) = v;
      oam_dma(b, v);
      return;
    case 0xFFFF: b.ie = v; return;
    default: *io_reg(b, addr) = v; return;
  }
  timer_schedule(b);
  events_reschedule(b);
}
