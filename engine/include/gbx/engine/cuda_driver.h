#pragma once
// CUDA Driver API loaded at run time: dlopen("libcuda.so.1") + cuGetProcAddress, never
// -lcuda, so every binary runs (CPU only) where no NVIDIA driver is installed. The Driver
// API's types come from GBX's own cuda_api.h (no toolkit needed to build); calling a cu*
// function directly would fail to link.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbx/engine/cuda_api.h"
#include "gbx/engine/result.h"

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
// cuda.h would rename some members below in this translation unit only.
#error "gbx/engine/cuda_driver.h expects the legacy default stream"
#endif

namespace gbx {

// The entry points GBX uses: member, function-pointer type, base name for cuGetProcAddress,
// exported symbol for the dlsym fallback. The types are those of CUDA 12.0, the version we
// ask cuGetProcAddress for, so a newer driver keeps handing out these signatures (CUDA 13
// gave cuCtxSynchronize a context argument, for one). Members are named after the API; where
// cuda.h #defines a name to its _v2 symbol the member is renamed consistently, which is
// harmless.
#define GBX_CUDA_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit, PFN_cuInit_v2000, "cuInit", "cuInit")                                                 \
  X(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020, "cuDriverGetVersion", "cuDriverGetVersion") \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000, "cuGetErrorName", "cuGetErrorName")                 \
  X(cuGetErrorString, PFN_cuGetErrorString_v6000, "cuGetErrorString", "cuGetErrorString")         \
  X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000, "cuDeviceGetCount", "cuDeviceGetCount")         \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000, "cuDeviceGet", "cuDeviceGet")                             \
  X(cuDeviceGetName, PFN_cuDeviceGetName_v2000, "cuDeviceGetName", "cuDeviceGetName")             \
  X(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000, "cuDeviceGetAttribute",                 \
    "cuDeviceGetAttribute")                                                                       \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain",     \
    "cuDevicePrimaryCtxRetain")                                                                   \
  X(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000, "cuDevicePrimaryCtxRelease", \
    "cuDevicePrimaryCtxRelease_v2")                                                               \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000, "cuCtxSetCurrent", "cuCtxSetCurrent")             \
  X(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000, "cuCtxSynchronize", "cuCtxSynchronize")         \
  X(cuModuleLoadData, PFN_cuModuleLoadData_v2000, "cuModuleLoadData", "cuModuleLoadData")         \
  X(cuModuleLoadDataEx, PFN_cuModuleLoadDataEx_v2010, "cuModuleLoadDataEx", "cuModuleLoadDataEx") \
  X(cuModuleUnload, PFN_cuModuleUnload_v2000, "cuModuleUnload", "cuModuleUnload")                 \
  X(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000, "cuModuleGetFunction",                    \
    "cuModuleGetFunction")                                                                        \
  X(cuFuncGetAttribute, PFN_cuFuncGetAttribute_v2020, "cuFuncGetAttribute", "cuFuncGetAttribute") \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020, "cuMemAlloc", "cuMemAlloc_v2")                              \
  X(cuMemFree, PFN_cuMemFree_v3020, "cuMemFree", "cuMemFree_v2")                                  \
  X(cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020, "cuMemcpyHtoD", "cuMemcpyHtoD_v2")                      \
  X(cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2")  \
  X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020, "cuMemcpyDtoH", "cuMemcpyDtoH_v2")                      \
  X(cuMemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2")  \
  X(cuMemsetD8, PFN_cuMemsetD8_v3020, "cuMemsetD8", "cuMemsetD8_v2")                              \
  X(cuLaunchKernel, PFN_cuLaunchKernel_v4000, "cuLaunchKernel", "cuLaunchKernel")                 \
  X(cuStreamCreate, PFN_cuStreamCreate_v2000, "cuStreamCreate", "cuStreamCreate")                 \
  X(cuStreamDestroy, PFN_cuStreamDestroy_v4000, "cuStreamDestroy", "cuStreamDestroy_v2")          \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000, "cuStreamSynchronize",                    \
    "cuStreamSynchronize")                                                                        \
  X(cuOccupancyMaxPotentialBlockSize, PFN_cuOccupancyMaxPotentialBlockSize_v6050,                 \
    "cuOccupancyMaxPotentialBlockSize", "cuOccupancyMaxPotentialBlockSize")                       \
  GBX_CUDA_DRIVER_FUNCTIONS_FDOUBLE(X)                                                            \
  X(cuMemHostAlloc, PFN_cuMemHostAlloc_v2020, "cuMemHostAlloc", "cuMemHostAlloc")                 \
  X(cuMemFreeHost, PFN_cuMemFreeHost_v2000, "cuMemFreeHost", "cuMemFreeHost")

// ---- added by fdouble (stream-ordered fills, events) --------------------------------------
#define GBX_CUDA_DRIVER_FUNCTIONS_FDOUBLE(X)                                                      \
  X(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020, "cuMemsetD8Async", "cuMemsetD8Async")             \
  X(cuEventCreate, PFN_cuEventCreate_v2000, "cuEventCreate", "cuEventCreate")                     \
  X(cuEventDestroy, PFN_cuEventDestroy_v4000, "cuEventDestroy", "cuEventDestroy_v2")              \
  X(cuEventRecord, PFN_cuEventRecord_v2000, "cuEventRecord", "cuEventRecord")                     \
  X(cuEventSynchronize, PFN_cuEventSynchronize_v2000, "cuEventSynchronize", "cuEventSynchronize") \
  X(cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020, "cuStreamWaitEvent", "cuStreamWaitEvent")
// ---- end of fdouble's block ----------------------------------------------------------------

// The CUDA version whose ABI the table above uses (cuGetProcAddress' cudaVersion).
inline constexpr int kCudaDriverAbiVersion = 12000;

// "CUDA_ERROR_OUT_OF_MEMORY" for common codes without asking the driver (the stub library
// answers every call, cuGetErrorName included, with CUDA_ERROR_STUB_LIBRARY).
std::string cu_result_name(CUresult r);

class CudaDriver {
 public:
  // The process-wide driver, loaded and initialised (cuInit) once; later calls return the
  // same pointer or the same error. Where there is no GPU (no libcuda.so.1, only the
  // toolkit's stub, the driver reports no device) the error is ErrorKind::NoDevice with a
  // one-line message starting "no CUDA device: "; a driver that is present but unusable
  // (cuInit or another call fails, an entry point is missing, the library cannot be loaded)
  // is ErrorKind::Runtime starting "CUDA driver error: " and naming the driver's error.
  static Result<CudaDriver*> get();
  // Loads a specific library (a path or a soname), independent of get(). For tests and
  // diagnostics: loading the toolkit's stub must report the stub.
  static Result<std::unique_ptr<CudaDriver>> load(const std::string& library);

  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

#define GBX_CUDA_DRIVER_MEMBER(member, type, proc_name, symbol) type member = nullptr;
  GBX_CUDA_DRIVER_FUNCTIONS(GBX_CUDA_DRIVER_MEMBER)
#undef GBX_CUDA_DRIVER_MEMBER

  int driver_version() const { return driver_version_; }  // 12040 = CUDA 12.4
  int device_count() const { return device_count_; }
  const std::string& library() const { return library_; }
  bool via_get_proc_address() const { return via_get_proc_address_; }

  std::string error_name(CUresult r) const;    // cuGetErrorName, else cu_result_name
  std::string error_string(CUresult r) const;  // cuGetErrorString, else ""
  // "<call> failed: CUDA_ERROR_X (description) at file.cpp:123" as ErrorKind::Runtime.
  Error error(CUresult r, const char* call, const char* file, int line) const;

 private:
  CudaDriver() = default;
  void* handle_ = nullptr;
  std::string library_;
  int driver_version_ = 0;
  int device_count_ = 0;
  bool via_get_proc_address_ = false;
};

// For functions returning Result<T> or Status: calls driver.call and returns the CUresult as
// an Error naming the call, the code and file:line. Use as GBX_CHECK_CU(drv, cuInit(0)).
#define GBX_CHECK_CU(driver, call)                                                              \
  do {                                                                                          \
    CUresult gbx_cu_r_ = (driver).call;                                                         \
    if (gbx_cu_r_ != CUDA_SUCCESS) return (driver).error(gbx_cu_r_, #call, __FILE__, __LINE__); \
  } while (0)

// One device's primary context (the one the runtime API would share), retained while this
// object lives.
class CudaContext {
 public:
  static Result<std::unique_ptr<CudaContext>> open(int device_index);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  // The context is per thread: call on any thread other than the one that opened it.
  Status make_current() const;
  Status synchronize() const;

  CudaDriver& driver() const { return *driver_; }
  CUdevice device() const { return device_; }
  CUcontext context() const { return context_; }
  int index() const { return index_; }
  const std::string& name() const { return name_; }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }
  int sm() const { return cc_major_ * 10 + cc_minor_; }              // 90
  std::string arch() const { return "sm_" + std::to_string(sm()); }  // "sm_90"
  int multiprocessors() const { return multiprocessors_; }
  int max_threads_per_block() const { return max_threads_per_block_; }
  int driver_version() const { return driver_->driver_version(); }

 private:
  CudaContext() = default;
  CudaDriver* driver_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  int index_ = 0;
  std::string name_;
  int cc_major_ = 0, cc_minor_ = 0;
  int multiprocessors_ = 0;
  int max_threads_per_block_ = 0;
};

class CudaStream {
 public:
  static Result<CudaStream> create(const CudaContext& ctx);
  CudaStream() = default;
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  ~CudaStream();

  CUstream get() const { return stream_; }
  Status synchronize() const;

 private:
  void reset();
  const CudaContext* ctx_ = nullptr;
  CUstream stream_ = nullptr;
};

// Device memory, freed on destruction. Every copy and fill is enqueued on the caller's stream:
// GBX launches on CU_STREAM_NON_BLOCKING streams, which do not synchronise with the legacy
// default stream, so a null-stream copy followed by a launch would race on a GPU.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> alloc(const CudaContext& ctx, size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {  // for filling pointer fields of kernel parameter structs
    return reinterpret_cast<T*>(static_cast<uintptr_t>(ptr_));
  }

  // A null stream is refused (see above). Pageable host memory: an upload's source may be
  // reused on return; a download's destination is valid after the stream is synchronised.
  Status upload(const void* src, size_t bytes, size_t offset, CUstream stream);
  Status download(void* dst, size_t bytes, size_t offset, CUstream stream) const;
  Status fill(uint8_t value, CUstream stream);

 private:
  Status check_range(size_t bytes, size_t offset) const;
  void reset();
  const CudaContext* ctx_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t size_ = 0;
};

// Page-locked host memory (cuMemHostAlloc), freed on destruction: the destination of the bulk
// output copies, so a device-to-host copy is truly asynchronous. Its contents are valid only
// after the stream that copied into it has been synchronised.
class PinnedBuffer {
 public:
  static Result<PinnedBuffer> alloc(const CudaContext& ctx, size_t bytes);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  ~PinnedBuffer();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void reset();
  const CudaContext* ctx_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

enum class ModuleImage { Cubin, Ptx };

class CudaModule {
 public:
  // image: a CUBIN, or PTX text (JIT-compiled by the driver; its log lands in the error).
  static Result<CudaModule> load(const CudaContext& ctx, const std::string& image,
                                 ModuleImage kind);
  CudaModule() = default;
  CudaModule(CudaModule&& other) noexcept;
  CudaModule& operator=(CudaModule&& other) noexcept;
  ~CudaModule();

  Result<CUfunction> function(const std::string& name) const;
  CUmodule get() const { return module_; }

 private:
  void reset();
  const CudaContext* ctx_ = nullptr;
  CUmodule module_ = nullptr;
};

struct LaunchShape {
  unsigned grid = 0;
  unsigned block = 0;
};

// Enough blocks of `block` threads to cover `threads` (at least one block).
LaunchShape launch_shape(long long threads, int block);

// Block size from cuOccupancyMaxPotentialBlockSize (capped by block_limit if > 0), grid
// covering `threads`.
Result<LaunchShape> occupancy_launch_shape(const CudaDriver& driver, CUfunction fn,
                                           long long threads, int block_limit = 0);

// What the launch shape depends on (device attributes).
struct LaunchDevice {
  int multiprocessors = 0;           // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  int max_threads_per_block = 1024;  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
};

// The block size GBX launches with when none is asked for.
inline constexpr int kDefaultBlockSize = 128;

// One thread per env, shaped for throughput: blocks of kDefaultBlockSize (4 warps, one per
// SM sub-partition scheduler) once there are enough envs for a block on every SM; below
// that, the largest of 64 and 32 that still gives every SM a block (32 when even that is
// impossible), since an SM without a block does nothing. `block_size` > 0 overrides
// (checked by check_block_size). A pure function: unit-tested with H100/A100/L4 attributes.
LaunchShape throughput_launch_shape(const LaunchDevice& dev, long long envs, int block_size = 0);

// --block-size: a multiple of 32 from 32 to the device's limit (1024 when unknown).
Status check_block_size(int block_size, int max_threads_per_block = 1024);

// args: one pointer per kernel parameter, e.g. {&params} for gbx_step(const GbxParams p).
Status launch_kernel(const CudaDriver& driver, CUfunction fn, LaunchShape shape, void** args,
                     CUstream stream = nullptr, unsigned shared_bytes = 0);

}  // namespace gbx
