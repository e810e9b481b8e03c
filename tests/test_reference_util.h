#pragma once
// Helpers of the suites that compare GBX with the Gambatte reference (test_gambatte_backend,
// test_game_screens): where the core and the games are, backends with screens, screen hashes
// along an action schedule.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "gbx/engine/cache.h"
#include "gbx/measure/verify/verify.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/reference/gambatte_backend.h"
#include "gbx/runtime/roms/rom.h"
#include "skip.h"

namespace gbx::test {

namespace fs = std::filesystem;

// Whether the Gambatte core is there; skips the calling case (skip.h), saying why, if not.
inline bool have_core() {
  if (fs::exists(default_gambatte_core_path())) return true;
  skip_case("no Gambatte core at " + default_gambatte_core_path() +
            " (apt-get install libretro-gambatte)");
  return false;
}

// ../shared/games beside the checkout (GBX_TEST_GAMES_DIR overrides), or nothing after skipping
// the calling case, saying why.
inline std::optional<fs::path> game(const std::string& file) {
  const char* env = std::getenv("GBX_TEST_GAMES_DIR");
  const fs::path dir =
      env && *env ? fs::path(env)
                  : fs::path(GBX_TEST_SOURCE_DIR).parent_path().parent_path() / "shared" / "games";
  if (fs::exists(dir / file)) return dir / file;
  skip_case((dir / file).string() + " is absent");
  return std::nullopt;
}

inline Rom rom_or_fail(const std::string& spec) {
  auto rom = load_rom(spec);
  REQUIRE_MESSAGE(rom.ok(), (rom ? "" : rom.error().message));
  return std::move(rom.value());
}

inline std::unique_ptr<Backend> backend(const std::string& name, const Rom& rom) {
  BackendConfig cfg;
  cfg.threads = 1;
  cfg.render = true;
  auto b = make_backend(name, rom, cfg);
  REQUIRE_MESSAGE(b.ok(), (b ? "" : b.error().message));
  return std::move(b.value());
}

inline std::string screen_hash(Backend& b) {
  auto s = b.read_screen(0);
  REQUIRE(s.ok());
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(s->data()), s->size()));
}

// Steps b from reset to each checkpoint under `actions`; the screen hash at each.
inline std::map<int, std::string> screens_at(Backend& b, const ActionSchedule& actions,
                                             const std::set<int>& checkpoints) {
  REQUIRE(b.reset(0).ok());
  std::map<int, std::string> out;
  for (int step = 1; step <= *checkpoints.rbegin(); ++step) {
    REQUIRE(b.step({action_for_step(actions, 0, step)}).ok());
    if (checkpoints.count(step)) out[step] = screen_hash(b);
  }
  return out;
}

}  // namespace gbx::test
