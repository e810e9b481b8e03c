#include "gbx/runtime/bench_stages.h"

#include <sys/resource.h>

#include <chrono>
#include <memory>
#include <sstream>

#include "gbx/runtime/action_policy.h"
#include "gbx/runtime/rom.h"

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
  std::string body = text;
  int threads = -1;
  if (const size_t at = text.find('@'); at != std::string::npos) {
    const std::string t = text.substr(at + 1);
    if (t.size() < 2 || t.size() > 5 || t[0] != 't' ||
        t.find_first_not_of("0123456789", 1) != std::string::npos || std::stoi(t.substr(1)) < 1)
      return bad("expected @tN with N >= 1 threads after the stage");
    threads = std::stoi(t.substr(1));
    body = text.substr(0, at);
  }
  std::vector<std::string> parts;
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ':')) parts.push_back(item);
  if (parts.empty() || parts.size() > 3) return bad("expected stage[:obs[:format]][@tN]");
  StageVariant v;
  v.label = text;
  v.threads = threads;
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
  if (o.envs < 1) return usage("--envs must be at least 1");
  if (o.frames_per_step < 1) return usage("--frames-per-step must be at least 1");
  if (o.rounds < 1 || o.steps_per_round < 1 || o.warmup_steps < 0)
    return usage("--rounds and --steps-per-round must be >= 1, --warmup-steps >= 0");
  auto policy = ActionPolicy::parse(o.actions, o.action_seed);
  if (!policy) return policy.take_error();
  auto rom = load_rom(o.rom);
  if (!rom) return rom.take_error();

  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<int64_t> step_index;  // per variant: each sees the policy's same sequence
  std::vector<int32_t> actions;
  auto step = [&](size_t k) -> Status {
    policy->fill(step_index[k]++, o.envs, actions);
    return backends[k]->step(actions);
  };
  std::vector<VariantResult> out;
  for (const StageVariant& v : o.variants) {
    BackendConfig cfg;
    cfg.num_envs = o.envs;
    cfg.frames_per_step = o.frames_per_step;
    cfg.threads = v.threads > 0 ? v.threads : o.threads;
    cfg.stage = v.stage;
    cfg.obs = v.obs;
    cfg.obs_format = v.obs_format;
    auto b = make_backend(o.backend, rom.value(), cfg);
    if (!b) return b.take_error();
    backends.push_back(std::move(b.value()));
    step_index.push_back(0);
    for (int i = 0; i < o.warmup_steps; ++i)
      if (auto st = step(backends.size() - 1); !st) return st.take_error();
    if (auto st = backends.back()->sync(); !st) return st.take_error();
    VariantResult r;
    r.label = v.label;
    r.kernel_key = backends.back()->kernel_key();
    out.push_back(r);
  }
  using Clock = std::chrono::steady_clock;
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t k = 0; k < backends.size(); ++k) {
      const auto t0 = Clock::now();
      const double c0 = process_cpu_seconds();
      for (int i = 0; i < o.steps_per_round; ++i)
        if (auto st = step(k); !st) return st.take_error();
      if (auto st = backends[k]->sync(); !st) return st.take_error();
      out[k].seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      out[k].cpu_seconds += process_cpu_seconds() - c0;
      out[k].env_frames += (long long)o.steps_per_round * o.frames_per_step * o.envs;
    }
  }
  for (auto& r : out) {
    r.frames_per_sec = (double)r.env_frames / r.seconds;
    r.frames_per_cpu_second = r.cpu_seconds > 0 ? (double)r.env_frames / r.cpu_seconds : 0;
  }
  for (auto& r : out) r.ratio_to_first = r.frames_per_sec / out[0].frames_per_sec;
  return out;
}

}  // namespace gbx
