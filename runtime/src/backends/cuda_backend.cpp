// cuda backend. Stages of create(), top to bottom: driver -> context -> kernel (cache or
// NVRTC) -> module -> buffers -> reset -> warm-up. Everything after create() runs on one
// stream, so reads are ordered after the steps enqueued before them.
#include "gbx/runtime/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "gbx/engine/specialize.h"
#include "gbx/runtime/save_state.h"
#include "gbx/runtime/state_fields.h"

namespace gbx {

constexpr int kObsDim = 32;  // obs_v0

// A loaded module and its entry point. Shared by every backend on the same device running the
// same kernel, so a process that creates many backends loads each module once.
struct CudaLoadedKernel {
  CudaModule module;
  CUfunction function = nullptr;
  CUfunction read_memory = nullptr;  // the manifest's read_memory entry point, when it has one
};

namespace {

// Contexts and modules live for the rest of the process, like the driver itself: tearing them
// down from static destructors would race the driver's own shutdown.
struct Registry {
  std::mutex mu;
  std::map<int, std::shared_ptr<CudaContext>> contexts;
  std::map<std::pair<int, std::string>, std::shared_ptr<CudaLoadedKernel>> kernels;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

Result<std::shared_ptr<CudaContext>> shared_context(int device_index) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.contexts.find(device_index); it != r.contexts.end()) {
    if (Status st = it->second->make_current(); !st) return st.take_error();
    return it->second;
  }
  auto ctx = CudaContext::open(device_index);
  if (!ctx) return ctx.take_error();
  std::shared_ptr<CudaContext> shared(std::move(*ctx));
  r.contexts[device_index] = shared;
  return shared;
}

// CUDA 13's NVRTC emits PTX ISA 9.0 and CUBINs an older driver may not accept; say so when
// the driver is older.
std::string driver_hint(const CudaContext& ctx, const Error& e) {
  const std::string nv = nvrtc_version();  // "13.0"
  const int nvrtc =
      std::atoi(nv.c_str()) * 1000 +
      (nv.find('.') != std::string::npos ? std::atoi(nv.c_str() + nv.find('.') + 1) * 10 : 0);
  if (ctx.driver_version() >= nvrtc) return {};
  for (const char* code : {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_IMAGE",
                           "CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_INVALID_PTX"})
    if (e.message.find(code) != std::string::npos)
      return " (driver " + std::to_string(ctx.driver_version()) + " may be older than NVRTC " +
             nvrtc_version() + ")";
  return {};
}

// A module by its id (device, cache key): loaded once per process and device.
Result<std::shared_ptr<CudaLoadedKernel>> shared_module(
    const CudaContext& ctx, const std::string& key, const std::string& image, bool cubin,
    const std::string& what, const std::string& entry_point, const std::string& read_entry = {}) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto id = std::make_pair(ctx.index(), key);
  if (auto it = r.kernels.find(id); it != r.kernels.end()) return it->second;
  auto mod = CudaModule::load(ctx, image, cubin ? ModuleImage::Cubin : ModuleImage::Ptx);
  if (!mod) {
    Error e = mod.take_error();
    e.message = "loading " + what + ": " + e.message + driver_hint(ctx, e);
    return e;
  }
  auto fn = mod->function(entry_point);
  if (!fn) return fn.take_error();
  auto loaded = std::make_shared<CudaLoadedKernel>();
  if (!read_entry.empty()) {
    auto rd = mod->function(read_entry);
    if (!rd) return rd.take_error();
    loaded->read_memory = *rd;
  }
  loaded->module = std::move(*mod);
  loaded->function = *fn;
  r.kernels[id] = loaded;
  return loaded;
}

Result<std::shared_ptr<CudaLoadedKernel>> shared_kernel(const CudaContext& ctx,
                                                        const CudaDeviceKernel& k) {
  const auto& extra = k.build.build.source.extra_entry_points;
  const auto rd = extra.find("read_memory");
  return shared_module(ctx, k.build.build.key + "/" + k.image_file, k.image, k.target.cubin,
                       k.image_file + " of kernel " + k.build.build.key.substr(0, 12),
                       k.build.build.source.entry_point, rd == extra.end() ? "" : rd->second);
}

uint64_t dev_addr(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// The state fields a CpuState reports: what cpu_states() packs for all envs and copies at once.
// clang-format off
#define GBX_REGISTER_FIELDS(X)                                                       \
  X(pc, 2) X(sp, 2) X(a, 1) X(f, 1) X(b, 1) X(c, 1) X(d, 1) X(e, 1) X(h, 1) X(l, 1)  \
  X(ime, 1) X(run_state, 1) X(cycle_count, 8) X(instr_count, 8) X(trap_kind, 1)     \
  X(trap_pc, 2) X(trap_opcode, 1)
// clang-format on

size_t align64(size_t v) { return (v + 63) / 64 * 64; }

// Bytes of the packed register block for n envs: one 64-byte aligned array per field.
size_t register_block_bytes(size_t n) {
  size_t off = 0;
#define GBX_REG_BYTES(name, size) off = align64(off + (size_t)(size)*n);
  GBX_REGISTER_FIELDS(GBX_REG_BYTES)
#undef GBX_REG_BYTES
  return off;
}

}  // namespace

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

Result<std::vector<uint8_t>> CudaBackend::read_pixels(int env) {
  auto px = read_section("pixels", env);
  if (px && px->empty() && env >= 0 && env < layout_.num_envs)
    return make_error(ErrorKind::Usage, "the kernel has no pixels output (obs kind is not pixels)");
  return px;
}

Result<std::vector<uint8_t>> CudaBackend::read_screen(int env) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (!synth_renders(kernel_.build.build.source.params))
    return make_error(ErrorKind::Usage, "the kernel does not render (ask for render or pixels)");
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  if (Status st = gather_env(env); !st) return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  return probe_.screen(0);
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

Status CudaBackend::upload_reset_image(EnvState& image) {
  const StateLayout l = image.layout();
  CUstream s = stream_.get();
  if (image_envs_ != l.num_envs) {
    image_soa_buf_ = DeviceBuffer();
    image_mem_buf_ = DeviceBuffer();
    for (auto [buf, bytes] :
         {std::pair{&image_soa_buf_, l.soa_bytes}, std::pair{&image_mem_buf_, l.mem_bytes}}) {
      auto a = DeviceBuffer::alloc(*ctx_, bytes);
      if (!a) {
        Error e = a.take_error();
        e.message = "allocating " + std::to_string(bytes) +
                    " bytes of device memory for the reset state (" + std::to_string(l.num_envs) +
                    " envs): " + e.message;
        return e;
      }
      *buf = std::move(*a);
    }
    image_envs_ = l.num_envs;
    l.bind(image_soa_, image_soa_buf_.ptr());
  }
  if (Status st = image_soa_buf_.upload(image.soa_block(), l.soa_bytes, 0, s); !st) return st;
  if (Status st = image_mem_buf_.upload(image.mem(), l.mem_bytes, 0, s); !st) return st;
  // `image` may die on return; pageable copies may still be reading it until then.
  return stream_.synchronize();
}

Status CudaBackend::copy_reset_image(uint64_t mask) {
  const bool shared = image_envs_ == 1;
  std::vector<EnvCopyRegion> regions;
  state_regions(soa_, image_soa_, shared, regions);
  // The image is env-major; the interleaved layout scatters it byte by byte.
  const bool interleaved = layout_.mem_layout == MemLayout::Interleaved;
  regions.push_back(EnvCopyRegion{mem_buf_.ptr(), image_mem_buf_.ptr(), layout_.mem_stride,
                                  interleaved ? 1 : layout_.mem_stride,
                                  shared ? 0 : layout_.mem_stride,
                                  interleaved ? layout_.mem_pitch : 0, 0});
  output_zero_regions(regions);
  EnvCopyParams p;
  p.mask = mask;
  p.envs = (uint64_t)layout_.num_envs;
  return launch_copy(p, regions);
}

Status CudaBackend::reset(uint64_t /*seed: reserved for randomized starts*/) {
  if (Status st = ctx_->make_current(); !st) return st;
  return copy_reset_image(0);
}

Status CudaBackend::reset(const std::vector<uint8_t>& mask) {
  const int n = layout_.num_envs;
  if ((int)mask.size() != n)
    return make_error(ErrorKind::Usage, "reset mask has " + std::to_string(mask.size()) +
                                            " entries for " + std::to_string(n) + " envs");
  if (Status st = ctx_->make_current(); !st) return st;
  // Staged before the call returns (pageable memory); the launch is ordered after it.
  if (Status st = mask_buf_.upload(mask.data(), mask.size(), 0, stream_.get()); !st) return st;
  return copy_reset_image(mask_buf_.ptr());
}

Status CudaBackend::set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) {
  const int n = layout_.num_envs;
  if (blobs.size() > 1 && (int)blobs.size() != n)
    return make_error(ErrorKind::Usage, "set_reset_state takes 0, 1 or " + std::to_string(n) +
                                            " blobs, got " + std::to_string(blobs.size()));
  // Every blob is decoded (and so checked) on the host before anything reaches the device.
  EnvState image(std::max<int>(1, (int)blobs.size()), cfg_.memory_model, &rom_, MemLayout::EnvMajor,
                 seen_bytes_);
  if (blobs.empty()) {
    if (cfg_.memory_model == MemoryModel::Flat64k)
      image.reset_zero();
    else
      image.reset_dmg();
    if (battery_) image.set_battery(*battery_);
  }
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (Status st = decode_env_state(blobs[i], image, (int)i); !st) {
      if (blobs.size() == 1) return st;
      return make_error(ErrorKind::Input,
                        "reset state " + std::to_string(i) + ": " + st.error().message);
    }
    image.clear_seen((int)i);  // a reset starts an episode: an empty seen() set
  }
  if (Status st = ctx_->make_current(); !st) return st;
  return upload_reset_image(image);
}

Status CudaBackend::gather_env(int env) {
  std::vector<EnvCopyRegion> regions;
  state_regions(stage_soa_, soa_, false, regions);
  EnvCopyParams p;
  p.envs = 1;
  p.src_first = (uint64_t)env;
  if (Status st = launch_copy(p, regions); !st) return st;
  return stage_soa_buf_.download(probe_.soa_block(), stage_soa_buf_.size(), 0, stream_.get());
}

// env's memory slice into probe_ (env-major), not yet synced. Interleaved: gathered into the
// staging slice on the device first (one launch, one copy).
Status CudaBackend::download_env_mem(int env) {
  const uint32_t bytes = layout_.mem_stride;
  if (layout_.mem_layout == MemLayout::EnvMajor)
    return mem_buf_.download(probe_.mem(), bytes, (size_t)env * bytes, stream_.get());
  EnvCopyParams p;
  p.envs = 1;
  p.src_first = (uint64_t)env;
  if (Status st = launch_copy(p, {EnvCopyRegion{stage_mem_buf_.ptr(), mem_buf_.ptr(), bytes, 0, 1,
                                                0, layout_.mem_pitch}});
      !st)
    return st;
  return stage_mem_buf_.download(probe_.mem(), bytes, 0, stream_.get());
}

// probe_'s memory into env's slice (ordered on the stream like download_env_mem).
Status CudaBackend::upload_env_mem(int env) {
  const uint32_t bytes = layout_.mem_stride;
  if (layout_.mem_layout == MemLayout::EnvMajor)
    return mem_buf_.upload(probe_.mem(), bytes, (size_t)env * bytes, stream_.get());
  if (Status st = stage_mem_buf_.upload(probe_.mem(), bytes, 0, stream_.get()); !st) return st;
  EnvCopyParams p;
  p.envs = 1;
  p.dst_first = (uint64_t)env;
  return launch_copy(
      p, {EnvCopyRegion{mem_buf_.ptr(), stage_mem_buf_.ptr(), bytes, 1, 0, layout_.mem_pitch, 0}});
}

Status CudaBackend::fetch_env(int env) {
  if (Status st = check_env(env); !st) return st;
  if (Status st = ctx_->make_current(); !st) return st;
  if (Status st = gather_env(env); !st) return st;
  if (Status st = download_env_mem(env); !st) return st;
  return stream_.synchronize();
}

Result<std::vector<uint8_t>> CudaBackend::save_state(int env) {
  if (Status st = fetch_env(env); !st) return st.take_error();
  return encode_env_state(probe_, 0);
}

Status CudaBackend::load_state(int env, const std::vector<uint8_t>& blob) {
  if (Status st = check_env(env); !st) return st;
  // decode_env_state checks the whole blob before writing: a bad one leaves probe_ and the
  // device untouched.
  if (Status st = decode_env_state(blob, probe_, 0); !st) return st;
  if (Status st = ctx_->make_current(); !st) return st;
  CUstream s = stream_.get();
  if (Status st = stage_soa_buf_.upload(probe_.soa_block(), stage_soa_buf_.size(), 0, s); !st)
    return st;
  if (Status st = upload_env_mem(env); !st) return st;
  std::vector<EnvCopyRegion> regions;
  state_regions(soa_, stage_soa_, true, regions);
  output_zero_regions(regions);
  EnvCopyParams p;
  p.envs = 1;
  p.dst_first = (uint64_t)env;
  return launch_copy(p, regions);
}

Status CudaBackend::copy_state(int src, const std::vector<uint8_t>& dst_mask) {
  if (Status st = check_env(src); !st) return st;
  const int n = layout_.num_envs;
  if ((int)dst_mask.size() != n)
    return make_error(ErrorKind::Usage, "copy_state: mask of " + std::to_string(dst_mask.size()) +
                                            " for " + std::to_string(n) + " envs");
  if (Status st = ctx_->make_current(); !st) return st;
  // Env src is read while the others are written: it is never a destination itself.
  std::vector<uint8_t> mask(dst_mask);
  mask[src] = 0;
  if (Status st = mask_buf_.upload(mask.data(), mask.size(), 0, stream_.get()); !st) return st;
  // Every state array's slot of env src, as a one-slot source every masked env copies.
  GbxState one{};
#define GBX_FIELD_AT(name, size) \
  one.name = reinterpret_cast<decltype(one.name)>(dev_addr(soa_.name) + (uint64_t)src * (size));
  GBX_STATE_FIELDS(GBX_FIELD_AT)
#undef GBX_FIELD_AT
  std::vector<EnvCopyRegion> regions;
  state_regions(soa_, one, true, regions);
  const bool interleaved = layout_.mem_layout == MemLayout::Interleaved;
  const uint64_t src_mem = mem_buf_.ptr() + (uint64_t)src * (interleaved ? 1 : layout_.mem_stride);
  const uint64_t pitch = interleaved ? layout_.mem_pitch : 0;
  regions.push_back(EnvCopyRegion{mem_buf_.ptr(), src_mem, layout_.mem_stride,
                                  interleaved ? 1 : layout_.mem_stride, 0, pitch, pitch});
  output_zero_regions(regions);
  EnvCopyParams p;
  p.mask = mask_buf_.ptr();
  p.envs = (uint64_t)n;
  return launch_copy(p, regions);
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

Result<std::vector<CpuState>> CudaBackend::cpu_states() {
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  const size_t n = (size_t)layout_.num_envs;
  const size_t bytes = register_block_bytes(n);
  if (regs_buf_.size() != bytes) {
    auto dev = DeviceBuffer::alloc(*ctx_, bytes);
    if (!dev) return dev.take_error();
    auto host = PinnedBuffer::alloc(*ctx_, bytes);
    if (!host) return host.take_error();
    regs_buf_ = std::move(*dev);
    regs_host_ = std::move(*host);
  }
  // Packed on the device (the state arrays are far apart), then one copy.
  std::vector<EnvCopyRegion> regions;
  size_t off = 0;
#define GBX_REG_PACK(name, size)                                                                \
  regions.push_back(EnvCopyRegion{regs_buf_.ptr() + off, dev_addr(soa_.name), (uint64_t)(size), \
                                  (uint64_t)(size), (uint64_t)(size)});                         \
  off = align64(off + (size_t)(size)*n);
  GBX_REGISTER_FIELDS(GBX_REG_PACK)
#undef GBX_REG_PACK
  EnvCopyParams cp;
  cp.envs = n;
  if (Status st = launch_copy(cp, regions); !st) return st.take_error();
  if (Status st = regs_buf_.download(regs_host_.data(), bytes, 0, stream_.get()); !st)
    return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  GbxState h{};
  off = 0;
#define GBX_REG_BIND(name, size)                                        \
  h.name = reinterpret_cast<decltype(h.name)>(regs_host_.data() + off); \
  off = align64(off + (size_t)(size)*n);
  GBX_REGISTER_FIELDS(GBX_REG_BIND)
#undef GBX_REG_BIND
  std::vector<CpuState> out(n);
  for (size_t i = 0; i < n; ++i) {
    CpuState& c = out[i];
    c.pc = h.pc[i], c.sp = h.sp[i], c.a = h.a[i], c.f = h.f[i], c.b = h.b[i], c.c = h.c[i];
    c.d = h.d[i], c.e = h.e[i], c.h = h.h[i], c.l = h.l[i], c.ime = h.ime[i];
    c.run_state = h.run_state[i];
    c.cycle_count = h.cycle_count[i], c.instr_count = h.instr_count[i];
    c.trap_kind = h.trap_kind[i], c.trap_pc = h.trap_pc[i], c.trap_opcode = h.trap_opcode[i];
  }
  return out;
}

Status CudaBackend::load_battery(const BatterySave& save) {
  if (cfg_.memory_model != MemoryModel::Dmg)
    return make_error(ErrorKind::Usage, "battery RAM needs memory model dmg");
  if (Status st = ctx_->make_current(); !st) return st;
  battery_ = save;
  // Now, and in every later reset: the current reset image (power-on or loaded) takes it too.
  if (Status st = apply_battery(soa_, mem_buf_.ptr(), layout_.num_envs); !st) return st;
  return apply_battery(image_soa_, image_mem_buf_.ptr(), image_envs_);
}

Status CudaBackend::apply_battery(const GbxState& soa, uint64_t mem, int envs) {
  // The source: one env's cart RAM and clock registers, shared by every env.
  const uint32_t ram = std::min<uint32_t>((uint32_t)battery_->ram.size(), rom_.header.ram_size);
  std::vector<uint8_t> src(ram + GBX_RTC_BYTES, 0);
  std::copy_n(battery_->ram.begin(), ram, src.begin());
  std::copy_n(battery_->rtc_live, 5, src.begin() + ram);
  std::copy_n(battery_->rtc_latched, 5, src.begin() + ram + 5);
  auto buf = DeviceBuffer::alloc(*ctx_, src.size());
  if (!buf) return buf.take_error();
  if (Status st = buf->upload(src.data(), src.size(), 0, stream_.get()); !st) return st;
  std::vector<EnvCopyRegion> regions;
  if (ram)
    regions.push_back(
        EnvCopyRegion{mem + GBX_MEM_CART_RAM, buf->ptr(), ram, layout_.mem_stride, 0});
  regions.push_back(
      EnvCopyRegion{dev_addr(soa.rtc_regs), buf->ptr() + ram, GBX_RTC_BYTES, GBX_RTC_BYTES, 0});
  // A loaded clock starts a new second (EnvState::set_battery).
  regions.push_back(
      EnvCopyRegion{dev_addr(soa.rtc_second_start), dev_addr(soa.cycle_count), 8, 8, 8});
  EnvCopyParams p;
  p.envs = (uint64_t)envs;
  if (Status st = launch_copy(p, regions); !st) return st;
  // `buf` is freed on return: the copy that reads it must be done by then.
  return stream_.synchronize();
}

Result<BatterySave> CudaBackend::read_battery(int env) {
  if (Status st = fetch_env(env); !st) return st.take_error();
  return probe_.battery(0);
}

Result<CpuState> CudaBackend::get_cpu_state(int env) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  if (Status st = gather_env(env); !st) return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  return probe_.cpu_state(0);
}

Status CudaBackend::debug_poke_register(int env, const std::string& reg, uint16_t value) {
  if (Status st = check_env(env); !st) return st;
  CpuState s;
  if (!set_cpu_register(s, reg, value))
    return make_error(ErrorKind::Usage, "unknown register '" + reg + "' (PC SP A F B C D E H L)");
  const int v = get_cpu_register(s, reg);  // masked to the register's width
  const std::pair<const char*, std::pair<const void*, size_t>> fields[] = {
      {"PC", {soa_.pc, 2}}, {"SP", {soa_.sp, 2}}, {"A", {soa_.a, 1}}, {"F", {soa_.f, 1}},
      {"B", {soa_.b, 1}},   {"C", {soa_.c, 1}},   {"D", {soa_.d, 1}}, {"E", {soa_.e, 1}},
      {"H", {soa_.h, 1}},   {"L", {soa_.l, 1}}};
  for (const auto& [name, field] : fields) {
    if (reg != name) continue;
    if (Status st = ctx_->make_current(); !st) return st;
    const uint16_t bytes = (uint16_t)v;  // little-endian: the low byte first
    const uint64_t at = dev_addr(field.first) + (uint64_t)env * field.second;
    if (Status st = soa_buf_.upload(&bytes, field.second, at - soa_buf_.ptr(), stream_.get()); !st)
      return st;
    return stream_.synchronize();
  }
  return make_error(ErrorKind::Usage, "unknown register '" + reg + "'");
}

Result<std::vector<uint8_t>> CudaBackend::read_view(int env, uint32_t lo, uint32_t hi, bool raw) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (lo >= hi || hi > 0x10000)
    return make_error(ErrorKind::Usage, "memory range must satisfy lo < hi <= 0x10000");
  if (!loaded_->read_memory)
    return make_error(ErrorKind::Template,
                      "templates/manifest.json names no read_memory entry point");
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  // The kernel's own read path on the device, one thread per address: only the slice crosses
  // the bus.
  GbxParams p = params(nullptr, layout_.num_envs);
  unsigned flags = raw ? 1u : 0u;  // GBX_READ_RAW (templates/kernel/step.tmpl)
  unsigned char* out_dev = read_buf_.as<unsigned char>();
  void* args[] = {&p, &env, &lo, &hi, &flags, &out_dev};
  if (Status st = launch_kernel(ctx_->driver(), loaded_->read_memory,
                                gbx::launch_shape(hi - lo, 128), args, stream_.get());
      !st)
    return st.take_error();
  std::vector<uint8_t> out(hi - lo);
  if (Status st = read_buf_.download(out.data(), out.size(), 0, stream_.get()); !st)
    return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  return out;
}

Result<std::vector<uint8_t>> CudaBackend::read_memory(int env, uint32_t lo, uint32_t hi) {
  return read_view(env, lo, hi, false);
}

Result<std::vector<uint8_t>> CudaBackend::read_memory_raw(int env, uint32_t lo, uint32_t hi) {
  return read_view(env, lo, hi, true);
}

Result<std::vector<float>> CudaBackend::read_obs(int env) {
  auto bytes = read_section("obs_v0", env);
  if (!bytes) return bytes.take_error();
  std::vector<float> out(bytes->size() / sizeof(float));
  std::memcpy(out.data(), bytes->data(), out.size() * sizeof(float));
  return out;
}

Result<float> CudaBackend::read_reward(int env) {
  auto bytes = read_section("reward", env);
  if (!bytes) return bytes.take_error();
  float r = 0;
  if (bytes->size() == sizeof r) std::memcpy(&r, bytes->data(), sizeof r);
  return r;
}

Result<std::string> CudaBackend::serial_output(int env) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  uint32_t len = 0;
  if (Status st = fetch(&len, dev_addr(soa_.serial_len) + (uint64_t)env * sizeof len, sizeof len);
      !st)
    return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  std::string out(std::min<uint32_t>(len, GBX_SERIAL_CAPACITY), '\0');
  if (!out.empty()) {
    const uint64_t buf = dev_addr(soa_.serial_buf) + (uint64_t)env * GBX_SERIAL_CAPACITY;
    if (Status st = fetch(out.data(), buf, out.size()); !st) return st.take_error();
    if (Status st = stream_.synchronize(); !st) return st.take_error();
  }
  return out;
}

// ---- ROM specialization ---------------------------------------------------------------------
// The cuda side of design.md section 10, from the same generated source as the cpu backend's
// (NVRTC instead of clang). cfg.specialize: the specialized kernel from the start. auto: the
// profiling interpreter (a cached kernel of its own) counts instructions per ROM offset on the
// device for the first N frames; the counts come back in one copy and the plan is made on the
// host; then a background thread compiles (NVRTC) and loads the specialized kernel while steps
// go on with the profiling kernel, counting off. The first step that finds it ready swaps the
// function for the next launch: launches are ordered on one stream and the state ABI is the
// same, so nothing is copied and no step waits for the compile.

Status CudaBackend::check_specialize(const Rom& rom, const BackendConfig& cfg) {
  if (cfg.specialize && cfg.specialize->rom != rom.bytes)
    return make_error(ErrorKind::Usage, "the specialized kernel was made for another ROM (sha256 " +
                                            cfg.specialize->rom_sha256.substr(0, 16) + ")");
  if (cfg.specialize_auto_frames > 0 &&
      (cfg.specialize || cfg.memory_model != MemoryModel::Dmg || cfg.run_mode != RunMode::Frames))
    return make_error(ErrorKind::Usage,
                      "specialize auto needs no other plan, memory model dmg, run mode frames");
  return ok_status();
}

SynthParams CudaBackend::first_tier_params(const BackendConfig& cfg) {
  SynthParams p = synth_params_for(cfg, Device::Cuda, kObsDim);
  if (cfg.specialize_auto_frames > 0) p.profile = true;
  return p;
}

Status CudaBackend::start_profiling() {
  const size_t bytes = rom_.bytes.size() * sizeof(uint32_t);
  auto buf = DeviceBuffer::alloc(*ctx_, bytes);
  if (!buf) {
    Error e = buf.take_error();
    e.message = "allocating " + std::to_string(bytes) +
                " bytes of device memory for the profile counters: " + e.message;
    return e;
  }
  profile_buf_ = std::move(*buf);
  if (Status st = profile_buf_.fill(0, stream_.get()); !st) return st;
  profiling_ = true;
  tier_.start(cfg_.specialize_auto_frames);
  return ok_status();
}

std::string CudaBackend::start_tier() const {
  if (!start_fast_) return "optimized";
  if (optimized_step_ >= 0) return "optimized";
  if (!start_error_.empty()) return "fast (the optimized compile failed: " + start_error_ + ")";
  return "fast";
}

std::function<Result<CudaBackend::TierKernel>(TemplateBundle, SynthParams)>
CudaBackend::tier_builder() const {
  return [ctx = ctx_, sm = ctx_->sm()](TemplateBundle b, SynthParams p) -> Result<TierKernel> {
    KernelCache cache;
    auto k = build_cuda_kernel_for_device(b, p, cache, sm);
    if (!k) return k.take_error();
    // Loaded here too (the driver's context is per thread): the step thread only swaps.
    if (Status st = ctx->make_current(); !st) return st.take_error();
    auto loaded = shared_kernel(*ctx, *k);
    if (!loaded) return loaded.take_error();
    return TierKernel{std::move(*k), std::move(*loaded)};
  };
}

void CudaBackend::compile_optimized_in_background(TemplateBundle bundle, SynthParams p) {
  optimized_compile_ = std::async(
      std::launch::async, [build = tier_builder(), b = std::move(bundle), p = std::move(p)]() {
        return build(std::move(b), std::move(p));
      });
}

void CudaBackend::use_tier_kernel(TierKernel k) {
  kernel_ = std::move(k.kernel);
  loaded_ = std::move(k.loaded);
  if (start_fast_ && optimized_step_ < 0) {
    optimized_step_ = steps_;
    optimized_after_s_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
  }
}

void CudaBackend::specialization_failed(const std::string& why) {
  tier_.fail(why);
  // A quick-compiled kernel is no place to stay: the optimized interpreter follows instead.
  if (!start_fast_ || optimized_step_ >= 0) return;
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) {
    start_error_ = bundle.error().message;
    return;
  }
  compile_optimized_in_background(std::move(*bundle),
                                  synth_params_for(cfg_, Device::Cuda, kObsDim));
}

Status CudaBackend::finish_tier_up() {
  if (tier_.state() == TierState::Compiling) {
    if (auto k = tier_.take_ready(true)) use_tier_kernel(std::move(*k));
    if (tier_.state() == TierState::Failed) specialization_failed(tier_.failure());
  }
  // After a quick start: the optimized interpreter (also in place of a failed specialization).
  take_optimized(true);
  return tier_.outcome();
}

void CudaBackend::take_optimized(bool wait) {
  if (!optimized_compile_.valid()) return;
  if (!wait && optimized_compile_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return;
  Result<TierKernel> k = optimized_compile_.get();
  if (!k) {
    start_error_ = k.error().message;
    return;
  }
  use_tier_kernel(std::move(*k));
}

void CudaBackend::tier_after_step() {
  if (tier_.profile_done_after(cfg_.frames_per_step)) {
    // The one read of the counters: ordered after the step just enqueued.
    std::vector<uint32_t> counts(rom_.bytes.size());
    Status st =
        profile_buf_.download(counts.data(), counts.size() * sizeof(uint32_t), 0, stream_.get());
    if (st) st = stream_.synchronize();
    profiling_ = false;  // later launches get no counters; the ones that had them are done
    profile_buf_ = DeviceBuffer();
    if (!st) return specialization_failed(st.error().message);
    tier_.compile(rom_.bytes, counts, synth_params_for(cfg_, Device::Cuda, kObsDim),
                  tier_builder());
    if (tier_.state() == TierState::Failed) specialization_failed(tier_.failure());
    return;
  }
  if (tier_.state() == TierState::Compiling) {
    if (auto k = tier_.take_ready(false)) return use_tier_kernel(std::move(*k));
    if (tier_.state() == TierState::Failed) return specialization_failed(tier_.failure());
  }
  take_optimized(false);
}

}  // namespace gbx
