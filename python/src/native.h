#pragma once
// gbx._native's Backend class (Native) and the error mapping every binding file shares. The
// members are defined, and bound, by topic: native_env.cpp (construction, stepping, output
// views), native_states.cpp (screens, save states, memory and registers of one env),
// native_cuda.cpp (the cuda backend's device arrays); native.cpp is the module itself.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx::py {

namespace nb = nanobind;

struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NoDeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// gbx::Error -> a Python exception: bad arguments and inputs are ValueError, kernel compile
// errors CompileError (a ValueError: the user's expression is the usual cause), no CUDA device
// NoDeviceError, the rest RuntimeError.
[[noreturn]] void raise(const gbx::Error& e);
// A runtime message with the CLI flags it names (--envs, --threads, ...) as the Python
// parameters they come from (num_envs, threads, ...).
std::string python_names(const std::string& msg);
// MemoryError for an allocation of num_envs envs that failed (what: the exception's text).
[[noreturn]] void raise_out_of_memory(int num_envs, const char* what);

template <typename T>
T unwrap(gbx::Result<T> r) {
  if (!r) raise(r.error());
  return std::move(r.value());
}
inline void check(gbx::Status st) {
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
  // native_env.cpp: construction, stepping, the output block and its views. The options are
  // the declared ones of the native surface (gbx/runtime/backends/options.h), by their Python
  // names.
  Native(const std::string& rom_spec, nb::bytes rom_bytes, const nb::kwargs& options);
  void reset(uint64_t seed);
  void reset_envs(MaskIn mask, bool gather_now);
  void step(ActionsIn actions, bool gather_now);
  void step_frames(ActionsIn actions, FramesIn frames, bool gather_now);
  // The host block brought up to date (non-cpu backends; the cpu block is the backend's own).
  void gather_outputs() { gather(); }

  F32x2 obs() {
    return F32x2(section_data<float>("obs_v0"), {(size_t)n_, (size_t)kObsDim}, nb::find(this));
  }
  F32x1 reward() { return F32x1(section_data<float>("reward"), {(size_t)n_}, nb::find(this)); }
  U8x1 done() { return U8x1(section_data<uint8_t>("done"), {(size_t)n_}, nb::find(this)); }
  nb::ndarray<nb::numpy> output(const std::string& name);
  std::vector<std::string> output_names() const;

  std::string name() const { return backend_->name(); }
  std::string kernel_key() const { return backend_->kernel_key(); }
  std::string start_tier() const;
  std::string specialize_status() const { return backend_->specialize_status(); }
  void finish_tier_up();
  std::string rom_name() const { return rom_.name; }
  std::string rom_sha256() const { return rom_.sha256; }
  std::vector<std::string> rom_warnings() const { return rom_.warnings; }
  int num_envs() const { return n_; }
  int frames_per_step() const { return frames_per_step_; }
  int obs_dim() const { return kObsDim; }

  // native_states.cpp: one env's memory, registers, screen and save states.
  nb::bytes read_memory(int env, uint32_t lo, uint32_t hi);
  nb::dict cpu_state(int env);
  std::string serial(int env) { return unwrap(backend_->serial_output(env)); }
  nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>> screen(int env);
  nb::bytes save_state(int env);
  nb::list save_states();
  void load_state(int env, nb::bytes blob);
  void copy_state(int src, MaskIn mask);
  void set_reset_state(const std::vector<nb::bytes>& blobs);
  nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>> read_memory_all(int64_t lo, int64_t hi);

  // native_cuda.cpp: the cuda backend's outputs as they are on the device, and every env's
  // registers in one call.
  nb::list cuda_outputs();
  nb::ndarray<> cuda_view(const std::string& name);
  int cuda_device() { return cuda()->context().index(); }
  // The CUstream every step runs on, as an int.
  uint64_t cuda_stream() { return (uint64_t)(uintptr_t)cuda()->stream(); }
  void cuda_stream_wait(uint64_t consumer);
  nb::dict registers();

 private:
  static constexpr int kObsDim = 32;

  // Errors found with the GIL released are raised after it is taken back.
  void check_nogil(gbx::Status st) {
    if (!st && pending_) pending_ = std::move(st);
  }
  void raise_pending();
  gbx::Status refresh(const std::vector<uint8_t>& mask);
  void gather();
  void bind_outputs(const gbx::BackendConfig& cfg);
  const gbx::OutputSection* find_section(const std::string& name) const;
  template <typename T>
  T* section_data(const std::string& name) {
    const gbx::OutputSection* s = find_section(name);
    if (!s) throw nb::value_error(("this env has no '" + name + "' output").c_str());
    return reinterpret_cast<T*>(const_cast<uint8_t*>(block_) + s->offset);
  }
  void check_index(int env) const;
  static std::vector<uint8_t> to_vector(const nb::bytes& b);
  gbx::CudaBackend* cuda() const;

  gbx::Rom rom_;
  std::unique_ptr<gbx::Backend> backend_;
  gbx::CpuBackend* cpu_ = nullptr;
  int n_ = 0;
  int frames_per_step_ = 1;
  std::vector<int32_t> actions_;
  gbx::Status pending_ = gbx::ok_status();

  std::vector<gbx::OutputSection> sections_;
  const uint8_t* block_ = nullptr;
  std::vector<uint8_t> host_block_;
  bool bulk_ = false;
  std::vector<uint16_t> gather_addrs_;
};

using NativeClass = nb::class_<Native>;

// Each file binds what it defines.
void bind_env(NativeClass& c);     // native_env.cpp
void bind_states(NativeClass& c);  // native_states.cpp
void bind_cuda(NativeClass& c);    // native_cuda.cpp
// gbx.pyboy_compat's functions and constants (pyboy_compat.cpp).
void bind_pyboy_compat(nb::module_& m);

}  // namespace gbx::py
