// DIV/TIMA/TMA/TAC (Pan Docs "Timer and Divider Registers"). Caught up lazily: on an access
// to a timer register, and at the next overflow event. Never ticked per M-cycle.
//
// The 16-bit system counter is cycles - div_epoch; DIV is its high byte. TIMA counts falling
// edges of one counter bit (TAC bits 0-1 select bit 9, 3, 5 or 7), i.e. crossings of
// multiples of 2^(bit+1).
GBX_FN u32 timer_shift(u8 tac) {
  const u8 bit = (tac & 3) == 0 ? 9 : (tac & 3) == 1 ? 3 : (tac & 3) == 2 ? 5 : 7;
  return bit + 1;
}

GBX_FN void timer_add(Bus& b, i64 n) {
  u8* tima = io_reg(b, 0xFF05);
  const u8 tma = *io_reg(b, 0xFF06);
  i64 rem = 256 - (i64)*tima;
  if (n < rem) {
    *tima = (u8)(*tima + n);
    return;
  }
  n -= rem;
  b.iflag |= 0x04;
  *tima = (u8)(tma + n % (256 - (i64)tma));
}

GBX_FN void timer_sync(Bus& b, i64 now) {
  const u8 tac = *io_reg(b, 0xFF07);
  if (tac & 4) {
    const u32 s = timer_shift(tac);
    const i64 n = ((now - b.div_epoch) >> s) - ((b.timer_synced - b.div_epoch) >> s);
    if (n > 0) timer_add(b, n);
  }
  b.timer_synced = now;
}

// When the next overflow's interrupt becomes visible (overflow + 4: TIMA reads 00 for one
// M-cycle before TMA is reloaded and IF is set).
GBX_FN void timer_schedule(Bus& b) {
  const u8 tac = *io_reg(b, 0xFF07);
  if (!(tac & 4)) {
    b.timer_event = GBX_NEVER;
    return;
  }
  const u32 s = timer_shift(tac);
  const i64 sc = b.timer_synced - b.div_epoch;
  const i64 rem = 256 - (i64)*io_reg(b, 0xFF05);
  b.timer_event = b.div_epoch + (((sc >> s) + rem) << s) + 4;
}

GBX_FN u8 timer_read_div(Bus& b) { return (u8)((io_time(b) - b.div_epoch) >> 8); }

GBX_FN void timer_write_div(Bus& b, i64 now) {
  timer_sync(b, now);
  const u8 tac = *io_reg(b, 0xFF07);
  // Resetting the counter while the selected bit is 1 is a falling edge: TIMA ticks.
  if ((tac & 4) && (((now - b.div_epoch) >> (timer_shift(tac) - 1)) & 1)) timer_add(b, 1);
  b.div_epoch = now;
  b.timer_synced = now;
}
