// The ARROWS micro-game (runtime/src/roms/arrows_rom.cpp): scoring, rounds, the arrow on screen,
// and arrows that depend on press timing. Joypad semantics from Pan Docs "Joypad Input";
// the kernel takes a step's action at the start of each of its frames.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/arrows_rom.h"
#include "gbx/runtime/roms/rom.h"

using namespace gbx;

namespace {

// Joypad byte bits (templates/hw/io.h): A, B, SELECT, START, RIGHT, LEFT, UP, DOWN.
constexpr int32_t kButtonA = 0x01;
constexpr int32_t kDirection[4] = {0x10, 0x20, 0x40, 0x80};  // right, left, up, down

std::unique_ptr<Backend> game(const std::string& backend, int num_envs, bool render = false) {
  auto rom = load_rom("builtin:ARROWS");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = num_envs;
  cfg.stage = Stage::EmulateOnly;
  cfg.frames_per_step = 1;  // one frame a step: the test presses and releases frame by frame
  cfg.release_after_frames = -1;
  cfg.threads = 1;
  cfg.render = render;
  auto be = make_backend(backend, rom.value(), cfg);
  REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
  REQUIRE(be.value()->reset(0).ok());
  return std::move(be.value());
}

int peek(Backend& be, int env, uint16_t addr) {
  auto m = be.read_memory(env, addr, addr + 1);
  REQUIRE(m.ok());
  return m.value()[0];
}
int peek16(Backend& be, int env, uint16_t addr) {
  return peek(be, env, addr) | peek(be, env, addr + 1) << 8;
}

void frames(Backend& be, int n, std::vector<int32_t> actions) {
  for (int i = 0; i < n; ++i) REQUIRE(be.step(actions).ok());
}

}  // namespace

TEST_CASE("ARROWS: the arrow's direction scores, another direction or a button does not") {
  std::vector<std::vector<int>> arrows_seen;
  for (const std::string backend : {"cpu", "mgba"}) {
    CAPTURE(backend);
    auto be = game(backend, 1);
    frames(*be, 3, {0});  // set-up done, first VBlank passed
    CHECK(peek16(*be, 0, arrows::kScore) == 0);
    CHECK(peek16(*be, 0, arrows::kRounds) == 0);
    REQUIRE(peek(*be, 0, arrows::kArrow) == 0);  // the first arrow points right

    frames(*be, 1, {kDirection[0]});
    CHECK(peek16(*be, 0, arrows::kScore) == 1);
    CHECK(peek16(*be, 0, arrows::kRounds) == 1);
    frames(*be, 5, {kDirection[0]});  // held: no new press, no new round
    CHECK(peek16(*be, 0, arrows::kRounds) == 1);
    frames(*be, 1, {0});

    const int arrow = peek(*be, 0, arrows::kArrow);
    REQUIRE(arrow >= 0);
    REQUIRE(arrow < 4);
    frames(*be, 1, {kDirection[(arrow + 1) % 4]});  // wrong direction: a round, no point
    CHECK(peek16(*be, 0, arrows::kScore) == 1);
    CHECK(peek16(*be, 0, arrows::kRounds) == 2);
    frames(*be, 1, {0});
    frames(*be, 1, {kButtonA});  // not a direction: nothing happens
    frames(*be, 1, {0});
    CHECK(peek16(*be, 0, arrows::kRounds) == 2);

    // Rounds of right presses with varying pauses: every one scores, the arrows change.
    std::vector<int> seq;
    for (int round = 0; round < 40; ++round) {
      const int a = peek(*be, 0, arrows::kArrow);
      seq.push_back(a);
      frames(*be, 1, {kDirection[a]});
      frames(*be, 1 + round % 3, {0});
    }
    CHECK(peek16(*be, 0, arrows::kScore) == 41);
    CHECK(peek16(*be, 0, arrows::kRounds) == 42);
    CHECK(std::set<int>(seq.begin(), seq.end()).size() == 4);
    arrows_seen.push_back(seq);
  }
  CHECK(arrows_seen[0] == arrows_seen[1]);  // the kernel and mGBA play the same game
}

TEST_CASE("ARROWS: the screen shows the arrow in RAM, 56x56 pixels of shade 3") {
  auto be = game("cpu", 1, /*render=*/true);
  // The ROM switches the LCD on in its first frame; the frame that starts then is not shown
  // (Pan Docs LCDC.7), so the first picture is complete at the second VBlank after it.
  frames(*be, 4, {0});
  std::set<int> shown;
  for (int round = 0; round < 12; ++round) {
    const int a = peek(*be, 0, arrows::kArrow);
    const auto cells = arrows::arrow_cells(a);
    auto screen = be->read_screen(0);
    REQUIRE(screen.ok());
    int wrong = 0, dark = 0;
    for (int y = 0; y < 144; ++y)
      for (int x = 0; x < 160; ++x) {
        const int r = y / 8 - arrows::kTileRow, c = x / 8 - arrows::kTileCol;
        const bool in = r >= 0 && r < arrows::kSize && c >= 0 && c < arrows::kSize;
        const int want = in && cells[r * arrows::kSize + c] ? 3 : 0;
        const int got = screen.value()[y * 160 + x];
        wrong += got != want;
        dark += got == 3;
      }
    CAPTURE(round);
    CAPTURE(a);
    CHECK(wrong == 0);
    CHECK(dark > 30 * 64 / 2);  // a big arrow, visible in the half (72x80) observation too
    shown.insert(a);
    frames(*be, 1, {kDirection[a]});
    frames(*be, 2, {0});  // the new arrow is drawn in VBlank and shown by the next frame
  }
  CHECK(shown.size() >= 3);
  // The four shapes differ from each other.
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) CHECK(arrows::arrow_cells(i) != arrows::arrow_cells(j));
}

TEST_CASE("ARROWS: the arrows depend on when the player presses") {
  // Env 0 presses every 3rd frame, env 1 every 4th, each always the right direction: same
  // score, different arrows (the LFSR advances once a frame).
  auto be = game("cpu", 2);
  std::vector<int> seq[2];
  for (int t = 0; t < 4 * 16; ++t) {
    std::vector<int32_t> act(2, 0);
    for (int e = 0; e < 2; ++e)
      if (t % (3 + e) == 2) {
        const int a = peek(*be, e, arrows::kArrow);
        seq[e].push_back(a);
        act[e] = kDirection[a];
      }
    frames(*be, 1, act);
  }
  CHECK(peek16(*be, 0, arrows::kScore) == (int)seq[0].size());
  CHECK(peek16(*be, 1, arrows::kScore) == (int)seq[1].size());
  seq[0].resize(seq[1].size());
  CHECK(seq[0] != seq[1]);
}
