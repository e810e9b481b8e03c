#pragma once
// Differential verification: one env on a reference backend and one on a backend under test
// (dut), reset alike and fed the same action every step, compared every `compare_every`
// steps (docs/verify.md). The first mismatch is narrowed to the first divergent step and
// written out as a mismatch bundle a developer can replay with its repro.sh.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/outputs/mem_region.h"

namespace gbx {

// Test-only fault: after step `step` (1-based) the dut's register `reg` is corrupted.
struct FaultSpec {
  int64_t step = 0;
  std::string reg;  // upper case, one of cpu_register_names()
};
Result<FaultSpec> parse_fault_spec(const std::string& text);

// Per-step action generators (the int32 action of the backend interface: bit0 A ... bit7
// DOWN). noop: 0. seeded_random: a random byte per step from `seed`. striped: one button per
// step, cycling A, B, SELECT, START, RIGHT, LEFT, UP, DOWN, then a step with none.
// hold:H:R: the way RL agents press buttons: one button drawn from `seed` held H frames,
// then none for R frames, again and again (H and R multiples of the frames per step).
enum class ActionGen { Noop, SeededRandom, Striped, Hold };
std::optional<ActionGen> parse_action_gen(const std::string& s);  // the parameterless ones
std::string to_string(ActionGen g);

// What --actions names: a generator and, for hold, its frame counts.
struct ActionSchedule {
  ActionGen gen = ActionGen::Noop;
  int hold_frames = 8, release_frames = 16;  // hold only
  ActionSchedule() = default;
  ActionSchedule(ActionGen g) : gen(g) {}  // NOLINT: a plain generator converts
};
// "noop", "seeded_random", "striped" or "hold:H:R" (H >= 1, R >= 0); Usage error otherwise.
Result<ActionSchedule> parse_action_schedule(const std::string& s);
std::string to_string(const ActionSchedule& a);
// Action for 1-based step `step`; a pure function, so a re-run replays the same sequence.
// hold counts frames: step s starts at frame (s - 1) * frames_per_step.
int32_t action_for_step(const ActionSchedule& a, uint64_t seed, int64_t step,
                        int frames_per_step = 1);

struct VerifyOptions {
  // mgba | gambatte (screens and memory only; screens implied when no region is given) |
  // cpu | cuda
  std::string ref = "mgba";
  std::string dut = "cpu";
  std::string dut_specialize =
      "off";  // off | profile:FILE | auto[:N] (gbx/runtime/backends/specialize.h)
  std::string rom = "builtin:ALU_LOOP";  // as given: "builtin:NAME" or a path
  int64_t steps = 1024;
  // The declared options of gbx-run verify (gbx/runtime/backends/options.h):
  // --frames-per-step, --stage, --ppu, --layout, --rtc-lock; one absent takes the command
  // line's default (with_defaults). Both backends' BackendConfig is made from them
  // (apply_options).
  OptionValues options;
  // The DUT's per-env memory layout when it differs from the options' --layout.
  std::optional<MemLayout> dut_layout;
  int64_t compare_every = 1;
  std::vector<MemRegion> regions;
  ActionSchedule actions;
  uint64_t seed = 0;
  // Also compare the screens (each backend's last complete frame as shades 0-3; mGBA's
  // output colours are mapped to shades by their grey level). Both backends then draw.
  bool screen = false;
  std::optional<FaultSpec> fault;
  std::filesystem::path out_dir = "artifacts";
  // For the bundle's repro.sh and metadata: the tool's absolute path, its arguments after
  // the program name, and the directory they were given in.
  std::filesystem::path tool_path;
  std::vector<std::string> args;
  std::filesystem::path cwd;
  // Called now and then with a one-line progress message (may be empty).
  std::function<void(const std::string&)> progress;
  // Called with each warning about the ROM (e.g. a wrong header checksum) once it is loaded.
  std::function<void(const std::string&)> warn;
};

// One field that differs at a comparison.
struct FieldDiff {
  std::string field;  // "A", "F", "cycle_count", "mem C000:C100", "screen", ...
  std::string ref, dut;
};

struct VerifyReport {
  bool match = true;
  std::string rom_name;
  std::string ref, dut;
  int64_t steps = 0;        // steps run (all of them on a match)
  int64_t comparisons = 0;  // comparisons made before the verdict (pinpointing included)
  // On a mismatch: the first step whose state differs, and its differing fields in
  // comparison order (PC SP A F B C D E H L, counters, memory regions).
  int64_t mismatch_step = 0;
  int64_t detected_at_step = 0;  // the comparison that first saw it (>= mismatch_step)
  std::vector<FieldDiff> diffs;
  std::filesystem::path bundle;  // the mismatch bundle directory
  // --dut-specialize: "specialized" (profile:FILE, every step), "specialized from step K"
  // (auto: the steps before K ran on the profiling interpreter); "" when off.
  std::string dut_kernel;

  // "verify: match (...)" or "verify: MISMATCH at step S (first diff: ...); bundle: ...".
  std::string verdict() const;
};

// Runs a verification. Errors: Usage for bad options (steps 0, unknown backend, fault
// outside the run), Input for an unusable ROM, NoDevice/Runtime/Compile from the backends.
// A mismatch is not an error: it is a report with match == false and a written bundle.
Result<VerifyReport> run_verify(const VerifyOptions& opts);

}  // namespace gbx
