#pragma once
// CUDA compile path: one NVRTC compile per real arch, each giving that arch's CUBIN, its PTX
// and ptxas' resource usage. Sources and outputs stay in memory; nothing here needs a GPU or
// a driver, only libnvrtc.
#include <string>
#include <string_view>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

// ptxas' figures for one function; -1 = not reported. ptxas leaves zero-valued items out of
// its "Used N registers, ..." line, so once that line has been seen, smem / cmem[0] / lmem /
// cumulative stack / barriers read 0 rather than -1.
struct ResourceUsage {
  std::string function;  // as ptxas prints it (mangled unless extern "C")
  bool entry = false;    // a __global__ kernel ("Compiling entry function")
  int registers = -1;
  int barriers = -1;
  int stack_frame_bytes = -1;
  int spill_stores_bytes = -1;
  int spill_loads_bytes = -1;
  int cumulative_stack_bytes = -1;
  int shared_bytes = -1;  // smem: static __shared__
  int const_bytes = -1;   // cmem[0]: kernel parameters and driver constants
  int local_bytes = -1;   // lmem (printed by older ptxas only)
  double ptxas_ms = -1;   // ptxas' "Compile time" for this function
};

// Everything `ptxas -v` said about one compile.
struct PtxasReport {
  int global_bytes = -1;                 // gmem: __device__ variables
  std::vector<ResourceUsage> functions;  // in log order, entries and non-inlined callees

  const ResourceUsage* find(std::string_view function) const;
};

// Reads the "ptxas info" lines of an NVRTC program log; other lines are ignored.
PtxasReport parse_ptxas_log(std::string_view log);

// Element-wise maximum over the report's entry functions (for GBX, the one gbx_step): the
// worst kernel decides occupancy and spilling. `function` is set when there is one entry.
ResourceUsage summarize_entries(const PtxasReport& report);

// GBX_CUDA_FAST_COMPILE=1: NVRTC's --Ofast-compile=max (front end and ptxas skip their
// expensive optimizations): a cold full_step compile drops from ~30 s to ~1.5 s of CPU, for a
// kernel of unmeasured GPU speed (little inlining: a 728 B stack frame). README "CUDA compile
// time" has the numbers. Off by default.
bool nvrtc_fast_compile_from_env();
// NVRTC 12.9+ takes --no-cache (its own compile cache off: GBX keeps one).
bool nvrtc_has_no_cache_option();

struct NvrtcOptions {
  std::vector<std::string> archs = {"sm_80", "sm_90"};  // real archs: each gets a CUBIN
  bool line_info = true;
  bool fast_compile = nvrtc_fast_compile_from_env();  // --Ofast-compile=max (in the key)
  std::vector<std::string> extra;  // appended after the fixed options, before the arch
  bool parallel = true;            // one thread per arch (NVRTC allows concurrent programs)
};

struct NvrtcArchOutput {
  std::string arch;     // "sm_90"
  std::string cubin;    // ELF image for cuModuleLoadData
  std::string ptx;      // PTX of the same compile (.target sm_XX), no trailing NUL
  ResourceUsage usage;  // summarize_entries(ptxas)
  PtxasReport ptxas;
  std::string log;                   // this compile's NVRTC program log, verbatim
  std::vector<std::string> options;  // exactly what was passed: nvrtc_options_for(opts, arch)
  double compile_ms = 0;
};

struct NvrtcResult {
  std::string ptx;       // PTX of the lowest arch: the driver can JIT it for any newer device
  std::string ptx_arch;  // "compute_80"
  std::vector<NvrtcArchOutput> cubins;  // in NvrtcOptions::archs order
  std::string log;                      // every compile's log, each headed by its arch and options
  double compile_ms = 0;                // wall time of the whole call
  // Shared options then one --gpu-architecture per arch, in order: the cache key's "ordered
  // options". Each compile got the shared options followed by its own arch.
  std::vector<std::string> options_used;

  const NvrtcArchOutput* find(std::string_view arch) const;
};

// Compile failures are ErrorKind::Compile: message = the first error line of the log (which
// names the `#line` file and line), detail = the full log. An arch NVRTC does not support is
// ErrorKind::Usage.
Result<NvrtcResult> nvrtc_compile(const std::string& source, const std::string& file_name,
                                  const NvrtcOptions& options);

// The ordered option list of one compile for `arch`; part of the cache key.
std::vector<std::string> nvrtc_options_for(const NvrtcOptions& options, const std::string& arch);
// The shared part of every compile's options (nvrtc_options_for without the arch).
std::vector<std::string> nvrtc_shared_options(const NvrtcOptions& options);

std::string nvrtc_version();                       // "13.0"
std::vector<std::string> nvrtc_supported_archs();  // "sm_75", ..., ascending

// "sm_90" / "compute_90" / "sm_90a" -> 90; -1 if not an arch name.
int arch_number(std::string_view arch);

// What to compile and load for a device of compute capability `sm` (major * 10 + minor):
// its own arch as CUBIN when NVRTC supports it, else PTX of the highest supported arch below
// it, which the driver JIT-compiles. No supported arch at or below the device: NoDevice.
struct CudaTarget {
  std::string arch;   // "sm_90": the arch to pass to nvrtc_compile
  bool cubin = true;  // false: load that compile's PTX
};
Result<CudaTarget> select_cuda_target(int sm, const std::vector<std::string>& supported);

}  // namespace gbx
