#pragma once
// Synthesis parameters: every field is part of the kernel's identity (and its cache key).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gbx {

enum class Stage { EmulateOnly, RewardOnly, ObsOnly, FullStep };
enum class Device { Cpu, Cuda };
enum class MemoryModel { Dmg, Flat64k };
enum class RunMode { Frames, Instructions };

struct SynthParams {
  Stage stage = Stage::FullStep;
  Device device = Device::Cpu;
  MemoryModel memory_model = MemoryModel::Dmg;
  RunMode run_mode = RunMode::Frames;
  int obs_dim = 32;
  std::vector<std::string> debug;  // debug options, e.g. "trace"; sorted when hashed
  // User expressions (gbx/engine/user_expr.h), injected at POST_STEP_DISPATCH: a reward that
  // replaces the stage's, a done flag, and values whose previous step prev(i) reads.
  std::string reward_expr;
  std::string done_expr;
  std::vector<std::string> track;

  bool has_user_exprs() const {
    return !reward_expr.empty() || !done_expr.empty() || !track.empty();
  }
  bool rtc_lock = false;           // cartridge clocks (MBC3 RTC) never advance

  // Canonical "key=value;..." string used in hashes, metadata and comments.
  std::string canonical() const;
};

std::string_view to_string(Stage s);
std::string_view to_string(Device d);
std::string_view to_string(MemoryModel m);
std::string_view to_string(RunMode r);
std::optional<Stage> parse_stage(std::string_view s);
std::optional<Device> parse_device(std::string_view s);
std::optional<MemoryModel> parse_memory_model(std::string_view s);
std::optional<RunMode> parse_run_mode(std::string_view s);
const std::vector<Stage>& all_stages();

// Which outputs a stage writes; the others are left untouched.
inline bool stage_writes_obs(Stage s) { return s == Stage::ObsOnly || s == Stage::FullStep; }
inline bool stage_writes_reward(Stage s) { return s == Stage::RewardOnly || s == Stage::FullStep; }

}  // namespace gbx
