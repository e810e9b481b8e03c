// ROM-specialized kernels on the cuda backend (docs/internals/specialization.md): the specialized
// kernel NVRTC builds from the same generated source ends every env byte-identical (save states:
// registers, counters, memory, framebuffer) to the plain cpu interpreter, with random actions, on
// built-in ROMs (all of them with GBX_TEST_CUDA_SPECIALIZE_ALL=1); `auto` profiles on the device,
// compiles in the background and swaps in between steps. Device-only like test_cuda_backend
// (CTest also runs it on the CUDA driver double, test_cuda_specialize_on_double); without a
// device it prints "[skipped]".
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "skip.h"
#include "spec_share.h"

using namespace gbx;

namespace {

bool have_device() {
  auto drv = CudaDriver::get();
  if (drv.ok()) return true;
  // On the double a skip would hide a failure: it must load.
  if (std::getenv("GBX_TEST_CUDA_DOUBLE_DIR"))
    FAIL("the CUDA double did not load: ", drv.error().message);
  test::skip_case(drv.error().message);
  return false;
}

BackendConfig config(int envs) {
  BackendConfig cfg;
  cfg.num_envs = envs;
  cfg.stage = Stage::FullStep;
  cfg.render = true;  // the framebuffer is part of the compared save states
  cfg.threads = 1;
  return cfg;
}

std::unique_ptr<Backend> make(const std::string& name, const Rom& rom, const BackendConfig& cfg) {
  auto b = make_backend(name, rom, cfg);
  REQUIRE_MESSAGE(b.ok(), name, ": ", (b.ok() ? "" : b.error().message + "\n" + b.error().detail));
  return std::move(b.value());
}

// A random button byte for a quarter of the env-steps, none for the rest (as test_specialize).
void random_actions(std::mt19937_64& rng, std::vector<int32_t>& actions) {
  for (auto& x : actions) x = (int32_t)(rng() % 4 == 0 ? rng() & 0xFF : 0);
}

// Steps ref and dut with the same random actions until done() holds and at least min_frames
// frames (one a step) have run, calling after(frames) after each step; fails after 15 minutes
// (a background compile that never lands).
template <class Done, class After>
void step_both_until(Backend& ref, Backend& dut, std::mt19937_64& rng, int min_frames, Done done,
                     After after) {
  std::vector<int32_t> actions((size_t)dut.num_envs());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(15);
  for (int frames = 0; !done() || frames < min_frames;) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    random_actions(rng, actions);
    REQUIRE(ref.step(actions).ok());
    REQUIRE(dut.step(actions).ok());
    after(++frames);
  }
}

// The kernel was built with NVRTC's quick setting (the first tier of a tiered start).
bool quick_compiled(const CudaBackend& b) {
  return b.kernel().build.build.entry.meta.dump().find("--Ofast-compile=max") != std::string::npos;
}

void check_same_envs(Backend& ref, Backend& dut) {
  REQUIRE(dut.sync().ok());
  for (int env = 0; env < dut.num_envs(); ++env) {
    CAPTURE(env);
    auto a = ref.save_state(env);
    auto b = dut.save_state(env);
    REQUIRE(a.ok());
    REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
    CHECK(a.value() == b.value());
    const CpuState sa = ref.get_cpu_state(env).value();
    const CpuState sb = dut.get_cpu_state(env).value();
    CHECK(sa.pc == sb.pc);
    CHECK(sa.cycle_count == sb.cycle_count);
    CHECK(sa.instr_count == sb.instr_count);
  }
}

}  // namespace

// Each ROM is a specialized kernel of its own: one NVRTC compile (about a minute of CPU on
// 2 cores, mostly ptxas) plus, on the double, one host compile. By default the ROMs whose
// features reach the specialized paths most (banked code, timer interrupts, OAM DMA from HRAM
// with the renderer on); GBX_TEST_CUDA_SPECIALIZE_ALL=1 takes every built-in ROM (about 20
// minutes on the double here; the cpu twin in test_specialize always takes them all).
bool take_rom(const std::string& name) {
  const char* all = std::getenv("GBX_TEST_CUDA_SPECIALIZE_ALL");
  if (all && std::string(all) == "1") return true;
  return name == "MBC1_BANKS" || name == "IRQ_TIMER" || name == "PPU_BENCH";
}

TEST_CASE("specialized cuda kernels end identically to the cpu interpreter on built-in ROMs") {
  if (!have_device()) return;
  const int envs = 3;
  int n = 0;
  for (const BuiltinRom& br : builtin_roms()) {
    if (!take_rom(br.name)) continue;
    CAPTURE(br.name);
    auto rom = load_rom("builtin:" + br.name);
    REQUIRE(rom.ok());
    ProfileRunOptions po;
    po.frames = 30;
    po.seed = 11 + (uint64_t)n;
    auto prof = profile_rom(*rom, po);
    REQUIRE_MESSAGE(prof.ok(), (prof.ok() ? "" : prof.error().message));
    auto plan = spec_plan_for(*rom, *prof);
    REQUIRE(plan.ok());
    BackendConfig cfg = config(envs);
    auto ref = make("cpu", *rom, cfg);
    cfg.specialize = *plan;
    auto dut = make("cuda", *rom, cfg);
    // The cuda kernel is the specialized one: its source carries the hot set.
    CHECK(static_cast<CudaBackend&>(*dut).kernel().build.build.source.source.find(
              "hot set " + (*plan)->profile_hash.substr(0, 16)) != std::string::npos);
    std::mt19937_64 rng(3 + (uint64_t)n);
    std::vector<int32_t> actions(envs);
    const int frames = std::max(20, br.frames_to_finish + 4);
    for (int f = 0; f < frames; ++f) {
      random_actions(rng, actions);
      REQUIRE(ref->step(actions).ok());
      REQUIRE(dut->step(actions).ok());  // asynchronous: no sync between steps
    }
    check_same_envs(*ref, *dut);
    // ... and the blocks ran on the device (the counters come from the kernel's own writes).
    const test::SpecShare sh = test::spec_share(*dut, envs);
    const double coverage = test::plan_coverage(*prof, **plan);
    MESSAGE(br.name << ": " << 100 * sh.share() << "% of " << sh.retired
                    << " instructions retired in specialized blocks (plan: " << 100 * coverage
                    << "%)");
    CHECK(sh.share() >= coverage / 3);
    if (!br.expected_serial.empty())
      CHECK(dut->serial_output(envs - 1).value() == br.expected_serial);
    ++n;
  }
  CHECK(n >= 3);
}

// ARROWS on 2 envs: the cpu interpreter, and cuda under auto (8 frames of profile). With a
// tiered start the profiling interpreter is a quick compile (unless an optimized one is
// cached) and the specialized kernel, optimized, is the one that follows it.
namespace {
struct AutoPair {
  Rom rom;
  std::unique_ptr<Backend> ref;
  std::unique_ptr<CudaBackend> dut;
};
AutoPair arrows_auto_pair() {
  AutoPair p;
  auto rom = load_rom("builtin:ARROWS");
  REQUIRE(rom.ok());
  p.rom = std::move(*rom);
  BackendConfig cfg = config(2);
  p.ref = make("cpu", p.rom, cfg);
  cfg.specialize_auto_frames = 8;
  cfg.tiered_start = true;
  auto made = CudaBackend::create(p.rom, cfg);
  REQUIRE_MESSAGE(made.ok(), (made.ok() ? "" : made.error().message));
  p.dut = std::move(*made);
  return p;
}
}  // namespace

TEST_CASE("auto on cuda: device profile, background compile, swap between steps, exact") {
  // As test_specialize's cpu case: after the step that starts the compile, steps keep
  // returning while it is "compiling" (a step that waited would find it done), and after
  // the swap every env ends exactly where the plain interpreter does.
  if (!have_device()) return;
  AutoPair pair = arrows_auto_pair();
  Backend& ref = *pair.ref;
  CudaBackend& dut = *pair.dut;
  CHECK(dut.specialize_status() == "profiling");
  CHECK(dut.kernel().build.build.source.params.profile);
  CHECK(quick_compiled(dut) == dut.started_fast());
  const std::string profiling_key = dut.kernel_key();
  std::mt19937_64 rng(7);
  int steps_while_compiling = 0;
  step_both_until(
      ref, dut, rng, 60, [&] { return dut.specialize_status() == "specialized"; },
      [&](int frames) {
        const std::string st = dut.specialize_status();
        REQUIRE_MESSAGE(st.rfind("failed", 0) != 0, st);
        if (st == "profiling") CHECK(frames < 8);
        if (st == "compiling") ++steps_while_compiling;
      });
  CHECK(steps_while_compiling >= 1);
  // The swapped-in kernel: specialized, without the profile counter.
  CHECK(dut.kernel_key() != profiling_key);
  const SynthParams& p = dut.kernel().build.build.source.params;
  CHECK_FALSE(p.profile);
  REQUIRE(p.specialize);
  CHECK(p.specialize->rom == pair.rom.bytes);
  CHECK_FALSE(p.specialize->blocks.empty());
  CHECK_FALSE(quick_compiled(dut));
  CHECK(dut.start_tier() == "optimized");
  check_same_envs(ref, dut);
}

TEST_CASE("finish_tier_up on cuda: waits for the specialized kernel and swaps it in, exact") {
  // What verify and bench do under auto. The inputs of the case above, so that its
  // specialized kernel is usually in the cache already.
  if (!have_device()) return;
  AutoPair pair = arrows_auto_pair();
  Backend& ref = *pair.ref;
  CudaBackend& dut = *pair.dut;
  REQUIRE(dut.finish_tier_up().ok());  // profiling: nothing to wait for yet
  CHECK(dut.specialize_status() == "profiling");
  std::mt19937_64 rng(7);
  step_both_until(
      ref, dut, rng, 1, [&] { return dut.specialize_status() != "profiling"; }, [](int) {});
  REQUIRE(dut.specialize_status() == "compiling");
  REQUIRE(dut.finish_tier_up().ok());
  CHECK(dut.specialize_status() == "specialized");
  CHECK(dut.start_tier() == "optimized");
  REQUIRE(dut.kernel().build.build.source.params.specialize);
  step_both_until(
      ref, dut, rng, 10, [] { return true; }, [](int) {});
  check_same_envs(ref, dut);
}

TEST_CASE("tiered start on cuda: quick kernel first, optimized swapped in between steps, exact") {
  // A cache of its own, so that the optimized kernel is certainly not in it.
  if (!have_device()) return;
  const std::string cache_dir =
      (std::filesystem::temp_directory_path() /
       ("gbx-tiered-" +
        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())))
          .string();
  const char* old_cache = std::getenv("GBX_CACHE_DIR");
  const std::string saved = old_cache ? old_cache : "";
  setenv("GBX_CACHE_DIR", cache_dir.c_str(), 1);
  {
    auto rom = load_rom("builtin:IRQ_TIMER");
    REQUIRE(rom.ok());
    const int envs = 3;
    BackendConfig cfg = config(envs);
    cfg.stage = Stage::EmulateOnly;
    auto ref = make("cpu", *rom, cfg);
    cfg.tiered_start = true;
    auto made = CudaBackend::create(*rom, cfg);
    REQUIRE_MESSAGE(made.ok(), (made.ok() ? "" : made.error().message));
    CudaBackend& dut = **made;
    CHECK(dut.started_fast());
    CHECK(dut.start_tier() == "fast");
    CHECK(quick_compiled(dut));
    const std::string fast_key = dut.kernel_key();
    std::mt19937_64 rng(5);
    int fast_steps = 0;
    step_both_until(
        *ref, dut, rng, 40, [&] { return dut.start_tier() == "optimized"; },
        [&](int) {
          REQUIRE_MESSAGE(dut.start_tier().rfind("fast (", 0) != 0, dut.start_tier());
          if (dut.start_tier() == "fast") ++fast_steps;
        });
    // Steps went on while the optimized kernel compiled; it took over at a step boundary.
    CHECK(fast_steps >= 1);
    CHECK(dut.optimized_step() >= 1);
    CHECK(dut.kernel_key() != fast_key);
    CHECK_FALSE(quick_compiled(dut));
    check_same_envs(*ref, dut);
    // The optimized kernel is cached now: the next backend starts on it, nothing quick.
    auto again = CudaBackend::create(*rom, cfg);
    REQUIRE(again.ok());
    CHECK_FALSE((*again)->started_fast());
    CHECK((*again)->start_tier() == "optimized");
    CHECK((*again)->kernel_key() == dut.kernel_key());
  }
  if (old_cache)
    setenv("GBX_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("GBX_CACHE_DIR");
  std::error_code ec;
  std::filesystem::remove_all(cache_dir, ec);
}

TEST_CASE("a plan for another ROM, or auto with a plan, is refused before any compile") {
  if (!have_device()) return;
  auto alu = load_rom("builtin:ALU_LOOP");
  auto mem = load_rom("builtin:MEM_RWB");
  REQUIRE(alu.ok());
  REQUIRE(mem.ok());
  ProfileRunOptions po;
  po.frames = 2;
  auto prof = profile_rom(*alu, po);
  REQUIRE(prof.ok());
  auto plan = spec_plan_for(*alu, *prof);
  REQUIRE(plan.ok());
  BackendConfig cfg = config(1);
  cfg.specialize = *plan;
  auto other = make_backend("cuda", *mem, cfg);
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().kind == ErrorKind::Usage);
  CHECK(other.error().message.find("another ROM") != std::string::npos);
  cfg.specialize_auto_frames = 4;
  auto both = make_backend("cuda", *alu, cfg);
  REQUIRE_FALSE(both.ok());
  CHECK(both.error().kind == ErrorKind::Usage);
}
