// gbx._native: the thin layer between Python and the C++ runtime. It owns one backend and its
// output buffers and hands them to numpy as views (no copy on the cpu backend); the
// Gymnasium API, action codecs and episode bookkeeping are plain Python (python/gbx/).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gbx/engine/generator.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/cpu_backend.h"
#include "gbx/runtime/cuda_backend.h"
#include "gbx/runtime/env_state.h"
#include "gbx/runtime/mgba_backend.h"
#include "gbx/runtime/rom.h"
#include "gbx/runtime/save_state.h"
#include "gbx/runtime/specialize.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NoDeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// gbx::Error -> a Python exception: bad arguments and inputs are ValueError, kernel compile
// errors CompileError (a ValueError: the user's expression is the usual cause), no CUDA device
// NoDeviceError, the rest RuntimeError.
[[noreturn]] void raise(const gbx::Error& e) {
  switch (e.kind) {
    case gbx::ErrorKind::Usage:
    case gbx::ErrorKind::Input:
      throw nb::value_error(e.message.c_str());
    case gbx::ErrorKind::Compile: {
      // The first error line, then the compiler log (a user expression's errors are a few
      // lines; the log repeats the first one).
      std::string msg = e.message;
      std::string d = e.detail;
      if (d.compare(0, msg.size(), msg) == 0) d = d.substr(msg.size());
      while (!d.empty() && d[0] == '\n') d.erase(0, 1);
      if (d.size() > 4000) d = d.substr(0, 4000) + "...";
      if (!d.empty()) msg += "\n" + d;
      throw CompileError(msg);
    }
    case gbx::ErrorKind::NoDevice:
      throw NoDeviceError(e.message);
    default:
      throw std::runtime_error(e.message);
  }
}

template <typename T>
T unwrap(gbx::Result<T> r) {
  if (!r) raise(r.error());
  return std::move(r.value());
}
void check(gbx::Status st) {
  if (!st) raise(st.error());
}

using F32x2 = nb::ndarray<nb::numpy, float, nb::ndim<2>, nb::c_contig>;
using F32x1 = nb::ndarray<nb::numpy, float, nb::ndim<1>, nb::c_contig>;
using U8x1 = nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>, nb::c_contig>;
using ActionsIn = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using MaskIn = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using FramesIn = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

class Native {
 public:
  Native(const std::string& rom_spec, nb::bytes rom_bytes, const std::string& backend, int num_envs,
         int frames_per_step, int release_after_frames, int threads, int device_index,
         const std::string& stage, const std::string& reward, const std::string& done,
         const std::vector<std::string>& track, const std::string& obs_kind,
         const std::string& obs_format, const std::vector<int>& gather, bool render,
         bool tiered_start, const std::string& specialize, const std::string& ppu,
         int64_t seen_capacity, const std::vector<std::pair<int64_t, int64_t>>& hooks) {
    if (rom_bytes.size() > 0) {
      const auto* p = static_cast<const uint8_t*>(rom_bytes.data());
      rom_ = unwrap(gbx::rom_from_bytes(rom_spec.empty() ? "bytes" : rom_spec,
                                        std::vector<uint8_t>(p, p + rom_bytes.size())));
    } else {
      rom_ = unwrap(gbx::load_rom(rom_spec));
    }
    gbx::BackendConfig cfg;
    cfg.num_envs = num_envs;
    cfg.frames_per_step = frames_per_step;
    cfg.release_after_frames = release_after_frames;
    cfg.threads = threads;
    cfg.device_index = device_index;
    const auto st = gbx::parse_stage(stage);
    if (!st) throw nb::value_error(("unknown stage '" + stage + "'").c_str());
    cfg.stage = *st;
    cfg.reward_expr = reward;
    cfg.done_expr = done;
    cfg.track = track;
    if (seen_capacity < 1 || seen_capacity > (int64_t)gbx::kSeenCapacityMax)
      throw nb::value_error(("seen_capacity must be 1.." + std::to_string(gbx::kSeenCapacityMax) +
                             " (got " + std::to_string(seen_capacity) + ")")
                                .c_str());
    cfg.seen_capacity = (uint32_t)seen_capacity;
    for (const auto& [bank, addr] : hooks) {
      if (addr < 0 || addr > 0xFFFF || bank < -1 || bank > 0xFFFF)
        throw nb::value_error(("hook bank:address " + std::to_string(bank) + ":" +
                               std::to_string(addr) + " is outside 0x0000-0xFFFF")
                                  .c_str());
      cfg.hooks.push_back({(int32_t)bank, (uint16_t)addr});
    }
    cfg.tiered_start = tiered_start;
    const auto model = gbx::parse_ppu_model(ppu);
    if (!model) throw nb::value_error(("unknown ppu '" + ppu + "' (line, fifo)").c_str());
    cfg.ppu = *model;
    if (auto s = gbx::apply_specialize_option(specialize, rom_, cfg); !s)
      throw nb::value_error(s.error().message.c_str());
    configure_outputs(cfg, obs_kind, obs_format, gather, render);
    if (backend == "mgba" && (!reward.empty() || !done.empty() || !track.empty()))
      throw nb::value_error(
          "the mgba backend runs no generated kernel, so it has no reward/done expressions");
    if (num_envs < 1)
      throw nb::value_error(
          ("num_envs must be at least 1 (got " + std::to_string(num_envs) + ")").c_str());
    {
      nb::gil_scoped_release release;  // compiling a kernel takes seconds
      auto b = gbx::make_backend(backend, rom_, cfg);
      if (b)
        backend_ = std::move(b.value());
      else
        pending_ = b.take_error();
    }
    raise_pending();
    cpu_ = dynamic_cast<gbx::CpuBackend*>(backend_.get());
    n_ = backend_->num_envs();
    frames_per_step_ = frames_per_step;
    bind_outputs(cfg);
  }

  void reset(uint64_t seed) {
    {
      nb::gil_scoped_release release;
      check_nogil(backend_->reset(seed));
      if (pending_) check_nogil(refresh(std::vector<uint8_t>((size_t)n_, 1)));
    }
    raise_pending();
    gather();
  }

  // The masked envs to their reset state (power-on), the others untouched: the backend's own
  // reset(mask), then their outputs are refreshed from the new state (every backend: cpu and
  // cuda give the same first observation).
  void reset_envs(MaskIn mask, bool gather_now) {
    if ((int)mask.shape(0) != n_)
      throw nb::value_error(("reset mask has " + std::to_string(mask.shape(0)) + " entries for " +
                             std::to_string(n_) + " envs")
                                .c_str());
    std::vector<uint8_t> m(mask.data(), mask.data() + n_);
    {
      nb::gil_scoped_release release;
      check_nogil(backend_->reset(m));
      if (pending_) check_nogil(refresh(m));
    }
    raise_pending();
    if (gather_now) gather();
  }

  // gather_now false: the host block is left as it was (a later call, or gather_outputs(),
  // brings it up to date): one copy of the block per VecEnv.step even with resets and no-ops.
  void step(ActionsIn actions, bool gather_now) {
    if ((int)actions.shape(0) != n_)
      throw nb::value_error(("step: " + std::to_string(actions.shape(0)) + " actions for " +
                             std::to_string(n_) + " envs")
                                .c_str());
    actions_.assign(actions.data(), actions.data() + n_);
    {
      nb::gil_scoped_release release;
      check_nogil(backend_->step(actions_));
      if (pending_) check_nogil(backend_->sync());
    }
    raise_pending();
    if (gather_now) gather();
  }

  // Env i runs frames[i] frames with actions[i] (0: refresh its outputs only; < 0: not
  // touched), all in one backend call (Backend::step_frames); the outputs are gathered.
  void step_frames(ActionsIn actions, FramesIn frames, bool gather_now) {
    if ((int)actions.shape(0) != n_ || (int)frames.shape(0) != n_)
      throw nb::value_error("step_frames: actions and frames need one entry per env");
    actions_.assign(actions.data(), actions.data() + n_);
    std::vector<int32_t> f(frames.data(), frames.data() + n_);
    {
      nb::gil_scoped_release release;
      check_nogil(backend_->step_frames(actions_, f));
      if (pending_) check_nogil(backend_->sync());
    }
    raise_pending();
    if (gather_now) gather();
  }

  // The host block brought up to date (non-cpu backends; the cpu block is the backend's own).
  void gather_outputs() { gather(); }

  F32x2 obs() {
    return F32x2(section_data<float>("obs_v0"), {(size_t)n_, (size_t)kObsDim}, nb::find(this));
  }
  F32x1 reward() { return F32x1(section_data<float>("reward"), {(size_t)n_}, nb::find(this)); }
  U8x1 done() { return U8x1(section_data<uint8_t>("done"), {(size_t)n_}, nb::find(this)); }

  nb::bytes read_memory(int env, uint32_t lo, uint32_t hi) {
    auto v = unwrap(backend_->read_memory(env, lo, hi));
    return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
  }

  nb::dict cpu_state(int env) {
    const gbx::CpuState s = unwrap(backend_->get_cpu_state(env));
    nb::dict d;
    d["pc"] = s.pc;
    d["sp"] = s.sp;
    d["a"] = s.a;
    d["f"] = s.f;
    d["b"] = s.b;
    d["c"] = s.c;
    d["d"] = s.d;
    d["e"] = s.e;
    d["h"] = s.h;
    d["l"] = s.l;
    d["ime"] = s.ime;
    d["run_state"] = s.run_state;
    d["cycle_count"] = s.cycle_count;
    d["instr_count"] = s.instr_count;
    d["trap_kind"] = s.trap_kind;
    return d;
  }

  std::string serial(int env) { return unwrap(backend_->serial_output(env)); }
  std::string name() const { return backend_->name(); }
  std::string kernel_key() const { return backend_->kernel_key(); }
  // cuda tiered start: "fast" | "optimized" | "fast (the optimized compile failed: ...)";
  // "optimized" on the other backends (they have one kernel from the start).
  std::string start_tier() const {
    auto* c = dynamic_cast<gbx::CudaBackend*>(backend_.get());
    return c ? c->start_tier() : "optimized";
  }
  std::string specialize_status() const { return backend_->specialize_status(); }
  void finish_tier_up() {
    {
      nb::gil_scoped_release release;  // a compile takes seconds
      check_nogil(backend_->finish_tier_up());
    }
    raise_pending();
  }
  std::string rom_name() const { return rom_.name; }
  std::string rom_sha256() const { return rom_.sha256; }
  std::vector<std::string> rom_warnings() const { return rom_.warnings; }
  int num_envs() const { return n_; }
  int frames_per_step() const { return frames_per_step_; }
  int obs_dim() const { return kObsDim; }

 private:
  static constexpr int kObsDim = 32;

  // Errors found with the GIL released are raised after it is taken back.
  void check_nogil(gbx::Status st) {
    if (!st && pending_) pending_ = std::move(st);
  }
  void raise_pending() {
    if (pending_) return;
    const gbx::Error e = pending_.take_error();
    pending_ = gbx::ok_status();
    raise(e);
  }

  // The masked envs' outputs from their current state: the stage epilog alone (0 frames).
  gbx::Status refresh(const std::vector<uint8_t>& mask) {
    std::vector<int32_t> frames(mask.size());
    for (size_t i = 0; i < mask.size(); ++i) frames[i] = mask[i] ? 0 : -1;
    return backend_->step_frames({}, frames);
  }

  // Non-cpu backends' outputs into the host block: one bulk copy where the backend has an
  // output block (cuda), else env by env (mgba, the checking backend).
  void gather() {
    if (cpu_) return;
    if (bulk_) {
      const gbx::OutputBlock b = unwrap(backend_->outputs());
      std::memcpy(host_block_.data(), b.data, std::min(b.bytes, host_block_.size()));
      return;
    }
    const gbx::OutputSection* obs = find_section("obs_v0");
    const gbx::OutputSection* rew = find_section("reward");
    const gbx::OutputSection* gat = find_section("gather");
    for (int e = 0; e < n_; ++e) {
      auto o = unwrap(backend_->read_obs(e));
      if (obs && o.size() == (size_t)kObsDim)
        std::memcpy(host_block_.data() + obs->offset + (size_t)e * obs->bytes_per_env, o.data(),
                    sizeof(float) * kObsDim);
      const float r = unwrap(backend_->read_reward(e));
      std::memcpy(host_block_.data() + rew->offset + (size_t)e * sizeof(float), &r, sizeof r);
      if (gat)
        for (size_t k = 0; k < gather_addrs_.size(); ++k) {
          const uint32_t a = gather_addrs_[k];
          host_block_[gat->offset + (size_t)e * gat->bytes_per_env + k] =
              unwrap(backend_->read_memory(e, a, a + 1))[0];
        }
    }
  }

  gbx::Rom rom_;
  std::unique_ptr<gbx::Backend> backend_;
  gbx::CpuBackend* cpu_ = nullptr;
  int n_ = 0;
  int frames_per_step_ = 1;
  std::vector<int32_t> actions_;
  gbx::Status pending_ = gbx::ok_status();

  // ---- epy2: output block views, screen, save states, bulk memory reads ----------------
 public:
  // One output section as a numpy view [num_envs, *shape] of the block (the cpu backend's
  // own buffer; a host copy for the others), overwritten by the next step or reset.
  nb::ndarray<nb::numpy> output(const std::string& name) {
    const gbx::OutputSection* s = find_section(name);
    if (!s) throw nb::value_error(("this env has no '" + name + "' output").c_str());
    std::vector<size_t> shape{(size_t)n_};
    for (int d : s->shape) shape.push_back((size_t)d);
    const nb::dlpack::dtype dt = s->dtype == "f32"   ? nb::dtype<float>()
                                 : s->dtype == "u32" ? nb::dtype<uint32_t>()
                                                     : nb::dtype<uint8_t>();
    return nb::ndarray<nb::numpy>(const_cast<uint8_t*>(block_) + s->offset, shape.size(),
                                  shape.data(), nb::find(this), nullptr, dt);
  }
  std::vector<std::string> output_names() const {
    std::vector<std::string> v;
    for (const auto& s : sections_) v.push_back(s.name);
    return v;
  }

  // env's last complete frame, uint8[144, 160] shade indices 0-3 (a copy).
  nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>> screen(int env) {
    check_index(env);
    auto v = unwrap(backend_->read_screen(env));
    if (v.size() != 144 * 160)
      throw std::runtime_error("the " + backend_->name() + " backend returned a screen of " +
                               std::to_string(v.size()) + " bytes, not 144x160");
    return to_array<uint8_t>(v.data(), {144, 160});
  }

  nb::bytes save_state(int env) {
    check_index(env);
    auto v = unwrap(backend_->save_state(env));
    return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
  }
  nb::list save_states() {
    nb::list out;
    for (int e = 0; e < n_; ++e) out.append(save_state(e));
    return out;
  }
  // Loads the blob into env and refreshes env's outputs from it (every backend), so the next
  // observation read describes the loaded state.
  void load_state(int env, nb::bytes blob) {
    check_index(env);
    check(backend_->load_state(env, to_vector(blob)));
    std::vector<uint8_t> m((size_t)n_, 0);
    m[env] = 1;
    check(refresh(m));
    check(backend_->sync());
    gather();
  }
  // Env src's state into the masked envs on the backend (cuda: no host copy), then their
  // outputs refreshed from it.
  void copy_state(int src, MaskIn mask) {
    check_index(src);
    if ((int)mask.shape(0) != n_)
      throw nb::value_error(("copy_state: mask has " + std::to_string(mask.shape(0)) +
                             " entries for " + std::to_string(n_) + " envs")
                                .c_str());
    std::vector<uint8_t> m(mask.data(), mask.data() + n_);
    m[src] = 0;
    {
      nb::gil_scoped_release release;
      check_nogil(backend_->copy_state(src, m));
      if (pending_) check_nogil(refresh(m));
      if (pending_) check_nogil(backend_->sync());
    }
    raise_pending();
    gather();
  }
  void set_reset_state(const std::vector<nb::bytes>& blobs) {
    std::vector<std::vector<uint8_t>> v;
    for (const auto& b : blobs) v.push_back(to_vector(b));
    check(backend_->set_reset_state(v));
  }

  // Bytes [lo, hi) of every env's bus view in one call: uint8[num_envs, hi - lo].
  nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>> read_memory_all(int64_t lo, int64_t hi) {
    if (lo < 0 || hi > 0x10000 || lo >= hi)
      throw nb::value_error(("memory range must satisfy 0 <= lo < hi <= 0x10000 (got " +
                             std::to_string(lo) + ".." + std::to_string(hi) + ")")
                                .c_str());
    const size_t w = (size_t)(hi - lo);
    auto* buf = new uint8_t[(size_t)n_ * w];
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
    {
      nb::gil_scoped_release release;
      for (int e = 0; e < n_ && pending_; ++e) {
        if (cpu_) {
          check_nogil(
              cpu_->state().read_memory(e, (uint32_t)lo, (uint32_t)hi, false, buf + (size_t)e * w));
        } else {
          auto r = backend_->read_memory(e, (uint32_t)lo, (uint32_t)hi);
          if (!r)
            check_nogil(r.take_error());
          else
            std::memcpy(buf + (size_t)e * w, r.value().data(), w);
        }
      }
    }
    raise_pending();
    const size_t shape[2] = {(size_t)n_, w};
    return nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>>(buf, 2, shape, owner);
  }

 private:
  void configure_outputs(gbx::BackendConfig& cfg, const std::string& obs_kind,
                         const std::string& obs_format, const std::vector<int>& gather,
                         bool render) {
    const auto kind = gbx::parse_obs_kind(obs_kind);
    if (!kind) throw nb::value_error(("unknown obs kind '" + obs_kind + "' (vec, pixels)").c_str());
    const auto fmt = gbx::parse_obs_format(obs_format);
    if (!fmt)
      throw nb::value_error(
          ("unknown obs format '" + obs_format + "' (full, half, packed)").c_str());
    for (int a : gather)
      if (a < 0 || a > 0xFFFF)
        throw nb::value_error(
            ("ram address " + std::to_string(a) + " out of range (0..0xFFFF)").c_str());
    cfg.obs = *kind;
    cfg.obs_format = *fmt;
    cfg.render = render;
    cfg.gather_addrs.assign(gather.begin(), gather.end());
    gather_addrs_ = cfg.gather_addrs;
  }

  // Where outputs are read from: the cpu backend's block itself; a host copy of the block
  // for the others.
  void bind_outputs(const gbx::BackendConfig& cfg) {
    if (cpu_) {
      const gbx::OutputBlock b = unwrap(cpu_->outputs());
      block_ = b.data;
      sections_ = b.sections;
      return;
    }
    auto b = backend_->outputs();
    if (b) {
      bulk_ = true;
      sections_ = b.value().sections;
      host_block_.assign(b.value().data, b.value().data + b.value().bytes);
    } else {
      if (cfg.obs != gbx::ObsKind::Vec)
        throw nb::value_error(
            ("the " + backend_->name() + " backend has no pixels output (use obs vec)").c_str());
      host_block_.assign(gbx::output_layout(cfg, n_, sections_), 0);
    }
    block_ = host_block_.data();
    gather();
  }

  const gbx::OutputSection* find_section(const std::string& name) const {
    for (const auto& s : sections_)
      if (s.name == name) return &s;
    return nullptr;
  }
  template <typename T>
  T* section_data(const std::string& name) {
    const gbx::OutputSection* s = find_section(name);
    if (!s) throw nb::value_error(("this env has no '" + name + "' output").c_str());
    return reinterpret_cast<T*>(const_cast<uint8_t*>(block_) + s->offset);
  }
  void check_index(int env) const {
    if (env < 0 || env >= n_)
      throw nb::index_error(
          ("env " + std::to_string(env) + " out of range (0.." + std::to_string(n_ - 1) + ")")
              .c_str());
  }
  static std::vector<uint8_t> to_vector(const nb::bytes& b) {
    const auto* p = static_cast<const uint8_t*>(b.data());
    return std::vector<uint8_t>(p, p + b.size());
  }
  template <typename T>
  static nb::ndarray<nb::numpy, T, nb::ndim<2>> to_array(const T* src,
                                                         std::array<size_t, 2> shape) {
    auto* buf = new T[shape[0] * shape[1]];
    std::memcpy(buf, src, sizeof(T) * shape[0] * shape[1]);
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<T*>(p); });
    return nb::ndarray<nb::numpy, T, nb::ndim<2>>(buf, 2, shape.data(), owner);
  }

  std::vector<gbx::OutputSection> sections_;
  const uint8_t* block_ = nullptr;
  std::vector<uint8_t> host_block_;
  bool bulk_ = false;
  std::vector<uint16_t> gather_addrs_;
  // ---- end epy2 -------------------------------------------------------------------------

  // ---- fcuda2: CUDA arrays (issue [E].3) ------------------------------------------------
  // The cuda backend's outputs as they are on the device: python/gbx/cuda_arrays.py wraps
  // them in __cuda_array_interface__ / __dlpack__ (kDLCUDA) on the backend's stream. Host
  // arrays are epy2's output views, filled by the backend's one page-locked bulk copy.
 public:
  // (name, device address, shape [num_envs, *per-env], dtype) of every output section.
  nb::list cuda_outputs() {
    const gbx::OutputBlock b = cuda()->device_outputs();
    nb::list out;
    for (const gbx::OutputSection& sec : b.sections) {
      nb::list shape;
      shape.append(n_);
      for (int d : sec.shape) shape.append(d);
      out.append(nb::make_tuple(sec.name, (uint64_t)(uintptr_t)(b.data + sec.offset),
                                nb::tuple(shape), sec.dtype));
    }
    return out;
  }
  // One section as a DLPack capsule ("dltensor", kDLCUDA); the caller orders streams first.
  nb::ndarray<> cuda_view(const std::string& name) {
    const gbx::OutputBlock b = cuda()->device_outputs();
    const gbx::OutputSection* sec = b.find(name);
    if (!sec) throw nb::value_error(("this env has no '" + name + "' output").c_str());
    std::vector<size_t> shape{(size_t)n_};
    for (int d : sec->shape) shape.push_back((size_t)d);
    const nb::dlpack::dtype dt = sec->dtype == "f32" ? nb::dtype<float>() : nb::dtype<uint8_t>();
    return nb::ndarray<>(const_cast<uint8_t*>(b.data + sec->offset), shape.size(), shape.data(),
                         nb::find(this), nullptr, dt, nb::device::cuda::value,
                         cuda()->context().index());
  }
  int cuda_device() { return cuda()->context().index(); }
  // The CUstream every step runs on, as an int.
  uint64_t cuda_stream() { return (uint64_t)(uintptr_t)cuda()->stream(); }
  // `consumer` (a CUstream; 0 = the legacy default stream) waits on the device, through an
  // event, for the work enqueued on the backend's stream so far; the host does not wait.
  void cuda_stream_wait(uint64_t consumer) {
    check(cuda()->stream_wait(reinterpret_cast<CUstream>((uintptr_t)consumer)));
  }
  // Every env's registers and counters, one array each (cuda: one launch, one copy).
  nb::dict registers() {
    std::vector<gbx::CpuState> st;
    {
      nb::gil_scoped_release release;
      auto r = backend_->cpu_states();
      if (r)
        st = std::move(r.value());
      else
        check_nogil(r.take_error());
    }
    raise_pending();
    nb::dict out;
    using S = const gbx::CpuState&;
    out["pc"] = column<uint16_t>(st, [](S c) { return c.pc; });
    out["sp"] = column<uint16_t>(st, [](S c) { return c.sp; });
    out["a"] = column<uint8_t>(st, [](S c) { return c.a; });
    out["f"] = column<uint8_t>(st, [](S c) { return c.f; });
    out["b"] = column<uint8_t>(st, [](S c) { return c.b; });
    out["c"] = column<uint8_t>(st, [](S c) { return c.c; });
    out["d"] = column<uint8_t>(st, [](S c) { return c.d; });
    out["e"] = column<uint8_t>(st, [](S c) { return c.e; });
    out["h"] = column<uint8_t>(st, [](S c) { return c.h; });
    out["l"] = column<uint8_t>(st, [](S c) { return c.l; });
    out["ime"] = column<uint8_t>(st, [](S c) { return c.ime; });
    out["run_state"] = column<uint8_t>(st, [](S c) { return c.run_state; });
    out["cycle_count"] = column<int64_t>(st, [](S c) { return c.cycle_count; });
    out["instr_count"] = column<int64_t>(st, [](S c) { return c.instr_count; });
    out["trap_kind"] = column<uint8_t>(st, [](S c) { return c.trap_kind; });
    return out;
  }

 private:
  // One field of every env's CpuState as a numpy array that owns its memory.
  template <typename T, typename F>
  static nb::ndarray<nb::numpy, T, nb::ndim<1>> column(const std::vector<gbx::CpuState>& st,
                                                       F get) {
    auto* v = new std::vector<T>(st.size());
    for (size_t i = 0; i < st.size(); ++i) (*v)[i] = (T)get(st[i]);
    nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::ndarray<nb::numpy, T, nb::ndim<1>>(v->data(), {v->size()}, owner);
  }
  gbx::CudaBackend* cuda() const {
    auto* c = dynamic_cast<gbx::CudaBackend*>(backend_.get());
    if (!c)
      throw nb::value_error(
          ("device arrays need the cuda backend (this is " + backend_->name() + ")").c_str());
    return c;
  }
  // ---- end fcuda2 -----------------------------------------------------------------------
};

// ---- epyboy: gbx.pyboy_compat (PyBoy state import) ------------------------------------------
// Only what the importer cannot do in Python: the DMG post-boot state of a ROM as a GBX save
// state (the baseline whose fields the importer overwrites), the ROM bytes behind a spec, and
// the per-env memory offsets. Loading and saving go through Backend.load_state/save_state.
namespace pyboy_compat {

gbx::Rom rom_of(const std::string& spec, nb::bytes bytes) {
  if (bytes.size() == 0) return unwrap(gbx::load_rom(spec));
  const auto* p = static_cast<const uint8_t*>(bytes.data());
  return unwrap(gbx::rom_from_bytes(spec.empty() ? "bytes" : spec,
                                    std::vector<uint8_t>(p, p + bytes.size())));
}

nb::bytes post_boot_state(const std::string& spec, nb::bytes rom_bytes) {
  const gbx::Rom rom = rom_of(spec, rom_bytes);
  gbx::EnvState state(1, gbx::MemoryModel::Dmg, &rom);
  state.reset_dmg();
  const std::vector<uint8_t> blob = gbx::encode_env_state(state, 0);
  return nb::bytes(reinterpret_cast<const char*>(blob.data()), blob.size());
}

nb::bytes rom_bytes(const std::string& spec) {
  const gbx::Rom rom = unwrap(gbx::load_rom(spec));
  return nb::bytes(reinterpret_cast<const char*>(rom.bytes.data()), rom.bytes.size());
}

void register_functions(nb::module_& m) {
  m.def("post_boot_state", &post_boot_state, "rom"_a, "rom_bytes"_a = nb::bytes(""),
        "The DMG post-boot state of `rom` as a GBX save-state blob (no kernel is compiled).");
  m.def("rom_bytes", &rom_bytes, "rom"_a, "The bytes of a ROM spec (path or builtin:NAME).");
  m.attr("MEM_VRAM") = GBX_MEM_VRAM;
  m.attr("MEM_WRAM") = GBX_MEM_WRAM;
  m.attr("MEM_OAM") = GBX_MEM_OAM;
  m.attr("MEM_IO") = GBX_MEM_IO;
  m.attr("MEM_CART_RAM") = GBX_MEM_CART_RAM;
  m.attr("SAVE_STATE_VERSION") = gbx::kSaveStateVersion;
}

}  // namespace pyboy_compat
// ---- end epyboy -----------------------------------------------------------------------------

}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "GBX native layer: backends, their output buffers, kernel compilation";
  nb::exception<CompileError>(m, "CompileError", PyExc_ValueError);
  nb::exception<NoDeviceError>(m, "NoDeviceError", PyExc_RuntimeError);

  m.def(
      "set_template_root", [](const std::string& p) { gbx::TemplateBundle::set_default_root(p); },
      "path"_a, "Templates the kernels are generated from (the package's own copy).");
  m.def("mgba_built_in", &gbx::mgba_built_in,
        "Whether this build has the mgba device (built where libmgba-dev was installed).");
  m.def("template_root", []() { return gbx::TemplateBundle::default_root().string(); });
  m.attr("ABI_VERSION") = GBX_ABI_VERSION;
  m.attr("USER_TRACK_MAX") = GBX_USER_TRACK_MAX;
  m.attr("SEEN_CAPACITY_MAX") = gbx::kSeenCapacityMax;
  m.attr("MAX_HOOKS") = gbx::kMaxHooks;

  nb::class_<Native>(m, "Backend")
      .def(nb::init<const std::string&, nb::bytes, const std::string&, int, int, int, int, int,
                    const std::string&, const std::string&, const std::string&,
                    const std::vector<std::string>&, const std::string&, const std::string&,
                    const std::vector<int>&, bool, bool, const std::string&, const std::string&,
                    int64_t, const std::vector<std::pair<int64_t, int64_t>>&>(),
           "rom"_a, "rom_bytes"_a = nb::bytes(""), "backend"_a = "cpu", "num_envs"_a = 1,
           "frames_per_step"_a = 1, "release_after_frames"_a = -1, "threads"_a = 0,
           "device_index"_a = 0, "stage"_a = "full_step", "reward"_a = "", "done"_a = "",
           "track"_a = std::vector<std::string>(), "obs"_a = "vec", "obs_format"_a = "full",
           "gather"_a = std::vector<int>(), "render"_a = false, "tiered_start"_a = false,
           "specialize"_a = "off", "ppu"_a = "line", "seen_capacity"_a = 4096,
           "hooks"_a = std::vector<std::pair<int64_t, int64_t>>())
      .def("reset", &Native::reset, "seed"_a = 0)
      .def("reset_envs", &Native::reset_envs, "mask"_a, "gather"_a = true)
      .def("step", &Native::step, "actions"_a, "gather"_a = true)
      .def("step_frames", &Native::step_frames, "actions"_a, "frames"_a, "gather"_a = true)
      .def("gather_outputs", &Native::gather_outputs)
      .def_prop_ro("obs", &Native::obs)
      .def_prop_ro("reward", &Native::reward)
      .def_prop_ro("done", &Native::done)
      .def("read_memory", &Native::read_memory, "env"_a, "lo"_a, "hi"_a)
      .def("cpu_state", &Native::cpu_state, "env"_a)
      .def("serial", &Native::serial, "env"_a)
      .def_prop_ro("name", &Native::name)
      .def_prop_ro("kernel_key", &Native::kernel_key)
      .def_prop_ro("start_tier", &Native::start_tier)
      .def_prop_ro("specialize_status", &Native::specialize_status)
      .def("finish_tier_up", &Native::finish_tier_up)
      .def_prop_ro("rom_name", &Native::rom_name)
      .def_prop_ro("rom_sha256", &Native::rom_sha256)
      .def_prop_ro("rom_warnings", &Native::rom_warnings)
      .def_prop_ro("num_envs", &Native::num_envs)
      .def_prop_ro("frames_per_step", &Native::frames_per_step)
      .def_prop_ro("obs_dim", &Native::obs_dim)
      // epy2: output views, screen, save states, bulk memory reads
      .def("output", &Native::output, "name"_a)
      .def_prop_ro("output_names", &Native::output_names)
      .def("screen", &Native::screen, "env"_a)
      .def("save_state", &Native::save_state, "env"_a)
      .def("save_states", &Native::save_states)
      .def("load_state", &Native::load_state, "env"_a, "blob"_a)
      .def("set_reset_state", &Native::set_reset_state, "blobs"_a)
      .def("copy_state", &Native::copy_state, "src"_a, "mask"_a)
      .def("read_memory_all", &Native::read_memory_all, "lo"_a, "hi"_a)
      // fcuda2: the cuda backend's device arrays and bulk registers
      .def("cuda_outputs", &Native::cuda_outputs)
      .def("cuda_view", &Native::cuda_view, "name"_a)
      .def_prop_ro("cuda_device", &Native::cuda_device)
      .def_prop_ro("cuda_stream", &Native::cuda_stream)
      .def("cuda_stream_wait", &Native::cuda_stream_wait, "consumer"_a)
      .def("registers", &Native::registers);
  pyboy_compat::register_functions(m);  // epyboy
}
