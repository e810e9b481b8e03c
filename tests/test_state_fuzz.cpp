// Crafted save states (docs/guide/states.md "What a load checks"): every state either loads
// and runs or is refused with one line naming its field; none makes a kernel touch memory
// outside its env. Seeds are states of real games (../shared/games, when present) and of the
// built-in PPU_BENCH (window, 40 objects, scroll and OAM DMA every frame). Each crafted state
// goes into env 1 of two, env 0 runs the seed, and both step frames with pixels; env 0 must
// end exactly as it does alone (nothing wrote into it), and the state env 1 reaches must load
// again (a rule that refuses a state the machine reaches is wrong). Structured cases put each
// field at its extremes and at values that break its rule, and make the pixel FIFO active on
// the line the PPU is on with odd fields; random cases flip seeded bytes and write seeded
// values. Counts (tried / refused / ran / crashed) are printed; a crash ends the run with the
// case it was in (crashed stays 0 when the run finishes). The cpu backend runs both pixel
// models here; the cuda backend, on a device or the CUDA driver double, in
// tests/test_cuda_backend/state_fuzz.cpp (helpers: state_fuzz.h).
#include <doctest/doctest.h>

#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/states/env_state.h"
#include "gbx/runtime/states/state_fields.h"
#include "gbx/runtime/states/state_rules.h"
#include "state_fuzz.h"

using namespace state_fuzz;

TEST_CASE("crafted states on the cpu backend: refused in one line or run inside their env") {
  report_crashes();
  report("cpu fifo", run_cases("cpu", PpuModel::Fifo, true));
  report("cpu line", run_cases("cpu", PpuModel::Line, false));
}

TEST_CASE("every state field has a value rule") {
  const auto covered = state_rule_records();
  auto has = [&](const std::string& n) {
    return std::find(covered.begin(), covered.end(), n) != covered.end();
  };
#define GBX_FIELD_RULED(name, size) \
  CHECK_MESSAGE(has(#name), #name " has no rule in state_rules.cpp");
  GBX_STATE_FIELDS(GBX_FIELD_RULED)
#undef GBX_FIELD_RULED
  CHECK(has("mem"));
  CHECK(has("seen"));
}

// The second line of defence: the probe states written straight into a kernel's state
// (no loader), the FIFO active on the PPU's line. The kernel clamps its indices (the screen x,
// the object slot, the OAM index), so env 1 stays inside its own rows and envs 0 and 2 end as
// they do beside an untouched env 1. Without the clamps the first case wrote 1 GiB past the
// framebuffer and the second read sel[-1].
TEST_CASE("the kernel keeps the probe's FIFO states inside their env, without the loader") {
  report_crashes();
  const Rom rom = rom_or_fail("builtin:PPU_BENCH");
  BackendConfig cfg;
  cfg.render = true;
  cfg.ppu = PpuModel::Fifo;
  const SynthParams params = synth_params_for(cfg, Device::Cpu, 32);
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  KernelCache cache;
  auto kernel = build_cpu_kernel(bundle.value(), params, cache);
  REQUIRE_MESSAGE(kernel.ok(), (kernel.ok() ? "" : kernel.error().message));
  // A seed 30 frames in.
  auto b = make("cpu", rom, PpuModel::Fifo);
  REQUIRE(b->reset(0).ok());
  for (int i = 0; i < 15; ++i) REQUIRE(b->step({0, 0}).ok());
  const Seed seed{"PPU_BENCH", rom, b->save_state(0).value()};
  auto run = [&](const Odd* odd) {
    EnvState state(3, MemoryModel::Dmg, &rom);
    std::vector<float> obs(3 * 32), reward(3);
    // Every env at the same PPU position (the FIFO idle), loaded through the loader; then
    // env 1's FIFO gets the probe's bytes behind the loader's back.
    auto recs = fifo_on_line(records(seed), odd ? *odd : odd_fifos().front());
    const std::vector<uint8_t> probe = rec(recs, "lcd_fifo").bytes;
    std::fill(rec(recs, "lcd_fifo").bytes.begin(), rec(recs, "lcd_fifo").bytes.end(), 0);
    const auto blob = write_save_state(rom, MemoryModel::Dmg, SaveStateKind::Kernel, recs);
    for (int env = 0; env < 3; ++env) {
      Status st = decode_env_state(blob, state, env);
      REQUIRE_MESSAGE(st.ok(), (st ? "" : st.error().message));
    }
    if (odd)
      std::memcpy(state.soa().lcd_fifo + GBX_LCD_FIFO_BYTES, probe.data(), GBX_LCD_FIFO_BYTES);
    GbxParams p = state.kernel_params();
    p.frames = 2;
    p.obs = obs.data();
    p.obs_dim = 32;
    p.reward = reward.data();
    kernel->step(&p, 0, 3);
    std::vector<std::vector<uint8_t>> out;
    for (int env = 0; env < 3; ++env) out.push_back(encode_env_state(state, env));
    return out;
  };
  const auto ref = run(nullptr);
  int cases = 0;
  for (const Odd& o : odd_fifos()) {
    CAPTURE(o.what);
    std::snprintf(g_case, sizeof g_case, "kernel probe: %s", o.what);
    const auto got = run(&o);
    CHECK(got[0] == ref[0]);
    CHECK(got[2] == ref[2]);
    ++cases;
  }
  std::printf("state fuzz kernel probe: %d FIFO states ran in the kernel, envs 0 and 2 intact\n",
              cases);
}

TEST_CASE("a refused value is one line naming the env and the field, on every load path") {
  const Rom rom = rom_or_fail("builtin:PPU_BENCH");
  auto b = make("cpu", rom, PpuModel::Fifo);
  REQUIRE(b->reset(0).ok());
  REQUIRE(b->step({0, 0}).ok());
  const Seed seed{"PPU_BENCH", rom, b->save_state(0).value()};
  auto recs = fifo_on_line(records(seed), odd_fifos().front());  // x 0 with the shift flag
  const auto bad = write_save_state(rom, MemoryModel::Dmg, SaveStateKind::Kernel, recs);
  const std::string field = "field 'lcd_fifo.x' is 0, must be at least 1";
  Status st = b->load_state(1, bad);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("save state for env 1: " + field) == 0);
  CHECK(st.error().message.find('\n') == std::string::npos);
  st = b->set_reset_state({seed.blob, bad});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("reset state 1: save state for env 1: " + field) == 0);
  // One blob for every env: decoded as env 0.
  CHECK(b->set_reset_state({bad}).error().message.find("save state for env 0: " + field) == 0);
  REQUIRE(b->load_state(1, seed.blob).ok());
}
