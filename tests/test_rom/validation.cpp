// test_rom, part 2: header validation errors and load_rom from files (helpers: common.h).
#include <doctest/doctest.h>

#include "common.h"

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
