// Serial port capture (Pan Docs "Serial Data Transfer"). No link partner: writing 0x81 to SC
// (start, internal clock) appends SB to this env's capture buffer, completes the transfer at
// once (SB reads 0xFF, SC bit 7 clears) and raises the serial interrupt.
GBX_FN void serial_write_sc(Bus& b, u8 v) {
  *io_reg(b, 0xFF02) = (u8)(v | 0x7E);
  if ((v & 0x81) != 0x81) return;
  if (b.serial_len < GBX_SERIAL_CAPACITY) b.serial_buf[b.serial_len] = *io_reg(b, 0xFF01);
  b.serial_len++;
  *io_reg(b, 0xFF01) = 0xFF;
  *io_reg(b, 0xFF02) = 0x7F & (u8)(v | 0x7E);
  b.iflag |= 0x08;
}
