#include <fstream>
#include <random>
#include <sstream>

#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/states/save_state.h"

namespace gbx {

Result<SpecProfile> profile_rom(const Rom& rom, const ProfileRunOptions& opts,
                                const SpecLimits& limits) {
  if (opts.frames < 1) return make_error(ErrorKind::Usage, "--frames must be at least 1");
  if (opts.actions != "random" && opts.actions != "none")
    return make_error(ErrorKind::Usage,
                      "--actions must be random or none (got '" + opts.actions + "')");
  const OptionValues values = with_defaults(opts.options, kProfile);
  const int64_t envs = option_int(values, "num_envs");
  const int64_t frames_per_step = option_int(values, "frames_per_step");
  if (envs < 1) return make_error(ErrorKind::Usage, "--envs must be at least 1");
  if (frames_per_step < 1)
    return make_error(ErrorKind::Usage, "--frames-per-step must be at least 1");
  if (option_int(values, "release_after_frames") < -1)
    return make_error(ErrorKind::Usage, "--release-after-frames must be -1 (never) or >= 0");
  BackendConfig cfg;
  if (Status st = apply_options(values, kProfile, rom, cfg); !st) return st.take_error();
  cfg.stage = Stage::EmulateOnly;
  cfg.threads = opts.threads;
  cfg.profile = true;
  auto backend = CpuBackend::create(rom, cfg);
  if (!backend) return backend.take_error();
  CpuBackend& b = *backend.value();
  if (!opts.load_state.empty()) {
    auto blob = read_save_state_file(opts.load_state);
    if (!blob) return blob.take_error();
    if (Status st = b.set_reset_state({blob.value()}); !st)
      return make_error(st.error().kind,
                        "--load-state " + opts.load_state + ": " + st.error().message);
    if (Status st = b.reset(std::vector<uint8_t>((size_t)envs, 1)); !st) return st.take_error();
  }
  std::mt19937_64 rng(opts.seed);
  std::vector<int32_t> actions((size_t)envs, 0);
  const int steps = (int)((opts.frames + frames_per_step - 1) / frames_per_step);
  for (int s = 0; s < steps; ++s) {
    for (int32_t& a : actions) a = opts.actions == "random" ? (int32_t)(rng() & 0xFF) : 0;
    if (Status st = b.step(actions); !st) return st.take_error();
  }
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  return spec_profile_from_counts(bundle.value().opcodes(), rom.bytes, b.profile_counts(),
                                  steps * frames_per_step, limits);
}

Result<std::shared_ptr<const SpecPlan>> spec_plan_for(const Rom& rom, const SpecProfile& profile,
                                                      const SpecLimits& limits) {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  return make_spec_plan(bundle.value().opcodes(), rom.bytes, profile, limits);
}

Result<std::shared_ptr<const SpecPlan>> load_spec_plan(const Rom& rom, const std::string& path,
                                                       const SpecLimits& limits) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(ErrorKind::Input, "cannot read profile " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  auto prof = spec_profile_from_json(ss.str());
  if (!prof) return make_error(ErrorKind::Input, path + ": " + prof.error().message);
  return spec_plan_for(rom, prof.value(), limits);
}

Status apply_specialize_option(const std::string& spec, const Rom& rom, BackendConfig& cfg) {
  if (spec.empty() || spec == "off") return ok_status();
  if (spec.rfind("profile:", 0) == 0) {
    auto plan = load_spec_plan(rom, spec.substr(8));
    if (!plan) return plan.take_error();
    cfg.specialize = plan.value();
    return ok_status();
  }
  if (spec == "auto" || spec.rfind("auto:", 0) == 0) {
    int frames = 60;
    if (spec.size() > 5) {
      try {
        size_t used = 0;
        frames = std::stoi(spec.substr(5), &used);
        if (used != spec.size() - 5) frames = 0;
      } catch (const std::exception&) {
        frames = 0;
      }
      if (frames < 1)
        return make_error(ErrorKind::Usage, "--specialize auto:N needs N >= 1 frames");
    }
    cfg.specialize_auto_frames = frames;
    return ok_status();
  }
  return make_error(ErrorKind::Usage,
                    "--specialize must be off, profile:FILE, auto or auto:N (got '" + spec + "')");
}

Result<int64_t> tier_up_now(Backend& be, const std::function<Status()>& step,
                            int64_t window_steps) {
  int64_t steps = 0;
  for (;;) {
    for (; be.specialize_status() == "profiling"; ++steps)
      if (Status st = step(); !st) return st.take_error();
    if (Status st = be.finish_tier_up(); !st) return st.take_error();
    const std::string status = be.specialize_status();
    if (status != "specialized" && status != "off")
      return make_error(ErrorKind::Runtime, "the specialized kernel " + status);
    if (status != "specialized" || window_steps <= 0) return steps;
    // kSettleWindows windows on the new kernel; watch() re-profiles a bounded number of
    // times (and gives up after one that did not help), so this loop ends.
    constexpr int64_t kSettleWindows = 3;
    for (int64_t i = 0;
         i < kSettleWindows * window_steps && be.specialize_status() == "specialized"; ++i, ++steps)
      if (Status st = step(); !st) return st.take_error();
    if (be.specialize_status() != "profiling") return steps;
  }
}

}  // namespace gbx
