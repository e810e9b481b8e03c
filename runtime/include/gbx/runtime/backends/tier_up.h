#pragma once
// The ROM-specialization tier-up both backends run (docs/internals/specialization.md): the
// profiling interpreter counts executed ROM bytes for N frames, a plan is made from the
// counts, the specialized kernel compiles in the background while the interpreter keeps
// running (counting off), and it is swapped in between two steps (same state ABI). One state
// machine with explicit states, so the cpu and cuda backends cannot drift apart, and a failed
// specialization is an error finish_tier_up() returns, not only a status string.
//
// Re-profiling (watch(); the cpu backend calls it): a profile only knows the code that ran in
// its window, and games move on (libbet's title loop, then the game: its first profile covered
// 6% of what ran afterwards; Tobu Tobu Girl from a mid-game state: the blocks carried 96% of
// the profile's window and 62-81% of every window after it). What costs is the share the
// interpreter runs, so that is what is watched: when a window of the profile's length finds
// the interpreter running more than kRetierInterp of the retired instructions (an
// interpreted instruction takes several times a block's: at 15% the interpreter takes about
// half the time), the profile is taken again and added to the earlier ones, and a kernel with
// blocks for both compiles in the background. At most kMaxRetiers times, and no more once a
// re-profile did not cut the interpreter's share to kRetierCut of what started it (code
// outside ROM, which no block covers, would otherwise re-profile to no end).
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
  static constexpr int kMaxRetiers = 3;
  // Shares of the retired instructions a window leaves to the interpreter (see the top).
  static constexpr double kRetierInterp = 0.15;  // over this re-profiles,
  static constexpr double kRetierCut = 0.75;     // ... unless the last re-profile cut less

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
    profiled_total_ += frames_;  // counts add up over re-profiles (watch())
    auto plan = make_tier_plan(rom, counts, profiled_total_, std::move(base));
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
    first_window_ = true;
    window_ = Window{};
    return std::move(*k);
  }

  // Specialized: after each step, the frames it ran and the instructions retired in all and
  // inside specialized blocks during it. True when the interpreter's share over the last
  // window of the profile's length calls for a re-profile (see the top): the state is
  // Profiling again (the caller zeroes its counters and runs the profiling kernel; the counts
  // it gives compile() next should include the earlier profiles').
  bool watch(int64_t frames, int64_t all_instrs, int64_t block_instrs) {
    if (state_ != TierState::Specialized || retiers_ >= kMaxRetiers || gave_up_) return false;
    window_.frames += frames;
    window_.all += all_instrs;
    window_.block += block_instrs;
    if (window_.frames < goal_frames_) return false;
    const double interp =
        window_.all > 0 ? (double)(window_.all - window_.block) / (double)window_.all : 0.0;
    window_ = Window{};
    if (first_window_ && retiers_ > 0 && interp > kRetierCut * retier_interp_) {
      gave_up_ = true;  // the first window after a re-profile: it did not help
      return false;
    }
    first_window_ = false;
    if (interp <= kRetierInterp) return false;
    ++retiers_;
    retier_interp_ = interp;
    start(goal_frames_);
    return true;
  }
  int retiers() const { return retiers_; }

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
  struct Window {
    int64_t frames = 0, all = 0, block = 0;
  };
  TierState state_ = TierState::Off;
  int64_t goal_frames_ = 0;
  int64_t frames_ = 0;
  int64_t profiled_total_ = 0;
  int retiers_ = 0;
  bool gave_up_ = false;
  bool first_window_ = true;  // no window has ended since the last swap
  double retier_interp_ = 0;  // the interpreter share that started the last re-profile
  Window window_;
  std::string failure_;
  std::future<Result<Kernel>> compile_;
};

}  // namespace gbx
