// gbx-run bench: throughput sweep over env counts -> one JSON file.
// gbx-run report: sweeps side by side, speedups, frames/s per core, PNG plot.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "gbx/measure/bench/bench.h"
#include "gbx/measure/bench/bench_stages.h"
#include "gbx/measure/bench/system_info.h"
#include "tool_common.h"
#include "tool_options.h"

namespace {

using namespace gbx;
namespace fs = std::filesystem;
using nlohmann::json;

struct BenchCli {
  // The declared options (--backend, --stage, --ppu, ...), with the declaration's defaults
  // (add_declared sets them).
  OptionValues opts;
  std::string rom = "builtin:ALU_LOOP";
  std::string envs = "1,8,64,512,2048,8192";
  long long steps = 0;
  double seconds = 2.0;
  long long warmup_steps = 3;
  long long sync_every = 64;
  std::string label;
  std::string actions = "random";
  unsigned long long action_seed = 1;
  std::string json_path;
  std::string out = "artifacts";
  bool verbose = false;
  std::string load_state;
};

struct ReportCli {
  std::vector<std::string> sweeps;
  std::string baseline = "mgba";
  std::string out = "artifacts";
  std::string python = "/usr/bin/python3";
  std::string plot_script;
};

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum((unsigned char)c) || c == '-' || c == '.' ? c : '_';
  return out;
}

int cmd_bench(const BenchCli& c) {
  BenchOptions o;
  o.options = c.opts;
  o.rom = c.rom;
  auto envs = parse_env_list(c.envs);
  if (!envs) return tool::fail(envs.error());
  o.envs = envs.value();
  if (c.steps < 0)
    return tool::fail(make_error(ErrorKind::Usage, "--steps must be >= 0 (0 = auto)"));
  o.steps = c.steps;
  o.target_seconds = c.seconds;
  o.warmup_steps = c.warmup_steps;
  o.sync_every = c.sync_every;
  o.label = c.label;
  o.actions = c.actions;
  o.action_seed = c.action_seed;
  o.verbose = c.verbose;
  o.load_state = c.load_state;
  // A live line on a terminal; in a log, one line per finished env count.
  const bool tty = isatty(STDERR_FILENO);
  if (tty) o.progress = [](const std::string& l) { std::fprintf(stderr, "\r%s\033[K", l.c_str()); };
  o.done = [tty](const std::string& l) {
    std::fprintf(stderr, tty ? "\r%s\033[K\n" : "%s\n", l.c_str());
  };

  auto sweep = run_bench(o);
  if (!sweep) return tool::fail(sweep.error(), c.verbose);
  const json& s = sweep.value();

  fs::path path = c.json_path;
  if (path.empty())
    path = fs::path(c.out) / "bench" /
           (s.value("created_utc", utc_timestamp()) + "_" +
            sanitize(s["config"]["rom"].value("name", "rom")) + "_" +
            sanitize(s["config"].value("label", option_text(c.opts, "backend"))) + ".json");
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream f(path);
  f << s.dump(2) << "\n";
  f.close();
  if (!f) return tool::fail(make_error(ErrorKind::Runtime, "cannot write " + path.string()));
  std::printf("%s", bench_table(s).c_str());
  std::printf("sweep: %s\n", path.string().c_str());
  return 0;
}

struct StagesCli {
  // The declared options' defaults are the declaration's (add_declared sets them).
  InterleavedBenchOptions o;
  std::string envs = "64";
  std::vector<std::string> variants = {"emulate_only", "obs_only:pixels"};
};

int cmd_bench_stages(StagesCli& c) {
  c.o.variants.clear();
  for (const std::string& v : c.variants) {
    auto parsed = parse_stage_variant(v);
    if (!parsed) return tool::fail(parsed.error());
    c.o.variants.push_back(parsed.value());
  }
  auto counts = parse_env_list(c.envs);
  if (!counts) return tool::fail(counts.error());
  c.o.env_counts = counts.value();
  c.o.envs = c.o.env_counts.front();
  auto res = run_interleaved_bench(c.o);
  if (!res) return tool::fail(res.error());
  std::string envs;
  for (int n : c.o.env_counts) envs += (envs.empty() ? "" : ",") + std::to_string(n);
  std::printf(
      "rom %s  backend %s  envs %s  frames/step %d  actions %s  %d rounds x %d steps, "
      "interleaved\n",
      c.o.rom.c_str(), c.o.backend.c_str(), envs.c_str(),
      (int)option_int(c.o.options, "frames_per_step"), c.o.actions.c_str(), c.o.rounds,
      c.o.steps_per_round);
  // "vs first": total frames/s over the first variant's at the same env count; "median":
  // the median over rounds of the same ratio taken round by round.
  std::printf("%-28s %6s %12s %9s %9s %8s %9s %13s\n", "variant", "envs", "frames/s", "seconds",
              "vs first", "median", "cpu s", "frames/cpu-s");
  for (const auto& r : res.value())
    std::printf("%-28s %6d %12.0f %9.3f %8.3fx %7.3fx %9.3f %13.0f\n", r.label.c_str(), r.envs,
                r.frames_per_sec, r.seconds, r.ratio_to_first, r.median_round_ratio, r.cpu_seconds,
                r.frames_per_cpu_second);
  return 0;
}

int cmd_report(const ReportCli& c) {
  ReportOptions o;
  for (const std::string& s : c.sweeps) o.sweeps.emplace_back(s);
  o.baseline = c.baseline;
  o.out_dir = c.out;
  o.python = c.python;
  o.plot_script = c.plot_script;
  auto rep = run_report(o);
  if (!rep) return tool::fail(rep.error());
  std::printf("%s", rep->text.c_str());
  if (!rep->png.empty()) std::printf("plot: %s\n", rep->png.string().c_str());
  tool::print_warnings(rep->warnings);
  return 0;
}

}  // namespace

namespace gbx::tool {

void register_bench(CLI::App& app, Commands& cmds) {
  static BenchCli b;
  auto* c = app.add_subcommand(
      "bench", "throughput sweep of one backend over env counts; writes one JSON per sweep");
  add_declared(c, kBench, "backend", b.opts);
  c->add_option("--rom", b.rom, "ROM path or builtin:NAME")->capture_default_str();
  c->add_option("--envs", b.envs, "comma-separated env counts")->capture_default_str();
  c->add_option("--steps", b.steps,
                "timed steps per env count; 0 = enough for about --seconds each")
      ->capture_default_str();
  c->add_option("--seconds", b.seconds, "target time per env count when --steps is 0")
      ->capture_default_str();
  c->add_option("--warmup-steps", b.warmup_steps, "untimed steps before the clock starts")
      ->capture_default_str();
  add_declared(c, kBench, "frames_per_step", b.opts);
  add_declared(c, kBench, "release_after_frames", b.opts);
  add_declared(c, kBench, "stage", b.opts);
  add_declared(c, kBench, "threads", b.opts);
  c->add_option("--sync-every", b.sync_every,
                "cuda: sync every K steps (0 = only at the end; always at the end)")
      ->capture_default_str();
  add_declared(c, kBench, "device_index", b.opts);
  add_declared(c, kBench, "block_size", b.opts);
  add_declared(c, kBench, "specialize", b.opts);
  c->add_option("--load-state", b.load_state,
                "save state every env starts from (gbx-run run --save-state; for mgba, one "
                "saved by --backend mgba)");
  c->add_option("--label", b.label, "sweep name in reports (default: backend, -tN with --threads)");
  c->add_option("--actions", b.actions,
                "random (a seeded random joypad byte per env per step) | none (all 0: envs "
                "in lockstep) | FILE (raw bytes, one per env per step, step-major, repeated)")
      ->capture_default_str();
  c->add_option("--seed", b.action_seed, "seed of --actions random")->capture_default_str();
  c->add_option("--json", b.json_path, "write the sweep here instead of OUT/bench/");
  c->add_option("--out", b.out, "output root")->capture_default_str();
  add_declared(c, kBench, "rtc_lock", b.opts);
  add_declared(c, kBench, "ppu", b.opts);
  add_declared(c, kBench, "dispatch", b.opts);
  add_declared(c, kBench, "warp_majority", b.opts);
  add_declared(c, kBench, "max_registers", b.opts);
  add_declared(c, kBench, "layout", b.opts);
  c->add_flag("--verbose", b.verbose, "backend logs");
  cmds.emplace_back(c, [] { return cmd_bench(b); });

  static ReportCli r;
  static StagesCli st;
  auto* sc = app.add_subcommand(
      "bench-stages", "kernel variants (stage[:obs[:format]]) on one ROM, timed interleaved");
  sc->add_option("--backend", st.o.backend, "cpu | cuda")->capture_default_str();
  sc->add_option("--rom", st.o.rom, "ROM path or builtin:NAME")->capture_default_str();
  sc->add_option("--envs", st.envs,
                 "envs per variant; a list (64,256) times every variant at every count in the "
                 "same rounds")
      ->capture_default_str();
  add_declared(sc, kBenchStages, "frames_per_step", st.o.options);
  add_declared(sc, kBenchStages, "threads", st.o.options);
  sc->add_option("--rounds", st.o.rounds, "interleaved rounds")->capture_default_str();
  sc->add_option("--steps-per-round", st.o.steps_per_round, "timed steps per variant and round")
      ->capture_default_str();
  sc->add_option("--warmup-steps", st.o.warmup_steps, "untimed steps per variant")
      ->capture_default_str();
  sc->add_option("--variants", st.variants,
                 "stage[:obs[:format]][@tN][@spec][@fifo|@line] ..., the first is the baseline; "
                 "@tN: N threads; @spec: the ROM-specialized kernel (--specialize); @fifo, "
                 "@line: the pixel model")
      ->capture_default_str();
  sc->add_option("--specialize", st.o.specialize,
                 "the @spec variants' kernel: profile:FILE | auto[:N] (profiled, and compiled "
                 "before the warm-up)");
  add_declared(sc, kBenchStages, "ppu", st.o.options);
  sc->add_option("--load-state", st.o.load_state,
                 "save state every env of every variant starts from");
  sc->add_option("--actions", st.o.actions, "random | none | FILE (as for bench)")
      ->capture_default_str();
  sc->add_option("--seed", st.o.action_seed, "seed of --actions random")->capture_default_str();
  cmds.emplace_back(sc, [] { return cmd_bench_stages(st); });

  auto* rc = app.add_subcommand(
      "report", "compare bench sweeps: table, frames/s per core vs the baseline, PNG plot");
  rc->add_option("sweeps", r.sweeps, "sweep JSON files")->required();
  rc->add_option("--baseline", r.baseline, "backend or label of the baseline sweep")
      ->capture_default_str();
  rc->add_option("--out", r.out, "output root (plot goes to OUT/report/)")->capture_default_str();
  rc->add_option("--python", r.python, "python with matplotlib")->capture_default_str();
  rc->add_option("--plot-script", r.plot_script, "default: scripts/plot_report.py of the source");
  cmds.emplace_back(rc, [] { return cmd_report(r); });
}

}  // namespace gbx::tool
