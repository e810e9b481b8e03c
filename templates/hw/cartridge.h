// Cartridge controllers (Pan Docs "MBC1"): ROM-only and MBC1 with optional RAM.
GBX_FN void mbc_update_windows(Bus& b) {
  const u32 mask = (b.rom_size >> 14) - 1;  // banks - 1 (rom_size is a power of two)
  u32 low = b.mbc_rom_bank & 0x1F;
  if (low == 0) low = 1;
  const u32 high = (u32)(b.mbc_ram_bank & 3) << 5;
  b.romx = b.rom + (((high | low) & mask) << 14);
  b.rom0 = b.rom + ((b.mbc_mode ? high & mask : 0) << 14);
  const u32 ram_banks = b.cart_ram_size >> 13;
  b.cart_ram_offset = (b.mbc_mode && ram_banks > 1) ? ((b.mbc_ram_bank & 3) % ram_banks) << 13 : 0;
}

GBX_FN void mbc_write(Bus& b, u32 addr, u8 v) {
  if (b.mbc != GBX_MBC_1) return;
  switch (addr >> 13) {
    case 0: b.mbc_ram_enable = (v & 0x0F) == 0x0A; return;
    case 1: b.mbc_rom_bank = v & 0x1F; break;
    case 2: b.mbc_ram_bank = v & 0x03; break;
    default: b.mbc_mode = v & 1; break;
  }
  mbc_update_windows(b);
}

GBX_FN bool cart_ram_present(const Bus& b) {
  return b.cart_ram_size != 0 && (b.mbc == GBX_MBC_NONE || b.mbc_ram_enable);
}

GBX_FN u8 cart_ram_read(Bus& b, u32 addr) {
  if (!cart_ram_present(b)) return 0xFF;
  const u32 off = (b.cart_ram_offset + (addr - 0xA000u)) % b.cart_ram_size;
  return b.mem[GBX_MEM_CART_RAM + off];
}

GBX_FN void cart_ram_write(Bus& b, u32 addr, u8 v) {
  if (!cart_ram_present(b)) return;
  const u32 off = (b.cart_ram_offset + (addr - 0xA000u)) % b.cart_ram_size;
  b.mem[GBX_MEM_CART_RAM + off] = v;
}
