#include "gbx/measure/bench/bench.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <type_traits>
#include <variant>

#include "gbx/measure/bench/system_info.h"
#include "gbx/runtime/actions/action_policy.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/states/env_state.h"
#include "gbx/runtime/states/save_state.h"

namespace gbx {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string gib(double bytes) { return fmt("%.2f GiB", bytes / (1024.0 * 1024 * 1024)); }

int hardware_threads() { return (int)std::max(1u, std::thread::hardware_concurrency()); }

// Host threads that step envs: what the cpu and mgba backends resolve cfg.threads to.
int threads_used(const std::string& backend, int requested, int envs) {
  if (backend == "cuda") return 0;
  return std::min(requested > 0 ? requested : hardware_threads(), envs);
}

std::string sweep_label(const BenchOptions& o, const OptionValues& v) {
  if (!o.label.empty()) return o.label;
  const std::string& backend = option_text(v, "backend");
  const int64_t threads = option_int(v, "threads");
  return threads > 0 ? backend + "-t" + std::to_string(threads) : backend;
}

// The sweep's record of a declared option's value.
json option_json(const OptionValue& value) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::vector<HookAddr>>) {
          json a = json::array();
          for (const HookAddr& h : x) a.push_back({h.bank, h.addr});
          return a;
        } else {
          return json(x);
        }
      },
      value);
}

// Bytes one mGBA core takes once it has run: RSS growth over a few cores, one frame each.
Result<uint64_t> measure_mgba_core_bytes(const Rom& rom) {
  constexpr int kProbe = 32;
  BackendConfig cfg;
  cfg.num_envs = kProbe;
  cfg.threads = 1;
  cfg.stage = Stage::EmulateOnly;
  const uint64_t before = resident_memory_bytes();
  auto b = make_backend("mgba", rom, cfg);
  if (!b) return b.take_error();
  if (auto st = b.value()->step({}); !st) return st.take_error();
  const uint64_t after = resident_memory_bytes();
  return after > before ? (after - before) / kProbe : 0;
}

}  // namespace

Result<std::vector<int>> parse_env_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad --envs '" + text + "': " + why);
  };
  // getline drops an empty last field: a trailing comma is checked on its own.
  if (!text.empty() && text.back() == ',')
    return bad("expected a comma-separated list of env counts, e.g. 1,8,64");
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item.size() > 10 ||
        !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return bad("expected a comma-separated list of env counts, e.g. 1,8,64");
    const long long n = std::stoll(item);
    if (n < 1 || n > 0x7fffffff) return bad("each env count must be between 1 and 2147483647");
    out.push_back((int)n);
  }
  if (out.empty()) return bad("no env counts given");
  return out;
}

Status check_bench_memory(const BenchOptions& o) {
  auto rom = load_rom(o.rom);
  if (!rom) return rom.take_error();
  const int most = *std::max_element(o.envs.begin(), o.envs.end());
  const std::string backend = option_text(with_defaults(o.options, kBench), "backend");
  if (backend == "cpu")
    return check_env_count(most, MemoryModel::Dmg, rom->header.ram_size, sizeof(float) * 33);
  if (backend != "mgba") return ok_status();  // cuda checks its device memory at creation
  if (most <= 64) return ok_status();
  auto per_core = measure_mgba_core_bytes(rom.value());
  if (!per_core) return per_core.take_error();
  // Headroom for what the probe cannot see: allocator slack, pages touched later.
  const double need = 1.5 * (double)per_core.value() * most;
  const double avail = (double)available_memory_bytes();
  if (avail > 0 && need > 0.8 * avail)
    return make_error(ErrorKind::Usage, "mgba with " + std::to_string(most) + " envs needs about " +
                                            gib(need) + " (" +
                                            std::to_string(per_core.value() / 1024) +
                                            " KiB per core, measured, plus headroom) but only " +
                                            gib(avail) + " is available; lower --envs");
  return ok_status();
}

Result<json> run_bench(const BenchOptions& o) {
  auto usage = [](std::string m) -> Error { return make_error(ErrorKind::Usage, std::move(m)); };
  const OptionValues values = with_defaults(o.options, kBench);
  const std::string& backend = option_text(values, "backend");
  const int frames_per_step = (int)option_int(values, "frames_per_step");
  const int threads = (int)option_int(values, "threads");
  if (backend != "cpu" && backend != "cuda" && backend != "mgba")
    return usage("unknown backend '" + backend + "' (cpu, cuda, mgba)");
  if (o.envs.empty()) return usage("--envs lists no env counts");
  if (o.steps < 0) return usage("--steps must be >= 0 (0 = auto)");
  if (o.warmup_steps < 0) return usage("--warmup-steps must be >= 0");
  if (frames_per_step < 1) return usage("--frames-per-step must be at least 1");
  if (o.sync_every < 0) return usage("--sync-every must be >= 0 (0 = only at the end)");
  if (threads < 0) return usage("--threads must be >= 0 (0 = all cores)");
  if (!(o.target_seconds > 0)) return usage("--seconds must be positive");
  auto policy = ActionPolicy::parse(o.actions, o.action_seed);
  if (!policy) return policy.take_error();
  auto rom = load_rom(o.rom);
  if (!rom) return rom.take_error();
  if (auto st = check_bench_memory(o); !st) return st.take_error();
  std::vector<uint8_t> start_state;
  if (!o.load_state.empty()) {
    auto bytes = read_save_state_file(o.load_state);
    if (!bytes) return bytes.take_error();
    start_state = std::move(bytes.value());
  }

  const std::function<double()> now = o.clock ? o.clock : [] {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  // Every env count's config but its count: the declared options, --specialize's plan
  // (profile:FILE) made once.
  BackendConfig base;
  base.verbose = o.verbose;
  if (auto st = apply_options(values, kBench, rom.value(), base); !st) return st.take_error();
  const std::string label = sweep_label(o, values);
  const std::string stage(to_string(base.stage));
  json results = json::array();
  std::string kernel_key;
  for (size_t idx = 0; idx < o.envs.size(); ++idx) {
    const int n = o.envs[idx];
    const std::string where = "bench " + label + ": envs " + std::to_string(n) + " [" +
                              std::to_string(idx + 1) + "/" + std::to_string(o.envs.size()) + "]";
    if (o.progress) o.progress(where + " setting up");
    BackendConfig cfg = base;
    cfg.num_envs = n;
    BenchResult r;
    r.num_envs = n;
    r.stage = stage;
    r.sync_every = o.sync_every;
    r.threads = threads_used(backend, threads, n);

    // Compile/load and allocate: never timed.
    auto t0 = Clock::now();
    auto made = make_backend(backend, rom.value(), cfg);
    if (!made) return made.take_error();
    std::unique_ptr<Backend> be = std::move(made.value());
    if (auto st = be->reset(0); !st) return st.take_error();
    if (!start_state.empty()) {
      if (auto st = be->set_reset_state({start_state}); !st)
        return make_error(st.error().kind,
                          "--load-state " + o.load_state + ": " + st.error().message);
      if (auto st = be->reset(std::vector<uint8_t>((size_t)n, 1)); !st) return st.take_error();
    }
    r.setup_seconds = since(t0);

    // Actions are drawn step by step inside the timed loop, as an RL loop hands them over
    // (cheap next to a step: a hash per env, or a copy from the file).
    std::vector<int32_t> actions;
    int64_t step_index = 0;
    auto step = [&]() -> Status {
      policy->fill(step_index++, n, actions);
      return be->step(actions);
    };
    // --specialize auto: profile, then wait for the specialized kernel (a run would go on
    // meanwhile on the interpreter, which the timed window would then partly measure).
    if (cfg.specialize_auto_frames > 0) {
      t0 = Clock::now();
      // And its re-profiling windows, until the tier-up settles (tier_up_now).
      const int64_t window_steps =
          (cfg.specialize_auto_frames + cfg.frames_per_step - 1) / cfg.frames_per_step;
      auto steps = tier_up_now(*be, step, window_steps);
      if (!steps)
        return make_error(ErrorKind::Runtime, "--specialize " + option_text(values, "specialize") +
                                                  ": " + steps.error().message);
      r.tier_up_steps = *steps;
      r.tier_up_seconds = since(t0);
      r.tier_up_retiers = be->specialize_retiers();
    }
    if (kernel_key.empty()) kernel_key = be->kernel_key();

    // Warm-up (caches, page faults, lazy module loading); with auto steps at least one, so a
    // first step's lazy loading stays out of the window.
    r.warmup_steps = o.steps == 0 ? std::max<int64_t>(1, o.warmup_steps) : o.warmup_steps;
    const double warm0 = now();
    for (int64_t i = 0; i < r.warmup_steps; ++i)
      if (auto st = step(); !st) return st.take_error();
    if (auto st = be->sync(); !st) return st.take_error();
    r.warmup_seconds = now() - warm0;
    r.steps = o.steps;
    if (r.steps == 0) r.steps = INT64_MAX / 2;  // auto steps: the clock ends the window (below)

    double last_note = now();
    const double w0 = now();
    for (int64_t i = 1; i <= r.steps; ++i) {
      if (auto st = step(); !st) return st.take_error();
      if (o.sync_every > 0 && i % o.sync_every == 0)
        if (auto st = be->sync(); !st) return st.take_error();
      // Auto steps: the window ends at the first step past target_seconds (3 steps at least).
      // A count extrapolated from the warm-up missed both ways: a state that idles through the
      // warm-up and then plays ran far past it (issue 36: past 60 s), a slow first step far
      // short; reading the clock only at syncs overshot by up to sync_every slow steps.
      const double t = now();
      if (o.steps == 0 && i >= 3 && t - w0 >= o.target_seconds) r.steps = i;
      if (o.progress && t - last_note >= 0.5) {
        last_note = t;
        const double sps = (double)i * n / (t - w0);
        o.progress(where + " step " + std::to_string(i) + "/" + std::to_string(r.steps) + ", " +
                   fmt("%.0f", sps) + " env-steps/s");
      }
    }
    if (auto st = be->sync(); !st) return st.take_error();
    r.seconds = now() - w0;
    r.total_env_steps = r.steps * n;
    r.total_sps = (double)r.total_env_steps / r.seconds;
    r.per_env_sps = r.total_sps / n;
    r.frames_per_sec = r.total_sps * frames_per_step;
    r.rss_bytes = resident_memory_bytes();
    if (o.done)
      o.done(where + ": " + fmt("%.0f", r.total_sps) + " env-steps/s, " +
             fmt("%.0f", r.frames_per_sec) + " frames/s (" + std::to_string(r.steps) +
             " steps in " + fmt("%.2f", r.seconds) + " s" +
             (r.tier_up_steps > 0
                  ? "; specialized kernel timed, in after " + std::to_string(r.tier_up_steps) +
                        " tier-up steps (profiles, settling windows; " +
                        std::to_string(r.tier_up_retiers) + " re-profile(s)) and " +
                        fmt("%.2f", r.tier_up_seconds) + " s"
                  : std::string()) +
             ")");
    results.push_back({{"num_envs", r.num_envs},
                       {"steps", r.steps},
                       {"seconds", r.seconds},
                       {"total_env_steps", r.total_env_steps},
                       {"total_sps", r.total_sps},
                       {"per_env_sps", r.per_env_sps},
                       {"frames_per_sec", r.frames_per_sec},
                       {"sync_every", r.sync_every},
                       {"stage", r.stage},
                       {"threads", r.threads},
                       {"setup_seconds", r.setup_seconds},
                       {"warmup_steps", r.warmup_steps},
                       {"warmup_seconds", r.warmup_seconds},
                       {"tier_up_steps", r.tier_up_steps},
                       {"tier_up_seconds", r.tier_up_seconds},
                       {"retiers", be->specialize_retiers()},
                       {"retiers_tier_up", r.tier_up_retiers},
                       {"rss_bytes", r.rss_bytes}});
  }

  // The config: the declared options by name (backend, stage, frames_per_step, threads,
  // ppu, layout, specialize, ...), then bench's own.
  json config = json::object();
  for (const auto& [name, value] : values) config[name] = option_json(value);
  config.update({{"label", label},
                 {"rom",
                  {{"name", rom->name},
                   {"spec", o.rom},
                   {"size", rom->bytes.size()},
                   {"sha256", rom->sha256}}},
                 {"envs", o.envs},
                 {"steps", o.steps},
                 {"target_seconds", o.target_seconds},
                 {"warmup_steps", o.warmup_steps},
                 {"load_state", o.load_state.empty() ? json(nullptr) : json(o.load_state)},
                 {"sync_every", o.sync_every},
                 {"actions", policy->to_json()},
                 {"kernel_key", kernel_key.empty() ? json(nullptr) : json(kernel_key)}});
  return json{{"schema_version", kBenchSchemaVersion},
              {"kind", "gbx-bench-sweep"},
              {"created_utc", utc_timestamp()},
              {"system", to_json(system_info())},
              {"config", config},
              {"results", results}};
}

std::string bench_table(const json& sweep) {
  const json& c = sweep.at("config");
  std::string actions = "?";
  if (c.contains("actions") && c["actions"].is_object())
    actions = c["actions"].value("policy", "?");
  else if (c.contains("actions") && c["actions"].is_string())
    actions = c["actions"].get<std::string>();
  std::string out = c.value("label", c.value("backend", "?")) + " on " +
                    c.at("rom").value("name", "?") + " (stage " + c.value("stage", "?") + ", " +
                    std::to_string(c.value("frames_per_step", 1)) + " frame(s)/step, actions " +
                    actions + ")\n";
  char line[256];
  std::snprintf(line, sizeof line, "%8s %8s %9s %14s %12s %14s %7s\n", "envs", "steps", "seconds",
                "total_sps", "per_env_sps", "frames_per_sec", "threads");
  out += line;
  for (const json& r : sweep.at("results")) {
    std::snprintf(line, sizeof line, "%8d %8lld %9.3f %14.0f %12.1f %14.0f %7d\n",
                  r.value("num_envs", 0), (long long)r.value("steps", (int64_t)0),
                  r.value("seconds", 0.0), r.value("total_sps", 0.0), r.value("per_env_sps", 0.0),
                  r.value("frames_per_sec", 0.0), r.value("threads", 0));
    out += line;
  }
  return out;
}

// ---- report --------------------------------------------------------------------------------

namespace {

std::string sweep_name(const json& s) {
  const json& c = s.at("config");
  return c.value("label", c.value("backend", std::string("?")));
}

bool is_baseline(const json& s, const std::string& baseline) {
  const json& c = s.at("config");
  return c.value("backend", std::string()) == baseline || sweep_name(s) == baseline;
}

const json* result_for(const json& s, int envs) {
  for (const json& r : s.at("results"))
    if (r.value("num_envs", 0) == envs) return &r;
  return nullptr;
}

// Frames/s per core of a sweep at its highest-throughput env count (per core = total /
// threads used there); nullptr when no result says how many threads it used.
const json* best_per_core(const json& s, double* per_core) {
  const json* best = nullptr;
  *per_core = 0;
  for (const json& r : s.at("results")) {
    if (r.value("threads", 0) <= 0) continue;
    if (!best || r.value("frames_per_sec", 0.0) > best->value("frames_per_sec", 0.0)) best = &r;
  }
  if (best) *per_core = best->value("frames_per_sec", 0.0) / best->value("threads", 1);
  return best;
}

bool run_capture(const std::string& cmd, std::string* out, int* status) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return false;
  std::array<char, 1024> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out->append(buf.data(), n);
  const int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return true;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  return l.empty() ? s : l;
}

}  // namespace

Result<json> load_sweep(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorKind::Input, "cannot read sweep " + path.string());
  json s = json::parse(in, nullptr, false);
  if (s.is_discarded() || !s.is_object())
    return make_error(ErrorKind::Input, "sweep " + path.string() + " is not valid JSON");
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Input, "sweep " + path.string() + ": " + why);
  };
  if (!s.contains("schema_version") || !s["schema_version"].is_number_integer())
    return bad("no schema_version");
  if (s["schema_version"].get<int>() > kBenchSchemaVersion)
    return bad("schema_version " + std::to_string(s["schema_version"].get<int>()) +
               " is newer than this gbx-run reads (" + std::to_string(kBenchSchemaVersion) + ")");
  if (!s.contains("config") || !s["config"].is_object() || !s["config"].contains("backend") ||
      !s["config"]["backend"].is_string())
    return bad("no config.backend");
  if (!s.contains("results") || !s["results"].is_array() || s["results"].empty())
    return bad("no results");
  for (const json& r : s["results"])
    for (const char* f : {"num_envs", "total_sps", "per_env_sps", "frames_per_sec"})
      if (!r.is_object() || !r.contains(f) || !r[f].is_number())
        return bad(std::string("a result lacks numeric field ") + f);
  return s;
}

Result<ReportOutput> run_report(const ReportOptions& o) {
  if (o.sweeps.empty()) return make_error(ErrorKind::Usage, "report needs at least one sweep file");
  std::vector<json> sweeps;
  for (const fs::path& p : o.sweeps) {
    auto s = load_sweep(p);
    if (!s) return s.take_error();
    sweeps.push_back(std::move(s.value()));
  }
  ReportOutput out;
  const json* base = nullptr;
  for (const json& s : sweeps)
    if (is_baseline(s, o.baseline)) {
      base = &s;
      break;
    }
  if (!base)
    out.warnings.push_back("no sweep of baseline '" + o.baseline +
                           "' among the inputs: no speedups shown");
  const std::string base_name = base ? sweep_name(*base) : o.baseline;

  char line[256];
  for (const json& s : sweeps) {
    if (&s == base) continue;
    const json& c = s.at("config");
    out.text += sweep_name(s) + " vs " + base_name + " (rom " +
                c.value("rom", json::object()).value("name", std::string("?")) + ", stage " +
                c.value("stage", std::string("?")) + ", " +
                std::to_string(c.value("frames_per_step", 1)) + " frame(s)/step)\n";
    std::snprintf(line, sizeof line, "%8s %16s %16s %9s %14s\n", "envs",
                  (base_name + " sps").c_str(), (sweep_name(s) + " sps").c_str(), "speedup",
                  "per-env sps");
    out.text += line;
    for (const json& r : s.at("results")) {
      const int envs = r.value("num_envs", 0);
      const double sps = r.value("total_sps", 0.0);
      const json* b = base ? result_for(*base, envs) : nullptr;
      const double bsps = b ? b->value("total_sps", 0.0) : 0.0;
      const std::string bcol = b ? fmt("%.0f", bsps) : "-";
      const std::string speed = b && bsps > 0 ? fmt("%.2fx", sps / bsps) : "-";
      std::snprintf(line, sizeof line, "%8d %16s %16.0f %9s %14.1f\n", envs, bcol.c_str(), sps,
                    speed.c_str(), r.value("per_env_sps", 0.0));
      out.text += line;
    }
    out.text += "\n";
  }
  if (sweeps.size() == 1 && base) out.text += bench_table(*base) + "\n";

  // Frames/s per core: the number that says whether one GBX core beats one mGBA core.
  double base_core = 0;
  const json* base_best = base ? best_per_core(*base, &base_core) : nullptr;
  std::string cores;
  for (const json& s : sweeps) {
    double v = 0;
    const json* r = best_per_core(s, &v);
    if (!r) continue;
    const int t = r->value("threads", 0);
    const int envs = r->value("num_envs", 0);
    std::snprintf(line, sizeof line,
                  "  %-12s %10.0f frames/s/core  (%10.0f frames/s, %d thread%s, %d env%s)",
                  sweep_name(s).c_str(), v, r->value("frames_per_sec", 0.0), t, t == 1 ? "" : "s",
                  envs, envs == 1 ? "" : "s");
    cores += line;
    if (&s == base)
      cores += "  baseline";
    else if (base_best && base_core > 0)
      cores += fmt("  %.2fx ", v / base_core) + base_name + " per core";
    cores += "\n";
  }
  if (!cores.empty())
    out.text +=
        "frames/s per core (at each sweep's fastest env count; per core = total / threads "
        "used):\n" +
        cores;

  // The plot: a small matplotlib script, run with Debian's python (python3-matplotlib).
  fs::path script = o.plot_script;
  if (script.empty()) {
    const std::string src = system_info().source_dir;
    if (!src.empty()) script = fs::path(src) / "scripts" / "plot_report.py";
  }
  std::error_code ec;
  if (script.empty() || !fs::exists(script, ec)) {
    out.warnings.push_back("plot script scripts/plot_report.py not found: no PNG drawn");
    return out;
  }
  const fs::path dir = o.out_dir / "report";
  fs::create_directories(dir, ec);
  if (ec)
    return make_error(ErrorKind::Runtime, "cannot create " + dir.string() + ": " + ec.message());
  const fs::path png = dir / (utc_timestamp() + "_report.png");
  std::string cmd = shell_quote(o.python) + " " + shell_quote(script.string()) + " --out " +
                    shell_quote(png.string()) + " --baseline " + shell_quote(o.baseline);
  for (const fs::path& p : o.sweeps) cmd += " " + shell_quote(p.string());
  std::string log;
  int status = 0;
  if (!run_capture(cmd, &log, &status)) {
    out.warnings.push_back("could not run " + o.python + ": no PNG drawn");
    return out;
  }
  if (status == 3) {  // the script's "matplotlib is missing"
    out.warnings.push_back("matplotlib is not available to " + o.python +
                           " (apt install python3-matplotlib): no PNG drawn");
    return out;
  }
  if (status != 0 || !fs::exists(png, ec)) {
    out.warnings.push_back("plot failed (" + o.python + " exit " + std::to_string(status) +
                           "): " + first_line(log));
    return out;
  }
  out.png = png;
  return out;
}

}  // namespace gbx
