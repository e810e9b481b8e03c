#pragma once
// test_cartridges' helpers: hand-assembled cartridge ROMs (banks marked, header fixed), running
// them, reading memory (test_cartridges.cpp and the cases in this folder).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "gbx/engine/generator.h"
#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx/runtime/states/battery_file.h"
#include "gbx/runtime/states/env_state.h"
#include "gbx_abi.h"
#include "test_util.h"

namespace cartridge_test {

using Bytes = std::vector<uint8_t>;
using gbx::Asm;
using gbx::test::run_command;
using gbx::test::TempDir;
using gbx::test::tool;

// Each bank b carries a marker at b * 0x4000 + 0x2000: bank low byte, bank high byte, 0xA5.
inline void mark_banks(gbx::RomSpec& s, uint32_t banks) {
  for (uint32_t b = 0; b < banks; ++b)
    s.patches.push_back({b * 0x4000u + 0x2000u, {(uint8_t)b, (uint8_t)(b >> 8), 0xA5}});
}

// `mirrors`: banks that also get a copy of the program at 0x0150, for code that keeps
// running while MBC1 mode 1 maps such a bank at 0000-3FFF.
inline Bytes build(gbx::RomSpec s, const Asm& a, std::vector<uint32_t> mirrors = {}) {
  REQUIRE(a.place(s).ok());
  for (uint32_t bank : mirrors) s.patches.push_back({bank * 0x4000u + 0x150u, s.program});
  auto rom = gbx::try_build_rom(s);
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  return rom.value();
}

// With GBX_TEST_ROM_DIR set, every ROM a test loads is also written there as NAME.gb, so the
// same ROMs can be run elsewhere (e.g. `gbx-run verify --ref mgba --rom DIR/NAME.gb`).
inline gbx::Rom load(Bytes bytes, const std::string& name = "") {
  if (const char* dir = std::getenv("GBX_TEST_ROM_DIR"); dir && !name.empty())
    std::ofstream(std::string(dir) + "/" + name + ".gb", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), (long)bytes.size());
  auto rom = gbx::rom_from_bytes("test", std::move(bytes));
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  return rom.value();
}

inline std::unique_ptr<gbx::Backend> run(const gbx::Rom& rom, int frames, bool rtc_lock = false) {
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

inline Bytes mem(gbx::Backend& be, uint32_t lo, uint32_t hi) {
  auto m = be.read_memory(0, lo, hi);
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  return m.value();
}

// a.store(addr, v): LD A,v; LD (addr),A.
inline void put(Asm& a, uint16_t addr, uint8_t v) { a.op("LD A,d8", v).op("LD (a16),A", addr); }
// Copies the byte at `from` to `to` (WRAM results).
inline void copy(Asm& a, uint16_t from, uint16_t to) {
  a.op("LD A,(a16)", from).op("LD (a16),A", to);
}
inline void finish(Asm& a) { a.label("end").op("JR r8", "end"); }

// About 0.44 s of emulated time per outer count: DEC BC / LD A,B / OR C / JR NZ is 28 T-cycles,
// 65536 times.
inline void wait_outer(Asm& a, uint8_t outer, const std::string& tag) {
  a.op("LD D,d8", outer).label("w_o" + tag).op("LD BC,d16", 0).label("w_i" + tag);
  a.op("DEC BC").op("LD A,B").op("OR C").op("JR NZ,r8", "w_i" + tag);
  a.op("DEC D").op("JR NZ,r8", "w_o" + tag);
}

// Pan Docs 0104-0133: the logo a multicart repeats at each game's header.
const uint8_t kLogo[48] = {0xCE, 0xED, 0x66, 0x66, 0xCC, 0x0D, 0x00, 0x0B, 0x03, 0x73, 0x00, 0x83,
                           0x00, 0x0C, 0x00, 0x0D, 0x00, 0x08, 0x11, 0x1F, 0x88, 0x89, 0x00, 0x0E,
                           0xDC, 0xCC, 0x6E, 0xE6, 0xDD, 0xDD, 0xD9, 0x99, 0xBB, 0xBB, 0x67, 0x63,
                           0x6E, 0x0E, 0xEC, 0xCC, 0xDD, 0xDC, 0x99, 0x9F, 0xBB, 0xB9, 0x33, 0x3E};

inline void fix_header_checksum(Bytes& rom) { rom[0x14D] = gbx::compute_header_checksum(rom); }

inline std::string write_file(const TempDir& d, const std::string& name, const Bytes& b) {
  const auto p = d.path / name;
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), (long)b.size());
  return p.string();
}

inline Bytes read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// MBC3 with clock: banking checks, then the RTC is set to day 511 23:59:58, left running
// about 2.2 s of emulated time, latched and read (C010-C014); read again without a new
// latch after 2.2 s more (C015: unchanged), latched again (C016); halted, waited, latched
// (C017: unchanged while halted).
inline Bytes mbc3_program_rom() {
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

}  // namespace cartridge_test

using namespace cartridge_test;
