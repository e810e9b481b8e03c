// GBX CUDA driver test double: a libcuda.so.1 for machines without a GPU, so CI runs the real
// cuda backend host code end to end (tests/CMakeLists.txt puts it on LD_LIBRARY_PATH of the
// cuda suites only).
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
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gbx/engine/cache.h"
#include "gbx/engine/cuda_api.h"
#include "gbx/engine/orc_compiler.h"
#include "gbx_abi.h"

namespace {

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

constexpr const char* kDeviceName = "GBX CUDA double (H100 attributes)";
constexpr int kDriverVersion = 13000;
constexpr size_t kDeviceMemory = size_t(80) << 30;

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

// ---- clocks and races ----------------------------------------------------------------------

using Clock = std::vector<uint64_t>;  // index: stream id

void join(Clock& into, const Clock& other) {
  if (into.size() < other.size()) into.resize(other.size(), 0);
  for (size_t i = 0; i < other.size(); ++i) into[i] = std::max(into[i], other[i]);
}

uint64_t at(const Clock& c, size_t i) { return i < c.size() ? c[i] : 0; }

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

// ---- memory --------------------------------------------------------------------------------

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

// ---- modules -------------------------------------------------------------------------------

// A kernel's launcher: with dims == nullptr it writes the size of each parameter into sizes and
// returns their count; else it runs the grid over args (one pointer per parameter).
using LaunchFn = unsigned (*)(void* const* args, const unsigned* dims, unsigned* sizes);

struct Kernel {
  LaunchFn launch = nullptr;
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

// CUDA's limit on a kernel's parameters (before 12.1's 32 KiB on Volta and later).
constexpr size_t kMaxParamsBytes = 4096;
constexpr unsigned kMaxParams = 32;

// The CUDA source compiled for the host: the keywords become host attributes, the built-in
// index variables plain globals the launcher sets before each thread's call. Launches run
// under the double's lock, one at a time.
const char* kCudaOnCpuShim = R"(// GBX CUDA double: CUDA keywords for the host compiler.
#define __device__
#define __global__
#define __host__
#define __forceinline__ __attribute__((always_inline)) inline
#define __noinline__ __attribute__((noinline))
// Profiling kernels count with it; threads run one after another, relaxed is enough.
static inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
struct GbxDoubleDim3 { unsigned x, y, z; };
static GbxDoubleDim3 threadIdx, blockIdx, blockDim, gridDim;
)";

struct KernelDecl {
  std::string name;
  std::vector<std::string> param_types;
};

// The `__global__ void NAME(T0 a, T1 b, ...)` declarations of a CUDA source: parameter types
// are what precedes each parameter's name.
std::vector<KernelDecl> kernel_decls(const std::string& src) {
  std::vector<KernelDecl> out;
  const std::string tag = "__global__ void ";
  for (size_t at = src.find(tag); at != std::string::npos; at = src.find(tag, at + 1)) {
    const size_t name_at = at + tag.size();
    const size_t open = src.find('(', name_at);
    const size_t close = src.find(')', open);
    if (open == std::string::npos || close == std::string::npos) continue;
    KernelDecl d;
    d.name = src.substr(name_at, open - name_at);
    std::string params = src.substr(open + 1, close - open - 1);
    size_t begin = 0;
    while (begin <= params.size()) {
      size_t comma = params.find(',', begin);
      if (comma == std::string::npos) comma = params.size();
      std::string p = params.substr(begin, comma - begin);
      size_t e = p.find_last_not_of(" \t\n");
      size_t b = e;
      while (b != std::string::npos && b > 0 &&
             (std::isalnum((unsigned char)p[b - 1]) || p[b - 1] == '_'))
        --b;
      if (e != std::string::npos) d.param_types.push_back(p.substr(0, b));
      begin = comma + 1;
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string launcher(const KernelDecl& k) {
  std::string types, call, sizes;
  for (size_t i = 0; i < k.param_types.size(); ++i) {
    const std::string t = "gbx_double_" + k.name + "_" + std::to_string(i);
    types += "typedef " + k.param_types[i] + " " + t + ";\n";
    call += (i ? ", *(" : "*(") + t + "*)args[" + std::to_string(i) + "]";
    sizes += "    sizes[" + std::to_string(i) + "] = sizeof(" + t + ");\n";
  }
  const std::string count = std::to_string(k.param_types.size());
  return "\n// GBX CUDA double: the grid of " + k.name + ", one thread after another.\n" + types +
         "extern \"C\" unsigned gbx_double_kernel_" + k.name +
         "(void* const* args, const unsigned* d, unsigned* sizes) {\n"
         "  if (!d) {\n" +
         sizes + "    return " + count +
         ";\n  }\n"
         "  gridDim.x = d[0]; gridDim.y = d[1]; gridDim.z = d[2];\n"
         "  blockDim.x = d[3]; blockDim.y = d[4]; blockDim.z = d[5];\n"
         "  for (unsigned bz = 0; bz < d[2]; ++bz) for (unsigned by = 0; by < d[1]; ++by)\n"
         "  for (unsigned bx = 0; bx < d[0]; ++bx) {\n"
         "    blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;\n"
         "    for (unsigned tz = 0; tz < d[5]; ++tz) for (unsigned ty = 0; ty < d[4]; ++ty)\n"
         "    for (unsigned tx = 0; tx < d[3]; ++tx) {\n"
         "      threadIdx.x = tx; threadIdx.y = ty; threadIdx.z = tz;\n"
         "      " +
         k.name + "(" + call +
         ");\n"
         "    }\n"
         "  }\n"
         "  return " +
         count +
         ";\n"
         "}\n";
}

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

State& st() {
  static State* s = new State();  // never destroyed: callers may outlive static destructors
  return *s;
}

thread_local bool t_context_current = false;

// Contexts are per thread in CUDA; GBX makes the primary context current on each thread.
#define NEED_CONTEXT()                                         \
  do {                                                         \
    if (!st().initialised) return CUDA_ERROR_NOT_INITIALIZED;  \
    if (!t_context_current) return CUDA_ERROR_INVALID_CONTEXT; \
    if (st().sticky != CUDA_SUCCESS) return st().sticky;       \
  } while (0)

Stream* stream_of(CUstream s) {
  State& S = st();
  const uintptr_t v = reinterpret_cast<uintptr_t>(s);
  if (v == 0 || v == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY)) return &S.streams[0];
  if (v == reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD))
    die("the per-thread default stream is not modelled (GBX uses the legacy one)");
  const size_t id = v - 0x100;
  if (id >= S.streams.size() || !S.streams[id].live)
    die("use of stream handle %p that was never created or is destroyed", (void*)s);
  return &S.streams[id];
}

Allocation* find_alloc(uint64_t addr) {
  State& S = st();
  auto it = S.allocations.upper_bound(addr);
  if (it == S.allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  return addr - a.base < std::max<size_t>(a.size, 1) ? &a : nullptr;
}

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

// One operation enqueued on `stream`: its clock, then its accesses checked against every
// earlier one it is not ordered after.
struct Op {
  Stream* stream;
  Clock clock;
};

Op begin_op(Stream* s) {
  State& S = st();
  Op op{s, s->clock};
  join(op.clock, S.host);  // everything the host has waited for precedes what it issues now
  // Legacy default stream semantics: it waits for all blocking streams and they wait for it;
  // CU_STREAM_NON_BLOCKING streams take part in neither.
  if (s->id == 0) {
    for (const Stream& o : S.streams)
      if (o.live && !o.non_blocking) join(op.clock, o.clock);
  } else if (!s->non_blocking) {
    join(op.clock, S.streams[0].clock);
  }
  if (op.clock.size() <= (size_t)s->id) op.clock.resize(s->id + 1, 0);
  op.clock[s->id] = at(s->clock, s->id) + 1;
  return op;
}

void end_op(const Op& op) { op.stream->clock = op.clock; }

std::string stream_name(int id) {
  if (id == 0) return "the legacy default stream";
  return "stream " + std::to_string(id) +
         (st().streams[id].non_blocking ? " (CU_STREAM_NON_BLOCKING)" : "");
}

void access(const Op& op, Allocation& a, size_t begin, size_t end, bool write,
            const std::string& what) {
  State& S = st();
  // Accesses the host has seen complete are ordered before everything issued from now on.
  auto& acc = a.accesses;
  acc.erase(std::remove_if(acc.begin(), acc.end(),
                           [&](const Access& x) { return at(S.host, x.stream) >= x.epoch; }),
            acc.end());
  for (const Access& x : acc) {
    if (x.end <= begin || end <= x.begin || (!x.write && !write)) continue;
    if (at(op.clock, x.stream) >= x.epoch) continue;  // ordered after it
    die("race on device memory [%s, %s): %s on %s is not ordered after %s on %s (no stream "
        "order, event or host synchronisation between them); on a GPU they may run at the "
        "same time",
        hex(a.base + std::max(begin, x.begin)).c_str(), hex(a.base + std::min(end, x.end)).c_str(),
        what.c_str(), stream_name(op.stream->id).c_str(), x.what.c_str(),
        stream_name(x.stream).c_str());
  }
  acc.push_back(Access{begin, end, write, op.stream->id, at(op.clock, op.stream->id), what});
}

// A device range for a copy: inside one live allocation, else CUDA_ERROR_INVALID_VALUE.
Allocation* device_range(uint64_t addr, size_t bytes, const char* call) {
  Allocation* a = find_alloc(addr);
  if (!a || bytes > a->size - (addr - a->base)) {
    note("%s: device range [%s, +%zu) is not inside one live allocation", call, hex(addr).c_str(),
         bytes);
    return nullptr;
  }
  return a;
}

// The page-locked allocation holding [p, p + bytes), or nullptr for pageable memory.
const std::pair<const uintptr_t, size_t>* pinned_range(const void* p, size_t bytes) {
  State& S = st();
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  auto it = S.pinned.upper_bound(v);
  if (it == S.pinned.begin()) return nullptr;
  --it;
  if (v - it->first >= it->second) return nullptr;
  if (bytes > it->second - (v - it->first))
    die("a copy of %zu bytes at %p runs past the end of its page-locked allocation", bytes, p);
  return &*it;
}

// The host now knows everything in `c` has completed: copies into page-locked memory that
// were waiting for it land, and copies out of it must have seen the source untouched.
void host_waits_for(const Clock& c) {
  State& S = st();
  join(S.host, c);
  auto& l = S.landings;
  for (auto it = l.begin(); it != l.end();) {
    if (at(S.host, it->stream) < it->epoch) {
      ++it;
      continue;
    }
    std::memcpy(it->dst, it->bytes.data(), it->bytes.size());
    it = l.erase(it);
  }
  auto& ps = S.pinned_sources;
  for (auto it = ps.begin(); it != ps.end();) {
    if (at(S.host, it->stream) < it->epoch) {
      ++it;
      continue;
    }
    if (std::memcmp(it->src, it->snapshot.data(), it->snapshot.size()) != 0)
      die("the host rewrote page-locked memory at %p while %s on %s was still reading it (no "
          "synchronisation in between); on a GPU the copy may send the new bytes",
          (const void*)it->src, it->what.c_str(), stream_name(it->stream).c_str());
    it = ps.erase(it);
  }
}

// A sync point: a pending kernel fault surfaces here, as an asynchronous error does on a GPU.
CUresult sync_result() {
  State& S = st();
  if (S.pending_fault) {
    S.pending_fault = false;
    S.sticky = CUDA_ERROR_LAUNCH_FAILED;
  }
  return S.sticky;
}

// ---- images --------------------------------------------------------------------------------

// A CUBIN is an ELF file; its size is where its last section or header table ends.
size_t elf_size(const uint8_t* p) {
  if (p[4] != 2) die("cuModuleLoadData: only 64-bit ELF images are modelled");
  uint64_t shoff, phoff;
  uint16_t phentsize, phnum, shentsize, shnum;
  std::memcpy(&phoff, p + 0x20, 8);
  std::memcpy(&shoff, p + 0x28, 8);
  std::memcpy(&phentsize, p + 0x36, 2);
  std::memcpy(&phnum, p + 0x38, 2);
  std::memcpy(&shentsize, p + 0x3A, 2);
  std::memcpy(&shnum, p + 0x3C, 2);
  size_t end = std::max<size_t>(64, shoff + (size_t)shnum * shentsize);
  end = std::max<size_t>(end, phoff + (size_t)phnum * phentsize);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = p + shoff + (size_t)i * shentsize;
    uint32_t type;
    uint64_t off, size;
    std::memcpy(&type, sh + 4, 4);
    std::memcpy(&off, sh + 0x18, 8);
    std::memcpy(&size, sh + 0x20, 8);
    if (type != 8 /* SHT_NOBITS */) end = std::max<size_t>(end, off + size);
  }
  return end;
}

std::string image_bytes(const void* image) {
  const auto* p = static_cast<const uint8_t*>(image);
  if (p[0] == 0x7F && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')
    return std::string(reinterpret_cast<const char*>(p), elf_size(p));
  return std::string(static_cast<const char*>(image));  // PTX: NUL-terminated text
}

// The prelude block of a generated source is the text between its #line marker and the next
// one; the shim goes right before it so the prelude's own macros see the keywords defined.
CUresult compile_for_host(const gbx::CacheEntry& entry, const std::string& sha, Module& m) {
  auto src = entry.read("source.cu");
  if (!src) {
    note("cache entry %s has no readable source.cu: %s", entry.key.c_str(),
         src.error().message.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  const std::vector<KernelDecl> decls = kernel_decls(*src);
  if (decls.empty()) {
    note("cache entry %s's source.cu declares no __global__ function", entry.key.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::string source = std::string(kCudaOnCpuShim) + *src;
  for (const KernelDecl& d : decls) source += launcher(d);

  gbx::CpuCompileOptions opts;
  std::string key_text = "gbx-cuda-double/2\n" + gbx::cpu_compiler_identity() + "\n";
  for (const auto& a : gbx::cpu_compile_args(opts)) key_text += a + "\n";
  key_text += source;
  const std::string key = gbx::sha256_hex(key_text);
  gbx::KernelCache cache;
  std::vector<std::string> warnings;
  std::string object;
  if (auto hit = cache.lookup(key, &warnings)) {
    if (auto o = hit->read("module.o")) object = *o;
  }
  if (object.empty()) {
    auto out = gbx::compile_cpu(source, "cuda_double_" + entry.key.substr(0, 12) + ".cpp", opts);
    if (!out) {
      note("compiling cache entry %s's source.cu for the host failed: %s\n%s", entry.key.c_str(),
           out.error().message.c_str(), out.error().detail.c_str());
      return CUDA_ERROR_INVALID_IMAGE;
    }
    object = out->object;
    nlohmann::json meta = {
        {"kind", "gbx-cuda-double host object"}, {"cuda_entry", entry.key}, {"image_sha256", sha}};
    cache.publish(key, {{"source.cpp", source}, {"module.o", object}}, meta, &warnings);
  }
  for (const KernelDecl& d : decls) {
    auto fn = gbx::jit_load_object("gbx-cuda-double-" + key, object, "gbx_double_kernel_" + d.name);
    if (!fn) {
      note("loading the host object of cache entry %s failed: %s", entry.key.c_str(),
           fn.error().message.c_str());
      return CUDA_ERROR_INVALID_IMAGE;
    }
    Kernel k;
    k.launch = reinterpret_cast<LaunchFn>(*fn);
    unsigned sizes[kMaxParams] = {};
    if (d.param_types.size() > kMaxParams) die("kernel %s: too many parameters", d.name.c_str());
    const unsigned count = k.launch(nullptr, nullptr, sizes);
    k.param_sizes.assign(sizes, sizes + count);
    size_t total = 0;
    for (unsigned sz : k.param_sizes) total += (sz + 15) / 16 * 16;
    if (total > kMaxParamsBytes) {
      note("cache entry %s: kernel %s takes %zu bytes of parameters (the limit is %zu)",
           entry.key.c_str(), d.name.c_str(), total, kMaxParamsBytes);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    m.kernels[d.name] = std::move(k);
  }
  return CUDA_SUCCESS;
}

// The host compile (seconds) runs outside the driver lock: a module loaded on one thread (a
// background tier-up, runtime/src/backends/cuda_tier_up.cpp) must not stall another thread's
// launches, as it does not on a GPU. Only the checks and the module list are under the lock.
CUresult load_module(CUmodule* out, const void* image) {
  {
    std::lock_guard<std::recursive_mutex> lock(st().mu);
    NEED_CONTEXT();
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    if (injection().hit("load", true)) return CUDA_ERROR_INVALID_IMAGE;
  }
  const std::string bytes = image_bytes(image);
  const std::string sha = gbx::sha256_hex(bytes);
  gbx::KernelCache cache;
  for (const gbx::CacheEntry& e : cache.list()) {
    const auto files = e.meta.find("files");
    if (files == e.meta.end() || !files->is_object()) continue;
    bool match = false;
    for (const auto& [name, f] : files->items())
      match |= (name.rfind("module.", 0) == 0) && f.value("sha256", std::string()) == sha;
    if (!match) continue;
    auto m = std::make_unique<Module>();
    m->image_sha256 = sha;
    if (CUresult r = compile_for_host(e, sha, *m); r != CUDA_SUCCESS) return r;
    std::lock_guard<std::recursive_mutex> lock(st().mu);
    *out = reinterpret_cast<CUmodule>(m.get());
    st().modules.push_back(std::move(m));
    return CUDA_SUCCESS;
  }
  note("module image (%zu bytes, SHA-256 %s) matches no kernel cache entry under %s", bytes.size(),
       sha.c_str(), cache.root().string().c_str());
  return CUDA_ERROR_INVALID_IMAGE;
}

Module* module_of(CUmodule h) {
  for (auto& m : st().modules)
    if (reinterpret_cast<CUmodule>(m.get()) == h) return m.get();
  die("use of module handle %p that was never loaded or is unloaded", (void*)h);
}

// ---- the Driver API --------------------------------------------------------------------------

#define LOCK() std::lock_guard<std::recursive_mutex> lock_(st().mu)

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

CUresult d_cuCtxSynchronize() {
  LOCK();
  NEED_CONTEXT();
  for (const Stream& s : st().streams) host_waits_for(s.clock);
  return sync_result();
}

CUresult d_cuModuleLoadData(CUmodule* m, const void* image) {
  // load_module takes the lock itself (not during the host compile).
  return load_module(m, image);
}

CUresult d_cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned, CUjit_option*, void**) {
  // load_module takes the lock itself (not during the host compile).
  return load_module(m, image);
}

CUresult d_cuModuleUnload(CUmodule h) {
  LOCK();
  auto& mods = st().modules;
  for (auto it = mods.begin(); it != mods.end(); ++it)
    if (reinterpret_cast<CUmodule>(it->get()) == h) {
      // The JIT-loaded code stays mapped (the ORC JIT keeps one dylib per key per process).
      mods.erase(it);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult d_cuModuleGetFunction(CUfunction* f, CUmodule h, const char* name) {
  LOCK();
  NEED_CONTEXT();
  if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
  Module* m = module_of(h);
  auto k = m->kernels.find(name);
  if (k == m->kernels.end()) return CUDA_ERROR_NOT_FOUND;
  auto fn = std::make_unique<Function>();
  fn->module = m;
  fn->name = name;
  fn->kernel = &k->second;
  *f = reinterpret_cast<CUfunction>(fn.get());
  st().functions.push_back(std::move(fn));
  return CUDA_SUCCESS;
}

Function* function_of(CUfunction f) {
  for (auto& fn : st().functions)
    if (reinterpret_cast<CUfunction>(fn.get()) == f) return fn.get();
  die("use of function handle %p that was never returned by cuModuleGetFunction", (void*)f);
}

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

CUresult d_cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  LOCK();
  NEED_CONTEXT();
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& S = st();
  if (injection().hit("oom", true) || bytes > kDeviceMemory - S.allocated)
    return CUDA_ERROR_OUT_OF_MEMORY;
  Allocation a;
  a.base = S.next_base;
  a.size = bytes;
  a.backing = std::make_unique<Backing>();
  if (!a.backing->create(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(a.host(), 0xA5, bytes);  // device memory is not zeroed
  S.next_base += (bytes + kGap - 1) / kGap * kGap + kGap;
  if (S.next_base >= kDeviceEnd) die("fake device address range exhausted");
  S.allocated += bytes;
  *p = (CUdeviceptr)a.base;
  S.allocations.emplace(a.base, std::move(a));
  return CUDA_SUCCESS;
}

CUresult d_cuMemFree(CUdeviceptr p) {
  LOCK();
  NEED_CONTEXT();
  State& S = st();
  auto it = S.allocations.find((uint64_t)p);
  if (it == S.allocations.end()) {
    note("cuMemFree(%s): not the base of a live allocation", hex(p).c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  // cuMemFree synchronises the device before freeing: nothing may still use the memory.
  for (const Stream& s : S.streams) host_waits_for(s.clock);
  S.allocated -= it->second.size;
  S.allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult d_cuMemHostAlloc(void** p, size_t bytes, unsigned flags) {
  LOCK();
  NEED_CONTEXT();
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags != 0) die("cuMemHostAlloc flags %u are not modelled (GBX asks for 0)", flags);
  if (injection().hit("oom", true)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(m, 0xA5, bytes);
  st().pinned[reinterpret_cast<uintptr_t>(m)] = bytes;
  *p = m;
  return CUDA_SUCCESS;
}

CUresult d_cuMemFreeHost(void* p) {
  LOCK();
  NEED_CONTEXT();
  State& S = st();
  auto it = S.pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == S.pinned.end()) {
    note("cuMemFreeHost(%p): not a page-locked allocation", p);
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (const Landing& l : S.landings)
    if (l.dst >= b && l.dst < b + it->second)
      die("cuMemFreeHost(%p) while a copy into it on %s is not known to be complete", p,
          stream_name(l.stream).c_str());
  for (const PinnedSource& x : S.pinned_sources)
    if (x.src >= b && x.src < b + it->second)
      die("cuMemFreeHost(%p) while %s on %s may still read it", p, x.what.c_str(),
          stream_name(x.stream).c_str());
  munmap(p, it->second);
  S.pinned.erase(it);
  return CUDA_SUCCESS;
}

// Bytes copied host to device and device to host so far (gbx_cuda_double_copied_bytes): a
// test proves with them that an operation moves no state through the host.
std::atomic<uint64_t> g_copied_h2d{0}, g_copied_d2h{0};

CUresult copy_h2d(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, bool sync) {
  LOCK();
  NEED_CONTEXT();
  if (bytes == 0) return CUDA_SUCCESS;
  g_copied_h2d += bytes;
  if (!src) return CUDA_ERROR_INVALID_VALUE;
  Allocation* a = device_range(dst, bytes, sync ? "cuMemcpyHtoD" : "cuMemcpyHtoDAsync");
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(sync ? nullptr : stream);
  // From pageable memory the call returns once the source is staged: the copy itself may
  // still be in flight, so the host learns nothing about its completion.
  if (sync) host_waits_for(st().streams[0].clock);
  Op op = begin_op(s);
  const size_t off = dst - a->base;
  const std::string what = std::string(sync ? "cuMemcpyHtoD" : "cuMemcpyHtoDAsync") + " of " +
                           std::to_string(bytes) + " bytes";
  access(op, *a, off, off + bytes, true, what);
  std::memcpy(a->host() + off, src, bytes);
  end_op(op);
  if (!sync && pinned_range(src, bytes)) {
    // Not staged: the GPU reads the source when the copy runs.
    const auto* p = static_cast<const uint8_t*>(src);
    st().pinned_sources.push_back(
        PinnedSource{s->id, at(op.clock, s->id), p, std::vector<uint8_t>(p, p + bytes), what});
  }
  return CUDA_SUCCESS;
}

CUresult copy_d2h(void* dst, CUdeviceptr src, size_t bytes, CUstream stream, bool sync) {
  LOCK();
  NEED_CONTEXT();
  if (bytes == 0) return CUDA_SUCCESS;
  g_copied_d2h += bytes;
  if (!dst) return CUDA_ERROR_INVALID_VALUE;
  Allocation* a = device_range(src, bytes, sync ? "cuMemcpyDtoH" : "cuMemcpyDtoHAsync");
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(sync ? nullptr : stream);
  Op op = begin_op(s);
  const size_t off = src - a->base;
  access(op, *a, off, off + bytes, false,
         std::string(sync ? "cuMemcpyDtoH" : "cuMemcpyDtoHAsync") + " of " + std::to_string(bytes) +
             " bytes");
  if (!sync && pinned_range(dst, bytes)) {
    // Truly asynchronous: the bytes are the device's now, but they reach the host only when
    // the host synchronises past this copy.
    const uint8_t* from = a->host() + off;
    st().landings.push_back(
        Landing{s->id, at(op.clock, s->id), static_cast<uint8_t*>(dst), {from, from + bytes}});
    std::memset(dst, 0xCD, bytes);
  } else {
    std::memcpy(dst, a->host() + off, bytes);
  }
  end_op(op);
  if (sync) {
    host_waits_for(op.clock);  // returns when the data is in host memory
    return sync_result();
  }
  return CUDA_SUCCESS;
}

CUresult d_cuMemcpyHtoD(CUdeviceptr d, const void* h, size_t n) {
  return copy_h2d(d, h, n, nullptr, true);
}
CUresult d_cuMemcpyHtoDAsync(CUdeviceptr d, const void* h, size_t n, CUstream s) {
  return copy_h2d(d, h, n, s, false);
}
CUresult d_cuMemcpyDtoH(void* h, CUdeviceptr d, size_t n) {
  return copy_d2h(h, d, n, nullptr, true);
}
CUresult d_cuMemcpyDtoHAsync(void* h, CUdeviceptr d, size_t n, CUstream s) {
  return copy_d2h(h, d, n, s, false);
}

CUresult memset_d8(CUdeviceptr d, unsigned char v, size_t n, CUstream stream, const char* call) {
  LOCK();
  NEED_CONTEXT();
  if (n == 0) return CUDA_SUCCESS;
  Allocation* a = device_range(d, n, call);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  Op op = begin_op(stream_of(stream));
  const size_t off = d - a->base;
  access(op, *a, off, off + n, true, std::string(call) + " of " + std::to_string(n) + " bytes");
  std::memset(a->host() + off, v, n);
  end_op(op);
  return CUDA_SUCCESS;
}

CUresult d_cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  return memset_d8(d, v, n, nullptr, "cuMemsetD8");
}
CUresult d_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return memset_d8(d, v, n, s, "cuMemsetD8Async");
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
    fn->kernel->launch(args, dims, nullptr);
  }
  end_op(op);
  return CUDA_SUCCESS;
}

CUresult d_cuStreamCreate(CUstream* s, unsigned flags) {
  LOCK();
  NEED_CONTEXT();
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~unsigned(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  State& S = st();
  Stream n;
  n.id = (int)S.streams.size();
  n.non_blocking = flags & CU_STREAM_NON_BLOCKING;
  S.streams.push_back(n);
  *s = reinterpret_cast<CUstream>(uintptr_t(0x100 + n.id));
  return CUDA_SUCCESS;
}

CUresult d_cuStreamDestroy(CUstream s) {
  LOCK();
  Stream* x = stream_of(s);
  if (x->id == 0) return CUDA_ERROR_INVALID_HANDLE;
  x->live = false;  // its pending work still completes; its clock stays for ordering checks
  return CUDA_SUCCESS;
}

CUresult d_cuStreamSynchronize(CUstream s) {
  LOCK();
  NEED_CONTEXT();
  Stream* x = stream_of(s);
  Clock c = x->clock;
  if (x->id == 0)  // the legacy stream waits for the blocking streams' earlier work
    for (const Stream& o : st().streams)
      if (!o.non_blocking) join(c, o.clock);
  host_waits_for(c);
  return sync_result();
}

CUresult d_cuEventCreate(CUevent* e, unsigned) {
  LOCK();
  NEED_CONTEXT();
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  st().events.push_back(std::make_unique<Event>());
  *e = reinterpret_cast<CUevent>(st().events.back().get());
  return CUDA_SUCCESS;
}

Event* event_of(CUevent e) {
  for (auto& x : st().events)
    if (reinterpret_cast<CUevent>(x.get()) == e) return x.get();
  die("use of event handle %p that was never created or is destroyed", (void*)e);
}

CUresult d_cuEventDestroy(CUevent e) {
  LOCK();
  auto& ev = st().events;
  for (auto it = ev.begin(); it != ev.end(); ++it)
    if (reinterpret_cast<CUevent>(it->get()) == e) {
      ev.erase(it);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult d_cuEventRecord(CUevent e, CUstream s) {
  LOCK();
  NEED_CONTEXT();
  Event* x = event_of(e);
  Op op = begin_op(stream_of(s));  // an empty operation: it completes after the stream's work
  end_op(op);
  x->clock = op.clock;
  return CUDA_SUCCESS;
}

CUresult d_cuStreamWaitEvent(CUstream s, CUevent e, unsigned) {
  LOCK();
  NEED_CONTEXT();
  Event* x = event_of(e);
  join(stream_of(s)->clock, x->clock);
  return CUDA_SUCCESS;
}

CUresult d_cuEventSynchronize(CUevent e) {
  LOCK();
  NEED_CONTEXT();
  host_waits_for(event_of(e)->clock);
  return sync_result();
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

}  // namespace

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
