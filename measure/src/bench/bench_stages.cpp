#include "gbx/measure/bench/bench_stages.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <sstream>

#include "gbx/runtime/actions/action_policy.h"
#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/states/save_state.h"

namespace gbx {
namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
         1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

Result<StageVariant> parse_stage_variant(const std::string& text) {
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad stage variant '" + text + "': " + why);
  };
  const size_t at = text.find('@');
  const std::string body = text.substr(0, at);
  int threads = -1;
  bool specialized = false;
  std::optional<PpuModel> ppu;
  for (size_t tag = at; tag != std::string::npos;) {
    const size_t next = text.find('@', tag + 1);
    const std::string t = text.substr(tag + 1, next == std::string::npos ? next : next - tag - 1);
    tag = next;
    if (t == "spec" && !specialized) {
      specialized = true;
      continue;
    }
    if ((t == "fifo" || t == "line") && !ppu) {
      ppu = parse_ppu_model(t);
      continue;
    }
    if (threads > 0 || t.size() < 2 || t.size() > 5 || t[0] != 't' ||
        t.find_first_not_of("0123456789", 1) != std::string::npos || std::stoi(t.substr(1)) < 1)
      return bad("expected @tN (N >= 1 threads), @spec and/or @fifo|@line after the stage");
    threads = std::stoi(t.substr(1));
  }
  std::vector<std::string> parts;
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ':')) parts.push_back(item);
  if (parts.empty() || parts.size() > 3) return bad("expected stage[:obs[:format]][@tN]");
  StageVariant v;
  v.label = text;
  v.threads = threads;
  v.specialized = specialized;
  v.ppu_set = ppu.has_value();
  if (ppu) v.ppu = *ppu;
  auto stage = parse_stage(parts[0]);
  if (!stage) return bad("unknown stage '" + parts[0] + "'");
  v.stage = *stage;
  if (parts.size() > 1) {
    auto obs = parse_obs_kind(parts[1]);
    if (!obs) return bad("unknown obs kind '" + parts[1] + "' (vec, pixels)");
    v.obs = *obs;
  }
  if (parts.size() > 2) {
    auto f = parse_obs_format(parts[2]);
    if (!f) return bad("unknown obs format '" + parts[2] + "' (full, half, packed)");
    v.obs_format = *f;
  }
  return v;
}

Result<std::vector<VariantResult>> run_interleaved_bench(const InterleavedBenchOptions& o) {
  auto usage = [](std::string m) -> Error { return make_error(ErrorKind::Usage, std::move(m)); };
  if (o.variants.size() < 2) return usage("give at least two stage variants to compare");
  const std::vector<int> counts = o.env_counts.empty() ? std::vector<int>{o.envs} : o.env_counts;
  for (int n : counts)
    if (n < 1) return usage("--envs must be at least 1");
  const OptionValues values = with_defaults(o.options, kBenchStages);
  const int frames_per_step = (int)option_int(values, "frames_per_step");
  if (frames_per_step < 1) return usage("--frames-per-step must be at least 1");
  if (o.rounds < 1 || o.steps_per_round < 1 || o.warmup_steps < 0)
    return usage("--rounds and --steps-per-round must be >= 1, --warmup-steps >= 0");
  auto policy = ActionPolicy::parse(o.actions, o.action_seed);
  if (!policy) return policy.take_error();
  auto rom = load_rom(o.rom);
  if (!rom) return rom.take_error();
  std::vector<uint8_t> start_state;
  if (!o.load_state.empty()) {
    auto bytes = read_save_state_file(o.load_state);
    if (!bytes) return bytes.take_error();
    start_state = std::move(bytes.value());
  }
  BackendConfig base;  // every variant's config before the variant's own choices
  if (auto st = apply_options(values, kBenchStages, rom.value(), base); !st) return st.take_error();
  BackendConfig spec_cfg;  // what @spec variants add
  if (auto st = apply_specialize_option(o.specialize, rom.value(), spec_cfg); !st)
    return st.take_error();
  const bool have_spec = spec_cfg.specialize || spec_cfg.specialize_auto_frames > 0;
  for (const StageVariant& v : o.variants)
    if (v.specialized && !have_spec)
      return usage("variant '" + v.label +
                   "' needs --specialize profile:FILE or auto[:N] for its kernel");

  // One backend per (env count, variant), in that order: results of one count are adjacent,
  // its first variant the baseline.
  std::vector<std::unique_ptr<Backend>> backends;
  // Per backend: each sees the policy's same sequence (an @spec variant under auto goes on
  // from where its profile left it).
  std::vector<int64_t> step_index;
  std::vector<size_t> baseline;  // per backend: index of its count's first variant
  std::vector<int32_t> actions;
  auto step = [&](size_t k) -> Status {
    policy->fill(step_index[k]++, backends[k]->num_envs(), actions);
    return backends[k]->step(actions);
  };
  std::vector<VariantResult> out;
  for (size_t i = 0; i < counts.size() * o.variants.size(); ++i) {
    const int envs = counts[i / o.variants.size()];
    const StageVariant& v = o.variants[i % o.variants.size()];
    baseline.push_back(i % o.variants.size() == 0 ? backends.size() : baseline.back());
    BackendConfig cfg = base;
    cfg.num_envs = envs;
    if (v.threads > 0) cfg.threads = v.threads;
    cfg.stage = v.stage;
    cfg.obs = v.obs;
    cfg.obs_format = v.obs_format;
    if (v.ppu_set) cfg.ppu = v.ppu;
    if (v.specialized) {
      cfg.specialize = spec_cfg.specialize;
      cfg.specialize_auto_frames = spec_cfg.specialize_auto_frames;
    }
    auto b = make_backend(o.backend, rom.value(), cfg);
    if (!b) return b.take_error();
    if (!start_state.empty()) {
      if (auto st = b.value()->set_reset_state({start_state}); !st)
        return make_error(st.error().kind,
                          "--load-state " + o.load_state + ": " + st.error().message);
      if (auto st = b.value()->reset(std::vector<uint8_t>((size_t)envs, 1)); !st)
        return st.take_error();
    }
    backends.push_back(std::move(b.value()));
    step_index.push_back(0);
    if (auto steps = tier_up_now(*backends.back(), [&] { return step(backends.size() - 1); });
        !steps)
      return make_error(ErrorKind::Runtime, v.label + ": " + steps.error().message);
    for (int i = 0; i < o.warmup_steps; ++i)
      if (auto st = step(backends.size() - 1); !st) return st.take_error();
    if (auto st = backends.back()->sync(); !st) return st.take_error();
    VariantResult r;
    r.label = v.label;
    r.envs = envs;
    r.kernel_key = backends.back()->kernel_key();
    out.push_back(r);
  }
  using Clock = std::chrono::steady_clock;
  std::vector<double> round_seconds(backends.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t k = 0; k < backends.size(); ++k) {
      const auto t0 = Clock::now();
      const double c0 = process_cpu_seconds();
      for (int i = 0; i < o.steps_per_round; ++i)
        if (auto st = step(k); !st) return st.take_error();
      if (auto st = backends[k]->sync(); !st) return st.take_error();
      round_seconds[k] = std::chrono::duration<double>(Clock::now() - t0).count();
      out[k].seconds += round_seconds[k];
      out[k].cpu_seconds += process_cpu_seconds() - c0;
      out[k].env_frames += (long long)o.steps_per_round * frames_per_step * out[k].envs;
    }
    // Same env count and steps: the frames/s ratio is the inverse ratio of the times.
    for (size_t k = 0; k < backends.size(); ++k)
      out[k].round_ratios.push_back(round_seconds[baseline[k]] / round_seconds[k]);
  }
  for (auto& r : out) {
    r.frames_per_sec = (double)r.env_frames / r.seconds;
    r.frames_per_cpu_second = r.cpu_seconds > 0 ? (double)r.env_frames / r.cpu_seconds : 0;
    std::vector<double> sorted = r.round_ratios;
    std::sort(sorted.begin(), sorted.end());
    const size_t m = sorted.size();
    r.median_round_ratio = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
  }
  for (size_t k = 0; k < out.size(); ++k)
    out[k].ratio_to_first = out[k].frames_per_sec / out[baseline[k]].frames_per_sec;
  return out;
}

}  // namespace gbx
