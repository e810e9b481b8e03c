// What the pieces of the cuda backend share: the module registry (cuda_modules.cpp) that
// create() (cuda_backend.cpp) and the tier-up (cuda_tier_up.cpp) load kernels through, and
// the device-address helper the state I/O (cuda_state_io.cpp) uses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gbx/runtime/backends/cuda_backend.h"

namespace gbx {

constexpr int kObsDim = 32;  // obs_v0

// A loaded module and its entry point. Shared by every backend on the same device running the
// same kernel, so a process that creates many backends loads each module once.
struct CudaLoadedKernel {
  CudaModule module;
  CUfunction function = nullptr;
  CUfunction read_memory = nullptr;  // the manifest's read_memory entry point, when it has one
};

namespace cuda_detail {

// The process-wide context of a device, opened on first use.
Result<std::shared_ptr<CudaContext>> shared_context(int device_index);

// A module by its id (device, cache key): loaded once per process and device.
Result<std::shared_ptr<CudaLoadedKernel>> shared_module(
    const CudaContext& ctx, const std::string& key, const std::string& image, bool cubin,
    const std::string& what, const std::string& entry_point, const std::string& read_entry = {});

// The module of a built kernel (its step entry point and, when it has one, read_memory).
Result<std::shared_ptr<CudaLoadedKernel>> shared_kernel(const CudaContext& ctx,
                                                        const CudaDeviceKernel& k);

inline uint64_t dev_addr(const void* p) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
}

}  // namespace cuda_detail
}  // namespace gbx
