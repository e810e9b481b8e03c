// Re-profiling under --specialize auto (runtime/include/gbx/runtime/backends/tier_up.h, watch()): a
// profile knows only the code of its window, so when a game moves on the blocks stop covering
// what runs; auto profiles again, adds the counts and swaps in a kernel with blocks for both.
// Bit-exact throughout: the end state equals the interpreter's.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "phase_rom.h"
#include "spec_share.h"

using namespace gbx;
using gbx::test::assembled;
using gbx::test::phase_rom;

namespace {

// Its loop runs from WRAM: no block can cover it, whatever the profile.
Rom wram_loop_rom() {
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD HL,d16", "loop").op("LD DE,d16", 0xC100).op("LD B,d8", 4);
  a.label("copy").op("LD A,(HL+)").op("LD (DE),A").op("INC DE").op("DEC B").op("JR NZ,r8", "copy");
  a.op("JP a16", 0xC100);
  a.label("loop").op("INC C").op("INC D").op("JR r8", -4);  // 4 bytes, at C100 once copied
  return assembled("WRAMLOOP", a);
}

// A game that moves on only in part: the second phase still calls the first's subroutine
// (in blocks) and adds its own loop around it, about a third of what it runs. The blocks
// keep most of the instructions, so only the interpreter's share says the profile is stale.
Rom partly_new_rom() {
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD HL,d16", 0x1800);
  a.label("title").op("CALL a16", "work").op("DEC HL").op("LD A,H").op("OR L");
  a.op("JR NZ,r8", "title");
  a.label("game").op("CALL a16", "work").op("INC E").op("LD A,E").op("XOR d8", 0x5A);
  a.op("LD E,A").op("INC D").op("JR r8", "game");
  a.label("work").op("INC C").op("LD A,C").op("ADD A,d8", 3).op("LD C,A").op("INC B");
  a.op("LD A,B").op("ADD A,d8", 5).op("LD B,A").op("SWAP A").op("XOR C").op("LD C,A");
  a.op("RET");
  return assembled("PARTLYNEW", a);
}

BackendConfig config(int auto_frames) {
  BackendConfig cfg;
  cfg.num_envs = 2;
  cfg.stage = Stage::EmulateOnly;
  cfg.threads = 1;
  cfg.specialize_auto_frames = auto_frames;
  return cfg;
}

struct Run {
  std::vector<double> shares;  // per step: the blocks' share of the instructions it retired
  int retiers = 0;
  std::string text() const {
    std::string s;
    for (double x : shares) s += std::to_string(x).substr(0, 4) + " ";
    return s;
  }
};

// Steps the auto backend beside the interpreter, one frame a step, waiting for each compile
// (finish_tier_up) so the swaps happen at the same steps on every machine; the end states
// must be equal.
Run run_beside_interpreter(const Rom& rom, int steps) {
  auto dut = CpuBackend::create(rom, config(4));
  REQUIRE_MESSAGE(dut.ok(), (dut.ok() ? "" : dut.error().message));
  auto ref = CpuBackend::create(rom, config(0));
  REQUIRE_MESSAGE(ref.ok(), (ref.ok() ? "" : ref.error().message));
  Run r;
  test::SpecShare before = test::spec_share(*dut.value(), 2);
  for (int i = 0; i < steps; ++i) {
    REQUIRE(ref.value()->step({}).ok());
    REQUIRE(dut.value()->step({}).ok());
    if (dut.value()->specialize_status() == "compiling")
      REQUIRE(dut.value()->finish_tier_up().ok());
    const test::SpecShare now = test::spec_share(*dut.value(), 2);
    const int64_t all = now.retired - before.retired;
    r.shares.push_back(all > 0 ? (double)(now.in_blocks - before.in_blocks) / (double)all : 0);
    before = now;
  }
  r.retiers = dut.value()->specialize_retiers();
  for (int env = 0; env < 2; ++env) {
    CAPTURE(env);
    auto a = ref.value()->save_state(env);
    auto b = dut.value()->save_state(env);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a.value() == b.value());
  }
  return r;
}

}  // namespace

TEST_CASE("auto re-profiles once the code moves on, and the new kernel covers both phases") {
  const Run r = run_beside_interpreter(phase_rom(), 48);
  const std::string shares = r.text();
  CAPTURE(shares);
  CHECK(r.retiers == 1);
  // Profiled on the first loop: its blocks carry it, then nothing of the second loop.
  CHECK(r.shares[6] > 0.9);
  bool uncovered = false;
  for (size_t i = 14; i < 24; ++i) uncovered = uncovered || r.shares[i] < 0.1;
  CHECK(uncovered);
  // After the re-profile: the second loop in blocks.
  for (size_t i = r.shares.size() - 4; i < r.shares.size(); ++i) CHECK(r.shares[i] > 0.9);
}

TEST_CASE("auto stops re-profiling when a re-profile does not lift the blocks' share") {
  // Code in WRAM: the first window re-profiles (the interpreter runs all of it), the kernel
  // after it covers no more, so auto gives up instead of profiling up to kMaxRetiers times.
  const Run r = run_beside_interpreter(wram_loop_rom(), 40);
  const std::string shares = r.text();
  CAPTURE(shares);
  CHECK(r.retiers == 1);
  CHECK(r.shares.back() < 0.1);
}

TEST_CASE("auto re-profiles when the interpreter runs over 15%, though blocks keep the most") {
  const Run r = run_beside_interpreter(partly_new_rom(), 48);
  const std::string shares = r.text();
  CAPTURE(shares);
  CHECK(r.retiers == 1);
  CHECK(r.shares[6] > 0.9);
  // The second phase before the re-profile: blocks still carry more than half of it.
  bool partly = false;
  for (size_t i = 10; i < 30; ++i) partly = partly || (r.shares[i] > 0.5 && r.shares[i] < 0.8);
  CHECK(partly);
  for (size_t i = r.shares.size() - 4; i < r.shares.size(); ++i) CHECK(r.shares[i] > 0.9);
}

TEST_CASE("tier_up_now settles: the re-profiles its windows call for happen before it returns") {
  // bench --specialize auto times what this returns to: the kernel after the re-profile.
  auto be = CpuBackend::create(partly_new_rom(), config(4));
  REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
  Backend& b = *be.value();
  auto steps = tier_up_now(
      b, [&] { return b.step({}); }, 4);
  REQUIRE_MESSAGE(steps.ok(), (steps.ok() ? "" : steps.error().message));
  CHECK(b.specialize_retiers() == 1);
  CHECK(b.specialize_status() == "specialized");
  // A profile of 4 steps, one to three windows of 4 on the first kernel (the last re-profiles),
  // a profile of 4 and three windows on the second.
  CHECK(steps.value() >= 4 + 4 + 4 + 12);
  CHECK(steps.value() <= 4 + 12 + 4 + 12);
  const test::SpecShare before = test::spec_share(b, 2);
  for (int i = 0; i < 8; ++i) REQUIRE(b.step({}).ok());
  const test::SpecShare after = test::spec_share(b, 2);
  CHECK((double)(after.in_blocks - before.in_blocks) / (double)(after.retired - before.retired) >
        0.9);
}
