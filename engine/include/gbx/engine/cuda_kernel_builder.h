#pragma once
// CUDA synthesis pipeline, the twin of build_cpu_kernel: generate (device cuda) -> key ->
// cache lookup -> NVRTC compile on a miss -> publish. One cache entry per (source, arch list)
// holding source.cu, module.ptx (PTX of the lowest arch), module.<arch>.cubin per arch,
// compile.log and meta.json (ptxas resource usage per arch, timings). Needs libnvrtc only:
// no GPU, no driver. Loading an image is the runtime's job (gbx/engine/cuda_driver.h).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gbx/engine/kernel_builder.h"
#include "gbx/engine/nvrtc_compiler.h"

namespace gbx {

// "NVRTC 13.0; archs sm_80,sm_90; output cubin+ptx": part of the key.
std::string cuda_compiler_identity(const NvrtcOptions& opts);
// The key's ordered options: the shared options, then one --gpu-architecture per arch, in
// the order the archs were given (the same list NvrtcResult::options_used reports).
std::vector<std::string> cuda_key_options(const NvrtcOptions& opts);
// Variables libnvrtc reads (name -> value, "" when unset), for the key.
std::vector<std::pair<std::string, std::string>> nvrtc_compiler_environment();

// Every arch must be a real arch ("sm_90") this NVRTC can build a CUBIN for; otherwise a
// one-line Usage error naming the first bad one and the supported list. Empty list: Usage.
Status check_cuda_archs(const std::vector<std::string>& archs);
// "sm_80,sm_90" -> {"sm_80", "sm_90"} (blanks dropped), then check_cuda_archs.
Result<std::vector<std::string>> parse_cuda_arch_list(std::string_view list);

// One arch's slice of an entry, as meta.json records it.
struct CudaArchInfo {
  std::string arch;        // "sm_90"
  std::string cubin_file;  // "module.sm_90.cubin"
  size_t cubin_bytes = 0;
  ResourceUsage usage;                 // gbx_step's ptxas figures
  std::vector<ResourceUsage> callees;  // non-inlined device functions (stack frames, spills)
  double compile_ms = 0;               // this arch's NVRTC compile when the entry was built
};

struct CudaKernelBuild {
  KernelBuild build;                // source, key, cached, timings, entry, warnings
  std::vector<CudaArchInfo> archs;  // in NvrtcOptions::archs order
  std::string ptx_arch;             // "compute_80": the target of module.ptx

  const CudaArchInfo* find(std::string_view arch) const;
};

// The key alone (generation + hashing; no cache access, no compile).
Result<std::string> cuda_kernel_key(const TemplateBundle& bundle, const SynthParams& params,
                                    const NvrtcOptions& opts = {});

// Compiles (or finds in the cache) the kernel for every arch in opts.archs. A cached entry
// whose meta.json lacks a CUBIN record for one of them is discarded and rebuilt, with a
// warning. params.device must be cuda.
Result<CudaKernelBuild> build_cuda_kernel(const TemplateBundle& bundle, const SynthParams& params,
                                          KernelCache& cache, const NvrtcOptions& opts = {});

// Cache lookup only: nullopt on a miss, never compiles.
Result<std::optional<CudaKernelBuild>> find_cuda_kernel(const TemplateBundle& bundle,
                                                        const SynthParams& params,
                                                        KernelCache& cache,
                                                        const NvrtcOptions& opts = {});

// Per-arch records of a CUDA entry's meta.json (empty for other entries).
std::vector<CudaArchInfo> cuda_arch_info_from_meta(const nlohmann::json& meta);

// What one device runs: the kernel build, the target chosen by select_cuda_target (its own
// arch as CUBIN when NVRTC supports it, else PTX of the highest supported arch below it) and
// that image's bytes.
struct CudaDeviceKernel {
  CudaKernelBuild build;
  CudaTarget target;
  std::string image;       // CUBIN bytes, or PTX text
  std::string image_file;  // "module.sm_90.cubin" or "module.ptx"
};

// For a device of compute capability `sm`: an existing cache entry for opts.archs that holds
// the device's CUBIN is reused (so `gbx-synth compile` warms the runtime's cache); otherwise
// the kernel is built for the chosen arch alone. opts.archs only names that shared entry.
Result<CudaDeviceKernel> build_cuda_kernel_for_device(const TemplateBundle& bundle,
                                                      const SynthParams& params, KernelCache& cache,
                                                      int sm, const NvrtcOptions& opts = {});
// The same choice, cache lookup only: nullopt when that kernel would have to be compiled.
Result<std::optional<CudaDeviceKernel>> find_cuda_kernel_for_device(const TemplateBundle& bundle,
                                                                    const SynthParams& params,
                                                                    KernelCache& cache, int sm,
                                                                    const NvrtcOptions& opts = {});

}  // namespace gbx
