#pragma once
// NVRTC loaded at run time, never linked: GBX builds and runs (CPU only) where no CUDA toolkit
// is installed, and finds NVRTC wherever a user has one, the way Warp, CuPy and Numba do:
//   1. $GBX_NVRTC_LIBRARY (a path or soname): that library and nothing else;
//   2. a CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda (lib64/, lib/);
//   3. PyPI's nvidia-cuda-nvrtc wheel (nvidia/cu13/lib, or the CUDA 12 wheel's
//      nvidia/cuda_nvrtc/lib) in the site-packages of $VIRTUAL_ENV or $CONDA_PREFIX;
//   4. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache) for libnvrtc.so.13,
//      libnvrtc.so.12;
//   5. the wheel in the site-packages of `python3` on PATH ($GBX_PYTHON overrides the name).
// GBX_NVRTC_NO_TOOLKIT=1 skips every library that lies in a toolkit directory (step 2 and
// toolkit copies found by step 4): how CI checks the wheel path on a machine that has both.
#include <string>
#include <vector>

#include "gbx/engine/cuda_api.h"
#include "gbx/engine/result.h"

namespace gbx {

#define GBX_NVRTC_FUNCTIONS(X) \
  X(nvrtcGetErrorString)       \
  X(nvrtcVersion)              \
  X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetSupportedArchs)    \
  X(nvrtcCreateProgram)        \
  X(nvrtcDestroyProgram)       \
  X(nvrtcCompileProgram)       \
  X(nvrtcGetPTXSize)           \
  X(nvrtcGetPTX)               \
  X(nvrtcGetCUBINSize)         \
  X(nvrtcGetCUBIN)             \
  X(nvrtcGetProgramLogSize)    \
  X(nvrtcGetProgramLog)

class NvrtcLibrary {
 public:
  // The process-wide NVRTC, found and loaded once; later calls return the same pointer or the
  // same error: ErrorKind::NoDevice, "CUDA unavailable: no NVRTC library found (...)", with
  // every place tried in the detail.
  static Result<const NvrtcLibrary*> get();
  // Loads one library (a path or soname), independent of get(); for tests and diagnostics.
  static Result<const NvrtcLibrary*> load(const std::string& library);

#define GBX_NVRTC_MEMBER(name) gbx_##name##_t name = nullptr;
  GBX_NVRTC_FUNCTIONS(GBX_NVRTC_MEMBER)
#undef GBX_NVRTC_MEMBER

  const std::string& path() const { return path_; }      // the file that was loaded
  const std::string& origin() const { return origin_; }  // "CUDA toolkit", "python wheel", ...

 private:
  friend struct NvrtcLibraryLoader;
  NvrtcLibrary() = default;
  std::string path_, origin_;
};

// Where get() looks, in order, as (place, origin) pairs; for diagnostics and tests.
std::vector<std::pair<std::string, std::string>> nvrtc_search_candidates();

}  // namespace gbx
