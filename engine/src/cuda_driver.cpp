// Driver API loader and RAII wrappers. Stages of CudaDriver::load: dlopen -> cuInit (tells a
// stub library from a real one) -> resolve every entry point -> count devices.
#include "gbx/engine/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace gbx {
namespace {

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

Error no_device(std::string reason, std::string detail = {}) {
  return make_error(ErrorKind::NoDevice, "no CUDA device: " + std::move(reason), std::move(detail));
}

// A driver that is installed but unusable: ErrorKind::Runtime, so tools exit non-zero through
// the error path, not the "no device" skip.
Error driver_error(std::string reason, std::string detail = {}) {
  return make_error(ErrorKind::Runtime, "CUDA driver error: " + std::move(reason),
                    std::move(detail));
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

std::string cu_result_name(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED:
      return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
      return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
      return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX:
      return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_LAUNCH_FAILED:
      return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case CUDA_ERROR_UNKNOWN:
      return "CUDA_ERROR_UNKNOWN";
    default:
      return "CUresult " + std::to_string(static_cast<int>(r));
  }
}

// ---- CudaDriver ---------------------------------------------------------------------------

Result<std::unique_ptr<CudaDriver>> CudaDriver::load(const std::string& library) {
  std::unique_ptr<CudaDriver> drv(new CudaDriver());
  drv->library_ = library;
  dlerror();
  // RTLD_NODELETE: a driver that ran cuInit (even a failing one) may have started threads
  // and keeps state; unloading it after a "no device" or error result is unsupported, and
  // LeakSanitizer saw that state leaked with the mapping that referenced it.
  drv->handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!drv->handle_) {
    const char* why = dlerror();
    std::string detail = why ? why : "";
    if (detail.find("No such file") != std::string::npos || detail.empty())
      return no_device(library + " not found (no NVIDIA driver installed)", detail);
    // The library is there but broken (wrong architecture, missing dependency): a driver
    // problem the user must fix, not the absence of a GPU.
    return driver_error(library + " could not be loaded: " + one_line(detail), detail);
  }
  void* handle = drv->handle_;
  auto sym = [handle](const char* name) { return dlsym(handle, name); };

  // cuInit comes first: only it tells a toolkit stub (every call returns 34) from a driver.
  drv->cuInit = reinterpret_cast<PFN_cuInit_v2000>(sym("cuInit"));
  drv->cuGetErrorName = reinterpret_cast<PFN_cuGetErrorName_v6000>(sym("cuGetErrorName"));
  drv->cuGetErrorString = reinterpret_cast<PFN_cuGetErrorString_v6000>(sym("cuGetErrorString"));
  if (!drv->cuInit) return driver_error(library + " has no cuInit (not a CUDA driver)");
  CUresult init = drv->cuInit(0);
  if (init == CUDA_ERROR_STUB_LIBRARY)
    return no_device("only the CUDA toolkit's stub libcuda is present", library);
  auto described = [&](CUresult r) {
    std::string text = drv->error_string(r);
    return drv->error_name(r) + (text.empty() ? "" : " (" + one_line(text) + ")");
  };
  // The driver's own "no device" is the only cuInit failure that means there is no GPU;
  // anything else (driver/kernel module mismatch, insufficient driver, ...) is an error.
  if (init == CUDA_ERROR_NO_DEVICE) return no_device("cuInit: " + described(init));
  if (init != CUDA_SUCCESS) return driver_error("cuInit failed: " + described(init));

  // cuGetProcAddress_v2 (CUDA 12.0+) hands out the entry point matching the ABI version we
  // ask for; an older driver only has the exported, versioned symbols.
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(sym("cuGetProcAddress_v2"));
  drv->via_get_proc_address_ = get_proc != nullptr;
  std::vector<std::string> missing;
  auto resolve = [&](void** slot, const char* proc_name, const char* symbol) {
    *slot = nullptr;
    if (get_proc) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      CUresult r = get_proc(proc_name, slot, kCudaDriverAbiVersion,
                            CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
      if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) *slot = nullptr;
    }
    if (!*slot) *slot = sym(symbol);
    if (!*slot) missing.push_back(proc_name);
  };
#define GBX_CUDA_DRIVER_RESOLVE(member, type, proc_name, symbol) \
  resolve(reinterpret_cast<void**>(&drv->member), proc_name, symbol);
  GBX_CUDA_DRIVER_FUNCTIONS(GBX_CUDA_DRIVER_RESOLVE)
#undef GBX_CUDA_DRIVER_RESOLVE
  if (!missing.empty())
    return driver_error("the driver in " + library + " lacks " + missing.front() +
                        " (driver too old for CUDA " +
                        std::to_string(kCudaDriverAbiVersion / 1000) + "." +
                        std::to_string(kCudaDriverAbiVersion % 1000 / 10) + ")");

  CUresult r = drv->cuDriverGetVersion(&drv->driver_version_);
  if (r != CUDA_SUCCESS) return driver_error("cuDriverGetVersion failed: " + described(r));
  r = drv->cuDeviceGetCount(&drv->device_count_);
  if (r == CUDA_ERROR_NO_DEVICE) return no_device("cuDeviceGetCount: " + described(r));
  if (r != CUDA_SUCCESS) return driver_error("cuDeviceGetCount failed: " + described(r));
  if (drv->device_count_ == 0) return no_device("the NVIDIA driver reports no devices");
  return drv;
}

Result<CudaDriver*> CudaDriver::get() {
  // Loaded once and kept for the life of the process: modules and contexts outlive callers.
  static Result<std::unique_ptr<CudaDriver>>* loaded =
      new Result<std::unique_ptr<CudaDriver>>(load("libcuda.so.1"));
  if (!*loaded) return loaded->error();
  return loaded->value().get();
}

CudaDriver::~CudaDriver() {
  if (handle_) dlclose(handle_);
}

std::string CudaDriver::error_name(CUresult r) const {
  const char* s = nullptr;
  if (cuGetErrorName && cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return cu_result_name(r);
}

std::string CudaDriver::error_string(CUresult r) const {
  const char* s = nullptr;
  if (cuGetErrorString && cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return {};
}

Error CudaDriver::error(CUresult r, const char* call, const char* file, int line) const {
  std::string text = error_string(r);
  return make_error(ErrorKind::Runtime, std::string(call) + " failed: " + error_name(r) +
                                            (text.empty() ? "" : " (" + one_line(text) + ")") +
                                            " at " + base_name(file) + ":" + std::to_string(line));
}

// ---- CudaContext --------------------------------------------------------------------------

Result<std::unique_ptr<CudaContext>> CudaContext::open(int device_index) {
  auto drv_r = CudaDriver::get();
  if (!drv_r) return drv_r.take_error();
  CudaDriver& drv = **drv_r;
  if (device_index < 0 || device_index >= drv.device_count())
    return make_error(ErrorKind::Usage, "CUDA device " + std::to_string(device_index) +
                                            " does not exist (" +
                                            std::to_string(drv.device_count()) + " present)");

  std::unique_ptr<CudaContext> ctx(new CudaContext());
  ctx->driver_ = &drv;
  ctx->index_ = device_index;
  GBX_CHECK_CU(drv, cuDeviceGet(&ctx->device_, device_index));
  char name[256] = {};
  GBX_CHECK_CU(drv, cuDeviceGetName(name, sizeof(name) - 1, ctx->device_));
  ctx->name_ = name;
  GBX_CHECK_CU(drv,
               cuDeviceGetAttribute(&ctx->cc_major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                    ctx->device_));
  GBX_CHECK_CU(drv,
               cuDeviceGetAttribute(&ctx->cc_minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                    ctx->device_));
  GBX_CHECK_CU(drv, cuDeviceGetAttribute(&ctx->multiprocessors_,
                                         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->device_));
  GBX_CHECK_CU(drv, cuDeviceGetAttribute(&ctx->max_threads_per_block_,
                                         CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ctx->device_));
  GBX_CHECK_CU(drv, cuDevicePrimaryCtxRetain(&ctx->context_, ctx->device_));
  // From here on the destructor releases the retained context.
  Status current = ctx->make_current();
  if (!current) return current.take_error();
  return ctx;
}

CudaContext::~CudaContext() {
  if (context_) driver_->cuDevicePrimaryCtxRelease(device_);
}

Status CudaContext::make_current() const {
  GBX_CHECK_CU(*driver_, cuCtxSetCurrent(context_));
  return ok_status();
}

Status CudaContext::synchronize() const {
  Status current = make_current();
  if (!current) return current;
  GBX_CHECK_CU(*driver_, cuCtxSynchronize());
  return ok_status();
}

// ---- CudaStream ---------------------------------------------------------------------------

Result<CudaStream> CudaStream::create(const CudaContext& ctx) {
  Status current = ctx.make_current();
  if (!current) return current.take_error();
  CudaStream s;
  GBX_CHECK_CU(ctx.driver(), cuStreamCreate(&s.stream_, CU_STREAM_NON_BLOCKING));
  s.ctx_ = &ctx;
  return s;
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)), stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    reset();
    ctx_ = std::exchange(other.ctx_, nullptr);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

CudaStream::~CudaStream() { reset(); }

void CudaStream::reset() {
  if (stream_) ctx_->driver().cuStreamDestroy(stream_);
  stream_ = nullptr;
  ctx_ = nullptr;
}

Status CudaStream::synchronize() const {
  if (!stream_) return make_error(ErrorKind::Runtime, "synchronize on an empty CudaStream");
  GBX_CHECK_CU(ctx_->driver(), cuStreamSynchronize(stream_));
  return ok_status();
}

// ---- DeviceBuffer -------------------------------------------------------------------------

Result<DeviceBuffer> DeviceBuffer::alloc(const CudaContext& ctx, size_t bytes) {
  Status current = ctx.make_current();
  if (!current) return current.take_error();
  DeviceBuffer buf;
  // cuMemAlloc rejects 0 bytes; an empty buffer is still a valid (null) one.
  if (bytes) GBX_CHECK_CU(ctx.driver(), cuMemAlloc(&buf.ptr_, bytes));
  buf.ctx_ = &ctx;
  buf.size_ = bytes;
  return buf;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)),
      ptr_(std::exchange(other.ptr_, 0)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    ctx_ = std::exchange(other.ctx_, nullptr);
    ptr_ = std::exchange(other.ptr_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() {
  if (ptr_) {
    // Destruction may happen on a thread where the context is not current.
    (void)ctx_->make_current();
    ctx_->driver().cuMemFree(ptr_);
  }
  ptr_ = 0;
  size_ = 0;
  ctx_ = nullptr;
}

Status DeviceBuffer::check_range(size_t bytes, size_t offset) const {
  if (offset > size_ || bytes > size_ - offset)
    return make_error(ErrorKind::Runtime, "device buffer access [" + std::to_string(offset) +
                                              ", +" + std::to_string(bytes) + ") outside its " +
                                              std::to_string(size_) + " bytes");
  return ok_status();
}

namespace {
Status need_stream(CUstream stream, const char* what) {
  if (stream) return ok_status();
  return make_error(ErrorKind::Runtime,
                    std::string("DeviceBuffer::") + what +
                        " needs the stream its users run on (a legacy-stream copy would race "
                        "a launch on a non-blocking stream)");
}
}  // namespace

Status DeviceBuffer::upload(const void* src, size_t bytes, size_t offset, CUstream stream) {
  Status range = check_range(bytes, offset);
  if (!range || bytes == 0) return range;
  if (Status s = need_stream(stream, "upload"); !s) return s;
  GBX_CHECK_CU(ctx_->driver(), cuMemcpyHtoDAsync(ptr_ + offset, src, bytes, stream));
  return ok_status();
}

Status DeviceBuffer::download(void* dst, size_t bytes, size_t offset, CUstream stream) const {
  Status range = check_range(bytes, offset);
  if (!range || bytes == 0) return range;
  if (Status s = need_stream(stream, "download"); !s) return s;
  GBX_CHECK_CU(ctx_->driver(), cuMemcpyDtoHAsync(dst, ptr_ + offset, bytes, stream));
  return ok_status();
}

Status DeviceBuffer::fill(uint8_t value, CUstream stream) {
  if (!ptr_) return ok_status();
  if (Status s = need_stream(stream, "fill"); !s) return s;
  GBX_CHECK_CU(ctx_->driver(), cuMemsetD8Async(ptr_, value, size_, stream));
  return ok_status();
}

// ---- PinnedBuffer -------------------------------------------------------------------------

Result<PinnedBuffer> PinnedBuffer::alloc(const CudaContext& ctx, size_t bytes) {
  Status current = ctx.make_current();
  if (!current) return current.take_error();
  PinnedBuffer buf;
  void* p = nullptr;
  if (bytes) GBX_CHECK_CU(ctx.driver(), cuMemHostAlloc(&p, bytes, 0));
  buf.ctx_ = &ctx;
  buf.data_ = static_cast<uint8_t*>(p);
  buf.size_ = bytes;
  return buf;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    ctx_ = std::exchange(other.ctx_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() { reset(); }

void PinnedBuffer::reset() {
  if (data_) {
    (void)ctx_->make_current();
    ctx_->driver().cuMemFreeHost(data_);
  }
  data_ = nullptr;
  size_ = 0;
  ctx_ = nullptr;
}

// ---- CudaModule ---------------------------------------------------------------------------

Result<CudaModule> CudaModule::load(const CudaContext& ctx, const std::string& image,
                                    ModuleImage kind) {
  Status current = ctx.make_current();
  if (!current) return current.take_error();
  const CudaDriver& drv = ctx.driver();
  CudaModule mod;
  if (kind == ModuleImage::Cubin) {
    GBX_CHECK_CU(drv, cuModuleLoadData(&mod.module_, image.data()));
  } else {
    // The JIT's own diagnostics say why PTX was rejected; keep them as the error's detail.
    std::string log(16384, '\0');
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
    CUresult r = drv.cuModuleLoadDataEx(&mod.module_, image.c_str(), 2, opts, values);
    if (r != CUDA_SUCCESS) {
      Error e = drv.error(r, "cuModuleLoadDataEx(ptx)", __FILE__, __LINE__);
      e.detail = log.c_str();
      return e;
    }
  }
  mod.ctx_ = &ctx;
  return mod;
}

CudaModule::CudaModule(CudaModule&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)), module_(std::exchange(other.module_, nullptr)) {}

CudaModule& CudaModule::operator=(CudaModule&& other) noexcept {
  if (this != &other) {
    reset();
    ctx_ = std::exchange(other.ctx_, nullptr);
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

CudaModule::~CudaModule() { reset(); }

void CudaModule::reset() {
  if (module_) {
    (void)ctx_->make_current();
    ctx_->driver().cuModuleUnload(module_);
  }
  module_ = nullptr;
  ctx_ = nullptr;
}

Result<CUfunction> CudaModule::function(const std::string& name) const {
  if (!module_) return make_error(ErrorKind::Runtime, "function lookup in an empty CudaModule");
  CUfunction fn = nullptr;
  CUresult r = ctx_->driver().cuModuleGetFunction(&fn, module_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND)
    return make_error(ErrorKind::Runtime, "kernel '" + name + "' not found in module");
  if (r != CUDA_SUCCESS) return ctx_->driver().error(r, "cuModuleGetFunction", __FILE__, __LINE__);
  return fn;
}

// ---- launches -----------------------------------------------------------------------------

LaunchShape launch_shape(long long threads, int block) {
  LaunchShape shape;
  shape.block = static_cast<unsigned>(block > 0 ? block : 1);
  long long blocks = threads > 0 ? (threads + shape.block - 1) / shape.block : 1;
  shape.grid = static_cast<unsigned>(blocks > 0 ? blocks : 1);
  return shape;
}

Result<LaunchShape> occupancy_launch_shape(const CudaDriver& driver, CUfunction fn,
                                           long long threads, int block_limit) {
  int min_grid = 0, block = 0;
  GBX_CHECK_CU(driver, cuOccupancyMaxPotentialBlockSize(&min_grid, &block, fn, nullptr, 0,
                                                        block_limit > 0 ? block_limit : 0));
  if (block <= 0)
    return make_error(ErrorKind::Runtime, "cuOccupancyMaxPotentialBlockSize gave no block size");
  return launch_shape(threads, block);
}

LaunchShape throughput_launch_shape(const LaunchDevice& dev, long long envs, int block_size) {
  if (block_size > 0) return launch_shape(envs, block_size);
  const long long sms = std::max(1, dev.multiprocessors);
  int block = 32;
  for (int b : {kDefaultBlockSize, 64, 32})
    if ((envs + b - 1) / b >= sms) {
      block = b;
      break;
    }
  if (dev.max_threads_per_block >= 32) block = std::min(block, dev.max_threads_per_block / 32 * 32);
  return launch_shape(envs, block);
}

Status check_block_size(int block_size, int max_threads_per_block) {
  if (block_size >= 32 && block_size <= max_threads_per_block && block_size % 32 == 0)
    return ok_status();
  return make_error(ErrorKind::Usage, "--block-size " + std::to_string(block_size) +
                                          ": must be a multiple of 32 from 32 to " +
                                          std::to_string(max_threads_per_block));
}

Status launch_kernel(const CudaDriver& driver, CUfunction fn, LaunchShape shape, void** args,
                     CUstream stream, unsigned shared_bytes) {
  GBX_CHECK_CU(driver, cuLaunchKernel(fn, shape.grid, 1, 1, shape.block, 1, 1, shared_bytes, stream,
                                      args, nullptr));
  return ok_status();
}

}  // namespace gbx
