#include "gbx/engine/synthesis.h"

#include <algorithm>
#include <cstdio>

#include "gbx/engine/cache.h"
#include "gbx/engine/specialize.h"
#include "gbx/engine/user_expr.h"

namespace gbx {

std::string_view to_string(Stage s) {
  switch (s) {
    case Stage::EmulateOnly:
      return "emulate_only";
    case Stage::RewardOnly:
      return "reward_only";
    case Stage::ObsOnly:
      return "obs_only";
    case Stage::FullStep:
      return "full_step";
  }
  return "?";
}
std::string_view to_string(Device d) { return d == Device::Cpu ? "cpu" : "cuda"; }
std::string_view to_string(MemoryModel m) { return m == MemoryModel::Dmg ? "dmg" : "flat64k"; }
std::string_view to_string(RunMode r) { return r == RunMode::Frames ? "frames" : "instructions"; }

std::string_view to_string(ObsKind k) { return k == ObsKind::Vec ? "vec" : "pixels"; }
std::string_view to_string(ObsFormat f) {
  return f == ObsFormat::Full ? "full" : f == ObsFormat::Half ? "half" : "packed";
}
std::optional<ObsKind> parse_obs_kind(std::string_view s) {
  if (s == "vec") return ObsKind::Vec;
  if (s == "pixels") return ObsKind::Pixels;
  return std::nullopt;
}
std::optional<ObsFormat> parse_obs_format(std::string_view s) {
  if (s == "full") return ObsFormat::Full;
  if (s == "half") return ObsFormat::Half;
  if (s == "packed") return ObsFormat::Packed;
  return std::nullopt;
}

const std::vector<Stage>& all_stages() {
  static const std::vector<Stage> stages = {Stage::EmulateOnly, Stage::RewardOnly, Stage::ObsOnly,
                                            Stage::FullStep};
  return stages;
}

std::optional<Stage> parse_stage(std::string_view s) {
  for (Stage st : all_stages())
    if (to_string(st) == s) return st;
  return std::nullopt;
}
std::optional<Device> parse_device(std::string_view s) {
  if (s == "cpu") return Device::Cpu;
  if (s == "cuda") return Device::Cuda;
  return std::nullopt;
}
std::optional<MemoryModel> parse_memory_model(std::string_view s) {
  if (s == "dmg") return MemoryModel::Dmg;
  if (s == "flat64k") return MemoryModel::Flat64k;
  return std::nullopt;
}
std::string_view to_string(MemLayout l) {
  return l == MemLayout::EnvMajor ? "env_major" : "interleaved";
}
std::optional<MemLayout> parse_mem_layout(std::string_view s) {
  if (s == "env_major") return MemLayout::EnvMajor;
  if (s == "interleaved") return MemLayout::Interleaved;
  return std::nullopt;
}
std::optional<RunMode> parse_run_mode(std::string_view s) {
  if (s == "frames") return RunMode::Frames;
  if (s == "instructions") return RunMode::Instructions;
  return std::nullopt;
}

std::string_view to_string(PpuModel m) { return m == PpuModel::Line ? "line" : "fifo"; }
std::optional<PpuModel> parse_ppu_model(std::string_view s) {
  if (s == "line") return PpuModel::Line;
  if (s == "fifo") return PpuModel::Fifo;
  return std::nullopt;
}

std::string_view to_string(Dispatch d) { return d == Dispatch::Switch ? "switch" : "uniform"; }
std::optional<Dispatch> parse_dispatch(std::string_view s) {
  if (s == "switch") return Dispatch::Switch;
  if (s == "uniform") return Dispatch::Uniform;
  return std::nullopt;
}

uint32_t seen_table_slots(uint32_t capacity) {
  const uint64_t want = ((uint64_t)capacity * 4 + 2) / 3;
  uint32_t slots = 8;
  while (slots < want) slots <<= 1;
  return slots;
}

uint32_t seen_table_bytes(uint32_t capacity) { return 8 + 4 * seen_table_slots(capacity); }

bool SynthParams::uses_seen() const {
  auto uses = [](const std::string& e) {
    return expr_names(e, "seen") || expr_names(e, "seen_count");
  };
  if (uses(reward_expr) || uses(done_expr)) return true;
  for (const auto& t : track)
    if (uses(t)) return true;
  return false;
}

std::string SynthParams::canonical() const {
  std::vector<std::string> dbg = debug;
  std::sort(dbg.begin(), dbg.end());
  std::string out;
  out += "stage=" + std::string(to_string(stage));
  out += ";device=" + std::string(to_string(device));
  out += ";memory_model=" + std::string(to_string(memory_model));
  out += ";run_mode=" + std::string(to_string(run_mode));
  out += ";obs_dim=" + std::to_string(obs_dim);
  out += ";obs=" + std::string(to_string(obs));
  if (obs == ObsKind::Pixels) out += ";obs_format=" + std::string(to_string(obs_format));
  out += ";render=" + std::string(synth_renders(*this) ? "1" : "0");
  out += ";debug=";
  for (size_t i = 0; i < dbg.size(); ++i) out += (i ? "," : "") + dbg[i];
  // User expressions by hash: the text itself is in the source (and so in the key), and
  // this string goes into one-line comments and metadata.
  if (has_user_exprs()) {
    std::string all = std::to_string(reward_expr.size()) + ":" + reward_expr +
                      std::to_string(done_expr.size()) + ":" + done_expr;
    for (const auto& t : track) all += std::to_string(t.size()) + ":" + t;
    out += ";user_exprs=" + sha256_hex(all).substr(0, 16);
  }
  if (uses_seen()) out += ";seen=" + std::to_string(seen_capacity);
  // Only when set: a default is implicit in the canonical form (and so in the key).
  if (rtc_lock) out += ";rtc_lock=1";
  if (layout != MemLayout::EnvMajor) out += ";layout=" + std::string(to_string(layout));
  // Only fifo: line, the pixel model of every kernel that draws nothing, is implicit.
  if (synth_ppu(*this) != PpuModel::Line) out += ";ppu=" + std::string(to_string(ppu));
  if (dispatch != Dispatch::Switch) out += ";dispatch=" + std::string(to_string(dispatch));
  if (warp_majority > 0 && device == Device::Cuda)
    out += ";warp_majority=" + std::to_string(warp_majority);
  if (max_registers > 0 && device == Device::Cuda)
    out += ";max_registers=" + std::to_string(max_registers);
  if (profile) out += ";profile=1";
  if (!hooks.empty()) {
    out += ";hooks=";
    char buf[32];
    for (size_t i = 0; i < hooks.size(); ++i) {
      if (hooks[i].bank >= 0)
        std::snprintf(buf, sizeof buf, "%s%X:%04X", i ? "," : "", (unsigned)hooks[i].bank,
                      hooks[i].addr);
      else
        std::snprintf(buf, sizeof buf, "%s%04X", i ? "," : "", hooks[i].addr);
      out += buf;
    }
  }
  if (specialize)
    out += ";specialize=" + specialize->rom_sha256.substr(0, 16) + ":" +
           specialize->profile_hash.substr(0, 16);
  return out;
}

}  // namespace gbx
