// GBX CUDA driver test double: a libcuda.so.1 for machines without a GPU, so CI runs the real
// cuda backend host code end to end (tests/CMakeLists.txt puts it on LD_LIBRARY_PATH of the
// cuda suites only). Its parts: this file (the device, errors, contexts, the procedure table
// and the exported symbols), memory.cpp, modules.cpp (images, the host compile), launch.cpp,
// warps.cpp and fibers.cpp (warp mode), clocks.cpp (streams, events and the vector-clock race
// checker), trace.cpp (the divergence meter's dispatch trace); shared state: cuda_double.h.
//
// - Device: one, with H100 attributes (sm_90, 132 SMs), named "GBX CUDA double (H100
//   attributes)". An attribute GBX asks for that is not modelled here aborts.
// - Memory: device addresses come from a fake range (kDeviceBase, a non-canonical x86-64
//   address), so a host read of device memory crashes instead of silently working. The
//   double keeps a host backing per allocation and translates addresses itself.
// - Modules: an image (CUBIN or PTX) is matched by SHA-256 to the kernel cache entry
//   ($GBX_CACHE_DIR) that lists it; that entry's source.cu is compiled for the host with a
//   shim that defines the CUDA keywords and built-ins (blockIdx, threadIdx, ...), so the very
//   kernel the GPU would run, bounds check included, runs on the CPU. The object is cached
//   beside the entries (a key of its own), so each kernel is compiled for the CPU once.
//   Every `__global__ void NAME(...)` of the source is a function of the module (gbx_step,
//   gbx_read_memory, gbx_copy_envs), with a launcher made from its own parameter list.
// - Launches run at the call, thread by thread over the grid. Each parameter is copied (its
//   size comes from the compiled launcher) and every 8-byte word of it that falls in the fake
//   device range is translated: no knowledge of a parameter struct's fields.
// - Warp mode (warps.cpp, fibers.cpp): a kernel whose source names a warp intrinsic
//   (__ballot_sync, __shfl_*_sync, __match_*_sync, __syncwarp, __activemask, __reduce_*_sync,
//   __syncthreads, ...), or every kernel with GBX_CUDA_DOUBLE_WARPS=all, runs block by block
//   with each thread a fiber on a stack of its own, in warps of 32 as on a GPU (a partial
//   last warp included). An intrinsic is a rendezvous of the lanes its mask names: results
//   are computed once they have all arrived (exited lanes take no part), and what the PTX
//   ISA leaves undefined (lanes that meet at one call with different masks, lanes waiting
//   for each other in calls that never meet, a caller outside its own mask, a shuffle
//   reading an exited or absent lane, a warp intrinsic waiting on a lane held at
//   __syncthreads) aborts naming the lanes and call sites.
// - Page-locked host memory (cuMemHostAlloc): an async device-to-host copy into it lands only
//   when the host synchronises past the copy (stream, event or context sync); until then the
//   destination holds a poison pattern (0xCD), so a host read that skipped the sync sees
//   garbage in CI instead of a stale value on a GPU. An async host-to-device copy from it
//   checks at that sync that the host did not rewrite the source while the copy was in flight,
//   and freeing page-locked memory that a copy still uses aborts.
// - Ordering: every stream, event and the host carry a vector clock; every device access is
//   recorded with its stream and position. An access that overlaps an earlier one (one of
//   them a write) with no happens-before edge between them (stream order, legacy-stream
//   implicit sync, events, host syncs) is a race on a real GPU: the double prints what
//   raced and aborts. Executing at the call is one valid CUDA schedule; the clocks check
//   that it is the only one the program relies on.
// - Transfers: gbx_cuda_double_copied_bytes(to_device) counts the bytes cuMemcpy* moved, so a
//   test can prove an operation moves no state through the host.
// - Failure injection: GBX_CUDA_DOUBLE_FAIL=KIND[:N] with KIND one of init (cuInit fails),
//   nodevice (no devices), oom (cuMemAlloc), load (cuModuleLoadData*), launch (the kernel
//   faults: the next synchronisation reports CUDA_ERROR_LAUNCH_FAILED, sticky as on a GPU).
//   N: the N-th such call fails (default 1; oom and load: that call and every later one).
#include "cuda_double.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gbx_double {

// ---- diagnostics and failure injection -----------------------------------------------------

[[noreturn]] void die(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "GBX CUDA double: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::fflush(stderr);
  std::abort();
}

void note(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "GBX CUDA double: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

Injection& injection() {
  static Injection inj = [] {
    Injection i;
    if (const char* v = std::getenv("GBX_CUDA_DOUBLE_FAIL")) {
      std::string s = v;
      const auto colon = s.find(':');
      i.kind = s.substr(0, colon);
      if (colon != std::string::npos) i.nth = std::max(1L, std::atol(s.c_str() + colon + 1));
      static const char* known[] = {"", "init", "nodevice", "oom", "load", "launch"};
      if (std::find_if(std::begin(known), std::end(known),
                       [&](const char* k) { return i.kind == k; }) == std::end(known))
        die("unknown GBX_CUDA_DOUBLE_FAIL kind '%s' (init, nodevice, oom, load, launch)",
            i.kind.c_str());
    }
    return i;
  }();
  return inj;
}

// ---- the device ----------------------------------------------------------------------------

int attribute(CUdevice_attribute a) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return 132;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      return 64;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      return 1980000;  // kHz
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      return 52428800;
    default:
      die("cuDeviceGetAttribute(%d): attribute not modelled by the double; add it", (int)a);
  }
}

// ---- the Driver API: initialisation, errors, the device, contexts ----------------------------

CUresult d_cuInit(unsigned flags) {
  LOCK();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (injection().hit("init", true)) return CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
  st().initialised = true;
  return CUDA_SUCCESS;
}

CUresult d_cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = kDriverVersion;
  return CUDA_SUCCESS;
}

const char* error_name(CUresult r) {
  switch (r) {
#define N(x) \
  case x:    \
    return #x;
    N(CUDA_SUCCESS)
    N(CUDA_ERROR_INVALID_VALUE)
    N(CUDA_ERROR_OUT_OF_MEMORY)
    N(CUDA_ERROR_NOT_INITIALIZED)
    N(CUDA_ERROR_NO_DEVICE)
    N(CUDA_ERROR_INVALID_DEVICE)
    N(CUDA_ERROR_INVALID_IMAGE)
    N(CUDA_ERROR_INVALID_CONTEXT)
    N(CUDA_ERROR_INVALID_HANDLE)
    N(CUDA_ERROR_NOT_FOUND)
    N(CUDA_ERROR_NOT_READY)
    N(CUDA_ERROR_LAUNCH_FAILED)
    N(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    N(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    N(CUDA_ERROR_NOT_SUPPORTED)
#undef N
    default:
      return nullptr;
  }
}

CUresult d_cuGetErrorName(CUresult r, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = error_name(r);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult d_cuGetErrorString(CUresult r, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  switch (r) {
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      *s = "system has unsupported display driver / cuda driver combination (injected by the "
           "GBX CUDA double)";
      return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *s = "out of memory";
      return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED:
      *s = "unspecified launch failure";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_IMAGE:
      *s = "device kernel image is invalid";
      return CUDA_SUCCESS;
    default:
      *s = error_name(r);
      return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult d_cuDeviceGetCount(int* n) {
  LOCK();
  if (!st().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = injection().kind == "nodevice" ? 0 : 1;
  return CUDA_SUCCESS;
}

CUresult d_cuDeviceGet(CUdevice* d, int ordinal) {
  LOCK();
  if (!st().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0 || injection().kind == "nodevice") return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}

CUresult d_cuDeviceGetName(char* name, int len, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, (size_t)len, "%s", kDeviceName);
  return CUDA_SUCCESS;
}

CUresult d_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = attribute(a);
  return CUDA_SUCCESS;
}

// Not a pointer into host memory either: the host never dereferences a context handle.
const CUcontext kContext = reinterpret_cast<CUcontext>(uintptr_t(0x0000C0DE00000000ull));

CUresult d_cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  LOCK();
  if (!st().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = kContext;
  return CUDA_SUCCESS;
}

CUresult d_cuDevicePrimaryCtxRelease(CUdevice d) {
  return d == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult d_cuCtxSetCurrent(CUcontext c) {
  if (c != nullptr && c != kContext) return CUDA_ERROR_INVALID_CONTEXT;
  t_context_current = c != nullptr;
  return CUDA_SUCCESS;
}

// ---- cuGetProcAddress ------------------------------------------------------------------------

struct Proc {
  const char* name;
  void* fn;
};

#define P(name, pfn) \
  { #name, reinterpret_cast < void*>(static_cast <pfn>(&d_##name)) }
const Proc kProcs[] = {
    P(cuInit, PFN_cuInit_v2000),
    P(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020),
    P(cuGetErrorName, PFN_cuGetErrorName_v6000),
    P(cuGetErrorString, PFN_cuGetErrorString_v6000),
    P(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000),
    P(cuDeviceGet, PFN_cuDeviceGet_v2000),
    P(cuDeviceGetName, PFN_cuDeviceGetName_v2000),
    P(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000),
    P(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000),
    P(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000),
    P(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000),
    P(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000),
    P(cuModuleLoadData, PFN_cuModuleLoadData_v2000),
    P(cuModuleLoadDataEx, PFN_cuModuleLoadDataEx_v2010),
    P(cuModuleUnload, PFN_cuModuleUnload_v2000),
    P(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000),
    P(cuFuncGetAttribute, PFN_cuFuncGetAttribute_v2020),
    P(cuMemAlloc, PFN_cuMemAlloc_v3020),
    P(cuMemFree, PFN_cuMemFree_v3020),
    P(cuMemHostAlloc, PFN_cuMemHostAlloc_v2020),
    P(cuMemFreeHost, PFN_cuMemFreeHost_v2000),
    P(cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020),
    P(cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020),
    P(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020),
    P(cuMemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020),
    P(cuMemsetD8, PFN_cuMemsetD8_v3020),
    P(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020),
    P(cuLaunchKernel, PFN_cuLaunchKernel_v4000),
    P(cuStreamCreate, PFN_cuStreamCreate_v2000),
    P(cuStreamDestroy, PFN_cuStreamDestroy_v4000),
    P(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000),
    P(cuEventCreate, PFN_cuEventCreate_v2000),
    P(cuEventDestroy, PFN_cuEventDestroy_v4000),
    P(cuEventRecord, PFN_cuEventRecord_v2000),
    P(cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020),
    P(cuEventSynchronize, PFN_cuEventSynchronize_v2000),
    P(cuOccupancyMaxPotentialBlockSize, PFN_cuOccupancyMaxPotentialBlockSize_v6050),
};
#undef P

CUresult d_cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t,
                            CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (cuda_version > kDriverVersion) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  for (const Proc& p : kProcs)
    if (std::strcmp(p.name, symbol) == 0) {
      *pfn = p.fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace gbx_double

using namespace gbx_double;

// The exported symbols: the ones a loader looks up before cuGetProcAddress_v2, which hands
// out the rest. Asm labels, because cuda.h #defines some of these names to other symbols.
#define EXPORT extern "C" __attribute__((visibility("default")))
EXPORT CUresult gbx_double_cuInit(unsigned flags) __asm__("cuInit");
EXPORT CUresult gbx_double_cuInit(unsigned flags) { return d_cuInit(flags); }
EXPORT CUresult gbx_double_cuGetErrorName(CUresult r, const char** s) __asm__("cuGetErrorName");
EXPORT CUresult gbx_double_cuGetErrorName(CUresult r, const char** s) {
  return d_cuGetErrorName(r, s);
}
EXPORT CUresult gbx_double_cuGetErrorString(CUresult r, const char** s) __asm__("cuGetErrorString");
EXPORT CUresult gbx_double_cuGetErrorString(CUresult r, const char** s) {
  return d_cuGetErrorString(r, s);
}
EXPORT CUresult
gbx_double_cuGetProcAddress(const char* symbol, void** pfn, int v, cuuint64_t f,
                            CUdriverProcAddressQueryResult* st) __asm__("cuGetProcAddress_v2");
EXPORT CUresult gbx_double_cuGetProcAddress(const char* symbol, void** pfn, int v, cuuint64_t f,
                                            CUdriverProcAddressQueryResult* st) {
  return d_cuGetProcAddress(symbol, pfn, v, f, st);
}
EXPORT const char* gbx_cuda_double_device_name() { return kDeviceName; }
// Bytes the cuMemcpy* calls moved so far: to_device 1 = host to device, 0 = device to host.
EXPORT uint64_t gbx_cuda_double_copied_bytes(int to_device) {
  return to_device ? g_copied_h2d.load() : g_copied_d2h.load();
}
// NVRTC dlopens libcuda.so.1 and asks it for private export tables (and crashes when the
// symbol is missing). The double has none to give.
EXPORT CUresult gbx_double_cuGetExportTable(const void** table,
                                            const CUuuid* id) __asm__("cuGetExportTable");
EXPORT CUresult gbx_double_cuGetExportTable(const void** table, const CUuuid*) {
  if (table) *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
