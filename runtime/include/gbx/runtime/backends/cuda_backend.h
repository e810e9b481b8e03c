#pragma once
// The cuda backend: the NVRTC-compiled kernel, one thread per env, on one device through the
// Driver API (libcuda is dlopen()ed; no driver means ErrorKind::NoDevice before anything is
// compiled). Device state uses the CPU's StateLayout. Resets copy a reset image kept on the
// device (power-on or loaded blobs, one shared or one per env) into the masked envs with the
// env copy kernel (gbx/engine/cuda_env_copy.h): only the mask crosses the bus. The same
// kernel gathers one env's element of every state array into a one-env staging block, so a
// read or save of an env is one launch and two copies, and scatters a loaded blob back.
// Memory reads run the kernel's own gbx_read_memory on the device: one launch, one copy of the
// slice. Bulk host reads (outputs(), cpu_states()) are one async copy each into page-locked
// memory, made only when asked for. step() only enqueues; sync() waits. Everything runs on one
// stream, in order.
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/cuda_env_copy.h"
#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/tier_up.h"
#include "gbx/runtime/states/env_state.h"

namespace gbx {

struct CudaLoadedKernel;  // module + function, shared per (device, key) within a process

class CudaBackend : public Backend {
 public:
  // Checks for a driver first (fast NoDevice), then opens cfg.device_index, compiles or finds
  // the kernel for the device's arch, loads it, allocates state, resets and warms up.
  static Result<std::unique_ptr<CudaBackend>> create(const Rom& rom, const BackendConfig& cfg);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int num_envs() const override { return layout_.num_envs; }
  Status reset(uint64_t seed) override;
  Status reset(const std::vector<uint8_t>& mask) override;
  Status set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) override;
  Result<std::vector<uint8_t>> save_state(int env) override;
  Status load_state(int env, const std::vector<uint8_t>& blob) override;
  Status copy_state(int src, const std::vector<uint8_t>& dst_mask) override;
  Status step(const std::vector<int32_t>& actions) override;  // asynchronous
  Status step_frames(const std::vector<int32_t>& actions,
                     const std::vector<int32_t>& frames) override;  // asynchronous
  Status sync() override;
  Result<CpuState> get_cpu_state(int env) override;
  Result<std::vector<CpuState>> cpu_states() override;  // one launch, one copy
  Status load_battery(const BatterySave& save) override;
  Result<BatterySave> read_battery(int env) override;
  Result<std::vector<uint8_t>> read_memory(int env, uint32_t lo, uint32_t hi) override;
  Result<std::vector<uint8_t>> read_memory_raw(int env, uint32_t lo, uint32_t hi) override;
  Result<std::vector<float>> read_obs(int env) override;
  Result<OutputBlock> outputs() override;  // one copy of the whole block (page-locked)
  // The output block on the device: `data` is a device address (not host-readable), valid
  // once the work enqueued on stream() before the read has run (__cuda_array_interface__).
  OutputBlock device_outputs() const;
  CUstream stream() const { return stream_.get(); }
  // `consumer` (another stream; 0 = the legacy default stream) waits on the device for the
  // work enqueued on stream() so far (an event), so it may read the outputs; the host does not
  // wait.
  Status stream_wait(CUstream consumer);
  Result<std::vector<uint8_t>> read_pixels(int env) override;
  Result<std::vector<uint8_t>> read_screen(int env) override;
  Result<float> read_reward(int env) override;
  Result<std::string> serial_output(int env) override;
  std::string kernel_key() const override;
  Status debug_poke_register(int env, const std::string& reg, uint16_t value) override;

  // Loads the module's code onto the device (lazy module loading defers that to the first
  // launch) with an empty launch, and waits: after it nothing timed pays a first-use cost.
  // create() calls it; state is untouched.
  Status warm_up();

  const CudaContext& context() const { return *ctx_; }
  const CudaDeviceKernel& kernel() const { return kernel_; }
  LaunchShape launch_shape() const { return shape_; }
  const std::vector<std::string>& warnings() const { return kernel_.build.build.warnings; }
  // ROM specialization (docs/internals/specialization.md): see Backend::specialize_status.
  std::string specialize_status() const override { return tier_.status(); }
  Status finish_tier_up() override;
  Result<std::vector<int64_t>> specialized_instr_counts() override;
  // Tiered start (cfg.tiered_start, README "Compile time"): "optimized" when the optimized
  // kernel runs; "fast" while the quick compile runs and the optimized kernel compiles in the
  // background; "fast (the optimized compile failed: ...)".
  std::string start_tier() const;
  bool started_fast() const { return start_fast_; }
  double first_kernel_ms() const { return first_kernel_ms_; }  // create(): cache or compile
  // Steps run, and how many had run (and seconds since create) when the optimized kernel
  // took over from the quick one (-1 while it has not).
  int64_t steps() const { return steps_; }
  int64_t optimized_step() const { return optimized_step_; }
  double optimized_after_s() const { return optimized_after_s_; }

 private:
  CudaBackend() = default;
  Status check_env(int env) const;
  // Enqueues a copy of `bytes` at device address `src` (inside soa_ or mem_) into `dst`.
  Status fetch(void* dst, uint64_t src, size_t bytes);
  GbxParams params(const int* actions, int num_envs) const;
  // Uploads actions (and frames: env_frames) and enqueues one launch of the step kernel.
  Status launch_step(const std::vector<int32_t>& actions, const std::vector<int32_t>* frames);
  Result<std::vector<uint8_t>> read_view(int env, uint32_t lo, uint32_t hi, bool raw);
  // probe_ holds env's whole state and memory slice (one launch, two copies, synchronised).
  Status fetch_env(int env);
  // The battery contents into `envs` envs of the state at (soa, mem), on the device.
  Status apply_battery(const GbxState& soa, uint64_t mem, int envs);
  // Device address of an output section, or nullptr when this configuration has none.
  void* section(const char* name) const;
  // env's bytes of one output section (empty when there is no such section).
  Result<std::vector<uint8_t>> read_section(const char* name, int env);
  // The host image (1 env = shared, or num_envs) becomes the device reset image.
  Status upload_reset_image(EnvState& image);
  // Masked copy of the reset image into the envs (mask: device address, 0 = every env);
  // zeroes their outputs.
  Status copy_reset_image(uint64_t mask);
  // probe_ gets env's element of every state array (one launch, one copy; not yet synced).
  Status gather_env(int env);
  // env's memory slice to / from probe_ in either layout (enqueued, not synced).
  Status download_env_mem(int env);
  Status upload_env_mem(int env);
  // Launches the env copy kernel over `regions`, in launches of kEnvCopyMaxRegions.
  Status launch_copy(EnvCopyParams p, const std::vector<EnvCopyRegion>& regions);
  // One region per state array between two bound GbxStates (device addresses); src_shared
  // makes src a single slot every env copies.
  static void state_regions(const GbxState& dst, const GbxState& src, bool src_shared,
                            std::vector<EnvCopyRegion>& out);
  void output_zero_regions(std::vector<EnvCopyRegion>& out) const;

  Rom rom_;
  BackendConfig cfg_;
  std::shared_ptr<CudaContext> ctx_;
  CudaDeviceKernel kernel_;
  std::shared_ptr<CudaLoadedKernel> loaded_;
  CudaStream stream_;
  StateLayout layout_;
  GbxState soa_{};  // bound to soa_buf_'s device addresses
  DeviceBuffer soa_buf_, mem_buf_, rom_buf_, actions_buf_;
  DeviceBuffer out_buf_;  // every output section (output_layout), env-major in each
  std::vector<OutputSection> sections_;
  PinnedBuffer out_host_;  // outputs()' copy of out_buf_ (allocated on first use)
  DeviceBuffer regs_buf_;  // cpu_states(): the register fields of every env, packed
  PinnedBuffer regs_host_;
  DeviceBuffer read_buf_;               // read_memory's slice (64 KiB)
  std::optional<BatterySave> battery_;  // --sav contents, part of every power-on reset image
  DeviceBuffer gather_addrs_buf_;       // the RAM gather's bus addresses
  DeviceBuffer release_buf_;            // release_after_frames per env; empty when never released
  DeviceBuffer mask_buf_;               // reset(mask)'s mask, one byte per env
  DeviceBuffer frames_buf_;             // step_frames' frame counts, one int32 per env
  // The reset image: image_envs_ envs (1: shared by every env) in the StateLayout of that
  // many envs.
  DeviceBuffer image_soa_buf_, image_mem_buf_;
  GbxState image_soa_{};
  int image_envs_ = 0;
  // One env in the one-env StateLayout: the device side of probe_ (gathers and loads).
  DeviceBuffer stage_soa_buf_;
  DeviceBuffer stage_mem_buf_;  // layout interleaved: one env's memory, env-major
  GbxState stage_soa_{};
  std::shared_ptr<CudaLoadedKernel> copy_loaded_;
  LaunchShape shape_;
  // One env, host side: the staging copy of reads, saves and loads (EnvState::peek reads it).
  EnvState probe_;
  uint32_t seen_bytes_ = 0;  // the seen() set's bytes per env (0: no expression uses it)

  // ---- ROM specialization (runtime/src/backends/cuda_tier_up.cpp) ----------------------
  // The plan is for this ROM; auto needs dmg, frames and no plan of its own.
  static Status check_specialize(const Rom& rom, const BackendConfig& cfg);
  // The first kernel's synthesis: the profiling interpreter under auto.
  static SynthParams first_tier_params(const BackendConfig& cfg);
  // auto: the per-ROM-offset counters on the device, zeroed; the kernel counts into them.
  Status start_profiling();
  // After each step: profile -> background compile + load -> swap, never waiting on it.
  void tier_after_step();
  struct TierKernel {
    CudaDeviceKernel kernel;
    std::shared_ptr<CudaLoadedKernel> loaded;
  };
  // Compiles (and loads, on the compiling thread) a kernel for this context.
  std::function<Result<TierKernel>(TemplateBundle, SynthParams)> tier_builder() const;
  // Tiered start: the optimized build of the running kernel, compiled in the background.
  void compile_optimized_in_background(TemplateBundle bundle, SynthParams p);
  // Swaps the optimized kernel in once compiled (waiting for it if `wait`).
  void take_optimized(bool wait);
  // Swaps a compiled kernel in (the optimized one after a quick start, or the specialized).
  void use_tier_kernel(TierKernel k);
  // auto: the specialized kernel will not come; after a quick start the optimized
  // interpreter is compiled in its place.
  void specialization_failed(const std::string& why);
  bool start_fast_ = false;  // the first kernel is the quick compile (tiered start)
  double first_kernel_ms_ = 0;
  std::string start_error_;
  int64_t steps_ = 0;
  int64_t optimized_step_ = -1;
  double optimized_after_s_ = -1;
  std::chrono::steady_clock::time_point created_;
  DeviceBuffer spec_retired_buf_;  // GbxParams::spec_retired: one long long per env
  DeviceBuffer profile_buf_;       // u32 per ROM byte while profiling (params().profile_counts)
  bool profiling_ = false;
  // Last members, so destroyed first: a compile still running finishes before the rest goes.
  std::future<Result<TierKernel>> optimized_compile_;  // tiered start
  SpecializeTierUp<TierKernel> tier_;                  // auto specialization (tier_up.h)
};

}  // namespace gbx
