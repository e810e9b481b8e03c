#pragma once
// The cuda backend: the NVRTC-compiled kernel, one thread per env, on one device through the
// Driver API (libcuda is dlopen()ed; no driver means ErrorKind::NoDevice before anything is
// compiled). Device state uses the CPU's StateLayout, so reset builds the host EnvState and
// uploads it in one copy per block. step() only enqueues; sync() waits. Reads copy just the
// bytes they return (one env's fields or memory slice), ordered after earlier steps.
#include <memory>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/env_state.h"

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
  Status step(const std::vector<int32_t>& actions) override;  // asynchronous
  Status sync() override;
  Result<CpuState> get_cpu_state(int env) override;
  Result<std::vector<uint8_t>> read_memory(int env, uint32_t lo, uint32_t hi) override;
  Result<std::vector<float>> read_obs(int env) override;
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

 private:
  CudaBackend() = default;
  Status check_env(int env) const;
  // Enqueues a copy of `bytes` at device address `src` (inside soa_ or mem_) into `dst`.
  Status fetch(void* dst, uint64_t src, size_t bytes);
  GbxParams params(const int* actions, int num_envs) const;

  Rom rom_;
  BackendConfig cfg_;
  std::shared_ptr<CudaContext> ctx_;
  CudaDeviceKernel kernel_;
  std::shared_ptr<CudaLoadedKernel> loaded_;
  CudaStream stream_;
  StateLayout layout_;
  GbxState soa_{};  // bound to soa_buf_'s device addresses
  DeviceBuffer soa_buf_, mem_buf_, rom_buf_, actions_buf_, obs_buf_, reward_buf_;
  LaunchShape shape_;
  EnvState probe_;  // one env: read_memory's staging copy, read through EnvState::peek
};

}  // namespace gbx
