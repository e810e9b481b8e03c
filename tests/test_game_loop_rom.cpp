// The game-shaped ROM (roms/game_loop, C built with Debian's sdcc): interrupt handlers in C, a
// HALT-paced frame loop, OAM DMA from HRAM, the joypad, function-pointer and switch dispatch,
// MBC5 banked code and cartridge RAM. What it reports in WRAM against the actions it was
// given, and the ROM-specialized kernel against the interpreter with random actions. Without
// sdcc the ROM is not built and every case skips, saying so.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "test_util.h"

using namespace gbx;
namespace fs = std::filesystem;

namespace {

const fs::path kRom = fs::path(GBX_TEST_ROM_DIR) / "game_loop.gb";

bool rom_built() { return test::c_rom(kRom.filename().string()).has_value(); }

uint16_t u16(const std::vector<uint8_t>& m, size_t at) {
  return (uint16_t)(m[at] | m[at + 1] << 8);
}

}  // namespace

TEST_CASE("header: MBC5 + RAM + battery, 128 KiB, code in bank 5") {
  if (!rom_built()) return;
  auto rom = load_rom(kRom.string());
  REQUIRE_MESSAGE(rom.ok(), rom.error().message);
  CHECK(rom->header.cart_type == 0x1B);
  CHECK(rom->header.rom_size == 128 * 1024);
  CHECK(rom->header.title == "GAMELOOP");
  CHECK(rom->bytes[5 * 0x4000] != 0xFF);  // fold_frame, where the link put it
  CHECK(rom->bytes[5 * 0x4000] != 0x00);
}

TEST_CASE("a frame per VBlank: the held direction moves the player, the timer interrupts count") {
  if (!rom_built()) return;
  auto rom = load_rom(kRom.string());
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 3;
  cfg.threads = 1;
  cfg.frames_per_step = 1;
  cfg.stage = Stage::EmulateOnly;
  auto b = make_backend("cpu", rom.value(), cfg);
  REQUIRE_MESSAGE(b.ok(), b.error().message);
  Backend& be = *b.value();
  // 20 frames with nothing held, then 60 with env 0 Right, env 1 Up, env 2 Right + Down.
  for (int f = 0; f < 20; ++f) REQUIRE(be.step({0, 0, 0}).ok());
  std::vector<std::vector<uint8_t>> before;
  for (int env = 0; env < 3; ++env) before.push_back(be.read_memory(env, 0xC000, 0xC00C).value());
  for (int f = 0; f < 60; ++f) REQUIRE(be.step({0x10, 0x40, 0x90}).ok());
  const int dx[3] = {1, 0, 1}, dy[3] = {0, -1, 1};
  for (int env = 0; env < 3; ++env) {
    CAPTURE(env);
    const auto m = be.read_memory(env, 0xC000, 0xC00C).value();
    const auto& m0 = before[(size_t)env];
    CHECK(m0[0] == 0xA5);
    CHECK(m0[5] == 0x50);  // not moved while nothing was held
    CHECK(m0[6] == 0x48);
    // One main-loop frame per emulated frame, and the player moved once per frame held.
    const int frames = u16(m, 1) - u16(m0, 1);
    CHECK(frames == 60);
    CHECK((uint8_t)(m[5] - m0[5]) == (uint8_t)(dx[env] * frames));
    CHECK((uint8_t)(m[6] - m0[6]) == (uint8_t)(dy[env] * frames));
    // The timer interrupts every 1024 T: 70224 / 1024 = 68.6 a frame.
    const int timers = u16(m, 3) - u16(m0, 3);
    CHECK(timers >= 60 * 68);
    CHECK(timers <= 60 * 69 + 1);
    // OAM holds the shadow table the VBlank handler's DMA (from HRAM) copied: the player as
    // of the frame before.
    const auto oam = be.read_memory(env, 0xFE00, 0xFE02).value();
    CHECK(oam[0] == (uint8_t)(m[6] - dy[env]));
    CHECK(oam[1] == (uint8_t)(m[5] - dx[env]));
    CHECK(be.get_cpu_state(env).value().trap_kind == 0);
  }
}

TEST_CASE("the specialized kernel ends every step as the interpreter does (random actions)") {
  if (!rom_built()) return;
  test::TempDir d;
  auto r = test::run_command(
      test::tool("gbx-run") + " verify --ref cpu --dut cpu --dut-specialize auto:20 --rom '" +
      kRom.string() +
      "' --steps 200 --frames-per-step 2 --actions seeded_random --seed 9 --screen "
      "--mem-region 8000:A000 --mem-region A000:C000 --mem-region C000:E000 "
      "--mem-region FE00:FEA0 --mem-region FF80:FFFF --out " +
      d.path.string());
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("verify: match (200 steps, 200 comparisons") != std::string::npos);
  CHECK(r.output.find("specialized from step") != std::string::npos);
}
