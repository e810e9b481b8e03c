#pragma once
// Throughput sweeps and the report that sets them side by side (docs/cli/tools.md,
// docs/benchmarks/index.md).
//
// A sweep runs one backend over a list of env counts. For each count the backend is created
// (kernel compiled or loaded, state allocated) and warmed up before the clock starts; only
// the timed steps count. CUDA steps are asynchronous: the sweep syncs every `sync_every`
// steps (0 = only at the end) and always at the end of the window. A sweep is one JSON file:
// schema_version, system, config, results[] (one per env count).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/backends/options.h"

namespace gbx {

inline constexpr int kBenchSchemaVersion = 1;

struct BenchOptions {
  // The declared options of gbx-run bench (gbx/runtime/backends/options.h): --backend,
  // --stage, --frames-per-step, --threads, --ppu, --layout, --specialize, ...; one absent
  // takes the command line's default (with_defaults). Each env count's BackendConfig is made
  // from them (apply_options), and the sweep's config records them by name.
  OptionValues options;
  std::string rom = "builtin:ALU_LOOP";
  std::vector<int> envs = {1, 8, 64, 512, 2048, 8192};
  // Timed steps per env count; 0 = about target_seconds each (what keeps a default sweep
  // short on a small machine): the clock is read after every step (3 at least) and the window
  // ends at the first step past target_seconds, then syncs. Never a count from the warm-up's
  // rate. On cuda, steps are asynchronous: the host runs ahead of the device by at most
  // sync_every steps (with 0, by the driver's launch queue), which the final sync waits for.
  int64_t steps = 0;
  double target_seconds = 2.0;
  int64_t warmup_steps = 3;
  int64_t sync_every = 64;
  std::string label;  // name of the sweep in reports; "" = backend, "-t<threads>" if given
  // Action policy (action_policy.h): "random" (default, seeded per env per step), "none" or
  // a file of action bytes. Recorded in the sweep's config.actions.
  std::string actions = "random";
  uint64_t action_seed = 1;
  bool verbose = false;
  // A save state (save_state.h) every env starts from (the backend's reset state, so a masked
  // reset goes back to it), as an RL run starts from a mid-game state; "" = power-on. The
  // blob's kind must match the backend (a GBX state for cpu/cuda, an mgba one for mgba).
  std::string load_state;
  // Live progress (one line, replaced as it goes) and a note per finished env count.
  std::function<void(const std::string&)> progress;
  std::function<void(const std::string&)> done;
  // Seconds on a monotonic clock (null: std::chrono::steady_clock); tests give a fake one.
  std::function<double()> clock;
};

struct BenchResult {
  int num_envs = 0;
  int64_t steps = 0;
  double seconds = 0;
  int64_t total_env_steps = 0;
  double total_sps = 0;       // env-steps per second over all envs
  double per_env_sps = 0;     // total_sps / num_envs
  double frames_per_sec = 0;  // total_sps * frames_per_step
  int64_t sync_every = 0;
  std::string stage;
  int threads = 0;  // host threads stepping envs (0 for cuda: the GPU does)
  double setup_seconds = 0;
  int64_t warmup_steps = 0;
  double warmup_seconds = 0;
  // --specialize auto: steps (profiles and settling windows: tier_up_now) and seconds until
  // the tier-up settled (untimed, before the warm-up); 0 otherwise.
  int64_t tier_up_steps = 0;
  double tier_up_seconds = 0;
  int tier_up_retiers = 0;  // re-profiles while the tier-up settled (before the timed window)
  uint64_t rss_bytes = 0;   // process RSS after the run
};

// "1,8,64" -> {1, 8, 64}; every count >= 1.
Result<std::vector<int>> parse_env_list(const std::string& text);

// Before anything runs: refuses env counts whose state would not fit in memory. For mgba the
// per-core footprint is measured on a few cores of this ROM (mGBA allocates per core).
Status check_bench_memory(const BenchOptions& opts);

// Runs the sweep and returns its JSON document (see above).
Result<nlohmann::json> run_bench(const BenchOptions& opts);

// Fixed-width table of a sweep's results (for stdout).
std::string bench_table(const nlohmann::json& sweep);

// ---- report ------------------------------------------------------------------------------

struct ReportOptions {
  std::vector<std::filesystem::path> sweeps;
  std::string baseline = "mgba";  // a backend or a label
  std::filesystem::path out_dir = "artifacts";
  std::filesystem::path plot_script;        // "" = scripts/plot_report.py of the source tree
  std::string python = "/usr/bin/python3";  // Debian's, which has python3-matplotlib
};

struct ReportOutput {
  std::string text;           // the table and the per-core lines
  std::filesystem::path png;  // empty when no plot was drawn
  std::vector<std::string> warnings;
};

// Reads the sweeps (Input errors for unreadable or malformed files), prints the comparison
// table (envs, baseline sps, dut sps, speedup, per-env sps per dut sweep) and the frames/s
// per core of each cpu-like sweep against the baseline's, and draws the PNG (env count vs
// total SPS, log-log, one line per sweep). A missing matplotlib is a warning, not an error.
Result<ReportOutput> run_report(const ReportOptions& opts);

// Loads and checks one sweep file.
Result<nlohmann::json> load_sweep(const std::filesystem::path& path);

}  // namespace gbx
