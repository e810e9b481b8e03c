// Settled screens of the two games in ../shared/games (zlib licence, not in the repo): GBX's
// screen hash at checkpoints, checked in, so CI holds GBX to them; where the Gambatte core is
// installed it must show the same screens there. The first frame after each LCD on is blank
// (Pan Docs "LCDC.7"; docs/machine/accuracy.md): 2048's step 9 and libbet's step 326 under
// hold:8:16 are such frames, all shade 0, and the steps after them the first drawn frames. Without
// the games the case skips, saying why (skip.h); without the core only GBX's side is checked (said
// in a note, not a skip, so a GBX failure shows).
#include <doctest/doctest.h>

#include "test_reference_util.h"

using namespace gbx;
using namespace gbx::test;

TEST_CASE("2048 and libbet: settled screen checkpoints, confirmed by Gambatte") {
  struct Case {
    const char* file;
    const char* actions;
    std::map<int, std::string> hashes;  // step -> sha256 of the 160x144 shades
  };
  // sha256 of 160 x 144 shade-0 bytes: a blank screen.
  const std::string kBlank = "46e2096b907947368d310929303a04005b39c4a278e3a7de2225c355b4522694";
  const Case cases[] = {
      // No input: the board 2048 draws after its LCD off/on, then nothing moves.
      {"2048.gb",
       "noop",
       {{9, kBlank},
        {10, "7a655e8b9f88893848579bdcbbac7a1dfeccc1ab4ea6bb1409a54dfc6ce22780"},
        {60, "7a655e8b9f88893848579bdcbbac7a1dfeccc1ab4ea6bb1409a54dfc6ce22780"},
        {600, "7a655e8b9f88893848579bdcbbac7a1dfeccc1ab4ea6bb1409a54dfc6ce22780"}}},
      // RL-style presses: title, text pages and the game, each screen different.
      {"libbet.gb",
       "hold:8:16",
       {{100, "85ed5cbd8cfb40a295c688e860744cf615eb334f837d2d02d1ef4c92247ba06e"},
        {326, kBlank},
        {327, "7e26a9b793cb31550a37796b7f95d8c2d48cb9b00cc474007cfda6499828572e"},
        {450, "0e6bec9dd78dd1492d77448671353a813fbeb496d48c04caf3e9dcc314a23ffb"},
        {800, "4643816aa29be1866998e74489120f67119448fdb04d4177142765bebc8376e7"},
        {1200, "e52ecf6ce045979ad75cfa6879f765a92fdf9e356c66e2e61eb60efa30e4786c"}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.file);
    auto path = game(c.file);
    if (!path) continue;
    const Rom rom = rom_or_fail(path->string());
    auto actions = parse_action_schedule(c.actions);
    REQUIRE(actions.ok());
    std::set<int> at;
    for (const auto& [step, hash] : c.hashes) at.insert(step);
    {
      auto cpu = backend("cpu", rom);
      const auto gbx = screens_at(*cpu, *actions, at);
      for (const auto& [step, hash] : c.hashes) {
        CAPTURE(step);
        CHECK(gbx.at(step) == hash);
      }
    }
    if (!fs::exists(default_gambatte_core_path())) {
      std::printf("note: %s: Gambatte's side not checked (no core at %s)\n", c.file,
                  default_gambatte_core_path().c_str());
      continue;
    }
    auto g = backend("gambatte", rom);
    const auto ref = screens_at(*g, *actions, at);
    for (const auto& [step, hash] : c.hashes) {
      CAPTURE(step);
      CHECK(ref.at(step) == hash);
    }
  }
}
