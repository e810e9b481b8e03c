// ROM loading and header validation, the ROM builder, the SM83 assembler and the built-in
// ROM table.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gbx/runtime/asm.h"
#include "gbx/runtime/rom.h"
#include "gbx/runtime/rom_builder.h"
#include "gbx_abi.h"

namespace fs = std::filesystem;
using gbx::Asm;
using Bytes = std::vector<uint8_t>;

namespace {

// A private scratch directory, removed at the end of the test case.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("gbx_test_rom_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  fs::path write(const std::string& name, const Bytes& bytes) const {
    fs::path p = path / name;
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return p;
  }
};

Bytes slice(const Bytes& b, size_t at, size_t n) {
  return Bytes(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
}

Bytes assemble(const Asm& a) {
  auto r = a.assemble_flat();
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return r.value();
}

// Asserts `r` failed with ErrorKind::Input and a message containing `needle`.
template <typename T>
void expect_input_error(const gbx::Result<T>& r, const std::string& needle) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == gbx::ErrorKind::Input);
  CHECK_MESSAGE(r.error().message.find(needle) != std::string::npos,
                "message: " << r.error().message << "\nexpected to contain: " << needle);
  CHECK(r.error().message.find('\n') == std::string::npos);
}

Bytes image(const gbx::RomSpec& spec) {
  auto r = gbx::try_build_rom(spec);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return r.value();
}

void fix_header_checksum(Bytes& rom) { rom[0x14D] = gbx::compute_header_checksum(rom); }

}  // namespace

TEST_CASE("header checksum follows the Pan Docs algorithm") {
  Bytes rom(0x8000, 0);
  // All-zero header: 25 bytes each subtract 1 -> -25 = 0xE7.
  CHECK(gbx::compute_header_checksum(rom) == 0xE7);
  rom[0x134] = 'A';
  CHECK(gbx::compute_header_checksum(rom) == static_cast<uint8_t>(0xE7 - 'A'));
  rom[0x14E] = 0xAB;  // the global checksum bytes do not count in the global checksum
  rom[0x14F] = 0xCD;
  rom[0x7FFF] = 0x02;
  CHECK(gbx::compute_global_checksum(rom) == 'A' + 2);
}

TEST_CASE("builder lays out entry, header and checksums") {
  gbx::RomSpec spec;
  spec.title = "hello";
  spec.program = {0x18, 0xFE};
  spec.patches = {{0x40, {0xD9}}};
  Bytes rom = image(spec);
  REQUIRE(rom.size() == 0x8000);
  CHECK(slice(rom, 0x100, 4) == Bytes{0x00, 0xC3, 0x50, 0x01});
  CHECK(slice(rom, 0x134, 6) == Bytes{'H', 'E', 'L', 'L', 'O', 0});
  CHECK(rom[0x147] == 0x00);
  CHECK(rom[0x14A] == 0x01);
  CHECK(rom[0x14D] == gbx::compute_header_checksum(rom));
  CHECK(((rom[0x14E] << 8) | rom[0x14F]) == gbx::compute_global_checksum(rom));
  CHECK(slice(rom, 0x150, 2) == Bytes{0x18, 0xFE});
  CHECK(rom[0x40] == 0xD9);
  CHECK(rom[0x152] == 0x00);

  spec.rom_size_code = 2;
  CHECK(image(spec).size() == 0x20000);
}

TEST_CASE("builder rejects bad specs") {
  gbx::RomSpec spec;
  spec.patches = {{0x0140, {0x01}}};
  auto r = gbx::try_build_rom(spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("header") != std::string::npos);

  spec.patches = {{0x0150, {0x01}}};
  spec.program = {0x00};
  r = gbx::try_build_rom(spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("overlaps program") != std::string::npos);

  spec.patches = {{0x7FFF, {0x01, 0x02}}};
  r = gbx::try_build_rom(spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("past the 32768-byte image") != std::string::npos);

  spec.patches.clear();
  spec.title = "SIXTEEN_CHARS_XX";
  r = gbx::try_build_rom(spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("longer than 15") != std::string::npos);

  spec.title = "OK";
  spec.rom_size_code = 9;
  r = gbx::try_build_rom(spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("8 MiB") != std::string::npos);
}

TEST_CASE("assembler: encodings match Pan Docs opcodes") {
  struct Case {
    const char* form;
    Bytes bytes;
  };
  const Case cases[] = {
      {"NOP", {0x00}},
      {"LD B,B", {0x40}},
      {"HALT", {0x76}},
      {"LD A,(HL)", {0x7E}},
      {"ld (hl), a", {0x77}},
      {"LD A,[HL+]", {0x2A}},
      {"LD (HLD),A", {0x32}},
      {"XOR A", {0xAF}},
      {"CP (HL)", {0xBE}},
      {"ADD A,B", {0x80}},
      {"SBC A,E", {0x9B}},
      {"OR L", {0xB5}},
      {"INC (HL)", {0x34}},
      {"DEC SP", {0x3B}},
      {"LD (C),A", {0xE2}},
      {"LDH (C),A", {0xE2}},
      {"LD A,(C)", {0xF2}},
      {"JP HL", {0xE9}},
      {"JP (HL)", {0xE9}},
      {"RETI", {0xD9}},
      {"DI", {0xF3}},
      {"EI", {0xFB}},
      {"RST 38H", {0xFF}},
      {"RST 00H", {0xC7}},
      {"PUSH AF", {0xF5}},
      {"POP HL", {0xE1}},
      {"RET NC", {0xD0}},
      {"LD SP,HL", {0xF9}},
      {"DAA", {0x27}},
      {"STOP", {0x10, 0x00}},
      {"RLC B", {0xCB, 0x00}},
      {"SWAP A", {0xCB, 0x37}},
      {"SRL (HL)", {0xCB, 0x3E}},
      {"BIT 7,H", {0xCB, 0x7C}},
      {"RES 1,A", {0xCB, 0x8F}},
      {"SET 0,(HL)", {0xCB, 0xC6}},
      {"SET 7,A", {0xCB, 0xFF}},
      {"LD A,d8", {0x3E}},
      {"LDH (a8),A", {0xE0}},
      {"LDH A,(a8)", {0xF0}},
      {"LD (a16),SP", {0x08}},
      {"JR NZ,r8", {0x20}},
      {"CALL C,a16", {0xDC}},
      {"LD HL,SP+r8", {0xF8}},
      {"ADD SP,r8", {0xE8}},
  };
  for (const Case& c : cases) {
    auto r = gbx::encode_form(c.form);
    REQUIRE_MESSAGE(r.ok(), c.form);
    CHECK_MESSAGE(r.value() == c.bytes, c.form);
  }
  CHECK_FALSE(gbx::encode_form("LD A,Q").ok());
  CHECK_FALSE(gbx::encode_form("PREFIX CB").ok());

  // Every CB opcode has exactly one form.
  const char* regs[] = {"B", "C", "D", "E", "H", "L", "(HL)", "A"};
  const char* shifts[] = {"RLC", "RRC", "RL", "RR", "SLA", "SRA", "SWAP", "SRL"};
  const char* bitops[] = {"BIT", "RES", "SET"};
  std::set<int> seen;
  for (int n = 0; n < 8; ++n)
    for (int r = 0; r < 8; ++r) {
      std::vector<std::string> forms = {std::string(shifts[n]) + " " + regs[r]};
      for (const char* b : bitops)
        forms.push_back(std::string(b) + " " + std::to_string(n) + "," + regs[r]);
      for (const std::string& f : forms) {
        auto e = gbx::encode_form(f);
        REQUIRE_MESSAGE(e.ok(), f);
        REQUIRE(e->size() == 2);
        seen.insert(e.value()[1]);
      }
    }
  CHECK(seen.size() == 256);
}

TEST_CASE("assembler: immediates, labels and jumps") {
  SUBCASE("operands are little-endian") {
    Asm a;
    a.op("LD A,d8", 0x12).op("LD HL,d16", 0xC000).op("LDH (a8),A", 0xFF01).op("LDH A,(a8)", 0x0F);
    a.op("ADD SP,r8", -2).op("LD A,d8", -1);
    CHECK(assemble(a) ==
          Bytes{0x3E, 0x12, 0x21, 0x00, 0xC0, 0xE0, 0x01, 0xF0, 0x0F, 0xE8, 0xFE, 0x3E, 0xFF});
  }
  SUBCASE("JR backwards") {
    Asm a(0x0150);
    a.label("loop").op("NOP").op("JR r8", "loop");
    CHECK(assemble(a) == Bytes{0x00, 0x18, 0xFD});
    Asm self;
    self.label("here").op("JR r8", "here");
    CHECK(assemble(self) == Bytes{0x18, 0xFE});
  }
  SUBCASE("JR forwards, conditional") {
    Asm a;
    a.op("JR NZ,r8", "skip").op("NOP").op("NOP").label("skip").op("HALT");
    CHECK(assemble(a) == Bytes{0x20, 0x02, 0x00, 0x00, 0x76});
  }
  SUBCASE("JR reaches exactly -128 and +127") {
    Asm fwd;
    fwd.op("JR r8", "far");
    for (int i = 0; i < 127; ++i) fwd.op("NOP");
    fwd.label("far");
    CHECK(assemble(fwd)[1] == 0x7F);
    Asm back;
    back.label("far");
    for (int i = 0; i < 126; ++i) back.op("NOP");
    back.op("JR r8", "far");
    CHECK(assemble(back)[127] == 0x80);
  }
  SUBCASE("JR out of range is an error") {
    Asm a;
    a.op("JR r8", "far");
    for (int i = 0; i < 128; ++i) a.op("NOP");
    a.label("far");
    auto r = a.assemble();
    expect_input_error(r, "JR reaches -128..127");
    CHECK(r.error().message.find("128") != std::string::npos);
  }
  SUBCASE("JP and CALL take absolute label addresses") {
    Asm a(0x0150);
    a.op("JP a16", "target").op("CALL a16", "target").op("CALL NZ,a16", "target");
    a.op("LD HL,d16", "target").label("target").op("RET");
    // target = 0x0150 + 3 + 3 + 3 + 3 = 0x015C
    CHECK(assemble(a) ==
          Bytes{0xC3, 0x5C, 0x01, 0xCD, 0x5C, 0x01, 0xC4, 0x5C, 0x01, 0x21, 0x5C, 0x01, 0xC9});
  }
  SUBCASE("org starts chunks; place() splits program and patches") {
    Asm a;
    a.org(0x0040).op("JP a16", "main");
    a.org(0x0150).label("main").op("JR r8", "main");
    auto chunks = a.assemble();
    REQUIRE(chunks.ok());
    REQUIRE(chunks->size() == 2);
    CHECK(chunks.value()[0].addr == 0x0040);
    CHECK(chunks.value()[0].bytes == Bytes{0xC3, 0x50, 0x01});
    CHECK_FALSE(a.assemble_flat().ok());
    gbx::RomSpec spec;
    REQUIRE(a.place(spec).ok());
    CHECK(spec.program == Bytes{0x18, 0xFE});
    REQUIRE(spec.patches.size() == 1);
    CHECK(spec.patches[0].first == 0x0040);
    Bytes rom = image(spec);
    CHECK(slice(rom, 0x40, 3) == Bytes{0xC3, 0x50, 0x01});
  }
  SUBCASE("data directives") {
    Asm a(0x0200);
    a.db({1, 2}).ascii("Hi").asciz("!");
    CHECK(a.here() == 0x0206);
    CHECK(assemble(a) == Bytes{1, 2, 'H', 'i', '!', 0});
  }
  SUBCASE("errors") {
    expect_input_error(Asm().op("LD A,Q").assemble(), "unknown SM83 instruction 'LD A,Q'");
    expect_input_error(Asm().op("LD A,d8", 300).assemble(), "outside -128..255");
    expect_input_error(Asm().op("LD A,d8").assemble(), "needs a d8 operand");
    expect_input_error(Asm().op("NOP", 1).assemble(), "takes no operand");
    expect_input_error(Asm().op("LD A,d8", "x").assemble(), "not a label");
    expect_input_error(Asm().op("JP a16", "nowhere").assemble(), "undefined label 'nowhere'");
    expect_input_error(Asm().label("x").op("NOP").label("x").assemble(), "defined twice");
    Asm overlap;
    overlap.org(0x40).db({1, 2, 3}).org(0x41).db({4});
    expect_input_error(overlap.assemble(), "overlaps");
  }
}

TEST_CASE("assembler reproduces the design's micro-ROM programs") {
  Asm alu;
  alu.op("LD A,d8", 0).op("LD B,d8", 0).label("loop").op("INC A").op("ADD A,B").op("INC B");
  alu.op("JR r8", "loop");
  CHECK(assemble(alu) == Bytes{0x3E, 0x00, 0x06, 0x00, 0x3C, 0x80, 0x04, 0x18, 0xFB});

  Asm mem;
  mem.op("LD HL,d16", 0xC000).op("LD A,d8", 0).label("loop").op("LD (HL),A").op("INC A");
  mem.op("LD B,(HL)").op("INC HL").op("JR r8", "loop");
  CHECK(assemble(mem) == Bytes{0x21, 0x00, 0xC0, 0x3E, 0x00, 0x77, 0x3C, 0x46, 0x23, 0x18, 0xFA});
}

TEST_CASE("every builtin ROM has a valid header") {
  const auto& roms = gbx::builtin_roms();
  REQUIRE(roms.size() >= 8);
  std::set<std::string> names;
  for (const gbx::BuiltinRom& b : roms) {
    CAPTURE(b.name);
    CHECK(names.insert(b.name).second);
    Bytes bytes = b.build();
    CHECK(bytes == b.build());  // deterministic
    auto h = gbx::parse_header(bytes);
    REQUIRE_MESSAGE(h.ok(), (h.ok() ? "" : h.error().message));
    CHECK(slice(bytes, 0x100, 4) == Bytes{0x00, 0xC3, 0x50, 0x01});
    CHECK(h->header_checksum == gbx::compute_header_checksum(bytes));
    CHECK(h->global_checksum == gbx::compute_global_checksum(bytes));
    CHECK(h->rom_size == bytes.size());
    CHECK(h->title == b.name);
    auto rom = gbx::load_rom("builtin:" + b.name);
    REQUIRE(rom.ok());
    CHECK(rom->name == b.name);
    CHECK(rom->bytes == bytes);
    CHECK(rom->sha256.size() == 64);
    CHECK(gbx::find_builtin_rom(b.name) == &b);
    if (b.name == "ALU_LOOP" || b.name == "MEM_RWB" || b.name == "PPU_BENCH" ||
        b.name == "ARROWS") {  // endless (ARROWS is a game)
      CHECK(b.expected_serial.empty());
      CHECK(b.frames_to_finish == 0);
    } else {
      // Test ROMs report over serial and end in `JR -2`.
      CHECK_FALSE(b.expected_serial.empty());
      CHECK(b.expected_serial.back() == '\n');
      CHECK(b.frames_to_finish > 0);
      CHECK(b.frames_to_finish < 60);
      const Bytes done = {0x18, 0xFE};
      CHECK(std::search(bytes.begin() + 0x150, bytes.end(), done.begin(), done.end()) !=
            bytes.end());
    }
  }
  CHECK(gbx::find_builtin_rom("NOPE") == nullptr);
}

TEST_CASE("design micro-ROMs carry the exact program bytes") {
  auto alu = gbx::load_rom("builtin:ALU_LOOP");
  REQUIRE(alu.ok());
  CHECK(alu->bytes.size() == 32768);
  CHECK(alu->header.cart_type == 0x00);
  CHECK(alu->header.mbc == GBX_MBC_NONE);
  CHECK(alu->header.ram_size == 0);
  CHECK(slice(alu->bytes, 0x150, 9) == Bytes{0x3E, 0x00, 0x06, 0x00, 0x3C, 0x80, 0x04, 0x18, 0xFB});
  CHECK(alu->bytes[0x159] == 0x00);

  auto mem = gbx::load_rom("builtin:MEM_RWB");
  REQUIRE(mem.ok());
  CHECK(mem->bytes.size() == 32768);
  CHECK(slice(mem->bytes, 0x150, 11) ==
        Bytes{0x21, 0x00, 0xC0, 0x3E, 0x00, 0x77, 0x3C, 0x46, 0x23, 0x18, 0xFA});
  CHECK(alu->sha256 != mem->sha256);
}

TEST_CASE("test ROMs: vectors, MBC1 layout and expected output") {
  auto timer = gbx::load_rom("builtin:IRQ_TIMER");
  REQUIRE(timer.ok());
  // push af; ldh a,(0x80); inc a; ldh (0x80),a; pop af; reti
  CHECK(slice(timer->bytes, 0x50, 8) == Bytes{0xF5, 0xF0, 0x80, 0x3C, 0xE0, 0x80, 0xF1, 0xD9});
  CHECK(gbx::find_builtin_rom("IRQ_TIMER")->expected_serial == "TIMER OK 0A\n");

  auto prio = gbx::load_rom("builtin:IRQ_PRIORITY");
  REQUIRE(prio.ok());
  for (uint32_t v : {0x40u, 0x48u, 0x50u, 0x58u, 0x60u}) CHECK(prio->bytes[v] == 0xC3);
  CHECK(gbx::find_builtin_rom("IRQ_PRIORITY")->expected_serial == "VLTSJ\n");

  // HALT then INC A, the pair whose second byte the HALT bug runs twice.
  auto halt = gbx::load_rom("builtin:HALT_BUG");
  REQUIRE(halt.ok());
  const Bytes halt_inc = {0x76, 0x3C};
  CHECK(std::search(halt->bytes.begin(), halt->bytes.end(), halt_inc.begin(), halt_inc.end()) !=
        halt->bytes.end());
  CHECK(gbx::find_builtin_rom("HALT_BUG")->expected_serial == "HALT BUG A=02\nHALT WAKE 01 B=01\n");

  auto ei = gbx::load_rom("builtin:EI_DELAY");
  REQUIRE(ei.ok());
  const Bytes ei_di = {0xFB, 0xF3};
  CHECK(std::search(ei->bytes.begin(), ei->bytes.end(), ei_di.begin(), ei_di.end()) !=
        ei->bytes.end());

  auto hello = gbx::load_rom("builtin:SERIAL_HELLO");
  REQUIRE(hello.ok());
  const std::string greeting = "Hello, GBX!\n";
  CHECK(std::search(hello->bytes.begin(), hello->bytes.end(), greeting.begin(), greeting.end()) !=
        hello->bytes.end());
  CHECK(gbx::find_builtin_rom("SERIAL_HELLO")->expected_serial == greeting);

  auto mbc = gbx::load_rom("builtin:MBC1_BANKS");
  REQUIRE(mbc.ok());
  CHECK(mbc->bytes.size() == 128 * 1024);
  CHECK(mbc->header.cart_type == 0x03);
  CHECK(mbc->header.mbc == GBX_MBC_1);
  CHECK(mbc->header.has_ram);
  CHECK(mbc->header.has_battery);
  CHECK(mbc->header.ram_size == 32 * 1024);
  for (uint32_t bank = 0; bank < 8; ++bank) CHECK(mbc->bytes[bank * 0x4000] == bank);
  CHECK(gbx::find_builtin_rom("MBC1_BANKS")->expected_serial ==
        "ROM 01 01 02 03 04 05 06 07 00\nRAM 10 11 12 13\nMODE0 10\nLOCK 10\n");
}

TEST_CASE("header validation errors") {
  SUBCASE("empty") { expect_input_error(gbx::rom_from_bytes("x", {}), "ROM is empty"); }
  SUBCASE("truncated") {
    expect_input_error(gbx::rom_from_bytes("x", Bytes(1234, 0)),
                       "ROM truncated: 1234 bytes, a cartridge is at least 32768");
  }
  SUBCASE("too large") {
    expect_input_error(gbx::parse_header(Bytes(16u << 20, 0)),
                       "ROM too large: 16777216 bytes, the limit is 8388608");
  }
  SUBCASE("not a power of two but holding the header's banks: padded with 0xFF") {
    gbx::RomSpec spec;
    spec.cart_type = 0x01;
    spec.rom_size_code = 0x01;  // 64 KiB
    Bytes rom = image(spec);
    rom.resize(3 * 0x8000, 0x00);
    auto r = gbx::rom_from_bytes("x", rom);
    REQUIRE(r.ok());
    CHECK(r->bytes.size() == 4 * 0x8000);
    CHECK(r->bytes[3 * 0x8000] == 0xFF);
    CHECK(r->warnings.size() == 1);
  }
  SUBCASE("size code does not match the file size") {
    gbx::RomSpec spec;
    spec.cart_type = 0x01;
    Bytes rom = image(spec);
    rom[0x148] = 0x02;
    fix_header_checksum(rom);
    expect_input_error(gbx::parse_header(rom),
                       "header ROM size code 0x02 says 128 KiB but the file is 32768 bytes");
    rom[0x148] = 0x0A;
    fix_header_checksum(rom);
    expect_input_error(gbx::parse_header(rom), "invalid ROM size code 0x0A");
  }
  SUBCASE("bad header checksum: a warning, the cartridge loads") {
    // Pan Docs "014D - Header Checksum": the boot ROM locks up; GBX skips it and runs.
    Bytes rom = image(gbx::RomSpec{});
    const uint8_t good = rom[0x14D];
    rom[0x14D] ^= 0x5A;
    REQUIRE(gbx::parse_header(rom).ok());
    auto r = gbx::rom_from_bytes("x", rom);
    REQUIRE(r.ok());
    REQUIRE(r->warnings.size() == 1);
    char want[128];
    std::snprintf(want, sizeof want,
                  "header checksum mismatch: 0x14D holds 0x%02X, the header bytes 0x134-0x14C "
                  "give 0x%02X",
                  rom[0x14D], good);
    CHECK(r->warnings[0].rfind(want, 0) == 0);
    CHECK(r->bytes == rom);
    rom[0x14D] = good;
    CHECK(gbx::rom_from_bytes("x", rom)->warnings.empty());
  }
  SUBCASE("global checksum is recorded, not enforced") {
    Bytes rom = image(gbx::RomSpec{});
    rom[0x14E] ^= 0xFF;
    auto h = gbx::parse_header(rom);
    REQUIRE(h.ok());
    CHECK(h->global_checksum != gbx::compute_global_checksum(rom));
  }
  SUBCASE("unsupported and unknown cartridge types") {
    gbx::RomSpec spec;
    spec.cart_type = 0xFE;
    expect_input_error(gbx::parse_header(image(spec)), "unsupported cartridge type 0xFE (HuC3)");
    spec.cart_type = 0xFC;
    expect_input_error(gbx::parse_header(image(spec)),
                       "unsupported cartridge type 0xFC (POCKET CAMERA)");
    spec.cart_type = 0x42;
    expect_input_error(gbx::parse_header(image(spec)), "unknown cartridge type 0x42");
    CHECK(std::string(gbx::cart_type_name(0x1B)) == "MBC5+RAM+BATTERY");
    CHECK(gbx::cart_type_name(0x04) == nullptr);
  }
  SUBCASE("RAM size code") {
    gbx::RomSpec spec;
    spec.cart_type = 0x02;
    spec.ram_size_code = 0x06;
    expect_input_error(gbx::parse_header(image(spec)), "invalid RAM size code 0x06");
    spec.ram_size_code = 0x04;
    expect_input_error(gbx::parse_header(image(spec)),
                       "MBC1+RAM supports at most 32 KiB of cartridge RAM");
    spec.ram_size_code = 0x02;
    auto h = gbx::parse_header(image(spec));
    REQUIRE(h.ok());
    CHECK(h->ram_size == 8 * 1024);
    CHECK(h->has_ram);
    CHECK_FALSE(h->has_battery);
    CHECK(h->mbc == GBX_MBC_1);
    spec.ram_size_code = 0x01;
    CHECK(gbx::parse_header(image(spec))->ram_size == 2 * 1024);
    // A type without RAM has none, whatever the code says.
    spec.cart_type = 0x01;
    spec.ram_size_code = 0x03;
    h = gbx::parse_header(image(spec));
    REQUIRE(h.ok());
    CHECK(h->ram_size == 0);
    CHECK_FALSE(h->has_ram);
    // ROM+RAM has no controller: one 8 KiB window at most.
    spec.cart_type = 0x09;
    expect_input_error(gbx::parse_header(image(spec)), "at most 8 KiB");
    spec.ram_size_code = 0x02;
    h = gbx::parse_header(image(spec));
    REQUIRE(h.ok());
    CHECK(h->mbc == GBX_MBC_NONE);
    CHECK(h->ram_size == 8 * 1024);
    CHECK(h->has_battery);
  }
  SUBCASE("ROM ONLY cannot be larger than 32 KiB") {
    gbx::RomSpec spec;
    spec.rom_size_code = 0x01;
    expect_input_error(gbx::parse_header(image(spec)), "no bank controller");
    spec.cart_type = 0x01;
    auto h = gbx::parse_header(image(spec));
    REQUIRE(h.ok());
    CHECK(h->rom_size == 64 * 1024);
  }
  SUBCASE("title is read up to the first non-printable byte") {
    gbx::RomSpec spec;
    spec.title = "TETRIS";
    CHECK(gbx::parse_header(image(spec))->title == "TETRIS");
  }
}

TEST_CASE("load_rom from files") {
  TempDir dir;
  SUBCASE("a valid file: name is the stem, bytes and hash match the builtin") {
    auto builtin = gbx::load_rom("builtin:SERIAL_HELLO");
    REQUIRE(builtin.ok());
    fs::path p = dir.write("hello.gb", builtin->bytes);
    auto rom = gbx::load_rom(p.string());
    REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
    CHECK(rom->name == "hello");
    CHECK(rom->bytes == builtin->bytes);
    CHECK(rom->sha256 == builtin->sha256);
  }
  SUBCASE("missing file") {
    const std::string p = (dir.path / "nope.gb").string();
    expect_input_error(gbx::load_rom(p), "no such file");
    expect_input_error(gbx::load_rom(p), p);
  }
  SUBCASE("directory") { expect_input_error(gbx::load_rom(dir.path.string()), "is a directory"); }
  SUBCASE("empty file") {
    expect_input_error(gbx::load_rom(dir.write("empty.gb", {}).string()), "ROM is empty");
  }
  SUBCASE("truncated file") {
    expect_input_error(gbx::load_rom(dir.write("short.gb", Bytes(1234, 0xFF)).string()),
                       "ROM truncated: 1234 bytes, a cartridge is at least 32768");
  }
  SUBCASE("16 MiB of random bytes is rejected by size") {
    Bytes noise(16u << 20);
    std::mt19937 rng(1234);
    for (auto& b : noise) b = static_cast<uint8_t>(rng());
    fs::path p = dir.write("noise.gb", noise);
    expect_input_error(gbx::load_rom(p.string()),
                       "too large: 16777216 bytes, the limit is 8388608");
  }
  SUBCASE("a huge sparse file is rejected without being read") {
    // 8 GiB that occupy no disk: reading it first would exhaust memory.
    fs::path p = dir.write("huge.gb", {});
    fs::resize_file(p, uint64_t{8} << 30);
    expect_input_error(gbx::load_rom(p.string()), "too large: 8589934592 bytes");
  }
  SUBCASE("not a regular file") {
    if (fs::exists("/dev/zero"))
      expect_input_error(gbx::load_rom("/dev/zero"), "not a regular file");
    else
      CHECK(gbx::load_rom("/dev/zero").ok() == false);
  }
  SUBCASE("32 KiB of random bytes is refused by its header, in one line") {
    Bytes noise(0x8000);
    std::mt19937 rng(99);
    for (auto& b : noise) b = static_cast<uint8_t>(rng());
    noise[0x143] = 0x00;  // not CGB-only (checked before the size)
    noise[0x148] = 0x07;  // 4 MiB: whatever else the noise says, the size disagrees
    auto r = gbx::load_rom(dir.write("noise32k.gb", noise).string());
    expect_input_error(r, "says 4096 KiB but the file is 32768 bytes");
    CHECK(r.error().message.find('\n') == std::string::npos);
  }
  SUBCASE("unknown builtin lists the available ones") {
    auto r = gbx::load_rom("builtin:NOPE");
    expect_input_error(r, "unknown builtin ROM 'NOPE'");
    CHECK(r.error().message.find("ALU_LOOP") != std::string::npos);
    CHECK(r.error().message.find("MBC1_BANKS") != std::string::npos);
  }
}
