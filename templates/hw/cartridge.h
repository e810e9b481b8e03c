// Cartridge controllers (Pan Docs "Memory Bank Controllers"): no controller, MBC1 (and the
// MBC1M multicart wiring), MBC2, MBC3 (with its real-time clock) and MBC5. The controller
// kind is a kernel parameter (GbxParams::mbc), so one kernel serves every cartridge.
#ifndef GBX_RTC_LOCK
#define GBX_RTC_LOCK 0
#endif

// Maps the 0000-3FFF / 4000-7FFF ROM windows and picks the cartridge RAM bank from the
// controller's registers. rom_size is a power of two, so bank numbers wrap like the
// cartridge's unconnected address lines do.
GBX_FN void mbc_update_windows(Machine& b) {
  const u32 mask = (GBX_LAUNCH(b, rom_size) >> 14) - 1;
  const u32 ram_banks = GBX_LAUNCH(b, cart_ram_size) >> 13;
  u32 bank = 1, bank0 = 0, ram_bank = 0;
  switch (GBX_LAUNCH(b, mbc)) {
    case GBX_MBC_1:
    case GBX_MBC_1M: {
      // The zero check sees all 5 bits of BANK1; a multicart then drops bit 4 and puts BANK2
      // at bits 4-5 (Pan Docs "MBC1", "MBC1M").
      const u32 shift = GBX_LAUNCH(b, mbc) == GBX_MBC_1M ? 4u : 5u;
      u32 low = b.mbc_rom_bank & 0x1Fu;
      if (low == 0) low = 1;
      low &= (1u << shift) - 1u;
      const u32 high = (u32)(b.mbc_ram_bank & 3u) << shift;
      bank = high | low;
      if (b.mbc_mode) {
        bank0 = high;
        ram_bank = b.mbc_ram_bank & 3u;
      }
      break;
    }
    case GBX_MBC_2:
      bank = b.mbc_rom_bank & 0x0Fu;
      if (bank == 0) bank = 1;
      break;
    case GBX_MBC_3:
    case GBX_MBC_3_RTC:
      bank = b.mbc_rom_bank & 0x7Fu;
      if (bank == 0) bank = 1;
      ram_bank = b.mbc_ram_bank & 7u;
      break;
    case GBX_MBC_5:
    case GBX_MBC_5_RUMBLE:
      bank = ((u32)(b.mbc_rom_bank_hi & 1u) << 8) | b.mbc_rom_bank;  // bank 0 is bank 0
      ram_bank =
          b.mbc_ram_bank & (GBX_LAUNCH(b, mbc) == GBX_MBC_5_RUMBLE ? 7u : 15u);  // bit 3: the motor
      break;
    default:
      break;
  }
  b.romx = GBX_LAUNCH(b, rom) + ((bank & mask) << 14);
  b.rom0 = GBX_LAUNCH(b, rom) + ((bank0 & mask) << 14);
  b.cart_ram_offset = ram_banks > 1 ? (ram_bank % ram_banks) << 13 : 0;
}

// MBC3 real-time clock (Pan Docs "MBC3"). It counts emulated seconds (4194304 T-cycles each),
// never host time, so a run is a function of its inputs. Caught up lazily like the timer: on
// a latch, on a clock-register write and at the end of every step. With GBX_RTC_LOCK (the
// rtc_lock synthesis parameter) it never moves.
GBX_FN bool mbc_is_mbc3(const Machine& b) {
  return GBX_LAUNCH(b, mbc) == GBX_MBC_3 || GBX_LAUNCH(b, mbc) == GBX_MBC_3_RTC;
}

// One second. Out-of-range values written by software count on to the register's bit width
// and wrap to 0 without a carry, as the counter chain does.
GBX_FN void rtc_tick(u8* r) {
  r[0] = (u8)((r[0] + 1) & 0x3F);
  if (r[0] != 60) return;
  r[0] = 0;
  r[1] = (u8)((r[1] + 1) & 0x3F);
  if (r[1] != 60) return;
  r[1] = 0;
  r[2] = (u8)((r[2] + 1) & 0x1F);
  if (r[2] != 24) return;
  r[2] = 0;
  r[3] = (u8)(r[3] + 1);
  if (r[3] != 0) return;
  if (!(r[4] & 1)) {
    r[4] |= 1;
    return;
  }
  r[4] = (u8)((r[4] & 0x40) | 0x80);  // day 511 -> 0 sets the carry, which stays until cleared
}

GBX_FN void rtc_advance(u8* r, i64 n) {
  while (n > 0 && (r[0] >= 60 || r[1] >= 60 || r[2] >= 24)) {
    rtc_tick(r);
    --n;
  }
  if (n <= 0) return;
  i64 days = ((i64)(r[4] & 1) << 8) | r[3];
  i64 secs = r[0] + 60 * (r[1] + 60 * (i64)r[2]) + n;
  days += secs / 86400;
  secs %= 86400;
  r[0] = (u8)(secs % 60);
  r[1] = (u8)(secs / 60 % 60);
  r[2] = (u8)(secs / 3600);
  u8 dh = (u8)(r[4] & 0xC0);
  if (days >= 512) {
    dh |= 0x80;
    days &= 511;
  }
  r[3] = (u8)days;
  r[4] = (u8)(dh | (days >> 8));
}

GBX_FN void rtc_sync(Machine& b, i64 now) {
  // Halted (DH bit 6) or locked: nothing counts; the second restarts when the clock does.
  if (GBX_RTC_LOCK || (rtc_of(b)[4] & 0x40)) {
    GBX_COLD(b, rtc_second_start) = now;
    return;
  }
  const i64 n = (now - GBX_COLD(b, rtc_second_start)) / GBX_RTC_CYCLES_PER_SECOND;
  if (n <= 0) return;
  GBX_COLD(b, rtc_second_start) += n * GBX_RTC_CYCLES_PER_SECOND;
  rtc_advance(rtc_of(b), n);
}

GBX_FN void rtc_latch_write(Machine& b, u8 v) {
  if (GBX_LAUNCH(b, mbc) == GBX_MBC_3_RTC && b.mbc_rtc_latch == 0 && v == 1) {
    rtc_sync(b, io_time(b));
    for (u32 i = 0; i < 5; ++i) rtc_of(b)[5 + i] = rtc_of(b)[i];
  }
  b.mbc_rtc_latch = v;
}

GBX_FN void rtc_write(Machine& b, u32 reg, u8 v) {
  rtc_sync(b, io_time(b));
  // Bits each register has (S, M: 6; H: 5; DL: 8; DH: day bit 8, halt, carry); no table, so
  // a GPU thread keeps nothing in local memory for it.
  const u8 bits = reg == 2 ? 0x1F : reg == 3 ? 0xFF : reg == 4 ? 0xC1 : 0x3F;
  rtc_of(b)[reg] = (u8)(v & bits);
  if (reg == 0) GBX_COLD(b, rtc_second_start) = io_time(b);  // writing seconds restarts the second
}

GBX_FN void mbc_write(Machine& b, u32 addr, u8 v) {
  switch (GBX_LAUNCH(b, mbc)) {
    case GBX_MBC_1:
    case GBX_MBC_1M:
      switch (addr >> 13) {
        case 0:
          b.mbc_ram_enable = (v & 0x0F) == 0x0A;
          return;
        case 1:
          b.mbc_rom_bank = v & 0x1F;
          break;
        case 2:
          b.mbc_ram_bank = v & 0x03;
          break;
        default:
          b.mbc_mode = v & 1;
          break;
      }
      break;
    case GBX_MBC_2:
      // Address bit 8 selects the register (Pan Docs "MBC2"); 4000-7FFF is not decoded.
      if (addr >= 0x4000u) return;
      if (!(addr & 0x100u)) {
        b.mbc_ram_enable = (v & 0x0F) == 0x0A;
        return;
      }
      b.mbc_rom_bank = v & 0x0F;
      break;
    case GBX_MBC_3:
    case GBX_MBC_3_RTC:
      switch (addr >> 13) {
        case 0:
          b.mbc_ram_enable = (v & 0x0F) == 0x0A;
          return;
        case 1:
          b.mbc_rom_bank = v & 0x7F;
          break;
        case 2:
          b.mbc_ram_bank = v & 0x0F;
          break;  // 00-07 RAM bank, 08-0C clock register
        default:
          rtc_latch_write(b, v);
          return;
      }
      break;
    case GBX_MBC_5:
    case GBX_MBC_5_RUMBLE:
      // MBC5 compares the whole byte with 0x0A (gekkio, "Game Boy: Complete Technical
      // Reference", MBC5), unlike MBC1's low nibble.
      if (addr < 0x2000u) {
        b.mbc_ram_enable = v == 0x0A;
        return;
      }
      if (addr < 0x3000u)
        b.mbc_rom_bank = v;
      else if (addr < 0x4000u)
        b.mbc_rom_bank_hi = v & 1;
      else if (addr < 0x6000u)
        b.mbc_ram_bank = v & 0x0F;
      else
        return;
      break;
    default:
      return;
  }
  mbc_update_windows(b);
}

GBX_FN bool cart_ram_enabled(const Machine& b) {
  return GBX_LAUNCH(b, mbc) == GBX_MBC_NONE ? GBX_LAUNCH(b, cart_ram_size) != 0
                                            : b.mbc_ram_enable != 0;
}

// What A000-BFFF holds under the current banking, whether or not the RAM is enabled: the
// selected RAM bank, the latched clock register, or 0xFF where nothing drives the bus.
GBX_FN u8 cart_ram_peek(Machine& b, u32 addr) {
  if (mbc_is_mbc3(b) && b.mbc_ram_bank >= 8) {
    if (GBX_LAUNCH(b, mbc) == GBX_MBC_3_RTC && b.mbc_ram_bank <= 0x0C)
      return rtc_of(b)[5 + b.mbc_ram_bank - 8];
    return 0xFF;
  }
  if (GBX_LAUNCH(b, cart_ram_size) == 0) return 0xFF;
  // MBC2: 512 half-bytes repeated through A000-BFFF; the upper nibble is not driven.
  if (GBX_LAUNCH(b, mbc) == GBX_MBC_2)
    return (u8)(0xF0 | mem_at(b, GBX_MEM_CART_RAM + (addr & 0x1FFu)));
  const u32 off = (b.cart_ram_offset + (addr - 0xA000u)) % GBX_LAUNCH(b, cart_ram_size);
  return mem_at(b, GBX_MEM_CART_RAM + off);
}

GBX_FN u8 cart_ram_read(Machine& b, u32 addr) {
  if (!cart_ram_enabled(b)) return 0xFF;
  return cart_ram_peek(b, addr);
}

GBX_FN void cart_ram_write(Machine& b, u32 addr, u8 v) {
  if (!cart_ram_enabled(b)) return;
  if (mbc_is_mbc3(b) && b.mbc_ram_bank >= 8) {
    if (GBX_LAUNCH(b, mbc) == GBX_MBC_3_RTC && b.mbc_ram_bank <= 0x0C)
      rtc_write(b, b.mbc_ram_bank - 8u, v);
    return;
  }
  if (GBX_LAUNCH(b, cart_ram_size) == 0) return;
  if (GBX_LAUNCH(b, mbc) == GBX_MBC_2) {
    mem_at(b, GBX_MEM_CART_RAM + (addr & 0x1FFu)) = (u8)(v | 0xF0);  // as mGBA stores it in .sav
    return;
  }
  const u32 off = (b.cart_ram_offset + (addr - 0xA000u)) % GBX_LAUNCH(b, cart_ram_size);
  mem_at(b, GBX_MEM_CART_RAM + off) = v;
}
