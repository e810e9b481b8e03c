// verify's options: injected faults and action schedules from their command line text, and
// the action each step takes (memory regions: gbx/runtime/outputs/mem_region.h).
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "verify_internal.h"

namespace gbx {
namespace verify_detail {

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", digits, v);
  return buf;
}

}  // namespace verify_detail

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = (char)std::toupper((unsigned char)c);
  return s;
}

// Bit mixing of SplitMix64: a per-step action that needs no generator state, so a re-run
// from reset (pinpointing, repro.sh) replays exactly the same inputs.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Result<FaultSpec> parse_fault_spec(const std::string& text) {
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad --inject-fault '" + text + "': " + why);
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) return bad("expected STEP:REG, e.g. 37:A");
  const std::string step = text.substr(0, colon);
  if (step.empty() || step.size() > 18 ||
      !std::all_of(step.begin(), step.end(), [](char c) { return std::isdigit((unsigned char)c); }))
    return bad("STEP must be a positive decimal number");
  FaultSpec f;
  f.step = std::stoll(step);
  f.reg = upper(text.substr(colon + 1));
  const auto& names = cpu_register_names();
  if (std::find(names.begin(), names.end(), f.reg) == names.end())
    return bad("REG must be one of PC SP A F B C D E H L");
  if (f.step < 1) return bad("STEP must be at least 1");
  return f;
}

std::optional<ActionGen> parse_action_gen(const std::string& s) {
  if (s == "noop") return ActionGen::Noop;
  if (s == "seeded_random") return ActionGen::SeededRandom;
  if (s == "striped") return ActionGen::Striped;
  return std::nullopt;
}

std::string to_string(ActionGen g) {
  switch (g) {
    case ActionGen::Noop:
      return "noop";
    case ActionGen::SeededRandom:
      return "seeded_random";
    case ActionGen::Striped:
      return "striped";
    case ActionGen::Hold:
      return "hold";
  }
  return "noop";
}

Result<ActionSchedule> parse_action_schedule(const std::string& s) {
  if (auto g = parse_action_gen(s)) return ActionSchedule(*g);
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad --actions '" + s + "': " + why);
  };
  if (s.rfind("hold", 0) != 0)
    return bad("expected noop, seeded_random, striped or hold:H:R (e.g. hold:8:16)");
  const auto c1 = s.find(':'), c2 = s.find(':', c1 == std::string::npos ? c1 : c1 + 1);
  if (s.size() < 5 || c1 != 4 || c2 == std::string::npos)
    return bad("expected hold:H:R, frames held and released, e.g. hold:8:16");
  auto number = [](const std::string& t, int* out) {
    if (t.empty() || t.size() > 6 ||
        !std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit((unsigned char)c); }))
      return false;
    *out = std::stoi(t);
    return true;
  };
  ActionSchedule a(ActionGen::Hold);
  if (!number(s.substr(c1 + 1, c2 - c1 - 1), &a.hold_frames) ||
      !number(s.substr(c2 + 1), &a.release_frames))
    return bad("H and R must be decimal frame counts (at most 6 digits)");
  if (a.hold_frames < 1) return bad("H (frames held) must be at least 1");
  return a;
}

std::string to_string(const ActionSchedule& a) {
  if (a.gen != ActionGen::Hold) return to_string(a.gen);
  return "hold:" + std::to_string(a.hold_frames) + ":" + std::to_string(a.release_frames);
}

int32_t action_for_step(const ActionSchedule& a, uint64_t seed, int64_t step, int frames_per_step) {
  switch (a.gen) {
    case ActionGen::Noop:
      return 0;
    case ActionGen::SeededRandom:
      return (int32_t)(mix64(seed * 0x100000001B3ull ^ (uint64_t)step) & 0xFF);
    case ActionGen::Striped: {
      const int64_t k = (step - 1) % 9;
      return k < 8 ? (int32_t)(1 << k) : 0;
    }
    case ActionGen::Hold: {
      const int64_t frame = (step - 1) * frames_per_step;
      const int64_t period = (int64_t)a.hold_frames + a.release_frames;
      if (frame % period >= a.hold_frames) return 0;
      // One button per press, drawn from (seed, press number) alone.
      const uint64_t press = (uint64_t)(frame / period);
      return (int32_t)1 << (mix64(seed * 0x9E3779B97F4A7C15ull ^ mix64(press)) % 8);
    }
  }
  return 0;
}

}  // namespace gbx
