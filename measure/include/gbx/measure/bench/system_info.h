#pragma once
// Provenance of a run: machine, GPU, compilers and the GBX source revision. Written into
// mismatch bundles and bench sweeps so a number or a failure can be traced to where it came
// from. Nothing here fails: what cannot be found reads "unknown" (or "none" for a GPU).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace gbx {

struct SystemInfo {
  std::string os;         // PRETTY_NAME from /etc/os-release, else "unknown"
  std::string kernel;     // uname: sysname release machine
  std::string cpu_model;  // /proc/cpuinfo "model name"
  int cpu_cores = 0;      // hardware threads the process may use
  uint64_t mem_total_bytes = 0;
  std::string gpu_name = "none";      // device 0 through the Driver API
  std::string gpu_driver = "none";    // NVIDIA kernel driver version, plus the CUDA API version
  std::string nvrtc_version;          // the NVRTC linked into GBX
  std::string llvm_version;           // the LLVM that JIT-compiles cpu kernels
  std::string cpu_compiler_identity;  // full identity string, as in the cpu cache key
  std::string host_compiler;          // the compiler that built GBX itself
  std::string gbx_version;
  std::string git_commit = "unknown";  // of the source tree GBX was built from
  bool git_dirty = false;              // uncommitted changes in that tree
  std::string source_dir;              // that tree ("" if it no longer exists)
};

// Gathered once per process (the Driver API and git are asked only the first time).
const SystemInfo& system_info();
nlohmann::json to_json(const SystemInfo& s);

// Bytes of memory this process could still allocate (MemAvailable), 0 if unknown.
uint64_t available_memory_bytes();
// Resident set size of this process in bytes, 0 if unknown.
uint64_t resident_memory_bytes();

// UTC time as "20250131T235959Z" (names of artifact directories and files).
std::string utc_timestamp();

}  // namespace gbx
