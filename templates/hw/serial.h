// Serial port (Pan Docs "Serial Data Transfer") with no link partner. Writing SC with bits 7
// and 0 set (start, internal clock) captures SB into this env's buffer; the 8 bits then shift
// out at 8192 Hz, one at each falling edge of bit 8 of the 16-bit system counter (the clock
// is divided from it, not started by the write: mooneye boot_sclk_align-dmgABCmgb, verified
// on DMG ABC / MGB: "clock edges align based on the *reset time*, not the time when SC is
// written to"; SameBoy's serial master clock follows the same counter). At the 8th edge SB
// reads 0xFF (1s shifted in), SC bit 7 clears and the serial interrupt is requested (an
// event): 3585 to 4096 T-cycles after the write.
#define GBX_SERIAL_BIT_SHIFT 9
#define GBX_SERIAL_BITS 8

// The cycle of the n-th (n >= 1) falling edge of the serial clock after cycle `at`.
GBX_FN i64 serial_edge_after(const Machine& b, i64 at, i64 n) {
  const i64 c = at - GBX_COLD(b, div_epoch);
  return GBX_COLD(b, div_epoch) + (((c >> GBX_SERIAL_BIT_SHIFT) + n) << GBX_SERIAL_BIT_SHIFT);
}

GBX_FN void serial_write_sc(Machine& b, u8 v) {
  *io_reg(b, 0xFF02) = (u8)(v | 0x7E);
  if ((v & 0x81) != 0x81) {
    GBX_COLD(b, serial_event) = GBX_NEVER;  // clearing bit 7 abandons a transfer
    return;
  }
  if (GBX_COLD(b, serial_len) < GBX_SERIAL_CAPACITY)
    serial_buf_of(b)[GBX_COLD(b, serial_len)] = *io_reg(b, 0xFF01);
  GBX_COLD(b, serial_len)++;
  GBX_COLD(b, serial_event) = serial_edge_after(b, io_time(b), GBX_SERIAL_BITS);
}

// DIV written at `now` (before the counter is reset): the edges still to come restart from
// the new counter, and resetting it while bit 8 is 1 is itself a falling edge.
GBX_FN void serial_div_reset(Machine& b, i64 now) {
  const i64 event = GBX_COLD(b, serial_event);
  if (event == GBX_NEVER || event <= now) return;
  const i64 c = now - GBX_COLD(b, div_epoch);
  i64 left =
      ((event - GBX_COLD(b, div_epoch)) >> GBX_SERIAL_BIT_SHIFT) - (c >> GBX_SERIAL_BIT_SHIFT);
  if ((c >> (GBX_SERIAL_BIT_SHIFT - 1)) & 1) --left;
  GBX_COLD(b, serial_event) = now + (left << GBX_SERIAL_BIT_SHIFT);
}

GBX_FN void serial_service(Machine& b, i64 now) {
  if (now < GBX_COLD(b, serial_event)) return;
  *io_reg(b, 0xFF01) = 0xFF;
  *io_reg(b, 0xFF02) &= 0x7F;
  irq_request(b, 0x08);
  GBX_COLD(b, serial_event) = GBX_NEVER;
}
