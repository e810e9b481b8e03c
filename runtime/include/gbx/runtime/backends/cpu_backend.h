#pragma once
// The cpu backend: the JIT-compiled kernel stepped over all cores by a persistent worker pool
// (worker_pool.h: a fixed env range per thread, the tail shared by stealing). State lives in an
// EnvState the conformance runner may also set directly.
#include <future>
#include <memory>
#include <optional>

#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/tier_up.h"
#include "gbx/runtime/backends/worker_pool.h"
#include "gbx/runtime/states/env_state.h"

namespace gbx {

class CpuBackend : public Backend {
 public:
  static Result<std::unique_ptr<CpuBackend>> create(const Rom& rom, const BackendConfig& cfg);

  std::string name() const override { return "cpu"; }
  int num_envs() const override { return state_.num_envs(); }
  Status reset(uint64_t seed) override;
  Status reset(const std::vector<uint8_t>& mask) override;
  Status set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) override;
  Result<std::vector<uint8_t>> save_state(int env) override;
  Status load_state(int env, const std::vector<uint8_t>& blob) override;
  Status copy_state(int src, const std::vector<uint8_t>& dst_mask) override;
  Status step(const std::vector<int32_t>& actions) override;
  Status sync() override { return ok_status(); }
  Result<CpuState> get_cpu_state(int env) override;
  Result<std::vector<uint8_t>> read_memory(int env, uint32_t lo, uint32_t hi) override;
  Result<std::vector<uint8_t>> read_memory_raw(int env, uint32_t lo, uint32_t hi) override;
  Status load_battery(const BatterySave& save) override;
  Result<BatterySave> read_battery(int env) override;
  Result<std::vector<float>> read_obs(int env) override;
  Result<float> read_reward(int env) override;
  Result<OutputBlock> outputs() override;
  Result<std::vector<uint8_t>> read_pixels(int env) override;
  Result<std::vector<uint8_t>> read_screen(int env) override;
  Result<std::string> serial_output(int env) override;
  std::string kernel_key() const override { return kernel_.build.key; }
  Status debug_poke_register(int env, const std::string& reg, uint16_t value) override;

  Status step_frames(const std::vector<int32_t>& actions,
                     const std::vector<int32_t>& frames) override;
  // Runs `frames` frames (0: only the stage epilog, which refreshes the outputs from the
  // current state) on the envs whose mask byte is non-zero; the others are not touched.
  Status step_envs(const std::vector<int32_t>& actions, int frames,
                   const std::vector<uint8_t>& mask);

  // Bulk views of all envs' outputs, env-major: obs_dim floats, one reward float and one done
  // byte per env. Owned by the backend, overwritten by every step.
  // Views into the output block (README "Kernel outputs"); obs_data is null unless obs=vec.
  float* obs_data() { return reinterpret_cast<float*>(section("obs_v0")); }
  float* reward_data() { return reinterpret_cast<float*>(section("reward")); }
  uint8_t* done_data() { return section("done"); }
  int obs_dim() const { return 32; }

  EnvState& state() { return state_; }
  const KernelBuild& kernel_build() const { return kernel_.build; }
  // Wall time create() spent getting its kernel: loading the templates, generating the source,
  // its key, the cache lookup and (on a miss) the compile, the JIT load; kernel_build() has
  // the parts.
  double kernel_load_ms() const { return kernel_load_ms_; }
  double kernel_load_cpu_ms() const { return kernel_load_cpu_ms_; }  // the same, CPU time
  double template_load_ms() const { return template_load_ms_; }
  int threads() const { return threads_; }
  // Parts the last step ran in (1: whole env steps; see run()).
  int last_step_parts() const { return last_step_parts_; }
  // Profiling kernels (BackendConfig::profile): instructions executed per ROM offset so far.
  const std::vector<uint32_t>& profile_counts() const { return profile_counts_; }
  std::string specialize_status() const override { return tier_.status(); }
  int specialize_retiers() const override { return tier_.retiers(); }
  Status finish_tier_up() override;
  Result<std::vector<int64_t>> specialized_instr_counts() override {
    return std::vector<int64_t>(spec_retired_.begin(), spec_retired_.end());
  }
  ~CpuBackend() override;

 private:
  CpuBackend() = default;
  Status check_env(int env) const;
  // env_frames: null (every env runs `frames`) or one count per env (GbxParams::env_frames).
  Status run(const std::vector<int32_t>& actions, int frames, const int32_t* env_frames);
  Result<std::vector<uint8_t>> read_view(int env, uint32_t lo, uint32_t hi, bool raw);
  uint8_t* section(const char* name);  // nullptr when this configuration has no such output
  void clear_outputs(int env);         // zeroes env's slice of every output section
  // The DMG post-boot (or flat64k all-zero) state of one env.
  EnvState power_on_image() const;

  Rom rom_;
  BackendConfig cfg_;
  CpuKernel kernel_;
  CpuReadMemoryFn read_memory_ = nullptr;  // the kernel's read_memory entry point
  std::optional<BatterySave> battery_;     // --sav contents, part of every reset image
  uint32_t seen_bytes_ = 0;  // the seen() set's bytes per env (0: no expression uses it)
  EnvState state_;
  std::vector<uint8_t> out_;  // the output block (output_layout)
  std::vector<OutputSection> sections_;
  // What reset() copies into an env: one image shared by all envs, or one per env.
  EnvState reset_image_;
  std::vector<uint32_t> profile_counts_;
  std::vector<long long> spec_retired_;  // GbxParams::spec_retired, one per env
  // Re-profiling (tier_up.h watch()): every profile's counts added up, the profiling kernel to
  // go back to, the current specialized kernel (it runs while the next one compiles), and the
  // last step's instructions retired in all and in blocks, summed over the envs.
  std::vector<uint32_t> merged_counts_;
  std::optional<CpuKernel> profile_kernel_, spec_kernel_;
  int64_t step_instrs_ = 0, step_block_instrs_ = 0;
  // Tiering (specialize_auto_frames): frames profiled so far, the background compile, state.
  void auto_tier_after_step(int frames);
  void use_kernel(CpuKernel k);
  SpecializeTierUp<CpuKernel> tier_;
  std::vector<int32_t> release_;  // release_after_frames for every env
  int threads_ = 1;
  // Steps in parts on several threads (run()): how many (GBX_STEP_PARTS, default 3; 1: off),
  // and up to how many envs a thread (beyond, half an env step at the end of a step is
  // under 2% of it, and the parts' extra passes over the envs' state would cost more).
  static constexpr int kPartsMaxEnvsPerThread = 16;
  int step_parts_ = 3;
  int last_step_parts_ = 1;
  int step_parts(int n, int frames, const int32_t* env_frames) const;
  double kernel_load_ms_ = 0;
  double kernel_load_cpu_ms_ = 0;
  double template_load_ms_ = 0;
  std::unique_ptr<WorkerPool> pool_;  // min(threads_, envs) participants, the caller included
};

}  // namespace gbx
