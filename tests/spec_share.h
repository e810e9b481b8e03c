#pragma once
// How much of a run the ROM-specialized blocks carried. Comparing a specialized kernel's end
// state with the interpreter's proves nothing if no block ever ran (a guard that refuses every
// block keeps the states equal), so the specializer's tests also hold this share against what
// the profile says the blocks cover.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "gbx/engine/kernel_builder.h"
#include "gbx/engine/specialize.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx::test {

struct SpecShare {
  int64_t in_blocks = 0;  // instructions retired inside specialized blocks, all envs
  int64_t retired = 0;    // all instructions retired, all envs
  double share() const { return retired > 0 ? (double)in_blocks / (double)retired : 0.0; }
};

inline SpecShare spec_share(Backend& be, int envs) {
  SpecShare s;
  auto counts = be.specialized_instr_counts();
  REQUIRE_MESSAGE(counts.ok(), (counts.ok() ? "" : counts.error().message));
  REQUIRE((int)counts.value().size() == envs);
  for (int env = 0; env < envs; ++env) {
    auto st = be.get_cpu_state(env);
    REQUIRE(st.ok());
    s.in_blocks += counts.value()[(size_t)env];
    s.retired += st.value().instr_count;
  }
  return s;
}

// The share of the profiled instructions that ran inside the plan's blocks: what a specialized
// kernel replaying the profiled run would carry at best.
inline double plan_coverage(const SpecProfile& profile, const SpecPlan& plan) {
  uint64_t weight = 0;
  for (const SpecBlock& b : plan.blocks) weight += b.weight;
  return profile.total_instructions ? (double)weight / (double)profile.total_instructions : 0.0;
}

// The generated source of the default kernel specialized for `plan` (what the specializer
// tests read for blocks, chains and comments).
inline std::string specialized_source(std::shared_ptr<const SpecPlan> plan) {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  SynthParams sp;
  sp.specialize = std::move(plan);
  auto src = generate(bundle.value(), sp);
  REQUIRE_MESSAGE(src.ok(), (src.ok() ? "" : src.error().message));
  return src.value().source;
}

// The plan of `rom` profiled `frames` frames with no input (one env), every test ROM's way.
inline std::shared_ptr<const SpecPlan> profiled_plan(const Rom& rom, int frames) {
  ProfileRunOptions po;
  po.frames = frames;
  po.actions = "none";
  auto prof = profile_rom(rom, po);
  REQUIRE(prof.ok());
  auto plan = spec_plan_for(rom, prof.value());
  REQUIRE(plan.ok());
  return plan.value();
}

// Runs `rom` on the interpreter and on `plan`'s specialized kernel side by side (emulate_only,
// no input, one thread) for `steps` steps of `frames_per_step` frames; every env's save state
// must match. Returns the specialized backend, for the share its blocks carried.
inline std::unique_ptr<CpuBackend> run_beside_interpreter(const Rom& rom,
                                                          std::shared_ptr<const SpecPlan> plan,
                                                          int envs, int frames_per_step,
                                                          int steps) {
  BackendConfig cfg;
  cfg.num_envs = envs;
  cfg.stage = Stage::EmulateOnly;
  cfg.threads = 1;
  cfg.frames_per_step = frames_per_step;
  auto ref = CpuBackend::create(rom, cfg);
  cfg.specialize = std::move(plan);
  auto dut = CpuBackend::create(rom, cfg);
  REQUIRE(ref.ok());
  REQUIRE(dut.ok());
  for (int i = 0; i < steps; ++i) {
    REQUIRE(ref.value()->step({}).ok());
    REQUIRE(dut.value()->step({}).ok());
  }
  for (int env = 0; env < envs; ++env) {
    auto x = ref.value()->save_state(env);
    auto y = dut.value()->save_state(env);
    REQUIRE(x.ok());
    REQUIRE(y.ok());
    CHECK(x.value() == y.value());
  }
  return std::move(dut.value());
}

}  // namespace gbx::test
