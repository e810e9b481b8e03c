// Cartridge controllers (MBC1 large ROMs, MBC1M, MBC2, MBC3 + RTC, MBC5), ROM loading rules,
// battery saves and the kernel's memory-read entry point, on hand-assembled ROMs. Expected
// values come from Pan Docs "Memory Bank Controllers" and "The Cartridge Header".
// ROM loading, memory reads, battery files and rtc_lock: test_cartridges/loading_and_tools.cpp.
#include <doctest/doctest.h>

#include "test_cartridges/common.h"

TEST_CASE("MBC5: 9-bit ROM bank, bank 0 selectable, 16 RAM banks, full-byte RAM enable") {
  Asm a;
  // 0x1FF: low 8 bits at 2000-2FFF, bit 8 at 3000-3FFF.
  put(a, 0x2000, 0xFF);
  put(a, 0x3000, 0x01);
  copy(a, 0x6000, 0xC000);
  copy(a, 0x6001, 0xC001);
  put(a, 0x2000, 0x00);  // 0x100
  copy(a, 0x6000, 0xC002);
  copy(a, 0x6001, 0xC003);
  put(a, 0x3000, 0x02);  // only bit 0 counts: bank 0x000, which MBC5 maps as bank 0
  copy(a, 0x6000, 0xC004);
  copy(a, 0x6001, 0xC005);
  put(a, 0x2000, 0x2A);
  copy(a, 0x6000, 0xC006);
  // RAM: write the bank number into each of the 16 banks, then read them back.
  put(a, 0x0000, 0x0A);
  a.op("LD C,d8", 0).label("wr").op("LD A,C").op("LD (a16),A", 0x4000).op("LD (a16),A", 0xA123);
  a.op("INC C").op("LD A,C").op("CP d8", 16).op("JR NZ,r8", "wr");
  a.op("LD HL,d16", 0xC010).op("LD C,d8", 0).label("rd").op("LD A,C").op("LD (a16),A", 0x4000);
  a.op("LD A,(a16)", 0xA123).op("LD (HL+),A").op("INC C").op("LD A,C").op("CP d8", 16);
  a.op("JR NZ,r8", "rd");
  put(a, 0x0000, 0x1A);  // low nibble A but not 0x0A: MBC5 disables
  copy(a, 0xA123, 0xC007);
  put(a, 0x0000, 0x0A);
  copy(a, 0xA123, 0xC008);
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x1B;      // MBC5+RAM+BATTERY
  s.rom_size_code = 0x08;  // 8 MiB, 512 banks
  s.ram_size_code = 0x04;  // 128 KiB, 16 banks
  mark_banks(s, 512);
  const gbx::Rom rom = load(build(s, a), "mbc5_banks");
  CHECK(rom.header.mbc == GBX_MBC_5);
  auto be = run(rom, 2);
  const Bytes m = mem(*be, 0xC000, 0xC020);
  CHECK(m[0] == 0xFF);
  CHECK(m[1] == 0x01);
  CHECK(m[2] == 0x00);
  CHECK(m[3] == 0x01);
  CHECK(m[4] == 0x00);
  CHECK(m[5] == 0x00);
  CHECK(m[6] == 0x2A);
  CHECK(m[7] == 0xFF);
  CHECK(m[8] == 0x0F);  // the last bank written and read was 15
  for (int i = 0; i < 16; ++i) CHECK(m[0x10 + i] == i);
}

TEST_CASE("MBC5 rumble carts: RAM bank bit 3 drives the motor, not the RAM") {
  Asm a;
  put(a, 0x0000, 0x0A);
  put(a, 0x4000, 0x00);
  put(a, 0xA000, 0x11);
  put(a, 0x4000, 0x01);
  put(a, 0xA000, 0x22);
  put(a, 0x4000, 0x08);  // bank 0 with the motor on
  copy(a, 0xA000, 0xC000);
  put(a, 0x4000, 0x09);
  copy(a, 0xA000, 0xC001);
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x1E;  // MBC5+RUMBLE+RAM+BATTERY
  s.rom_size_code = 0x01;
  s.ram_size_code = 0x03;  // 32 KiB, 4 banks
  const gbx::Rom rom = load(build(s, a), "mbc5_rumble");
  CHECK(rom.header.mbc == GBX_MBC_5_RUMBLE);
  auto be = run(rom, 1);
  const Bytes m = mem(*be, 0xC000, 0xC002);
  CHECK(m[0] == 0x11);
  CHECK(m[1] == 0x22);
}

TEST_CASE("MBC2: register select by address bit 8, 512 x 4-bit RAM echoed through A000-BFFF") {
  Asm a;
  put(a, 0x2100, 0x05);  // bit 8 set: ROM bank
  copy(a, 0x6000, 0xC000);
  put(a, 0x2000, 0x03);  // bit 8 clear: the RAM-enable register, the bank stays 5
  copy(a, 0x6000, 0xC001);
  put(a, 0x0100, 0x07);  // any address in 0000-3FFF with bit 8 set
  copy(a, 0x6000, 0xC002);
  put(a, 0x2100, 0x00);  // bank 0 reads as bank 1
  copy(a, 0x6000, 0xC003);
  put(a, 0x2100, 0x1F);  // 4 bits: 0x0F
  copy(a, 0x6000, 0xC004);
  copy(a, 0xA000, 0xC005);  // RAM disabled: 0xFF
  put(a, 0x0000, 0x0A);
  put(a, 0xA000, 0x5C);
  copy(a, 0xA000, 0xC006);  // low nibble kept, upper reads 1s: 0xFC
  copy(a, 0xA200, 0xC007);  // echo
  put(a, 0xA1FF, 0x03);
  copy(a, 0xBFFF, 0xC008);
  put(a, 0x4000, 0x0A);  // 4000-7FFF: no register
  copy(a, 0x6000, 0xC009);
  put(a, 0x0000, 0x00);  // RAM off
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x06;      // MBC2+BATTERY
  s.rom_size_code = 0x03;  // 256 KiB, 16 banks
  mark_banks(s, 16);
  const gbx::Rom rom = load(build(s, a), "mbc2_banks");
  CHECK(rom.header.mbc == GBX_MBC_2);
  CHECK(rom.header.ram_size == 512);
  auto be = run(rom, 1);
  const Bytes m = mem(*be, 0xC000, 0xC00A);
  CHECK(m[0] == 5);
  CHECK(m[1] == 5);
  CHECK(m[2] == 7);
  CHECK(m[3] == 1);
  CHECK(m[4] == 0x0F);
  CHECK(m[5] == 0xFF);
  CHECK(m[6] == 0xFC);
  CHECK(m[7] == 0xFC);
  CHECK(m[8] == 0xF3);
  CHECK(m[9] == 0x0F);
  // Disabled RAM: the memory view shows 0xFF, the raw view what the chip holds.
  CHECK(mem(*be, 0xA000, 0xA001)[0] == 0xFF);
  auto raw = be->read_memory_raw(0, 0xA000, 0xA001);
  REQUIRE(raw.ok());
  CHECK(raw.value()[0] == 0xFC);
}

TEST_CASE("MBC3: 7-bit ROM bank, 4 RAM banks, RTC latch and emulated-time clock") {
  const gbx::Rom rom = load(mbc3_program_rom(), "mbc3_rtc");
  CHECK(rom.header.mbc == GBX_MBC_3_RTC);
  CHECK(rom.header.has_rtc);
  // About 6.6 s of waiting: 420 frames is 7.03 s.
  auto be = run(rom, 420);
  const Bytes m = mem(*be, 0xC000, 0xC018);
  CHECK(m[0] == 0x20);
  CHECK(m[1] == 0x01);
  CHECK(m[2] == 0x7F);
  for (int b = 0; b < 4; ++b) CHECK(m[4 + b] == 0x40 + b);
  // Two seconds after 511 days 23:59:58: 00:00:00 of day 0 with the day carry set.
  CHECK(m[0x10] == 0);
  CHECK(m[0x11] == 0);
  CHECK(m[0x12] == 0);
  CHECK(m[0x13] == 0);
  CHECK(m[0x14] == 0x80);
  CHECK(m[0x15] == 0);  // latched value, not the running clock
  CHECK(m[0x16] == 2);  // 4.4 s after the set: 4 whole seconds past 58
  CHECK(m[0x17] == 2);  // halted: no count
  SUBCASE("the clock is a function of emulated cycles: same run, same bytes") {
    auto again = run(rom, 420);
    CHECK(mem(*again, 0xC000, 0xC018) == m);
  }
  SUBCASE("--rtc-lock freezes it") {
    auto locked = run(rom, 420, true);
    const Bytes l = mem(*locked, 0xC010, 0xC018);
    CHECK(l[0] == 58);
    CHECK(l[1] == 59);
    CHECK(l[2] == 23);
    CHECK(l[3] == 0xFF);
    CHECK(l[4] == 0x01);
    CHECK(l[6] == 58);
  }
}

TEST_CASE("MBC3 RTC: out-of-range values count to the register width and wrap without carry") {
  Asm a;
  put(a, 0x0000, 0x0A);
  put(a, 0x4000, 0x08);
  put(a, 0xA000, 62);  // 62 -> 63 -> 0 (no minute carry) -> 1
  put(a, 0x4000, 0x09);
  put(a, 0xA000, 0x00);
  wait_outer(a, 7, "a");  // about 3.06 s
  put(a, 0x6000, 0x00);
  put(a, 0x6000, 0x01);
  put(a, 0x4000, 0x08);
  copy(a, 0xA000, 0xC000);
  put(a, 0x4000, 0x09);
  copy(a, 0xA000, 0xC001);
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x0F;  // MBC3+TIMER+BATTERY
  s.rom_size_code = 0x01;
  auto be = run(load(build(s, a), "mbc3_rtc_wrap"), 200);
  const Bytes m = mem(*be, 0xC000, 0xC002);
  CHECK(m[0] == 1);
  CHECK(m[1] == 0);
}

TEST_CASE("MBC1 on a 2 MiB ROM: BANK2 supplies bank bits 5-6, and 0000-3FFF in mode 1") {
  Asm a;
  put(a, 0x4000, 0x03);
  put(a, 0x2000, 0x1F);
  copy(a, 0x6000, 0xC000);  // 0x7F
  put(a, 0x2000, 0x00);
  copy(a, 0x6000, 0xC001);  // 0x61: the zero check sees BANK1 only
  put(a, 0x6000, 0x01);
  copy(a, 0x2000, 0xC002);  // mode 1: 0000-3FFF is bank 0x60
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x01;
  s.rom_size_code = 0x06;
  mark_banks(s, 128);
  auto be = run(load(build(s, a, {0x60}), "mbc1_2mib"), 1);
  const Bytes m = mem(*be, 0xC000, 0xC003);
  CHECK(m[0] == 0x7F);
  CHECK(m[1] == 0x61);
  CHECK(m[2] == 0x60);
}

namespace {

Bytes mbc1m_rom(bool logo_at_bank_10) {
  Asm a;
  put(a, 0x4000, 0x01);
  put(a, 0x2000, 0x01);
  copy(a, 0x6000, 0xC000);  // multicart: (1 << 4) | 1 = 0x11; plain MBC1: 0x21
  put(a, 0x2000, 0x10);
  copy(a, 0x6000, 0xC001);  // BANK1 = 0x10 is not zero, bit 4 unwired: 0x10 (MBC1: 0x30)
  put(a, 0x6000, 0x01);
  copy(a, 0x2000, 0xC002);  // mode 1: 0000-3FFF is bank 0x10 (MBC1: 0x20)
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x01;
  s.rom_size_code = 0x05;  // 1 MiB
  mark_banks(s, 64);
  Bytes rom = build(s, a, {0x10, 0x20});
  std::memcpy(rom.data() + 0x104, kLogo, sizeof kLogo);
  if (logo_at_bank_10) std::memcpy(rom.data() + 0x40104, kLogo, sizeof kLogo);
  fix_header_checksum(rom);
  return rom;
}

}  // namespace

TEST_CASE("MBC1M multicarts: detected by the logo at bank 0x10, BANK1 bit 4 unwired") {
  const gbx::Rom multi = load(mbc1m_rom(true), "mbc1m");
  CHECK(multi.header.mbc == GBX_MBC_1M);
  auto be = run(multi, 1);
  Bytes m = mem(*be, 0xC000, 0xC003);
  CHECK(m[0] == 0x11);
  CHECK(m[1] == 0x10);
  CHECK(m[2] == 0x10);
  const gbx::Rom plain = load(mbc1m_rom(false), "mbc1_1mib");
  CHECK(plain.header.mbc == GBX_MBC_1);
  be = run(plain, 1);
  m = mem(*be, 0xC000, 0xC003);
  CHECK(m[0] == 0x21);
  CHECK(m[1] == 0x30);
  CHECK(m[2] == 0x20);
}

// MBC1 edge cases on a small cartridge (Pan Docs "MBC1"; gekkio, "Game Boy: Complete
// Technical Reference", MBC1): the registers are decoded by A13-A14 only, so any address in
// a register's range writes it; RAMG enables on a low nibble of 0xA whatever the high one;
// the 00 -> 01 translation looks at the 5-bit BANK1 register, not the bank after masking to
// the ROM size (0x10 on a 16-bank ROM is bank 0 in 4000-7FFF); mode 1 banks the RAM with
// BANK2 and would bank 0000-3FFF too, but BANK2 << 5 is beyond a 256 KiB ROM (bank 0 there).
TEST_CASE("MBC1 on a 256 KiB ROM: register decoding, RAMG low nibble, BANK1 zero check, modes") {
  Asm a;
  put(a, 0x3FFF, 0x13);  // BANK1 = 0x13: bank 3 (16 banks)
  copy(a, 0x6000, 0xC000);
  put(a, 0x2000, 0x20);  // BANK1 = 0x00 (5 bits): bank 1
  copy(a, 0x6000, 0xC001);
  put(a, 0x2ABC, 0x10);  // BANK1 = 0x10: not zero, so no translation; masked to bank 0
  copy(a, 0x6000, 0xC002);
  put(a, 0x2000, 0x01);
  put(a, 0x1FFF, 0xFA);  // RAMG low nibble A: enabled
  put(a, 0xA000, 0x77);
  copy(a, 0xA000, 0xC003);
  put(a, 0x0123, 0x0B);  // disabled
  copy(a, 0xA000, 0xC004);
  put(a, 0x1000, 0x0A);
  put(a, 0x7FFF, 0x01);  // mode 1
  put(a, 0x5FFF, 0x02);  // BANK2 = 2: RAM bank 2
  put(a, 0xA000, 0x22);
  copy(a, 0x2000, 0xC005);  // 0000-3FFF: bank (2 << 5) & 15 = 0
  copy(a, 0x6000, 0xC006);  // 4000-7FFF: (2 << 5 | 1) & 15 = 1
  put(a, 0x4000, 0x00);
  copy(a, 0xA000, 0xC007);  // RAM bank 0
  put(a, 0x4000, 0x02);
  put(a, 0x6000, 0x00);  // mode 0: RAM bank 0 whatever BANK2 says
  copy(a, 0xA000, 0xC008);
  put(a, 0x6000, 0x01);
  copy(a, 0xA000, 0xC009);  // mode 1 again: bank 2
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x03;      // MBC1+RAM+BATTERY
  s.rom_size_code = 0x03;  // 256 KiB, 16 banks
  s.ram_size_code = 0x03;  // 32 KiB, 4 banks
  mark_banks(s, 16);
  auto be = run(load(build(s, a), "mbc1_small"), 2);
  const Bytes m = mem(*be, 0xC000, 0xC00A);
  CHECK(m[0] == 3);
  CHECK(m[1] == 1);
  CHECK(m[2] == 0);
  CHECK(m[3] == 0x77);
  CHECK(m[4] == 0xFF);
  CHECK(m[5] == 0);
  CHECK(m[6] == 1);
  CHECK(m[7] == 0x77);
  CHECK(m[8] == 0x77);
  CHECK(m[9] == 0x22);
}

// MBC2 (Pan Docs "MBC2"): in 0000-3FFF address bit 8 picks the register anywhere in the range
// (3FFF: ROMB), ROMB is 4 bits with 0 -> 1, and 4000-7FFF is not decoded at all.
TEST_CASE("MBC2: ROMB 4 bits with the zero check, 4000-7FFF not decoded") {
  Asm a;
  put(a, 0x3FFF, 0x13);  // bit 8 set: ROMB = 3
  copy(a, 0x6000, 0xC000);
  put(a, 0x2100, 0x10);  // ROMB = 0 -> bank 1
  copy(a, 0x6000, 0xC001);
  put(a, 0x2100, 0x05);
  put(a, 0x4100, 0x02);  // ignored
  put(a, 0x6100, 0x03);  // ignored
  copy(a, 0x6000, 0xC002);
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x05;      // MBC2
  s.rom_size_code = 0x03;  // 256 KiB, 16 banks
  mark_banks(s, 16);
  auto be = run(load(build(s, a), "mbc2_romb"), 2);
  const Bytes m = mem(*be, 0xC000, 0xC003);
  CHECK(m[0] == 3);
  CHECK(m[1] == 1);
  CHECK(m[2] == 5);
}
