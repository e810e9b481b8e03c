// cuda backend. Stages of create(), top to bottom: driver -> context -> kernel (cache or
// NVRTC) -> module -> buffers -> reset -> warm-up. Everything after create() runs on one
// stream, so reads are ordered after the steps enqueued before them.
#include "gbx/runtime/backends/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda_backend_internal.h"
#include "gbx/engine/specialize.h"
#include "gbx/runtime/states/save_state.h"
#include "gbx/runtime/states/state_fields.h"

namespace gbx {

using cuda_detail::dev_addr;
using cuda_detail::shared_context;
using cuda_detail::shared_kernel;
using cuda_detail::shared_module;

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(const Rom& rom, const BackendConfig& cfg) {
  // The driver first: without one, fail in milliseconds and never start a compile.
  auto drv = CudaDriver::get();
  if (!drv) return drv.take_error();
  if (cfg.frames_per_step < 1) return make_error(ErrorKind::Usage, "--frames must be at least 1");
  if (Status st = check_specialize(rom, cfg); !st) return st.take_error();
  // Reset states (set_reset_state) are decoded in a host EnvState of the same size.
  const uint32_t seen_bytes = synth_params_for(cfg, Device::Cuda, kObsDim).seen_bytes();
  if (Status st =
          check_env_count(cfg.num_envs, cfg.memory_model, rom.header.ram_size, 0, seen_bytes);
      !st)
    return st.take_error();

  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->rom_ = rom;
  b->cfg_ = cfg;
  auto ctx = shared_context(cfg.device_index);
  if (!ctx) return ctx.take_error();
  b->ctx_ = std::move(*ctx);
  const CudaContext& c = *b->ctx_;
  if (cfg.block_size != 0)  // before the (slow) compile
    if (Status st = check_block_size(cfg.block_size, c.max_threads_per_block()); !st)
      return st.take_error();

  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  // Templates are read at run time; a state ABI other than the one this binary's buffers and
  // GbxParams follow would corrupt device memory. Checked before the (slow) compile.
  const SynthParams p = first_tier_params(cfg);
  KernelCache cache;
  // Tiered start: a kernel the cache does not hold starts as the quick compile (seconds)
  // while the optimized one compiles in the background (tens of seconds on two cores).
  std::optional<CudaDeviceKernel> cached;
  const NvrtcOptions full_opts;
  if (cfg.tiered_start && !full_opts.fast_compile) {
    auto found = find_cuda_kernel_for_device(*bundle, p, cache, c.sm(), full_opts);
    if (!found) return found.take_error();
    cached = std::move(*found);
    b->start_fast_ = !cached;
  }
  NvrtcOptions first_opts = full_opts;
  first_opts.fast_compile = full_opts.fast_compile || b->start_fast_;
  const auto compile_t0 = std::chrono::steady_clock::now();
  auto k = cached ? Result<CudaDeviceKernel>(std::move(*cached))
                  : build_cuda_kernel_for_device(*bundle, p, cache, c.sm(), first_opts);
  if (!k) return k.take_error();
  b->first_kernel_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compile_t0)
          .count();
  b->kernel_ = std::move(*k);
  auto loaded = shared_kernel(c, b->kernel_);
  if (!loaded) return loaded.take_error();
  b->loaded_ = std::move(*loaded);
  // The env copy kernel (resets, save-state gathers and loads): one small cached compile.
  auto copy = build_env_copy_kernel(c.sm(), cache);
  if (!copy) return copy.take_error();
  auto copy_loaded =
      shared_module(c, "env-copy/" + copy->key, copy->image, copy->cubin,
                    "the env copy kernel " + copy->key.substr(0, 12), kEnvCopyEntryPoint);
  if (!copy_loaded) return copy_loaded.take_error();
  b->copy_loaded_ = std::move(*copy_loaded);
  b->shape_ = throughput_launch_shape({c.multiprocessors(), c.max_threads_per_block()},
                                      cfg.num_envs, cfg.block_size);
  auto stream = CudaStream::create(c);
  if (!stream) return stream.take_error();
  b->stream_ = std::move(*stream);

  b->seen_bytes_ = seen_bytes;
  b->layout_ =
      make_layout(cfg.num_envs, cfg.memory_model, rom.header.ram_size, cfg.layout, seen_bytes);
  const bool interleaved = cfg.layout == MemLayout::Interleaved;
  const size_t n = (size_t)cfg.num_envs;
  struct Alloc {
    DeviceBuffer* buf;
    size_t bytes;
    const char* what;
  };
  for (const Alloc& a :
       {Alloc{&b->soa_buf_, b->layout_.soa_bytes, "the register arrays"},
        Alloc{&b->mem_buf_, b->layout_.mem_bytes, "env memory"},
        Alloc{&b->rom_buf_, rom.bytes.size(), "the ROM"},
        Alloc{&b->actions_buf_, n * sizeof(int32_t), "actions"},
        Alloc{&b->out_buf_, output_layout(cfg, cfg.num_envs, b->sections_), "the outputs"},
        Alloc{&b->gather_addrs_buf_, cfg.gather_addrs.size() * sizeof(uint16_t),
              "the RAM gather addresses"},
        Alloc{&b->release_buf_, cfg.release_after_frames >= 0 ? n * sizeof(int32_t) : 0,
              "the button release schedule"},
        Alloc{&b->mask_buf_, n, "the reset mask"},
        Alloc{&b->frames_buf_, n * sizeof(int32_t), "per-env frame counts"},
        Alloc{&b->read_buf_, 0x10000, "memory reads"},
        Alloc{&b->spec_retired_buf_, n * sizeof(long long), "the specialized-block counters"},
        Alloc{&b->stage_soa_buf_, make_layout(1, cfg.memory_model, rom.header.ram_size).soa_bytes,
              "the one-env staging block"},
        Alloc{&b->stage_mem_buf_, interleaved ? b->layout_.mem_stride : 0,
              "the one-env memory staging slice"}}) {
    auto buf = DeviceBuffer::alloc(c, a.bytes);
    if (!buf) {
      Error e = buf.take_error();
      e.message = "allocating " + std::to_string(a.bytes) + " bytes of device memory for " +
                  a.what + " (" + std::to_string(n) + " envs): " + e.message;
      return e;
    }
    *a.buf = std::move(*buf);
  }
  if (Status st = b->spec_retired_buf_.fill(0, b->stream_.get()); !st) return st.take_error();
  b->layout_.bind(b->soa_, b->soa_buf_.ptr());
  b->probe_ = EnvState(1, cfg.memory_model, &b->rom_, MemLayout::EnvMajor, seen_bytes);
  b->probe_.layout().bind(b->stage_soa_, b->stage_soa_buf_.ptr());
  // The shared ROM: one read-only copy for every env, uploaded once.
  if (Status st = b->rom_buf_.upload(rom.bytes.data(), rom.bytes.size(), 0, b->stream_.get()); !st)
    return st.take_error();
  if (!cfg.gather_addrs.empty())
    if (Status st = b->gather_addrs_buf_.upload(cfg.gather_addrs.data(),
                                                cfg.gather_addrs.size() * sizeof(uint16_t), 0,
                                                b->stream_.get());
        !st)
      return st.take_error();
  if (cfg.release_after_frames >= 0) {
    // Uploaded once: the schedule is part of the configuration, not of a step.
    const std::vector<int32_t> release(n, cfg.release_after_frames);
    if (Status st = b->release_buf_.upload(release.data(), release.size() * sizeof(int32_t), 0,
                                           b->stream_.get());
        !st)
      return st.take_error();
  }
  if (cfg.specialize_auto_frames > 0)
    if (Status st = b->start_profiling(); !st) return st.take_error();
  if (Status st = b->set_reset_state({}); !st) return st.take_error();
  if (Status st = b->reset(0); !st) return st.take_error();
  if (Status st = b->warm_up(); !st) return st.take_error();
  b->created_ = std::chrono::steady_clock::now();
  // Under auto the next kernel is the specialized one (tier_after_step), optimized as well.
  if (b->start_fast_ && cfg.specialize_auto_frames == 0)
    b->compile_optimized_in_background(std::move(*bundle), b->kernel_.build.build.source.params);
  return b;
}

CudaBackend::~CudaBackend() {
  // Buffers must not be freed under a running kernel.
  if (stream_.get()) {
    (void)ctx_->make_current();
    (void)stream_.synchronize();
  }
}

std::string CudaBackend::kernel_key() const { return kernel_.build.build.key; }

GbxParams CudaBackend::params(const int* actions, int num_envs) const {
  GbxParams p{};
  p.s = soa_;
  p.rom = rom_buf_.size() ? rom_buf_.as<const unsigned char>() : nullptr;
  p.rom_size = (unsigned)rom_.bytes.size();
  p.mbc = (unsigned)rom_.header.mbc;
  p.mem = mem_buf_.as<unsigned char>();
  p.mem_stride = layout_.kernel_mem_stride();
  p.cart_ram_size = rom_.header.ram_size;
  p.num_envs = num_envs;
  p.frames = cfg_.frames_per_step;
  p.instr_budget = cfg_.instructions_per_step;
  p.actions = actions;
  p.release_after_frames = release_buf_.size() ? release_buf_.as<const int>() : nullptr;
  p.obs = reinterpret_cast<float*>(section("obs_v0"));
  p.reward = reinterpret_cast<float*>(section("reward"));
  p.obs_dim = kObsDim;
  p.pixels = reinterpret_cast<unsigned char*>(section("pixels"));
  p.done = reinterpret_cast<unsigned char*>(section("done"));
  p.gather = reinterpret_cast<unsigned char*>(section("gather"));
  p.gather_addrs =
      gather_addrs_buf_.size() ? gather_addrs_buf_.as<const unsigned short>() : nullptr;
  p.hits = reinterpret_cast<unsigned int*>(section("hits"));
  p.gather_count = (int)cfg_.gather_addrs.size();
  p.profile_counts = profiling_ ? profile_buf_.as<unsigned>() : nullptr;
  p.spec_retired = spec_retired_buf_.as<long long>();
  return p;
}

Result<std::vector<int64_t>> CudaBackend::specialized_instr_counts() {
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  std::vector<int64_t> counts((size_t)layout_.num_envs);
  if (Status st = spec_retired_buf_.download(counts.data(), counts.size() * sizeof(int64_t), 0,
                                             stream_.get());
      !st)
    return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  return counts;
}

void CudaBackend::state_regions(const GbxState& dst, const GbxState& src, bool src_shared,
                                std::vector<EnvCopyRegion>& out) {
#define GBX_FIELD_REGION(name, size)                                                    \
  out.push_back(EnvCopyRegion{dev_addr(dst.name), dev_addr(src.name), (uint64_t)(size), \
                              (uint64_t)(size), src_shared ? 0 : (uint64_t)(size)});
  GBX_STATE_FIELDS(GBX_FIELD_REGION)
#undef GBX_FIELD_REGION
}

void CudaBackend::output_zero_regions(std::vector<EnvCopyRegion>& out) const {
  for (const OutputSection& sec : sections_)
    out.push_back(
        EnvCopyRegion{out_buf_.ptr() + sec.offset, 0, sec.bytes_per_env, sec.bytes_per_env, 0});
}

void* CudaBackend::section(const char* name) const {
  for (const OutputSection& sec : sections_)
    if (sec.name == name)
      return reinterpret_cast<void*>(static_cast<uintptr_t>(out_buf_.ptr() + sec.offset));
  return nullptr;
}

Result<std::vector<uint8_t>> CudaBackend::read_section(const char* name, int env) {
  if (Status st = check_env(env); !st) return st.take_error();
  for (const OutputSection& sec : sections_) {
    if (sec.name != name) continue;
    if (Status st = ctx_->make_current(); !st) return st.take_error();
    std::vector<uint8_t> out(sec.bytes_per_env);
    if (Status st = out_buf_.download(out.data(), out.size(),
                                      sec.offset + (size_t)env * sec.bytes_per_env, stream_.get());
        !st)
      return st.take_error();
    if (Status st = stream_.synchronize(); !st) return st.take_error();
    return out;
  }
  return std::vector<uint8_t>{};
}

Result<OutputBlock> CudaBackend::outputs() {
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  // Every output of every env in one async copy into page-locked memory, allocated the first
  // time a user asks for host arrays.
  if (out_host_.size() != out_buf_.size()) {
    auto pinned = PinnedBuffer::alloc(*ctx_, out_buf_.size());
    if (!pinned) return pinned.take_error();
    out_host_ = std::move(*pinned);
  }
  if (Status st = out_buf_.download(out_host_.data(), out_host_.size(), 0, stream_.get()); !st)
    return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  OutputBlock b;
  b.data = out_host_.data();
  b.bytes = out_host_.size();
  b.num_envs = layout_.num_envs;
  b.sections = sections_;
  return b;
}

OutputBlock CudaBackend::device_outputs() const {
  OutputBlock b;
  b.data = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(out_buf_.ptr()));
  b.bytes = out_buf_.size();
  b.num_envs = layout_.num_envs;
  b.sections = sections_;
  return b;
}

Status CudaBackend::stream_wait(CUstream consumer) {
  if (Status st = ctx_->make_current(); !st) return st;
  if (consumer == stream_.get()) return ok_status();
  const CudaDriver& drv = ctx_->driver();
  CUevent ev = nullptr;
  GBX_CHECK_CU(drv, cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CUresult r = drv.cuEventRecord(ev, stream_.get());
  if (r == CUDA_SUCCESS) r = drv.cuStreamWaitEvent(consumer, ev, 0);
  // Destroying an event whose wait is enqueued is fine: the wait keeps what it needs.
  drv.cuEventDestroy(ev);
  if (r != CUDA_SUCCESS) return drv.error(r, "cuEventRecord/cuStreamWaitEvent", __FILE__, __LINE__);
  return ok_status();
}

Status CudaBackend::launch_copy(EnvCopyParams p, const std::vector<EnvCopyRegion>& regions) {
  const CudaDriver& drv = ctx_->driver();
  for (size_t first = 0; first < regions.size(); first += kEnvCopyMaxRegions) {
    const size_t count = std::min<size_t>(kEnvCopyMaxRegions, regions.size() - first);
    p.num_regions = count;
    std::copy(regions.begin() + (long)first, regions.begin() + (long)(first + count), p.regions);
    const EnvCopyGrid g = env_copy_grid(p);
    void* args[] = {&p};  // copied by the driver at the call
    GBX_CHECK_CU(drv, cuLaunchKernel(copy_loaded_->function, g.grid_x, g.grid_y, 1, g.block, 1, 1,
                                     0, stream_.get(), args, nullptr));
  }
  return ok_status();
}

Status CudaBackend::step(const std::vector<int32_t>& actions) {
  const int n = layout_.num_envs;
  if (!actions.empty() && (int)actions.size() != n)
    return make_error(ErrorKind::Usage, "step: " + std::to_string(actions.size()) +
                                            " actions for " + std::to_string(n) + " envs");
  Status st = launch_step(actions, nullptr);
  if (st) ++steps_;
  if (st && (cfg_.specialize_auto_frames > 0 || optimized_compile_.valid())) tier_after_step();
  return st;
}

Status CudaBackend::step_frames(const std::vector<int32_t>& actions,
                                const std::vector<int32_t>& frames) {
  if (Status st = check_step_frames(layout_.num_envs, actions, frames); !st) return st;
  return launch_step(actions, &frames);
}

Status CudaBackend::launch_step(const std::vector<int32_t>& actions,
                                const std::vector<int32_t>* frames) {
  const int n = layout_.num_envs;
  if (Status st = ctx_->make_current(); !st) return st;
  // Copies from pageable memory are staged before the call returns, so the caller may reuse
  // its vectors at once; the launch below is ordered after them on the same stream.
  const int* dev_actions = nullptr;
  if (!actions.empty()) {
    if (Status st = actions_buf_.upload(actions.data(), n * sizeof(int32_t), 0, stream_.get()); !st)
      return st;
    dev_actions = actions_buf_.as<const int>();
  }
  GbxParams p = params(dev_actions, n);
  if (frames) {
    if (Status st = frames_buf_.upload(frames->data(), n * sizeof(int32_t), 0, stream_.get()); !st)
      return st;
    p.env_frames = frames_buf_.as<const int>();
  }
  void* args[] = {&p};  // cuLaunchKernel copies the parameter block at the call
  return launch_kernel(ctx_->driver(), loaded_->function, shape_, args, stream_.get());
}

Status CudaBackend::sync() {
  if (Status st = ctx_->make_current(); !st) return st;
  return stream_.synchronize();
}

Status CudaBackend::warm_up() {
  if (Status st = ctx_->make_current(); !st) return st;
  GbxParams p = params(nullptr, 0);  // every thread exits at the bounds check
  void* args[] = {&p};
  if (Status st = launch_kernel(ctx_->driver(), loaded_->function,
                                gbx::launch_shape(1, shape_.block), args, stream_.get());
      !st)
    return st;
  return stream_.synchronize();
}

Status CudaBackend::check_env(int env) const {
  if (env < 0 || env >= layout_.num_envs)
    return make_error(ErrorKind::Usage, "env " + std::to_string(env) + " out of range (0.." +
                                            std::to_string(layout_.num_envs - 1) + ")");
  return ok_status();
}

Status CudaBackend::fetch(void* dst, uint64_t src, size_t bytes) {
  const uint64_t soa = soa_buf_.ptr(), mem = mem_buf_.ptr();
  if (src >= soa && src - soa < soa_buf_.size())
    return soa_buf_.download(dst, bytes, src - soa, stream_.get());
  if (src >= mem && src - mem < mem_buf_.size())
    return mem_buf_.download(dst, bytes, src - mem, stream_.get());
  return make_error(ErrorKind::Runtime, "cuda backend: fetch outside the state buffers");
}

}  // namespace gbx
