// cuda backend. Stages of create(), top to bottom: driver -> context -> kernel (cache or
// NVRTC) -> module -> buffers -> reset -> warm-up. Everything after create() runs on one
// stream, so reads are ordered after the steps enqueued before them.
#include "gbx/runtime/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace gbx {

constexpr int kObsDim = 32;  // obs_v0

// A loaded module and its entry point. Shared by every backend on the same device running the
// same kernel, so a process that creates many backends loads each module once.
struct CudaLoadedKernel {
  CudaModule module;
  CUfunction function = nullptr;
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

Result<std::shared_ptr<CudaLoadedKernel>> shared_kernel(const CudaContext& ctx,
                                                        const CudaDeviceKernel& k) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto id = std::make_pair(ctx.index(), k.build.build.key + "/" + k.image_file);
  if (auto it = r.kernels.find(id); it != r.kernels.end()) return it->second;
  auto mod = CudaModule::load(ctx, k.image, k.target.cubin ? ModuleImage::Cubin : ModuleImage::Ptx);
  if (!mod) {
    Error e = mod.take_error();
    e.message = "loading " + k.image_file + " of kernel " + k.build.build.key.substr(0, 12) + ": " +
                e.message + driver_hint(ctx, e);
    return e;
  }
  auto fn = mod->function(k.build.build.source.entry_point);
  if (!fn) return fn.take_error();
  auto loaded = std::make_shared<CudaLoadedKernel>();
  loaded->module = std::move(*mod);
  loaded->function = *fn;
  r.kernels[id] = loaded;
  return loaded;
}

uint64_t dev_addr(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(const Rom& rom, const BackendConfig& cfg) {
  // The driver first: without one, fail in milliseconds and never start a compile.
  auto drv = CudaDriver::get();
  if (!drv) return drv.take_error();
  if (cfg.frames_per_step < 1) return make_error(ErrorKind::Usage, "--frames must be at least 1");
  // The host builds every reset in an EnvState of the same size before uploading it.
  if (Status st = check_env_count(cfg.num_envs, cfg.memory_model, rom.header.ram_size); !st)
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
  const SynthParams p = synth_params_for(cfg, Device::Cuda, kObsDim);
  KernelCache cache;
  auto k = build_cuda_kernel_for_device(*bundle, p, cache, c.sm());
  if (!k) return k.take_error();
  b->kernel_ = std::move(*k);
  auto loaded = shared_kernel(c, b->kernel_);
  if (!loaded) return loaded.take_error();
  b->loaded_ = std::move(*loaded);
  b->shape_ = throughput_launch_shape({c.multiprocessors(), c.max_threads_per_block()},
                                      cfg.num_envs, cfg.block_size);
  auto stream = CudaStream::create(c);
  if (!stream) return stream.take_error();
  b->stream_ = std::move(*stream);

  b->layout_ = make_layout(cfg.num_envs, cfg.memory_model, rom.header.ram_size);
  const size_t n = (size_t)cfg.num_envs;
  struct Alloc {
    DeviceBuffer* buf;
    size_t bytes;
    const char* what;
  };
  for (const Alloc& a : {Alloc{&b->soa_buf_, b->layout_.soa_bytes, "the register arrays"},
                         Alloc{&b->mem_buf_, b->layout_.mem_bytes, "env memory"},
                         Alloc{&b->rom_buf_, rom.bytes.size(), "the ROM"},
                         Alloc{&b->actions_buf_, n * sizeof(int32_t), "actions"},
                         Alloc{&b->obs_buf_, n * kObsDim * sizeof(float), "observations"},
                         Alloc{&b->reward_buf_, n * sizeof(float), "rewards"}}) {
    auto buf = DeviceBuffer::alloc(c, a.bytes);
    if (!buf) {
      Error e = buf.take_error();
      e.message = "allocating " + std::to_string(a.bytes) + " bytes of device memory for " +
                  a.what + " (" + std::to_string(n) + " envs): " + e.message;
      return e;
    }
    *a.buf = std::move(*buf);
  }
  b->layout_.bind(b->soa_, b->soa_buf_.ptr());
  // The shared ROM: one read-only copy for every env, uploaded once.
  if (Status st = b->rom_buf_.upload(rom.bytes.data(), rom.bytes.size(), 0, b->stream_.get()); !st)
    return st.take_error();
  b->probe_ = EnvState(1, cfg.memory_model, &b->rom_);
  if (Status st = b->reset(0); !st) return st.take_error();
  if (Status st = b->warm_up(); !st) return st.take_error();
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
  p.mem_stride = layout_.mem_stride;
  p.cart_ram_size = rom_.header.ram_size;
  p.num_envs = num_envs;
  p.frames = cfg_.frames_per_step;
  p.instr_budget = cfg_.instructions_per_step;
  p.actions = actions;
  p.obs = obs_buf_.as<float>();
  p.reward = reward_buf_.as<float>();
  p.obs_dim = kObsDim;
  return p;
}

Status CudaBackend::reset(uint64_t /*seed: reserved for randomized starts*/) {
  if (Status st = ctx_->make_current(); !st) return st;
  EnvState host(layout_.num_envs, cfg_.memory_model, &rom_);
  if (cfg_.memory_model == MemoryModel::Flat64k)
    host.reset_zero();
  else
    host.reset_dmg();
  const std::vector<float> zeros((size_t)layout_.num_envs * kObsDim, 0.0f);
  CUstream s = stream_.get();
  if (Status st = soa_buf_.upload(host.soa_block(), layout_.soa_bytes, 0, s); !st) return st;
  if (Status st = mem_buf_.upload(host.mem(), layout_.mem_bytes, 0, s); !st) return st;
  if (Status st = obs_buf_.upload(zeros.data(), obs_buf_.size(), 0, s); !st) return st;
  if (Status st = reward_buf_.upload(zeros.data(), reward_buf_.size(), 0, s); !st) return st;
  // `host` and `zeros` die on return; pageable copies may still be reading them until then.
  return stream_.synchronize();
}

Status CudaBackend::step(const std::vector<int32_t>& actions) {
  const int n = layout_.num_envs;
  if (!actions.empty() && (int)actions.size() != n)
    return make_error(ErrorKind::Usage, "step: " + std::to_string(actions.size()) +
                                            " actions for " + std::to_string(n) + " envs");
  if (Status st = ctx_->make_current(); !st) return st;
  const int* dev_actions = nullptr;
  if (!actions.empty()) {
    // A copy from pageable memory is staged before the call returns, so the caller may reuse
    // `actions` at once; the launch below is ordered after it on the same stream.
    if (Status st = actions_buf_.upload(actions.data(), n * sizeof(int32_t), 0, stream_.get()); !st)
      return st;
    dev_actions = actions_buf_.as<const int>();
  }
  GbxParams p = params(dev_actions, n);
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

Result<CpuState> CudaBackend::get_cpu_state(int env) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  CpuState s;
  // One small copy per register field: only this env's bytes cross the bus.
#define GBX_FETCH(field)                                                                        \
  static_assert(sizeof(s.field) == sizeof(*soa_.field), "CpuState." #field " mirrors the ABI"); \
  if (Status st = fetch(&s.field, dev_addr(soa_.field) + (uint64_t)env * sizeof(s.field),       \
                        sizeof(s.field));                                                       \
      !st)                                                                                      \
    return st.take_error();
  GBX_FETCH(pc)
  GBX_FETCH(sp)
  GBX_FETCH(a)
  GBX_FETCH(f)
  GBX_FETCH(b)
  GBX_FETCH(c)
  GBX_FETCH(d)
  GBX_FETCH(e)
  GBX_FETCH(h)
  GBX_FETCH(l)
  GBX_FETCH(ime)
  GBX_FETCH(run_state)
  GBX_FETCH(cycle_count)
  GBX_FETCH(instr_count)
  GBX_FETCH(trap_kind)
  GBX_FETCH(trap_pc)
  GBX_FETCH(trap_opcode)
#undef GBX_FETCH
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  return s;
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

Result<std::vector<uint8_t>> CudaBackend::read_memory(int env, uint32_t lo, uint32_t hi) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (lo >= hi || hi > 0x10000)
    return make_error(ErrorKind::Usage, "memory range must satisfy lo < hi <= 0x10000");
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  const uint64_t slice = mem_buf_.ptr() + (uint64_t)env * layout_.mem_stride;
  uint8_t* probe_mem = probe_.mem(0);

  // Memory offsets [begin, end) of this env's slice that addresses [lo, hi) can read.
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  auto region = [&](uint32_t a0, uint32_t a1, uint32_t base) {  // a plain mapped region
    const uint32_t x = std::max(lo, a0), y = std::min(hi, a1);
    if (x < y) spans.emplace_back(base + (x - a0), base + (y - a0));
  };
  if (cfg_.memory_model == MemoryModel::Flat64k) {
    spans.emplace_back(lo, hi);
  } else {
    // The peek below needs this env's banking, timer and PPU fields: one element of every
    // SoA array except the serial buffer.
    const auto& sizes = state_field_sizes();
    constexpr size_t kFields = sizeof(GbxState) / sizeof(void*);
    uint64_t dev[kFields], host[kFields];
    std::memcpy(dev, &soa_, sizeof dev);
    std::memcpy(host, &probe_.soa(), sizeof host);
    for (size_t i = 0; i < kFields && i < sizes.size(); ++i) {
      if (dev[i] == dev_addr(soa_.serial_buf)) continue;
      if (Status st = fetch(reinterpret_cast<void*>(static_cast<uintptr_t>(host[i])),
                            dev[i] + (uint64_t)env * sizes[i], sizes[i]);
          !st)
        return st.take_error();
    }
    region(0x8000, 0xA000, GBX_MEM_VRAM);
    if (rom_.header.ram_size && lo < 0xC000 && hi > 0xA000)  // banked: the whole RAM
      spans.emplace_back(GBX_MEM_CART_RAM, GBX_MEM_CART_RAM + rom_.header.ram_size);
    if (lo < 0xFE00 && hi > 0xC000) {
      const uint32_t x = std::max(lo, 0xC000u), y = std::min(hi, 0xFE00u);
      // Echo RAM (0xE000-0xFDFF) repeats WRAM: a range crossing 0xE000 wraps around.
      const bool wraps = x < 0xE000 && y > 0xE000;
      const uint32_t ox = (x - 0xC000) & 0x1FFF, oy = ((y - 1 - 0xC000) & 0x1FFF) + 1;
      if (wraps || ox >= oy)
        spans.emplace_back(GBX_MEM_WRAM, GBX_MEM_WRAM + 0x2000);
      else
        spans.emplace_back(GBX_MEM_WRAM + ox, GBX_MEM_WRAM + oy);
    }
    region(0xFE00, 0xFF00, GBX_MEM_OAM);
    // I/O reads (LY, STAT) combine several registers: always take the whole 256-byte page.
    spans.emplace_back(GBX_MEM_IO, GBX_MEM_IO + 0x100);
  }
  for (const auto& [begin, end] : spans)
    if (Status st = fetch(probe_mem + begin, slice + begin, end - begin); !st)
      return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();

  std::vector<uint8_t> out(hi - lo);
  for (uint32_t a = lo; a < hi; ++a) out[a - lo] = probe_.peek(0, a);
  return out;
}

Result<std::vector<float>> CudaBackend::read_obs(int env) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  std::vector<float> out(kObsDim);
  const size_t bytes = kObsDim * sizeof(float);
  if (Status st = obs_buf_.download(out.data(), bytes, (size_t)env * bytes, stream_.get()); !st)
    return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
  return out;
}

Result<float> CudaBackend::read_reward(int env) {
  if (Status st = check_env(env); !st) return st.take_error();
  if (Status st = ctx_->make_current(); !st) return st.take_error();
  float r = 0;
  if (Status st = reward_buf_.download(&r, sizeof r, (size_t)env * sizeof r, stream_.get()); !st)
    return st.take_error();
  if (Status st = stream_.synchronize(); !st) return st.take_error();
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

}  // namespace gbx
