// cuda backend, state I/O: reset images, save states, battery saves, and the reads of one env
// (registers packed for all envs at once, memory, screen, observations, serial output).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda_backend_internal.h"
#include "gbx/engine/specialize.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/states/save_state.h"
#include "gbx/runtime/states/state_fields.h"

namespace gbx {

using cuda_detail::dev_addr;

namespace {

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
  if (Status st = decode_env_state(blob, probe_, 0, env); !st) return st;
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

}  // namespace gbx
