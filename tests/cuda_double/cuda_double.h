#pragma once
// The GBX CUDA driver test double's shared state (see cuda_double.cpp for what it models):
// the device memory, modules, streams, events and their vector clocks, and the functions the
// parts use from each other. Everything here stays inside the library (hidden visibility).
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gbx/engine/cuda_api.h"

namespace gbx_double {

// ---- diagnostics and failure injection (cuda_double.cpp) -----------------------------------

[[noreturn]] void die(const char* fmt, ...);
void note(const char* fmt, ...);

struct Injection {
  std::string kind;
  long nth = 1;
  long seen = 0;
  // True when this call of `kind` is the one (or, if `from_then_on`, one of those) to fail.
  bool hit(const char* k, bool from_then_on) {
    if (kind != k) return false;
    ++seen;
    return from_then_on ? seen >= nth : seen == nth;
  }
};

Injection& injection();  // GBX_CUDA_DOUBLE_FAIL

// ---- the device (cuda_double.cpp) ----------------------------------------------------------

constexpr const char* kDeviceName = "GBX CUDA double (H100 attributes)";
constexpr int kDriverVersion = 13000;
constexpr size_t kDeviceMemory = size_t(80) << 30;

int attribute(CUdevice_attribute a);

// ---- clocks and races (clocks.cpp) ---------------------------------------------------------

using Clock = std::vector<uint64_t>;  // index: stream id

inline void join(Clock& into, const Clock& other) {
  if (into.size() < other.size()) into.resize(other.size(), 0);
  for (size_t i = 0; i < other.size(); ++i) into[i] = std::max(into[i], other[i]);
}

inline uint64_t at(const Clock& c, size_t i) { return i < c.size() ? c[i] : 0; }

struct Stream {
  int id = 0;
  bool non_blocking = false;
  bool live = true;
  Clock clock;
};

struct Event {
  Clock clock;
};

struct Access {
  size_t begin = 0, end = 0;
  bool write = false;
  int stream = 0;
  uint64_t epoch = 0;
  std::string what;
};

// ---- memory (memory.cpp) -------------------------------------------------------------------

// Bits 47..63 must all be equal in a canonical x86-64 address: this range is never mapped,
// so a host dereference faults at once.
constexpr uint64_t kDeviceBase = 0x0000D00000000000ull;
constexpr uint64_t kDeviceEnd = kDeviceBase + (uint64_t(1) << 44);
constexpr uint64_t kGap = uint64_t(1) << 20;  // unmapped space between allocations

// Host backing of one allocation: its last byte sits (up to 16-byte alignment) right before an
// inaccessible guard page, so a kernel or copy that runs past the end of a buffer that was
// allocated too small faults in CI.
struct Backing {
  void* map = MAP_FAILED;
  size_t map_bytes = 0;
  uint8_t* data = nullptr;
  Backing() = default;
  Backing(const Backing&) = delete;
  Backing& operator=(const Backing&) = delete;
  ~Backing() {
    if (map != MAP_FAILED) munmap(map, map_bytes);
  }
  bool create(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t body = (bytes + 15) / 16 * 16;
    const size_t pages = (body + page - 1) / page;
    map_bytes = (pages + 1) * page;
    map = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return false;
    uint8_t* guard = static_cast<uint8_t*>(map) + pages * page;
    if (mprotect(guard, page, PROT_NONE) != 0) return false;
    data = guard - body;
    return true;
  }
};

struct Allocation {
  uint64_t base = 0;
  size_t size = 0;
  std::unique_ptr<Backing> backing;
  uint8_t* host() const { return backing->data; }
  std::vector<Access> accesses;
};

// ---- modules (modules.cpp) -----------------------------------------------------------------

// A kernel's launcher: with dims == nullptr it writes the size of each parameter into sizes and
// returns their count; else it runs the grid over args (one pointer per parameter).
using LaunchFn = unsigned (*)(void* const* args, const unsigned* dims, unsigned* sizes);

// The same kernel one thread at a time, for warp mode: `coords` are the grid and block
// dimensions, the block index and the thread index (x, y, z each: 12 values).
using LaneFn = void (*)(void* const* args, const unsigned* coords);

struct Kernel {
  LaunchFn launch = nullptr;
  LaneFn lane = nullptr;
  bool warps = false;  // its source names a warp intrinsic: launches run in warp mode
  std::vector<unsigned> param_sizes;
};

struct Module {
  std::string image_sha256;
  std::map<std::string, Kernel> kernels;  // every __global__ function of the source
};

struct Function {
  Module* module = nullptr;
  std::string name;
  const Kernel* kernel = nullptr;
};

// ---- warp mode (warps.cpp, fibers.cpp) -----------------------------------------------------

// The host definitions of the warp intrinsics (and __shared__, warpSize, the bit built-ins),
// compiled after the keyword shim.
const std::string& warp_shim();
// gbx_double_lane_NAME: one thread of kernel NAME (LaneFn), after launcher()'s typedefs.
std::string lane_launcher(const std::string& kernel, size_t params);
// Whether a CUDA source names a warp intrinsic (or __syncthreads): its launches run in warp mode.
bool names_warp_intrinsic(const std::string& source);
// After a host object is loaded: k.lane from it, and the module's intrinsics pointed at the
// double. "" or what went wrong.
std::string attach_lanes(const std::string& jit_key, const std::string& object,
                         const std::string& kernel, Kernel& k);
// Warp mode for this launch: the kernel names an intrinsic, or GBX_CUDA_DOUBLE_WARPS=all.
bool warp_mode(const Kernel& k);
// Runs the grid block by block, each block's threads as fibers grouped in warps of 32.
void run_warps(const Kernel& k, void* const* args, const unsigned dims[6], const std::string& what);

constexpr size_t kLaneStackBytes = size_t(256) << 10;
constexpr size_t kLaneGuardBytes = size_t(64) << 10;

struct FiberStack {
  void* map = nullptr;
  size_t map_bytes = 0;
  uint8_t* bottom = nullptr;  // lowest usable byte; the guard lies below it
  FiberStack() = default;
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  ~FiberStack();
};

#if defined(__x86_64__) && !defined(GBX_CUDA_DOUBLE_UCONTEXT)
#define GBX_DOUBLE_ASM_SWITCH 1
#else
#define GBX_DOUBLE_ASM_SWITCH 0
#endif

struct FiberContext {
#if GBX_DOUBLE_ASM_SWITCH
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
  const void* stack_bottom = nullptr;  // for AddressSanitizer's fiber annotations
  size_t stack_size = 0;
};

// The i-th lane stack of this process (made on first use, kept for later launches).
FiberStack* lane_stack(size_t i);
// How deep a stack has ever been used (its deepest resident page), in bytes.
size_t stack_depth(const FiberStack& s);
// A context that starts `entry` on stack `s` at its first switch; entry never returns.
void make_context(FiberContext& c, FiberStack& s, void (*entry)());
// Suspends `from`, resumes `to`. from_ends: `from` is never resumed.
void switch_context(FiberContext& from, FiberContext& to, bool from_ends);
// First call of a fiber's entry: `scheduler` is the context that started it.
void fiber_started(FiberContext& scheduler);

// CUDA's limit on a kernel's parameters (before 12.1's 32 KiB on Volta and later).
constexpr size_t kMaxParamsBytes = 4096;
constexpr unsigned kMaxParams = 32;

// ---- the double's state --------------------------------------------------------------------

// An async copy into page-locked memory, not yet seen complete by the host.
struct Landing {
  int stream = 0;
  uint64_t epoch = 0;
  uint8_t* dst = nullptr;
  std::vector<uint8_t> bytes;
};

// An async copy out of page-locked memory: the host must leave the source alone until then.
struct PinnedSource {
  int stream = 0;
  uint64_t epoch = 0;
  const uint8_t* src = nullptr;
  std::vector<uint8_t> snapshot;
  std::string what;
};

struct State {
  std::recursive_mutex mu;
  std::map<uintptr_t, size_t> pinned;  // page-locked host allocations by address
  std::vector<Landing> landings;
  std::vector<PinnedSource> pinned_sources;
  bool initialised = false;
  CUresult sticky = CUDA_SUCCESS;  // a kernel fault poisons the context, as on a GPU
  bool pending_fault = false;      // a faulting launch not yet observed by a sync
  size_t allocated = 0;
  uint64_t next_base = kDeviceBase;
  std::map<uint64_t, Allocation> allocations;  // by base
  std::vector<Stream> streams;                 // [0]: the legacy default stream
  Clock host;                                  // what the host knows has completed
  std::vector<std::unique_ptr<Module>> modules;
  std::vector<std::unique_ptr<Function>> functions;
  std::vector<std::unique_ptr<Event>> events;
  State() {
    streams.emplace_back();
    streams[0].id = 0;
  }
};

State& st();
extern thread_local bool t_context_current;

// Contexts are per thread in CUDA; GBX makes the primary context current on each thread.
#define NEED_CONTEXT()                                         \
  do {                                                         \
    if (!st().initialised) return CUDA_ERROR_NOT_INITIALIZED;  \
    if (!t_context_current) return CUDA_ERROR_INVALID_CONTEXT; \
    if (st().sticky != CUDA_SUCCESS) return st().sticky;       \
  } while (0)

#define LOCK() std::lock_guard<std::recursive_mutex> lock_(st().mu)

Stream* stream_of(CUstream s);
Allocation* find_alloc(uint64_t addr);
std::string hex(uint64_t v);

// One operation enqueued on `stream`: its clock, then its accesses checked against every
// earlier one it is not ordered after.
struct Op {
  Stream* stream;
  Clock clock;
};

Op begin_op(Stream* s);
void end_op(const Op& op);
std::string stream_name(int id);
// Records an access of [begin, end) of `a` by `op`; a race with an unordered earlier one dies.
void access(const Op& op, Allocation& a, size_t begin, size_t end, bool write,
            const std::string& what);
// The host now knows everything in `c` has completed.
void host_waits_for(const Clock& c);
// A sync point: a pending kernel fault surfaces here.
CUresult sync_result();

CUresult load_module(CUmodule* out, const void* image);
Module* module_of(CUmodule h);

// The divergence meter's callback slot every loaded module's trace hook reads, and the cache
// entry of the step module loaded last (trace.cpp).
void* trace_slot();
void set_trace_module(const std::string& entry_key);

// Bytes copied host to device and device to host so far (gbx_cuda_double_copied_bytes).
extern std::atomic<uint64_t> g_copied_h2d, g_copied_d2h;

// ---- the Driver API, d_<name> for each entry of cuGetProcAddress's table --------------------

CUresult d_cuInit(unsigned flags);
CUresult d_cuDriverGetVersion(int* v);
CUresult d_cuGetErrorName(CUresult r, const char** s);
CUresult d_cuGetErrorString(CUresult r, const char** s);
CUresult d_cuDeviceGetCount(int* n);
CUresult d_cuDeviceGet(CUdevice* d, int ordinal);
CUresult d_cuDeviceGetName(char* name, int len, CUdevice d);
CUresult d_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d);
CUresult d_cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d);
CUresult d_cuDevicePrimaryCtxRelease(CUdevice d);
CUresult d_cuCtxSetCurrent(CUcontext c);
CUresult d_cuCtxSynchronize();
CUresult d_cuModuleLoadData(CUmodule* m, const void* image);
CUresult d_cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned, CUjit_option*, void**);
CUresult d_cuModuleUnload(CUmodule h);
CUresult d_cuModuleGetFunction(CUfunction* f, CUmodule h, const char* name);
CUresult d_cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f);
CUresult d_cuMemAlloc(CUdeviceptr* p, size_t bytes);
CUresult d_cuMemFree(CUdeviceptr p);
CUresult d_cuMemHostAlloc(void** p, size_t bytes, unsigned flags);
CUresult d_cuMemFreeHost(void* p);
CUresult d_cuMemcpyHtoD(CUdeviceptr d, const void* h, size_t n);
CUresult d_cuMemcpyHtoDAsync(CUdeviceptr d, const void* h, size_t n, CUstream s);
CUresult d_cuMemcpyDtoH(void* h, CUdeviceptr d, size_t n);
CUresult d_cuMemcpyDtoHAsync(void* h, CUdeviceptr d, size_t n, CUstream s);
CUresult d_cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n);
CUresult d_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s);
CUresult d_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params,
                          void** extra);
CUresult d_cuStreamCreate(CUstream* s, unsigned flags);
CUresult d_cuStreamDestroy(CUstream s);
CUresult d_cuStreamSynchronize(CUstream s);
CUresult d_cuEventCreate(CUevent* e, unsigned);
CUresult d_cuEventDestroy(CUevent e);
CUresult d_cuEventRecord(CUevent e, CUstream s);
CUresult d_cuStreamWaitEvent(CUstream s, CUevent e, unsigned);
CUresult d_cuEventSynchronize(CUevent e);
CUresult d_cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction f,
                                            CUoccupancyB2DSize, size_t, int limit);
CUresult d_cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t,
                            CUdriverProcAddressQueryResult* status);

}  // namespace gbx_double
