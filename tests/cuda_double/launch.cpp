// GBX CUDA double: functions and launches. A launch runs at the call, its parameters copied and
// every device address in them translated; thread by thread over the grid, or in warp mode
// (warps.cpp: each block's threads as fibers grouped in warps) when the kernel's source names a
// warp intrinsic or GBX_CUDA_DOUBLE_WARPS=all.
#include <cstring>

#include "cuda_double.h"

namespace gbx_double {

namespace {

Function* function_of(CUfunction f) {
  for (auto& fn : st().functions)
    if (reinterpret_cast<CUfunction>(fn.get()) == f) return fn.get();
  die("use of function handle %p that was never returned by cuModuleGetFunction", (void*)f);
}

}  // namespace

CUresult d_cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) {
  LOCK();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  function_of(f);
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = 1024;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *v = 72;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
      *v = 0;
      return CUDA_SUCCESS;
    default:
      die("cuFuncGetAttribute(%d): attribute not modelled by the double; add it", (int)a);
  }
}

CUresult d_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params,
                          void** extra) {
  LOCK();
  NEED_CONTEXT();
  Function* fn = function_of(f);
  if (extra) die("cuLaunchKernel: the 'extra' parameter form is not modelled");
  if (!params || !params[0]) return CUDA_ERROR_INVALID_VALUE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((unsigned long long)bx * by * bz >
          (unsigned)attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) ||
      bz > 64)
    return CUDA_ERROR_INVALID_VALUE;
  if (shared > 49152) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(stream);
  Op op = begin_op(s);

  // The parameters, copied now (as the driver does) and translated word by word.
  alignas(16) unsigned char storage[kMaxParamsBytes];
  void* args[kMaxParams] = {};
  const std::string what =
      "kernel " + fn->name + " <<<" + std::to_string(gx) + ", " + std::to_string(bx) + ">>>";
  std::vector<Allocation*> touched;
  size_t used = 0;
  for (size_t i = 0; i < fn->kernel->param_sizes.size(); ++i) {
    if (!params[i]) return CUDA_ERROR_INVALID_VALUE;
    const size_t bytes = fn->kernel->param_sizes[i];
    unsigned char* arg = storage + used;
    used += (bytes + 15) / 16 * 16;
    std::memcpy(arg, params[i], bytes);
    args[i] = arg;
    for (size_t off = 0; off + 8 <= bytes; off += 8) {
      uint64_t w;
      std::memcpy(&w, arg + off, 8);
      if (w < kDeviceBase || w >= kDeviceEnd) continue;
      Allocation* a = find_alloc(w);
      if (!a)
        die("%s: parameter %zu's word at byte %zu is device address %s, which lies in no live "
            "allocation (freed, or out of bounds)",
            what.c_str(), i, off, hex(w).c_str());
      const uint64_t host = reinterpret_cast<uint64_t>(a->host()) + (w - a->base);
      std::memcpy(arg + off, &host, 8);
      if (std::find(touched.begin(), touched.end(), a) == touched.end()) touched.push_back(a);
    }
  }
  // The double cannot tell which bytes a kernel reads or writes: every allocation it was
  // given is taken as written, whole.
  for (Allocation* a : touched) access(op, *a, 0, a->size, true, what);
  if (injection().hit("launch", false)) {
    st().pending_fault = true;  // reported by the next synchronisation, as on a GPU
  } else {
    const unsigned dims[6] = {gx, gy, gz, bx, by, bz};
    if (warp_mode(*fn->kernel))
      run_warps(*fn->kernel, args, dims, what);  // warps.cpp
    else
      fn->kernel->launch(args, dims, nullptr);
  }
  end_op(op);
  return CUDA_SUCCESS;
}

CUresult d_cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction f,
                                            CUoccupancyB2DSize, size_t, int limit) {
  LOCK();
  function_of(f);
  if (!min_grid || !block) return CUDA_ERROR_INVALID_VALUE;
  // 72 registers a thread: 65536 / 72 = 910 -> 896 threads (28 warps) a block, one per SM.
  int b = 896;
  if (limit > 0) b = std::min(b, limit);
  *block = b;
  *min_grid = 132;
  return CUDA_SUCCESS;
}

}  // namespace gbx_double
