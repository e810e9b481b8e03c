// gbx._native: the thin layer between Python and the C++ runtime. It owns one backend and its
// output buffers and hands them to numpy as views (no copy on the cpu backend); the
// Gymnasium API, action codecs and episode bookkeeping are plain Python (python/gbx/).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gbx/engine/generator.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/cpu_backend.h"
#include "gbx/runtime/env_state.h"
#include "gbx/runtime/rom.h"
#include "gbx/runtime/save_state.h"

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

class Native {
 public:
  Native(const std::string& rom_spec, nb::bytes rom_bytes, const std::string& backend, int num_envs,
         int frames_per_step, int release_after_frames, int threads, int device_index,
         const std::string& stage, const std::string& reward, const std::string& done,
         const std::vector<std::string>& track) {
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
    if (backend == "mgba" && (!reward.empty() || !done.empty() || !track.empty()))
      throw nb::value_error(
          "the mgba backend runs no generated kernel, so it has no reward/done expressions");
    if (backend == "cuda" && !done.empty())
      throw nb::value_error(
          "the cuda backend has no done output yet (it needs a device buffer for it); "
          "use max_episode_frames, or the cpu device");
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
    if (!cpu_) {
      // Other backends return outputs one env at a time (read_obs); they are gathered here
      // after every step until they offer bulk views.
      obs_.assign((size_t)n_ * kObsDim, 0.0f);
      reward_.assign((size_t)n_, 0.0f);
      done_.assign((size_t)n_, 0);
    }
  }

  void reset(uint64_t seed) {
    {
      nb::gil_scoped_release release;
      check_nogil(backend_->reset(seed));
      if (cpu_) check_nogil(refresh(std::vector<uint8_t>((size_t)n_, 1)));
    }
    raise_pending();
    gather();
  }

  // The masked envs to their reset state (power-on), the others untouched: the backend's own
  // reset(mask); the cpu backend then refreshes their outputs from the new state.
  void reset_envs(MaskIn mask) {
    if ((int)mask.shape(0) != n_)
      throw nb::value_error(("reset mask has " + std::to_string(mask.shape(0)) + " entries for " +
                             std::to_string(n_) + " envs")
                                .c_str());
    std::vector<uint8_t> m(mask.data(), mask.data() + n_);
    {
      nb::gil_scoped_release release;
      check_nogil(backend_->reset(m));
      if (cpu_) check_nogil(refresh(m));
    }
    raise_pending();
    gather();
  }

  void step(ActionsIn actions) {
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
    gather();
  }

  // `frames` frames (0: refresh outputs only) on the masked envs (cpu backend).
  void step_envs(ActionsIn actions, int frames, MaskIn mask) {
    if (!cpu_)
      throw std::runtime_error("step_envs needs the cpu backend (not " + backend_->name() + ")");
    if ((int)actions.shape(0) != n_ || (int)mask.shape(0) != n_)
      throw nb::value_error("step_envs: actions and mask need one entry per env");
    actions_.assign(actions.data(), actions.data() + n_);
    std::vector<uint8_t> m(mask.data(), mask.data() + n_);
    {
      nb::gil_scoped_release release;
      check_nogil(cpu_->step_envs(actions_, frames, m));
    }
    raise_pending();
  }

  F32x2 obs() {
    return F32x2(cpu_ ? cpu_->obs_data() : obs_.data(), {(size_t)n_, (size_t)kObsDim},
                 nb::find(this));
  }
  F32x1 reward() {
    return F32x1(cpu_ ? cpu_->reward_data() : reward_.data(), {(size_t)n_}, nb::find(this));
  }
  U8x1 done() {
    return U8x1(cpu_ ? cpu_->done_data() : done_.data(), {(size_t)n_}, nb::find(this));
  }

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
  std::string rom_name() const { return rom_.name; }
  std::string rom_sha256() const { return rom_.sha256; }
  int num_envs() const { return n_; }
  int frames_per_step() const { return frames_per_step_; }
  int obs_dim() const { return kObsDim; }
  gbx::Backend& backend() { return *backend_; }  // for the module functions below

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

  gbx::Status refresh(const std::vector<uint8_t>& mask) { return cpu_->step_envs({}, 0, mask); }

  void gather() {
    if (cpu_) return;
    for (int e = 0; e < n_; ++e) {
      auto o = unwrap(backend_->read_obs(e));
      if (o.size() == (size_t)kObsDim)
        std::memcpy(obs_.data() + (size_t)e * kObsDim, o.data(), sizeof(float) * kObsDim);
      reward_[e] = unwrap(backend_->read_reward(e));
    }
  }

  gbx::Rom rom_;
  std::unique_ptr<gbx::Backend> backend_;
  gbx::CpuBackend* cpu_ = nullptr;
  int n_ = 0;
  int frames_per_step_ = 1;
  std::vector<int32_t> actions_;
  std::vector<float> obs_, reward_;
  std::vector<uint8_t> done_;
  gbx::Status pending_ = gbx::ok_status();
};

// ---- gbx.pyboy_compat (PyBoy state import) -------------------------------------------------
// Only what the importer cannot do in Python: the DMG post-boot state of a ROM as a GBX save
// state (the baseline whose fields the importer overwrites), the ROM bytes behind a spec, the
// per-env memory offsets, and loading a blob into one env.
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

void load_state(Native& n, int env, nb::bytes blob) {
  const auto* p = static_cast<const uint8_t*>(blob.data());
  check(n.backend().load_state(env, std::vector<uint8_t>(p, p + blob.size())));
}

nb::bytes save_state(Native& n, int env) {
  const std::vector<uint8_t> blob = unwrap(n.backend().save_state(env));
  return nb::bytes(reinterpret_cast<const char*>(blob.data()), blob.size());
}

void register_functions(nb::module_& m) {
  m.def("post_boot_state", &post_boot_state, "rom"_a, "rom_bytes"_a = nb::bytes(""),
        "The DMG post-boot state of `rom` as a GBX save-state blob (no kernel is compiled).");
  m.def("rom_bytes", &rom_bytes, "rom"_a, "The bytes of a ROM spec (path or builtin:NAME).");
  m.def("pyboy_load_state", &load_state, "backend"_a, "env"_a, "blob"_a,
        "Loads a GBX save-state blob into one env of a backend.");
  m.def("pyboy_save_state", &save_state, "backend"_a, "env"_a,
        "One env's GBX save-state blob (the importer's tests compare raw memory with it).");
  m.attr("MEM_VRAM") = GBX_MEM_VRAM;
  m.attr("MEM_WRAM") = GBX_MEM_WRAM;
  m.attr("MEM_OAM") = GBX_MEM_OAM;
  m.attr("MEM_IO") = GBX_MEM_IO;
  m.attr("MEM_CART_RAM") = GBX_MEM_CART_RAM;
  m.attr("SAVE_STATE_VERSION") = gbx::kSaveStateVersion;
}

}  // namespace pyboy_compat
// ---- end gbx.pyboy_compat -------------------------------------------------------------------

}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "GBX native layer: backends, their output buffers, kernel compilation";
  nb::exception<CompileError>(m, "CompileError", PyExc_ValueError);
  nb::exception<NoDeviceError>(m, "NoDeviceError", PyExc_RuntimeError);

  m.def(
      "set_template_root", [](const std::string& p) { gbx::TemplateBundle::set_default_root(p); },
      "path"_a, "Templates the kernels are generated from (the package's own copy).");
  m.def("template_root", []() { return gbx::TemplateBundle::default_root().string(); });
  m.attr("ABI_VERSION") = GBX_ABI_VERSION;
  m.attr("USER_TRACK_MAX") = GBX_USER_TRACK_MAX;

  nb::class_<Native>(m, "Backend")
      .def(nb::init<const std::string&, nb::bytes, const std::string&, int, int, int, int, int,
                    const std::string&, const std::string&, const std::string&,
                    const std::vector<std::string>&>(),
           "rom"_a, "rom_bytes"_a = nb::bytes(""), "backend"_a = "cpu", "num_envs"_a = 1,
           "frames_per_step"_a = 1, "release_after_frames"_a = -1, "threads"_a = 0,
           "device_index"_a = 0, "stage"_a = "full_step", "reward"_a = "", "done"_a = "",
           "track"_a = std::vector<std::string>())
      .def("reset", &Native::reset, "seed"_a = 0)
      .def("reset_envs", &Native::reset_envs, "mask"_a)
      .def("step", &Native::step, "actions"_a)
      .def("step_envs", &Native::step_envs, "actions"_a, "frames"_a, "mask"_a)
      .def_prop_ro("obs", &Native::obs)
      .def_prop_ro("reward", &Native::reward)
      .def_prop_ro("done", &Native::done)
      .def("read_memory", &Native::read_memory, "env"_a, "lo"_a, "hi"_a)
      .def("cpu_state", &Native::cpu_state, "env"_a)
      .def("serial", &Native::serial, "env"_a)
      .def_prop_ro("name", &Native::name)
      .def_prop_ro("kernel_key", &Native::kernel_key)
      .def_prop_ro("rom_name", &Native::rom_name)
      .def_prop_ro("rom_sha256", &Native::rom_sha256)
      .def_prop_ro("num_envs", &Native::num_envs)
      .def_prop_ro("frames_per_step", &Native::frames_per_step)
      .def_prop_ro("obs_dim", &Native::obs_dim);
  pyboy_compat::register_functions(m);
}
