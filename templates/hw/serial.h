// Serial port (Pan Docs "Serial Data Transfer") with no link partner. Writing SC with bits 7
// and 0 set (start, internal clock) captures SB into this env's buffer; the 8 bits then shift
// out at 8192 Hz, 512 T-cycles each, so 4096 T-cycles after the write SB reads 0xFF (1s
// shifted in), SC bit 7 clears and the serial interrupt is requested (an event).
#define GBX_SERIAL_TRANSFER_CYCLES 4096

GBX_FN void serial_write_sc(Machine& b, u8 v) {
  *io_reg(b, 0xFF02) = (u8)(v | 0x7E);
  if ((v & 0x81) != 0x81) {
    GBX_COLD(b, serial_event) = GBX_NEVER;  // clearing bit 7 abandons a transfer
    return;
  }
  if (GBX_COLD(b, serial_len) < GBX_SERIAL_CAPACITY)
    serial_buf_of(b)[GBX_COLD(b, serial_len)] = *io_reg(b, 0xFF01);
  GBX_COLD(b, serial_len)++;
  GBX_COLD(b, serial_event) = io_time(b) + GBX_SERIAL_TRANSFER_CYCLES;
}

GBX_FN void serial_service(Machine& b, i64 now) {
  if (now < GBX_COLD(b, serial_event)) return;
  *io_reg(b, 0xFF01) = 0xFF;
  *io_reg(b, 0xFF02) &= 0x7F;
  b.iflag |= 0x08;
  GBX_COLD(b, serial_event) = GBX_NEVER;
}
