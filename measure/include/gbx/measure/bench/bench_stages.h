#pragma once
// Kernel variants (stage + obs kind/format) of one backend compared on the same ROM, timed in
// interleaved rounds (A B A B ...) so that machine noise hits every variant alike; ratios are
// measured in the same run.
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/options.h"

namespace gbx {

struct StageVariant {
  std::string label;  // as given: stage[:obs[:format]][@tN], e.g. obs_only:pixels:packed@t2
  Stage stage = Stage::EmulateOnly;
  ObsKind obs = ObsKind::Vec;
  ObsFormat obs_format = ObsFormat::Full;
  int threads = -1;            // @tN: this variant's cpu threads; -1 = the options' --threads
  bool specialized = false;    // @spec: the ROM-specialized kernel (InterleavedBenchOptions)
  PpuModel ppu = kDefaultPpu;  // @fifo / @line: the pixel model (default: the options' --ppu)
  bool ppu_set = false;
};

// "emulate_only" or "obs_only:pixels" or "full_step:pixels:half", each optionally followed by
// "@tN" (N threads, e.g. "emulate_only@t1" vs "emulate_only@t2" compares thread counts)
// and/or "@spec" (the ROM-specialized kernel: "emulate_only@t1@spec") and/or "@fifo" / "@line"
// (the pixel model: "obs_only:pixels@line" vs "obs_only:pixels@fifo").
Result<StageVariant> parse_stage_variant(const std::string& text);

struct InterleavedBenchOptions {
  std::string backend = "cpu";
  std::string rom = "builtin:PPU_BENCH";
  int envs = 64;
  // More env counts to time in the same rounds (each variant at each count; ratios are to the
  // first variant at the same count). Empty: only `envs`.
  std::vector<int> env_counts;
  // The declared options of gbx-run bench-stages (gbx/runtime/backends/options.h):
  // --frames-per-step, --threads, --ppu (the pixel model of variants without @fifo / @line);
  // one absent takes the command line's default (with_defaults). Every variant's
  // BackendConfig is made from them (apply_options), then the variant's own choices.
  OptionValues options;
  int rounds = 10;
  int steps_per_round = 2;
  int warmup_steps = 2;
  std::string actions = "random";  // action policy (action_policy.h)
  uint64_t action_seed = 1;
  // For @spec variants: profile:FILE or auto[:N] (auto profiles and waits for the compile
  // before the warm-up, so every timed step runs the specialized kernel).
  std::string specialize;
  // A save state every env of every variant starts from (bench.h's load_state); "" = power-on.
  std::string load_state;
  std::vector<StageVariant> variants;
};

struct VariantResult {
  std::string label;
  int envs = 0;
  std::string kernel_key;
  double seconds = 0;
  long long env_frames = 0;
  double frames_per_sec = 0;
  double ratio_to_first = 0;  // frames/s over the first variant's
  // The same ratio per round (the first variant's frames/s in that round), and its median:
  // a round that a burst of load on the shared machine hit moves the median less.
  std::vector<double> round_ratios;
  double median_round_ratio = 0;
  // Process CPU time (all threads, user + system) spent in this variant's timed steps, and
  // frames per CPU second: what threads cost in spinning and waiting, which wall time on a
  // shared machine cannot show.
  double cpu_seconds = 0;
  double frames_per_cpu_second = 0;
};

Result<std::vector<VariantResult>> run_interleaved_bench(const InterleavedBenchOptions& o);

}  // namespace gbx
