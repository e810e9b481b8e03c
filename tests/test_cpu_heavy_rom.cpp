// The CPU-heavy ROM (roms/cpu_heavy, C built with Debian's sdcc): its header, the CRC it
// reports in WRAM against the same algorithm computed here, identical
// behaviour on mGBA (gbx-run verify), and that `gbx-run bench` runs it. Without sdcc the ROM
// is not built and every case skips, saying so.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "test_util.h"

using namespace gbx;
namespace fs = std::filesystem;

namespace {

const fs::path kRom = fs::path(GBX_TEST_ROM_DIR) / "cpu_heavy.gb";

bool rom_built() { return test::c_rom(kRom.filename().string()).has_value(); }

// roms/cpu_heavy/cpu_heavy.h, computed the straightforward way: xorshift16 words, sorted,
// CRC-16/CCITT bit by bit over their bytes (low first), chained over the rounds.
uint16_t expected_crc(int words, int rounds) {
  uint16_t x = 1, crc = 0xFFFF;
  for (int r = 0; r < rounds; ++r) {
    std::vector<uint16_t> w;
    for (int i = 0; i < words; ++i) {
      x ^= (uint16_t)(x << 7);
      x ^= (uint16_t)(x >> 9);
      x ^= (uint16_t)(x << 8);
      w.push_back(x);
    }
    std::sort(w.begin(), w.end());
    for (uint16_t v : w)
      for (uint8_t b : {(uint8_t)(v & 0xFF), (uint8_t)(v >> 8)}) {
        crc ^= (uint16_t)(b << 8);
        for (int k = 0; k < 8; ++k)
          crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
      }
  }
  return crc;
}

constexpr int kWords = 64, kRounds = 3;  // CPU_HEAVY_WORDS, CPU_HEAVY_ROUNDS

}  // namespace

TEST_CASE("header: MBC1, 64 KiB, code in banks 1 and 2") {
  if (!rom_built()) return;
  auto rom = load_rom(kRom.string());
  REQUIRE_MESSAGE(rom.ok(), rom.error().message);
  CHECK(rom->header.cart_type == 0x01);
  CHECK(rom->header.rom_size == 64 * 1024);
  CHECK(rom->header.title == "CPUHEAVY");
  // The banked routines are where the link put them: the bank windows hold code, not fill.
  auto all_fill = [&](size_t at) {
    return std::all_of(rom->bytes.begin() + (long)at, rom->bytes.begin() + (long)at + 64,
                       [](uint8_t b) { return b == 0xFF || b == 0x00; });
  };
  CHECK_FALSE(all_fill(0x4000));
  CHECK_FALSE(all_fill(0x8000));
}

TEST_CASE("the CRC the ROM reports equals the host's, and later passes agree") {
  if (!rom_built()) return;
  auto rom = load_rom(kRom.string());
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 2;
  cfg.threads = 1;
  cfg.frames_per_step = 150;
  cfg.stage = Stage::EmulateOnly;
  auto b = make_backend("cpu", rom.value(), cfg);
  REQUIRE_MESSAGE(b.ok(), b.error().message);
  REQUIRE(b.value()->step({}).ok());
  const uint16_t want = expected_crc(kWords, kRounds);
  for (int env = 0; env < 2; ++env) {
    auto mem = b.value()->read_memory(env, 0xC000, 0xC006);
    REQUIRE(mem.ok());
    const std::vector<uint8_t>& m = mem.value();
    CHECK(m[0] == 0xA5);
    CHECK((m[1] | m[2] << 8) == want);
    CHECK((m[3] | m[4] << 8) >= 2);  // a later pass finished too, and agreed:
    CHECK(m[5] == 0);
    auto st = b.value()->get_cpu_state(env);
    REQUIRE(st.ok());
    CHECK(st->trap_kind == 0);
  }
}

TEST_CASE("gbx-run verify against mGBA matches, WRAM included") {
  if (!rom_built()) return;
  auto r = test::run_command(test::tool("gbx-run") + " verify --ref mgba --dut cpu --rom '" +
                             kRom.string() +
                             "' --steps 160 --compare-every 8 --mem-region C000:E000 "
                             "--mem-region FF00:FF80 --out " +
                             (fs::temp_directory_path() / "gbx-cpu-heavy-verify").string());
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
}

TEST_CASE("gbx-run bench runs it with random actions") {
  if (!rom_built()) return;
  test::TempDir dir;
  const fs::path json = dir.path / "s.json";
  auto r = test::run_command(test::tool("gbx-run") + " bench --backend cpu --rom '" +
                             kRom.string() + "' --envs 2 --steps 2 --warmup-steps 1 --threads 1 " +
                             "--json '" + json.string() + "'");
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(json));
  CHECK(r.output.find("actions random") != std::string::npos);
}
