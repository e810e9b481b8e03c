// The project's hand-assembled test ROMs (interrupts, timer, serial, HALT, MBC1) on the cpu
// backend: each must print exactly its expected serial text (checked on mGBA when written).
#include <doctest/doctest.h>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom_builder.h"

using namespace gbx;

TEST_CASE("every built-in test ROM prints its expected serial output on the cpu backend") {
  int checked = 0;
  for (const auto& b : builtin_roms()) {
    if (b.expected_serial.empty()) continue;
    CAPTURE(b.name);
    auto rom = load_rom("builtin:" + b.name);
    REQUIRE(rom.ok());
    BackendConfig cfg;
    cfg.num_envs = 4;
    cfg.stage = Stage::EmulateOnly;
    cfg.frames_per_step = b.frames_to_finish + 4;
    auto be = make_backend("cpu", rom.value(), cfg);
    REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
    REQUIRE(be.value()->step({}).ok());
    for (int env = 0; env < cfg.num_envs; ++env) {
      auto text = be.value()->serial_output(env);
      REQUIRE(text.ok());
      CHECK(text.value() == b.expected_serial);
      CHECK(be.value()->get_cpu_state(env)->trap_kind == 0);
    }
    ++checked;
  }
  CHECK(checked >= 6);
}
