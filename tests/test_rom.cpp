// ROM loading and header validation, the ROM builder, the SM83 assembler and the built-in
// ROM table.
// Header validation and load_rom from files: test_rom/validation.cpp.
#include <doctest/doctest.h>

#include "test_rom/common.h"

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

TEST_CASE("assembler reproduces the micro-ROMs' programs (ALU_LOOP, MEM_RWB)") {
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

TEST_CASE("the micro-ROMs ALU_LOOP and MEM_RWB carry the exact program bytes") {
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
