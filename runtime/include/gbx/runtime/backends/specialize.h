#pragma once
// Profiling runs and specialization plans for a ROM (docs/internals/specialization.md): the runtime
// side of gbx/engine/specialize.h.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gbx/engine/specialize.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx {

struct ProfileRunOptions {
  int frames = 600;                // frames profiled per env
  std::string actions = "random";  // random: a random button byte per env per step; none: no input
  uint64_t seed = 1;
  int threads = 1;
  // The declared options of gbx-synth profile (gbx/runtime/backends/options.h): --envs (envs
  // stepped together; their counts add up), --frames-per-step (one action per step),
  // --release-after-frames (-1: never); one absent takes the command line's default
  // (with_defaults). The profiling run's BackendConfig is made from them (apply_options).
  OptionValues options;
  std::string load_state;  // save state every env starts from ("" = power-on)
};

// Runs `rom` on the profiling interpreter (a cached kernel like any other). With a save state
// and the step shape of the run to come (24 frames a step, buttons held 8), the profile sees
// the code that run will execute: the mid-game loop, not the title screen.
Result<SpecProfile> profile_rom(const Rom& rom, const ProfileRunOptions& opts,
                                const SpecLimits& limits = {});

// The hot set of the profile file at `path` for `rom`.
Result<std::shared_ptr<const SpecPlan>> load_spec_plan(const Rom& rom, const std::string& path,
                                                       const SpecLimits& limits = {});

// The same from a profile in memory.
Result<std::shared_ptr<const SpecPlan>> spec_plan_for(const Rom& rom, const SpecProfile& profile,
                                                      const SpecLimits& limits = {});

// The tools' --specialize option into cfg: "off"; "profile:FILE" (the kernel for that profile's
// hot set); "auto" or "auto:N" (profile the first N frames, default 60, then compile in the
// background and swap in between steps; cpu and cuda backends).
Status apply_specialize_option(const std::string& spec, const Rom& rom, BackendConfig& cfg);

// For benchmarks under auto: calls step() until be's profile is done, then waits for the
// specialized kernel (Backend::finish_tier_up); an error if it failed. Then, with
// window_steps > 0 (the steps of one re-profiling window: the profile's frames over the
// frames a step), runs three windows on the new kernel, and when one calls for a re-profile
// (SpecializeTierUp::watch) profiles and waits again, until three pass without one: the
// timed window then runs the kernel the tier-up settles on, as an RL run does once its first
// minutes have passed, not a profile already known to be stale.
// Returns the steps run. No-op (0) when be is not profiling or compiling.
Result<int64_t> tier_up_now(Backend& be, const std::function<Status()>& step,
                            int64_t window_steps = 0);

}  // namespace gbx
