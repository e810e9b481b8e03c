#pragma once
// Masked per-env copies between structure-of-arrays blocks on the device: a tiny CUDA kernel
// of its own (NVRTC, cached like every kernel), beside the generated one, which stays
// unchanged. It knows nothing of the machine: a launch copies `envs` envs' slices of up to
// kEnvCopyMaxRegions regions (an array of `bytes` per env at `dst`/`src`), skipping envs whose
// mask byte is 0. Backends use it for per-env resets, save-state gathers and loads without a
// host round trip. The parameter block is all 64-bit words, so every device address in it is
// one aligned word (what the CUDA driver double translates).
#include <cstdint>
#include <string>

#include "gbx/engine/cache.h"
#include "gbx/engine/nvrtc_compiler.h"
#include "gbx/engine/result.h"

namespace gbx {

inline constexpr int kEnvCopyMaxRegions = 64;  // 64 * 56 + 40 bytes: under the 4 KiB limit

struct EnvCopyRegion {
  uint64_t dst = 0;         // device address of the array's env 0
  uint64_t src = 0;         // device address, or 0: zero-fill
  uint64_t bytes = 0;       // bytes per env
  uint64_t dst_stride = 0;  // bytes between envs in dst (0: every env writes one slot)
  uint64_t src_stride = 0;  // bytes between envs in src (0: one slot shared by every env)
  // Bytes between one env's consecutive bytes (0: contiguous). Nonzero for memory in the
  // interleaved layout (gbx_abi.h GBX_MEM_PITCH): the copy then goes byte by byte.
  uint64_t dst_pitch = 0;
  uint64_t src_pitch = 0;
};

// The kernel's one parameter. Launch env i (0 <= i < envs) copies src env src_first + i to dst
// env dst_first + i when mask is 0 or mask[i] != 0.
struct EnvCopyParams {
  uint64_t mask = 0;  // device address of one byte per launch env, or 0: every env
  uint64_t envs = 0;
  uint64_t dst_first = 0;
  uint64_t src_first = 0;
  uint64_t num_regions = 0;
  EnvCopyRegion regions[kEnvCopyMaxRegions];
};

inline constexpr const char* kEnvCopyEntryPoint = "gbx_copy_envs";

// The kernel image for a device of compute capability `sm` (CUBIN of its arch, or PTX as
// select_cuda_target decides), from the cache or compiled once. `cubin` tells which.
struct EnvCopyKernel {
  std::string image;
  bool cubin = true;
  std::string key;
  bool cached = false;
};
Result<EnvCopyKernel> build_env_copy_kernel(int sm, KernelCache& cache);

// The kernel's source (for tests and `--emit`-style inspection).
const std::string& env_copy_kernel_source();

// Blocks of the launch's grid: y = region, x covers the largest region's work.
struct EnvCopyGrid {
  unsigned grid_x = 1, grid_y = 1, block = 128;
};
EnvCopyGrid env_copy_grid(const EnvCopyParams& p);

}  // namespace gbx
