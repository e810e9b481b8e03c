// Cartridge controllers (MBC1 large ROMs, MBC1M, MBC2, MBC3 + RTC, MBC5), ROM loading rules,
// battery saves and the kernel's memory-read entry point, on hand-assembled ROMs. Expected
// values come from Pan Docs "Memory Bank Controllers" and "The Cartridge Header".
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "gbx/engine/generator.h"
#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/asm.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/battery_file.h"
#include "gbx/runtime/cpu_backend.h"
#include "gbx/runtime/env_state.h"
#include "gbx/runtime/rom.h"
#include "gbx/runtime/rom_builder.h"
#include "gbx_abi.h"
#include "test_util.h"

namespace {

using Bytes = std::vector<uint8_t>;
using gbx::Asm;
using gbx::test::run_command;
using gbx::test::TempDir;
using gbx::test::tool;

// Each bank b carries a marker at b * 0x4000 + 0x2000: bank low byte, bank high byte, 0xA5.
void mark_banks(gbx::RomSpec& s, uint32_t banks) {
  for (uint32_t b = 0; b < banks; ++b)
    s.patches.push_back({b * 0x4000u + 0x2000u, {(uint8_t)b, (uint8_t)(b >> 8), 0xA5}});
}

// `mirrors`: banks that also get a copy of the program at 0x0150, for code that keeps
// running while MBC1 mode 1 maps such a bank at 0000-3FFF.
Bytes build(gbx::RomSpec s, const Asm& a, std::vector<uint32_t> mirrors = {}) {
  REQUIRE(a.place(s).ok());
  for (uint32_t bank : mirrors) s.patches.push_back({bank * 0x4000u + 0x150u, s.program});
  auto rom = gbx::try_build_rom(s);
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  return rom.value();
}

// With GBX_TEST_ROM_DIR set, every ROM a test loads is also written there as NAME.gb, so the
// same ROMs can be run elsewhere (e.g. `gbx-run verify --ref mgba --rom DIR/NAME.gb`).
gbx::Rom load(Bytes bytes, const std::string& name = "") {
  if (const char* dir = std::getenv("GBX_TEST_ROM_DIR"); dir && !name.empty())
    std::ofstream(std::string(dir) + "/" + name + ".gb", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), (long)bytes.size());
  auto rom = gbx::rom_from_bytes("test", std::move(bytes));
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  return rom.value();
}

std::unique_ptr<gbx::Backend> run(const gbx::Rom& rom, int frames, bool rtc_lock = false) {
  gbx::BackendConfig cfg;
  cfg.num_envs = 1;
  cfg.frames_per_step = frames;
  cfg.stage = gbx::Stage::EmulateOnly;
  cfg.threads = 1;
  cfg.rtc_lock = rtc_lock;
  auto be = gbx::make_backend("cpu", rom, cfg);
  REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
  REQUIRE(be.value()->step({}).ok());
  return std::move(be).value();
}

Bytes mem(gbx::Backend& be, uint32_t lo, uint32_t hi) {
  auto m = be.read_memory(0, lo, hi);
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  return m.value();
}

// a.store(addr, v): LD A,v; LD (addr),A.
void put(Asm& a, uint16_t addr, uint8_t v) { a.op("LD A,d8", v).op("LD (a16),A", addr); }
// Copies the byte at `from` to `to` (WRAM results).
void copy(Asm& a, uint16_t from, uint16_t to) { a.op("LD A,(a16)", from).op("LD (a16),A", to); }
void finish(Asm& a) { a.label("end").op("JR r8", "end"); }

// About 0.44 s of emulated time per outer count: DEC BC / LD A,B / OR C / JR NZ is 28 T-cycles,
// 65536 times.
void wait_outer(Asm& a, uint8_t outer, const std::string& tag) {
  a.op("LD D,d8", outer).label("w_o" + tag).op("LD BC,d16", 0).label("w_i" + tag);
  a.op("DEC BC").op("LD A,B").op("OR C").op("JR NZ,r8", "w_i" + tag);
  a.op("DEC D").op("JR NZ,r8", "w_o" + tag);
}

// Pan Docs 0104-0133: the logo a multicart repeats at each game's header.
const uint8_t kLogo[48] = {0xCE, 0xED, 0x66, 0x66, 0xCC, 0x0D, 0x00, 0x0B, 0x03, 0x73, 0x00, 0x83,
                           0x00, 0x0C, 0x00, 0x0D, 0x00, 0x08, 0x11, 0x1F, 0x88, 0x89, 0x00, 0x0E,
                           0xDC, 0xCC, 0x6E, 0xE6, 0xDD, 0xDD, 0xD9, 0x99, 0xBB, 0xBB, 0x67, 0x63,
                           0x6E, 0x0E, 0xEC, 0xCC, 0xDD, 0xDC, 0x99, 0x9F, 0xBB, 0xB9, 0x33, 0x3E};

void fix_header_checksum(Bytes& rom) { rom[0x14D] = gbx::compute_header_checksum(rom); }

std::string write_file(const TempDir& d, const std::string& name, const Bytes& b) {
  const auto p = d.path / name;
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), (long)b.size());
  return p.string();
}

Bytes read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

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

namespace {

// MBC3 with clock: banking checks, then the RTC is set to day 511 23:59:58, left running
// about 2.2 s of emulated time, latched and read (C010-C014); read again without a new
// latch after 2.2 s more (C015: unchanged), latched again (C016); halted, waited, latched
// (C017: unchanged while halted).
Bytes mbc3_program_rom() {
  Asm a;
  put(a, 0x2000, 0x20);  // bank 0x20 is a real bank on MBC3 (MBC1 would give 0x21)
  copy(a, 0x6000, 0xC000);
  put(a, 0x2000, 0x00);  // 0 reads as 1
  copy(a, 0x6000, 0xC001);
  put(a, 0x2000, 0xFF);  // 7 bits: 0x7F
  copy(a, 0x6000, 0xC002);
  put(a, 0x0000, 0x0A);
  for (uint8_t b = 0; b < 4; ++b) {
    put(a, 0x4000, b);
    put(a, 0xA000, (uint8_t)(0x40 + b));
  }
  for (uint8_t b = 0; b < 4; ++b) {
    put(a, 0x4000, b);
    copy(a, 0xA000, (uint16_t)(0xC004 + b));
  }
  const uint8_t set[5] = {58, 59, 23, 0xFF, 0x01};
  for (uint8_t r = 0; r < 5; ++r) {
    put(a, 0x4000, (uint8_t)(0x08 + r));
    put(a, 0xA000, set[r]);
  }
  wait_outer(a, 5, "a");
  put(a, 0x6000, 0x00);
  put(a, 0x6000, 0x01);
  for (uint8_t r = 0; r < 5; ++r) {
    put(a, 0x4000, (uint8_t)(0x08 + r));
    copy(a, 0xA000, (uint16_t)(0xC010 + r));
  }
  wait_outer(a, 5, "b");
  put(a, 0x4000, 0x08);
  copy(a, 0xA000, 0xC015);
  put(a, 0x6000, 0x00);
  put(a, 0x6000, 0x01);
  copy(a, 0xA000, 0xC016);
  put(a, 0x4000, 0x0C);
  put(a, 0xA000, 0x40);  // halt
  wait_outer(a, 5, "c");
  put(a, 0x6000, 0x00);
  put(a, 0x6000, 0x01);
  put(a, 0x4000, 0x08);
  copy(a, 0xA000, 0xC017);
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x10;      // MBC3+TIMER+RAM+BATTERY
  s.rom_size_code = 0x06;  // 2 MiB, 128 banks
  s.ram_size_code = 0x03;  // 32 KiB, 4 banks
  mark_banks(s, 128);
  return build(s, a);
}

}  // namespace

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

TEST_CASE("ROM loading: padding, truncation, CGB-only, unsupported controllers") {
  auto expect_error = [](const Bytes& b, const std::string& want) {
    auto r = gbx::rom_from_bytes("x", b);
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.error().message.find(want) != std::string::npos, r.error().message);
    CHECK(r.error().message.find('\n') == std::string::npos);
  };
  gbx::RomSpec s;
  s.cart_type = 0x19;  // MBC5
  s.rom_size_code = 0x06;
  SUBCASE("a 1.5 MiB dump (96 banks, size code 0x54) is padded to 2 MiB with 0xFF") {
    Bytes b = build(s, Asm());
    b.resize(96u << 14);
    b[0x148] = 0x54;
    fix_header_checksum(b);
    auto r = gbx::rom_from_bytes("x", b);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    CHECK(r->bytes.size() == (2u << 20));
    CHECK(r->bytes[96u << 14] == 0xFF);
    CHECK(r->bytes.back() == 0xFF);
    REQUIRE(r->warnings.size() == 1);
    CHECK(r->warnings[0].find("padded with 0xFF") != std::string::npos);
  }
  SUBCASE("a file shorter than its header's ROM size") {
    Bytes b = build(s, Asm());
    b.resize(1536u * 1024);
    expect_error(b, "ROM truncated: header ROM size code 0x06 says 2048 KiB but the file is");
  }
  SUBCASE("8 MiB is accepted, 16 MiB is too large") {
    s.rom_size_code = 0x08;
    CHECK(gbx::rom_from_bytes("x", build(s, Asm())).ok());
    expect_error(Bytes(16u << 20, 0), "ROM too large");
  }
  SUBCASE("CGB-only refused, dual-mode runs") {
    Bytes b = build(s, Asm());
    b[0x143] = 0xC0;
    fix_header_checksum(b);
    expect_error(b, "CGB-only cartridge (0x143 = 0xC0)");
    b[0x143] = 0x80;
    fix_header_checksum(b);
    CHECK(gbx::rom_from_bytes("x", b).ok());
  }
  SUBCASE("unsupported controllers are named") {
    s.rom_size_code = 0x00;
    for (auto [type, name] : std::vector<std::pair<uint8_t, std::string>>{{0xFC, "POCKET CAMERA"},
                                                                          {0xFE, "HuC3"},
                                                                          {0x0B, "MMM01"},
                                                                          {0x20, "MBC6"},
                                                                          {0x22, "MBC7"},
                                                                          {0xFD, "BANDAI TAMA5"},
                                                                          {0xFF, "HuC1"}}) {
      s.cart_type = type;
      char want[64];
      std::snprintf(want, sizeof want, "unsupported cartridge type 0x%02X (", type);
      expect_error(build(s, Asm()), want);
      expect_error(build(s, Asm()), name);
    }
  }
}

TEST_CASE("read_memory goes through the kernel and changes nothing") {
  auto be0 = run(load(mbc3_program_rom()), 30);
  auto* cpu = dynamic_cast<gbx::CpuBackend*>(be0.get());
  REQUIRE(cpu);
  gbx::EnvState& st = cpu->state();
  const Bytes soa_before(st.soa_block(), st.soa_block() + st.layout().soa_bytes);
  const Bytes mem_before(st.mem(), st.mem() + st.layout().mem_bytes);
  const Bytes all = mem(*be0, 0x0000, 0x10000);
  CHECK(Bytes(st.soa_block(), st.soa_block() + st.layout().soa_bytes) == soa_before);
  CHECK(Bytes(st.mem(), st.mem() + st.layout().mem_bytes) == mem_before);
  // The same bytes one at a time through EnvState::peek (the cuda backend's host path).
  for (uint32_t addr : {0x0000u, 0x4000u, 0x6000u, 0x8010u, 0xA000u, 0xC000u, 0xE000u, 0xFE00u,
                        0xFF04u, 0xFF40u, 0xFF41u, 0xFF44u, 0xFF80u, 0xFFFFu})
    CHECK(st.peek(0, addr) == all[addr]);
  // Echo RAM mirrors WRAM; LY is below 154; ROM bank 0 is the image.
  CHECK(Bytes(all.begin() + 0xE000, all.begin() + 0xE100) ==
        Bytes(all.begin() + 0xC000, all.begin() + 0xC100));
  CHECK(all[0xFF44] < 154);
  CHECK(all[0x0147] == 0x10);
  auto bad = be0->read_memory(0, 0x10, 0x10);
  CHECK_FALSE(bad.ok());
}

// The memory view is what memory holds: VRAM and OAM read as written even when the step
// ends while the PPU locks them (mode 3; modes 2-3), for the host read and for a reward.
TEST_CASE("the memory view shows VRAM and OAM while the PPU locks them, rewards too") {
  Asm a;
  a.label("vbl").op("LDH A,(a8)", 0x44).op("CP d8", 144).op("JR NZ,r8", "vbl");
  a.op("XOR A").op("LDH (a8),A", 0x40);  // LCD off: VRAM and OAM free
  put(a, 0x9800, 0x5A);
  put(a, 0x9BFF, 0xC3);
  put(a, 0xFE00, 0x21);
  put(a, 0xFE9F, 0x42);
  a.op("LD A,d8", 0x91).op("LDH (a8),A", 0x40);  // LCD on
  finish(a);
  gbx::RomSpec s;
  const gbx::Rom rom = load(build(s, a));
  gbx::BackendConfig cfg;
  cfg.num_envs = 1;
  cfg.threads = 1;
  cfg.stage = gbx::Stage::RewardOnly;
  // 997 instructions of the final JR (12 T each) a step: the step ends at a dot that walks
  // through the frame, so some steps end in mode 3 and some in mode 2.
  cfg.run_mode = gbx::RunMode::Instructions;
  cfg.instructions_per_step = 997;
  cfg.reward_expr =
      "ram(0x9800) + ram(0x9BFF) * 256 + ram(0xFE00) * 65536 + ram(0xFE9F) * 16777216";
  auto be = gbx::make_backend("cpu", rom, cfg);
  REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
  const float want = (float)(0x5A + 0xC3 * 256.0 + 0x21 * 65536.0 + 0x42 * 16777216.0);
  int ended_in[4] = {0, 0, 0, 0};
  for (int step = 0; step < 120; ++step) {
    REQUIRE(be.value()->step({}).ok());
    const Bytes stat = mem(*be.value(), 0xFF41, 0xFF42);
    if (step < 40) continue;  // the program is still writing
    ++ended_in[stat[0] & 3];
    CAPTURE(step);
    CAPTURE(stat[0] & 3);
    CHECK(mem(*be.value(), 0x9800, 0x9801)[0] == 0x5A);
    CHECK(mem(*be.value(), 0x9BFF, 0x9C00)[0] == 0xC3);
    CHECK(mem(*be.value(), 0xFE00, 0xFE01)[0] == 0x21);
    CHECK(mem(*be.value(), 0xFE9F, 0xFEA0)[0] == 0x42);
    CHECK(be.value()->read_reward(0).value() == want);
  }
  CHECK(ended_in[3] > 0);
  CHECK(ended_in[2] > 0);
}

TEST_CASE("EnvState without a backend reads through the shared CPU kernel") {
  const gbx::Rom rom = load(mbc3_program_rom());
  gbx::EnvState st(2, gbx::MemoryModel::Dmg, &rom);
  st.reset_dmg();
  st.mem_at(1, GBX_MEM_WRAM + 5) = 0x77;
  CHECK(st.peek(1, 0xC005) == 0x77);
  CHECK(st.peek(1, 0xE005) == 0x77);  // echo
  CHECK(st.peek(0, 0xC005) == 0x00);
  CHECK(st.peek(0, 0x0147) == 0x10);
  CHECK(st.peek(0, 0x4000 + 0x2000) == 0x01);  // bank 1 at reset
  CHECK(st.peek(0, 0xFF04) == 0xAB);           // DIV after the boot ROM
  CHECK(st.peek(0, 0xA000) == 0xFF);           // RAM disabled at reset
  uint8_t raw = 0;
  REQUIRE(st.read_memory(0, 0xA000, 0xA001, true, &raw).ok());
  CHECK(raw == 0x00);
  CHECK_FALSE(st.read_memory(2, 0, 1, false, &raw).ok());
}

TEST_CASE("gbx-run run: --read-mem, --read-mem-raw and --sav") {
  TempDir d;
  // MBC3+TIMER+RAM+BATTERY: increments A000, then disables the RAM.
  Asm a;
  put(a, 0x0000, 0x0A);
  a.op("LD HL,d16", 0xA000).op("INC (HL)");
  put(a, 0x0000, 0x00);
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x10;
  s.rom_size_code = 0x01;
  s.ram_size_code = 0x02;  // 8 KiB
  const std::string rom = write_file(d, "inc.gb", build(s, a));
  const std::string sav = (d.path / "inc.sav").string();
  const std::string base =
      tool("gbx-run") + " run --rom " + rom + " --frames 2 --stage emulate_only ";

  auto r = run_command(base + "--sav " + sav + " --read-mem A000:A010 --read-mem-raw A000:A010");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("A000: FF FF FF FF FF FF FF FF FF FF FF FF FF FF FF FF\n") !=
        std::string::npos);
  CHECK(r.output.find("A000: 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n") !=
        std::string::npos);
  Bytes saved = read_file(sav);
  REQUIRE(saved.size() == 8192 + 48);  // RAM + the RTC trailer
  CHECK(saved[0] == 1);

  r = run_command(base + "--sav " + sav + " --read-mem-raw A000:A001");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("A000: 02\n") != std::string::npos);
  CHECK(read_file(sav)[0] == 2);

  SUBCASE("bad ranges: one line, exit 2") {
    for (const char* range : {"A010:A000", "XYZ", "0:10001", "A000"}) {
      auto bad = run_command(base + "--read-mem " + std::string(range));
      CHECK(bad.exit_code == 2);
      CHECK(gbx::test::count_lines(bad.output) == 1);
      CHECK(bad.output.rfind("error: bad --read-mem", 0) == 0);
    }
  }
  SUBCASE("a --sav of the wrong size or unreadable: one line, non-zero, nothing written") {
    const std::string wrong = write_file(d, "wrong.sav", Bytes(100, 0x33));
    auto bad = run_command(base + "--sav " + wrong);
    CHECK(bad.exit_code != 0);
    CHECK(gbx::test::count_lines(bad.output) == 1);
    CHECK(bad.output.find("100 bytes") != std::string::npos);
    CHECK(read_file(wrong) == Bytes(100, 0x33));
    bad = run_command(base + "--sav " + d.path.string());
    CHECK(bad.exit_code != 0);
    CHECK(gbx::test::count_lines(bad.output) == 1);
    bad = run_command(base + "--sav " + (d.path / "no/such/dir/x.sav").string());
    CHECK(bad.exit_code != 0);
    CHECK(gbx::test::count_lines(bad.output) == 1);
  }
}

TEST_CASE("--sav moves between the cpu and mgba backends") {
  TempDir d;
  Asm a;  // MBC1+RAM+BATTERY: increments A000
  put(a, 0x0000, 0x0A);
  a.op("LD HL,d16", 0xA000).op("INC (HL)");
  put(a, 0x0000, 0x00);
  finish(a);
  gbx::RomSpec s;
  s.cart_type = 0x03;
  s.ram_size_code = 0x02;
  const std::string rom = write_file(d, "inc1.gb", build(s, a));
  const std::string sav = (d.path / "inc1.sav").string();
  for (const char* be : {"cpu", "mgba", "cpu", "mgba"}) {
    auto r = run_command(tool("gbx-run") + " run --stage emulate_only --frames 2 --rom " + rom +
                         " --backend " + be + " --sav " + sav);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  }
  const Bytes saved = read_file(sav);
  REQUIRE(saved.size() == 8192);
  CHECK(saved[0] == 4);
  // mGBA's MBC3 clock follows the host clock: refused there, one line.
  const std::string rtc = write_file(d, "rtc.gb", mbc3_program_rom());
  auto r = run_command(tool("gbx-run") + " run --backend mgba --rom " + rtc + " --sav " +
                       (d.path / "rtc.sav").string());
  CHECK(r.exit_code != 0);
  CHECK(gbx::test::count_lines(r.output) == 1);
  CHECK_FALSE(std::filesystem::exists(d.path / "rtc.sav"));
}

TEST_CASE("battery files: the 48-byte RTC trailer round-trips the clock") {
  TempDir d;
  gbx::CartHeader cart;
  cart.cart_type = 0x10;
  cart.has_battery = cart.has_rtc = true;
  cart.ram_size = 8192;
  gbx::BatterySave save;
  save.ram.assign(8192, 0x5A);
  save.has_rtc = true;
  const uint8_t live[5] = {1, 2, 3, 4, 0x41}, latched[5] = {5, 6, 7, 8, 0x80};
  std::memcpy(save.rtc_live, live, 5);
  std::memcpy(save.rtc_latched, latched, 5);
  const std::string p = (d.path / "x.sav").string();
  REQUIRE(gbx::write_sav_file(p, save, cart).ok());
  const Bytes b = read_file(p);
  REQUIRE(b.size() == 8192 + 48);
  CHECK(b[8192] == 1);          // seconds, 32-bit little endian
  CHECK(b[8192 + 16] == 0x41);  // DH
  CHECK(b[8192 + 20] == 5);     // latched seconds
  bool exists = false;
  auto back = gbx::read_sav_file(p, cart, &exists);
  REQUIRE(back.ok());
  CHECK(exists);
  CHECK(back->ram == save.ram);
  CHECK(std::memcmp(back->rtc_live, live, 5) == 0);
  CHECK(std::memcmp(back->rtc_latched, latched, 5) == 0);
  cart.has_battery = false;
  CHECK_FALSE(gbx::read_sav_file(p, cart, &exists).ok());
}

TEST_CASE("rtc_lock is a synthesis parameter: its own source, key and canonical form") {
  auto bundle = gbx::TemplateBundle::load(gbx::TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  gbx::SynthParams p;
  p.stage = gbx::Stage::EmulateOnly;
  auto plain = gbx::generate(bundle.value(), p);
  p.rtc_lock = true;
  auto locked = gbx::generate(bundle.value(), p);
  REQUIRE(plain.ok());
  REQUIRE(locked.ok());
  CHECK(plain->source.find("#define GBX_RTC_LOCK 1") == std::string::npos);
  CHECK(locked->source.find("#define GBX_RTC_LOCK 1") != std::string::npos);
  CHECK(p.canonical().find(";rtc_lock=1") != std::string::npos);
  auto key = [&](const gbx::GeneratedSource& s) {
    return gbx::compute_cache_key(gbx::make_key_inputs(bundle.value(), s, "id", {}, {}));
  };
  CHECK(key(plain.value()) != key(locked.value()));
  // The manifest names the memory-read entry point; the engine looks it up by role.
  CHECK(locked->extra_entry_points.at("read_memory") == "gbx_read_memory");
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
