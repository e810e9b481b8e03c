// test_cartridges, part 2: ROM loading rules, the kernel's memory-read entry point and the
// memory view, battery files (gbx-run --sav, the RTC trailer) and rtc_lock (helpers: common.h).
#include <doctest/doctest.h>

#include "common.h"

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
