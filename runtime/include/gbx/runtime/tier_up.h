#pragma once
// The ROM-specialization tier-up both backends run (docs/internals/specialization.md): the
// profiling interpreter counts executed ROM bytes for N frames, a plan is made from the
// counts, the specialized kernel compiles in the background while the interpreter keeps
// running (counting off), and it is swapped in between two steps (same state ABI). One state
// machine with explicit states, so the cpu and cuda backends cannot drift apart, and a failed
// specialization is an error finish_tier_up() returns, not only a status string.
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gbx/engine/generator.h"
#include "gbx/engine/result.h"

namespace gbx {

enum class TierState : uint8_t { Off, Profiling, Compiling, Specialized, Failed };

// "off", "profiling", "compiling", "specialized" or "failed" (Backend::specialize_status
// appends the reason to the last).
const char* tier_state_name(TierState s);

// The plan step shared by both backends: the synthesis parameters of the specialized kernel
// for `rom`, from the profile `counts` (one per ROM byte) of `frames` frames, on top of `base`
// (the backend's own parameters). The template bundle comes back with it for the compile.
struct TierPlan {
  TemplateBundle bundle;
  SynthParams params;
};
Result<TierPlan> make_tier_plan(const std::vector<uint8_t>& rom,
                                const std::vector<uint32_t>& counts, int64_t frames,
                                SynthParams base);

template <class Kernel>
class SpecializeTierUp {
 public:
  // Off -> Profiling: the next `frames` frames are profiled.
  void start(int64_t frames) {
    state_ = TierState::Profiling;
    goal_frames_ = frames;
    frames_ = 0;
  }
  TierState state() const { return state_; }
  const std::string& failure() const { return failure_; }
  std::string status() const {
    std::string s = tier_state_name(state_);
    return state_ == TierState::Failed ? s + ": " + failure_ : s;
  }
  int64_t profiled_frames() const { return frames_; }

  // After a step of `frames` frames: true once the profile is complete (the caller then reads
  // its counters and calls compile()).
  bool profile_done_after(int64_t frames) {
    if (state_ != TierState::Profiling) return false;
    frames_ += frames;
    return frames_ >= goal_frames_;
  }

  // Profiling -> Compiling (or Failed): plans from the counts and compiles in the background.
  void compile(const std::vector<uint8_t>& rom, const std::vector<uint32_t>& counts,
               SynthParams base, std::function<Result<Kernel>(TemplateBundle, SynthParams)> build) {
    auto plan = make_tier_plan(rom, counts, frames_, std::move(base));
    if (!plan) return fail(plan.error().message);
    state_ = TierState::Compiling;
    compile_ = std::async(std::launch::async,
                          [build = std::move(build), plan = std::move(*plan)]() mutable {
                            return build(std::move(plan.bundle), std::move(plan.params));
                          });
  }

  // Compiling -> Specialized (the kernel, once) or Failed; nothing while the compile runs,
  // unless `wait`.
  std::optional<Kernel> take_ready(bool wait) {
    if (state_ != TierState::Compiling) return std::nullopt;
    if (!wait && compile_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      return std::nullopt;
    Result<Kernel> k = compile_.get();
    if (!k) {
      fail(k.error().message);
      return std::nullopt;
    }
    state_ = TierState::Specialized;
    return std::move(*k);
  }

  // Blocks until a background compile (if any) has finished, leaving its result to take.
  void wait() const {
    if (compile_.valid()) compile_.wait();
  }

  // Any state -> Failed, with the reason finish_tier_up() returns.
  void fail(std::string why) {
    state_ = TierState::Failed;
    failure_ = std::move(why);
  }

  // What finish_tier_up() returns once no compile runs: the failure as an error.
  Status outcome() const {
    if (state_ != TierState::Failed) return ok_status();
    return make_error(ErrorKind::Compile, "the ROM-specialized kernel failed: " + failure_);
  }

 private:
  TierState state_ = TierState::Off;
  int64_t goal_frames_ = 0;
  int64_t frames_ = 0;
  std::string failure_;
  std::future<Result<Kernel>> compile_;
};

}  // namespace gbx
