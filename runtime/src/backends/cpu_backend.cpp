#include "gbx/runtime/backends/cpu_backend.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "gbx/engine/specialize.h"
#include "gbx/runtime/states/save_state.h"

namespace gbx {
namespace {

// CPU time of the calling thread: a load timed on a shared machine also says how much of its
// wall time was work.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

}  // namespace

Result<std::unique_ptr<CpuBackend>> CpuBackend::create(const Rom& rom, const BackendConfig& cfg) {
  const int obs_dim = 32;
  std::vector<OutputSection> one_env;
  const uint32_t seen_bytes = synth_params_for(cfg, Device::Cpu, obs_dim).seen_bytes();
  if (auto st = check_env_count(cfg.num_envs, cfg.memory_model, rom.header.ram_size,
                                output_layout(cfg, 1, one_env), seen_bytes);
      !st)
    return st.take_error();
  if (cfg.frames_per_step < 1) return make_error(ErrorKind::Usage, "--frames must be at least 1");
  if (cfg.threads < 0) return make_error(ErrorKind::Usage, "--threads must be >= 0");
  if (cfg.specialize && cfg.specialize->rom != rom.bytes)
    return make_error(ErrorKind::Usage, "the specialized kernel was made for another ROM (sha256 " +
                                            cfg.specialize->rom_sha256.substr(0, 16) + ")");
  std::unique_ptr<CpuBackend> b(new CpuBackend());
  b->rom_ = rom;
  b->cfg_ = cfg;
  b->threads_ =
      cfg.threads > 0 ? cfg.threads : (int)std::max(1u, std::thread::hardware_concurrency());
  b->pool_ = std::make_unique<WorkerPool>(std::min(b->threads_, cfg.num_envs));
  if (const char* parts = std::getenv("GBX_STEP_PARTS"); parts && *parts)
    b->step_parts_ = std::max(1, std::atoi(parts));

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_ms();
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  b->template_load_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  SynthParams p = synth_params_for(cfg, Device::Cpu, obs_dim);
  if (cfg.specialize_auto_frames > 0) {
    if (cfg.specialize || cfg.memory_model != MemoryModel::Dmg || cfg.run_mode != RunMode::Frames)
      return make_error(ErrorKind::Usage,
                        "specialize auto needs no other plan, memory model dmg, run mode frames");
    p.profile = true;
    b->tier_.start(cfg.specialize_auto_frames);
  }
  KernelCache cache;
  auto k = build_cpu_kernel(bundle.value(), p, cache);
  if (!k) return k.take_error();
  b->kernel_ = std::move(k.value());
  if (p.profile) {
    b->profile_counts_.assign(rom.bytes.size(), 0);
    b->profile_kernel_ = b->kernel_;
  }
  b->read_memory_ = reinterpret_cast<CpuReadMemoryFn>(b->kernel_.entry("read_memory"));
  if (!b->read_memory_)
    return make_error(ErrorKind::Template,
                      "templates/manifest.json names no read_memory entry point");
  b->kernel_load_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  b->kernel_load_cpu_ms_ = thread_cpu_ms() - cpu0;
  b->seen_bytes_ = seen_bytes;
  b->state_ = EnvState(cfg.num_envs, cfg.memory_model, &b->rom_, cfg.layout, seen_bytes);
  b->state_.set_memory_reader(b->read_memory_);
  b->out_.assign(output_layout(cfg, cfg.num_envs, b->sections_), 0);
  b->spec_retired_.assign((size_t)cfg.num_envs, 0);
  b->reset_image_ = b->power_on_image();
  if (auto st = b->reset(0); !st) return st.take_error();
  return b;
}

EnvState CpuBackend::power_on_image() const {
  EnvState image(1, cfg_.memory_model, &rom_, MemLayout::EnvMajor, seen_bytes_);
  if (cfg_.memory_model == MemoryModel::Flat64k)
    image.reset_zero();
  else
    image.reset_dmg();
  if (battery_) image.set_battery(*battery_);
  return image;
}

Status CpuBackend::reset(uint64_t /*seed: reserved for randomized starts*/) {
  return reset(std::vector<uint8_t>((size_t)state_.num_envs(), 1));
}

Status CpuBackend::reset(const std::vector<uint8_t>& mask) {
  const int n = state_.num_envs();
  if ((int)mask.size() != n)
    return make_error(ErrorKind::Usage, "reset mask has " + std::to_string(mask.size()) +
                                            " entries for " + std::to_string(n) + " envs");
  const bool shared = reset_image_.num_envs() == 1;
  pool_->run(n, [&](int64_t b, int64_t e) {
    for (int i = (int)b; i < (int)e; ++i) {
      if (!mask[i]) continue;
      state_.copy_env(i, reset_image_, shared ? 0 : i);
      clear_outputs(i);
    }
  });
  return ok_status();
}

Status CpuBackend::set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) {
  const int n = state_.num_envs();
  if (blobs.empty()) {
    reset_image_ = power_on_image();
    return ok_status();
  }
  if (blobs.size() != 1 && (int)blobs.size() != n)
    return make_error(ErrorKind::Usage, "set_reset_state takes 0, 1 or " + std::to_string(n) +
                                            " blobs, got " + std::to_string(blobs.size()));
  EnvState image((int)blobs.size(), cfg_.memory_model, &rom_, MemLayout::EnvMajor, seen_bytes_);
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (Status st = decode_env_state(blobs[i], image, (int)i); !st) {
      if (blobs.size() == 1) return st;
      return make_error(ErrorKind::Input,
                        "reset state " + std::to_string(i) + ": " + st.error().message);
    }
    image.clear_seen((int)i);  // a reset starts an episode: an empty seen() set
  }
  reset_image_ = std::move(image);
  return ok_status();
}

Result<std::vector<uint8_t>> CpuBackend::save_state(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  return encode_env_state(state_, env);
}

Status CpuBackend::load_state(int env, const std::vector<uint8_t>& blob) {
  if (auto st = check_env(env); !st) return st;
  if (Status st = decode_env_state(blob, state_, env); !st) return st;
  clear_outputs(env);
  return ok_status();
}

Status CpuBackend::copy_state(int src, const std::vector<uint8_t>& dst_mask) {
  if (auto st = check_env(src); !st) return st;
  const int n = state_.num_envs();
  if ((int)dst_mask.size() != n)
    return make_error(ErrorKind::Usage, "copy_state: mask of " + std::to_string(dst_mask.size()) +
                                            " for " + std::to_string(n) + " envs");
  for (int i = 0; i < n; ++i) {
    if (!dst_mask[i] || i == src) continue;
    state_.copy_env(i, state_, src);
    clear_outputs(i);
  }
  return ok_status();
}

CpuBackend::~CpuBackend() {
  // A compile still running finishes on its thread before the backend goes (it owns nothing
  // of ours, but the JIT session outlives it only this way).
  tier_.wait();
}

void CpuBackend::use_kernel(CpuKernel k) {
  kernel_ = std::move(k);
  read_memory_ = reinterpret_cast<CpuReadMemoryFn>(kernel_.entry("read_memory"));
  state_.set_memory_reader(read_memory_);
}

// The tiers (tier_up.h): profile, then compile in the background (the profiling kernel keeps
// running with counting off), then swap in the specialized kernel between two steps; when its
// blocks stop covering what runs, profile again (watch()) and compile blocks for both.
void CpuBackend::auto_tier_after_step(int frames) {
  if (tier_.profile_done_after(frames)) {
    if (merged_counts_.empty()) {
      merged_counts_ = std::move(profile_counts_);
    } else {
      for (size_t i = 0; i < merged_counts_.size(); ++i)
        merged_counts_[i] += std::min(profile_counts_[i], UINT32_MAX - merged_counts_[i]);
    }
    profile_counts_.clear();  // counting stops: the kernel checks the pointer
    tier_.compile(rom_.bytes, merged_counts_, synth_params_for(cfg_, Device::Cpu, 32),
                  [](TemplateBundle b, SynthParams p) {
                    KernelCache cache;
                    return build_cpu_kernel(b, p, cache);
                  });
    // A re-profile: the earlier specialized kernel runs until the new one is ready.
    if (spec_kernel_) use_kernel(*spec_kernel_);
    return;
  }
  if (auto k = tier_.take_ready(false)) {
    spec_kernel_ = *k;
    use_kernel(std::move(*k));
    return;
  }
  if (tier_.watch(frames, step_instrs_, step_block_instrs_) && profile_kernel_) {
    profile_counts_.assign(rom_.bytes.size(), 0);
    use_kernel(*profile_kernel_);
  }
}

Status CpuBackend::finish_tier_up() {
  if (auto k = tier_.take_ready(true)) {
    spec_kernel_ = *k;
    use_kernel(std::move(*k));
  }
  return tier_.outcome();
}

Status CpuBackend::step(const std::vector<int32_t>& actions) {
  Status st = run(actions, cfg_.frames_per_step, nullptr);
  if (st && cfg_.specialize_auto_frames > 0) auto_tier_after_step(cfg_.frames_per_step);
  return st;
}

Status CpuBackend::step_envs(const std::vector<int32_t>& actions, int frames,
                             const std::vector<uint8_t>& mask) {
  if ((int)mask.size() != state_.num_envs())
    return make_error(ErrorKind::Usage, "step_envs: mask of " + std::to_string(mask.size()) +
                                            " for " + std::to_string(state_.num_envs()) + " envs");
  if (frames < 0) return make_error(ErrorKind::Usage, "step_envs: frames must be >= 0");
  std::vector<int32_t> env_frames(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) env_frames[i] = mask[i] ? frames : -1;
  return step_frames(actions, env_frames);
}

Status CpuBackend::step_frames(const std::vector<int32_t>& actions,
                               const std::vector<int32_t>& frames) {
  if (Status st = check_step_frames(state_.num_envs(), actions, frames); !st) return st;
  return run(actions, 0, frames.data());
}

Status CpuBackend::run(const std::vector<int32_t>& actions, int frames, const int32_t* env_frames) {
  const int n = state_.num_envs();
  if (!actions.empty() && (int)actions.size() != n)
    return make_error(ErrorKind::Usage, "step: " + std::to_string(actions.size()) +
                                            " actions for " + std::to_string(n) + " envs");
  GbxParams p = state_.kernel_params();
  p.frames = frames;
  p.env_frames = env_frames;
  p.instr_budget = cfg_.instructions_per_step;
  p.actions = actions.empty() ? nullptr : actions.data();
  if (cfg_.release_after_frames >= 0) {
    release_.assign((size_t)n, cfg_.release_after_frames);
    p.release_after_frames = release_.data();
  }
  p.obs = reinterpret_cast<float*>(section("obs_v0"));
  p.reward = reinterpret_cast<float*>(section("reward"));
  p.obs_dim = 32;
  p.pixels = section("pixels");
  p.done = section("done");
  p.gather = section("gather");
  p.gather_addrs = cfg_.gather_addrs.empty() ? nullptr : cfg_.gather_addrs.data();
  p.gather_count = (int)cfg_.gather_addrs.size();
  p.profile_counts = profile_counts_.empty() ? nullptr : profile_counts_.data();
  p.spec_retired = spec_retired_.data();
  p.hits = reinterpret_cast<unsigned int*>(section("hits"));
  const CpuStepFn fn = kernel_.step;
  // The pool hands out env ranges (each thread keeps the same envs from step to step, the
  // tail is shared by stealing); the kernel itself skips envs whose env_frames is < 0.
  // What the specialized kernel's blocks cover, for re-profiling (tier_up.h watch()): this
  // step's retired instructions, in all and in blocks (resets happen between steps).
  const bool watch = tier_.state() == TierState::Specialized;
  auto sum = [n](const long long* v) {
    int64_t t = 0;
    for (int i = 0; i < n; ++i) t += v[i];
    return t;
  };
  const int64_t all0 = watch ? sum(p.s.instr_count) : 0;
  const int64_t block0 = watch ? sum(spec_retired_.data()) : 0;
  // With few envs a thread, the thread that finishes a step first waits for the other's
  // last env step (about half an env step: 4% of 2048.gb's steps at 8 envs a thread). Then
  // every env step runs in parts, all envs' first part before any second part, so what is
  // left at the end is short parts of many envs, which the threads share
  // (WorkerPool::run_phased; the kernel composes parts into exactly the step).
  const int parts = step_parts(n, frames, env_frames);
  last_step_parts_ = parts;
  if (parts > 1)
    pool_->run_phased(n, parts, [&](int64_t i, int k) {
      GbxParams q = p;
      q.part_begin = frames * k / parts;
      q.part_end = frames * (k + 1) / parts;
      fn(&q, (int)i, (int)i + 1);
    });
  else
    pool_->run(n, [&](int64_t b, int64_t e) { fn(&p, (int)b, (int)e); });
  step_instrs_ = watch ? sum(p.s.instr_count) - all0 : 0;
  step_block_instrs_ = watch ? sum(spec_retired_.data()) - block0 : 0;
  return ok_status();
}

int CpuBackend::step_parts(int n, int frames, const int32_t* env_frames) const {
  const int threads = pool_->threads();
  if (threads < 2 || step_parts_ < 2 || env_frames || frames < step_parts_ ||
      n > kPartsMaxEnvsPerThread * threads || cfg_.run_mode != RunMode::Frames ||
      cfg_.memory_model != MemoryModel::Dmg)
    return 1;
  return step_parts_;
}

Status CpuBackend::check_env(int env) const {
  if (env < 0 || env >= state_.num_envs())
    return make_error(ErrorKind::Usage, "env " + std::to_string(env) + " out of range (0.." +
                                            std::to_string(state_.num_envs() - 1) + ")");
  return ok_status();
}

Result<CpuState> CpuBackend::get_cpu_state(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  return state_.cpu_state(env);
}

Result<std::vector<uint8_t>> CpuBackend::read_view(int env, uint32_t lo, uint32_t hi, bool raw) {
  if (auto st = check_env(env); !st) return st.take_error();
  if (lo >= hi || hi > 0x10000)
    return make_error(ErrorKind::Usage, "memory range must satisfy lo < hi <= 0x10000");
  std::vector<uint8_t> out(hi - lo);
  if (auto st = state_.read_memory(env, lo, hi, raw, out.data()); !st) return st.take_error();
  return out;
}

Result<std::vector<uint8_t>> CpuBackend::read_memory(int env, uint32_t lo, uint32_t hi) {
  return read_view(env, lo, hi, false);
}

Result<std::vector<uint8_t>> CpuBackend::read_memory_raw(int env, uint32_t lo, uint32_t hi) {
  return read_view(env, lo, hi, true);
}

Status CpuBackend::load_battery(const BatterySave& save) {
  if (cfg_.memory_model != MemoryModel::Dmg)
    return make_error(ErrorKind::Usage, "battery RAM needs memory model dmg");
  battery_ = save;
  // Now, and in every later reset: the current reset image (power-on or a loaded state)
  // takes the battery RAM too.
  state_.set_battery(save);
  reset_image_.set_battery(save);
  return ok_status();
}

Result<BatterySave> CpuBackend::read_battery(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  return state_.battery(env);
}

void CpuBackend::clear_outputs(int env) {
  for (const auto& s : sections_)
    std::fill_n(out_.begin() + (long)(s.offset + (size_t)env * s.bytes_per_env), s.bytes_per_env,
                0);
}

uint8_t* CpuBackend::section(const char* name) {
  for (const auto& s : sections_)
    if (s.name == name) return out_.data() + s.offset;
  return nullptr;
}

Result<OutputBlock> CpuBackend::outputs() {
  OutputBlock b;
  b.data = out_.data();
  b.bytes = out_.size();
  b.num_envs = state_.num_envs();
  b.sections = sections_;
  return b;
}

Result<std::vector<float>> CpuBackend::read_obs(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  const float* obs = reinterpret_cast<const float*>(section("obs_v0"));
  if (!obs) return std::vector<float>{};
  return std::vector<float>(obs + (long)env * 32, obs + (long)(env + 1) * 32);
}

Result<float> CpuBackend::read_reward(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  return reinterpret_cast<const float*>(section("reward"))[env];
}

Result<std::vector<uint8_t>> CpuBackend::read_pixels(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  for (const auto& s : sections_)
    if (s.name == "pixels") {
      const uint8_t* p = out_.data() + s.offset + (size_t)env * s.bytes_per_env;
      return std::vector<uint8_t>(p, p + s.bytes_per_env);
    }
  return make_error(ErrorKind::Usage, "the kernel has no pixels output (obs kind is not pixels)");
}

Result<std::vector<uint8_t>> CpuBackend::read_screen(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  if (!synth_renders(kernel_.build.source.params))
    return make_error(ErrorKind::Usage, "the kernel does not render (ask for render or pixels)");
  return state_.screen(env);
}

Status CpuBackend::debug_poke_register(int env, const std::string& reg, uint16_t value) {
  if (auto st = check_env(env); !st) return st;
  CpuState s = state_.cpu_state(env);
  if (!set_cpu_register(s, reg, value))
    return make_error(ErrorKind::Usage, "unknown register '" + reg + "' (PC SP A F B C D E H L)");
  state_.set_cpu_state(env, s);
  return ok_status();
}

Result<std::string> CpuBackend::serial_output(int env) {
  if (auto st = check_env(env); !st) return st.take_error();
  return state_.serial(env);
}

}  // namespace gbx
