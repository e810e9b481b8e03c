// gbx-synth profile --load-state (ProfileRunOptions::load_state): a profile taken from a save
// state sees the code that runs from there on, not what ran from power-on, and the counts of
// several envs add up.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/states/save_state.h"
#include "phase_rom.h"

using namespace gbx;

namespace {

std::set<std::pair<uint32_t, uint16_t>> block_starts(const SpecProfile& p) {
  std::set<std::pair<uint32_t, uint16_t>> s;
  for (const SpecBlock& b : p.blocks) s.insert({b.bank, b.addr});
  return s;
}

// The phase ROM after 30 frames (its second loop runs from frame ~14), saved to a file.
std::string state_in_second_phase(const Rom& rom) {
  BackendConfig cfg;
  cfg.num_envs = 1;
  cfg.stage = Stage::EmulateOnly;
  cfg.threads = 1;
  cfg.frames_per_step = 30;
  auto b = CpuBackend::create(rom, cfg);
  REQUIRE(b.ok());
  REQUIRE(b.value()->step({}).ok());
  auto blob = b.value()->save_state(0);
  REQUIRE(blob.ok());
  const std::string path =
      (std::filesystem::temp_directory_path() / "gbx_test_profile_from_state.state").string();
  REQUIRE(write_save_state_file(path, blob.value()).ok());
  return path;
}

}  // namespace

TEST_CASE("a profile from a save state covers the code after it, not the power-on code") {
  const Rom rom = test::phase_rom();
  const std::string state = state_in_second_phase(rom);

  ProfileRunOptions from_power_on;
  from_power_on.frames = 4;
  from_power_on.actions = "none";
  auto early = profile_rom(rom, from_power_on);
  REQUIRE(early.ok());

  ProfileRunOptions from_state = from_power_on;
  from_state.load_state = state;
  auto late = profile_rom(rom, from_state);
  REQUIRE_MESSAGE(late.ok(), (late.ok() ? "" : late.error().message));

  // Power-on: the first loop (and the set-up before it). From the state: the second loop
  // alone. Both ran instructions, and no block is in both.
  REQUIRE(!early.value().blocks.empty());
  REQUIRE(!late.value().blocks.empty());
  CHECK(late.value().total_instructions > 0);
  for (const auto& start : block_starts(late.value())) {
    CAPTURE(start.second);
    CHECK(block_starts(early.value()).count(start) == 0);
  }

  // Three envs from the same state, no input: three times the instructions, the same blocks.
  // Steps of 2 frames: 4 frames are 2 steps.
  ProfileRunOptions three = from_state;
  three.options["num_envs"] = int64_t{3};
  three.options["frames_per_step"] = int64_t{2};
  auto tripled = profile_rom(rom, three);
  REQUIRE(tripled.ok());
  CHECK(tripled.value().total_instructions == 3 * late.value().total_instructions);
  CHECK(block_starts(tripled.value()) == block_starts(late.value()));
  CHECK(tripled.value().frames == 4);
  std::filesystem::remove(state);
}

TEST_CASE("profile options out of range or a missing state: one clear error") {
  const Rom rom = test::phase_rom();
  ProfileRunOptions o;
  o.frames = 2;
  o.options["frames_per_step"] = int64_t{0};
  auto r = profile_rom(rom, o);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("--frames-per-step") != std::string::npos);
  o.options["frames_per_step"] = int64_t{1};
  o.options["num_envs"] = int64_t{0};
  r = profile_rom(rom, o);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("--envs") != std::string::npos);
  o.options["num_envs"] = int64_t{1};
  o.load_state = "/nonexistent/gbx.state";
  r = profile_rom(rom, o);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("/nonexistent/gbx.state") != std::string::npos);
}
