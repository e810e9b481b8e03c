// GBX CUDA double: the warp intrinsics of warp mode as host code (warps.cpp runs them). The
// shim text is compiled into every kernel's host object after the keyword shim of modules.cpp:
// each intrinsic hands a GbxDoubleWarpCall to the double's hook, which suspends the lane until
// its rendezvous completes; the lane entry gbx_double_lane_NAME runs one thread.
#include <cstdlib>
#include <cstring>

#include "cuda_double.h"
#include "warps.h"

namespace gbx_double {

const char* const kOpNames[kOpEnd] = {"?",
                                      "__syncwarp",
                                      "__ballot_sync",
                                      "__any_sync",
                                      "__all_sync",
                                      "__activemask",
                                      "__match_any_sync",
                                      "__match_all_sync",
                                      "__shfl_sync",
                                      "__shfl_up_sync",
                                      "__shfl_down_sync",
                                      "__shfl_xor_sync",
                                      "__reduce_add_sync",
                                      "__reduce_min_sync",
                                      "__reduce_min_sync",
                                      "__reduce_max_sync",
                                      "__reduce_max_sync",
                                      "__reduce_and_sync",
                                      "__reduce_or_sync",
                                      "__reduce_xor_sync",
                                      "__syncthreads",
                                      "__syncthreads_count",
                                      "__syncthreads_and",
                                      "__syncthreads_or"};

namespace {

// What a source must name for its launches to run in warp mode.
const char* const kIntrinsics[] = {"__syncwarp", "__ballot_sync", "__any_sync",
                                   "__all_sync", "__activemask",  "__match_",
                                   "__shfl_",    "__reduce_",     "__syncthreads"};

const char* kShim = R"(// GBX CUDA double: warp intrinsics (tests/cuda_double/warps.cpp).
#define __shared__ static
static const int warpSize = 32;
struct GbxDoubleWarpCall {
  unsigned op, mask, size, pad;
  unsigned long long value;
  int arg, width;
  const char* site;
  unsigned long long result;
  int pred;
};
static void (*gbx_double_warp_hook)(GbxDoubleWarpCall*);
extern "C" void gbx_double_set_warp_hook(void (*hook)(GbxDoubleWarpCall*)) {
  gbx_double_warp_hook = hook;
}
// Other lanes run while this one sleeps in the hook and set the built-in indices: this
// lane's are put back.
static unsigned long long gbx_double_warp(unsigned op, unsigned mask, unsigned long long value,
                                          unsigned size, int arg = 0, int width = 32,
                                          const char* site = 0, int* pred = 0) {
  GbxDoubleWarpCall c = {op, mask, size, 0, value, arg, width, site, 0, 0};
  const GbxDoubleDim3 t = threadIdx, b = blockIdx;
  gbx_double_warp_hook(&c);
  threadIdx = t;
  blockIdx = b;
  if (pred) *pred = c.pred;
  return c.result;
}
template <typename T> static inline unsigned long long gbx_double_bits(T v) {
  static_assert(sizeof(T) <= 8, "a warp intrinsic moves at most 8 bytes");
  unsigned long long b = 0;
  __builtin_memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T> static inline T gbx_double_value(unsigned long long b) {
  T v;
  __builtin_memcpy(&v, &b, sizeof(T));
  return v;
}
#define GBX_DOUBLE_STR2(x) #x
#define GBX_DOUBLE_STR(x) GBX_DOUBLE_STR2(x)
// Each intrinsic is a macro so that the double knows its call site (file:line).
#define GBX_DOUBLE_SITE __FILE__ ":" GBX_DOUBLE_STR(__LINE__)
static inline void gbx_double_syncwarp(const char* s, unsigned mask = 0xffffffffu) {
  gbx_double_warp(OP_SYNCWARP, mask, 0, 0, 0, 32, s);
}
static inline unsigned long long gbx_double_vote(const char* s, unsigned op, unsigned mask, int p) {
  return gbx_double_warp(op, mask, p != 0, 4, 0, 32, s);
}
template <typename T>
static inline unsigned gbx_double_match(const char* s, unsigned op, unsigned mask, T v, int* pred = 0) {
  return (unsigned)gbx_double_warp(op, mask, gbx_double_bits(v), sizeof(T), 0, 32, s, pred);
}
template <typename T>
static inline T gbx_double_shfl(const char* s, unsigned op, unsigned mask, T var, int a, int width = 32) {
  return gbx_double_value<T>(gbx_double_warp(op, mask, gbx_double_bits(var), sizeof(T), a, width, s));
}
#define GBX_DOUBLE_REDUCE(name, op, type)                                  \
  static inline type name(const char* s, unsigned mask, type v) {          \
    return (type)gbx_double_warp(op, mask, (unsigned)v, 4, 0, 32, s);      \
  }
GBX_DOUBLE_REDUCE(gbx_double_reduce_add, OP_REDUCE_ADD, unsigned)
GBX_DOUBLE_REDUCE(gbx_double_reduce_add, OP_REDUCE_ADD, int)
GBX_DOUBLE_REDUCE(gbx_double_reduce_min, OP_REDUCE_MIN_U, unsigned)
GBX_DOUBLE_REDUCE(gbx_double_reduce_min, OP_REDUCE_MIN_S, int)
GBX_DOUBLE_REDUCE(gbx_double_reduce_max, OP_REDUCE_MAX_U, unsigned)
GBX_DOUBLE_REDUCE(gbx_double_reduce_max, OP_REDUCE_MAX_S, int)
GBX_DOUBLE_REDUCE(gbx_double_reduce_and, OP_REDUCE_AND, unsigned)
GBX_DOUBLE_REDUCE(gbx_double_reduce_or, OP_REDUCE_OR, unsigned)
GBX_DOUBLE_REDUCE(gbx_double_reduce_xor, OP_REDUCE_XOR, unsigned)
static inline int gbx_double_barrier(const char* s, unsigned op, int p) {
  return (int)gbx_double_warp(op, 0, p != 0, 4, 0, 32, s);
}
#define __syncwarp(...) gbx_double_syncwarp(GBX_DOUBLE_SITE, ##__VA_ARGS__)
#define __ballot_sync(m, p) ((unsigned)gbx_double_vote(GBX_DOUBLE_SITE, OP_BALLOT, m, p))
#define __any_sync(m, p) ((int)gbx_double_vote(GBX_DOUBLE_SITE, OP_ANY, m, p))
#define __all_sync(m, p) ((int)gbx_double_vote(GBX_DOUBLE_SITE, OP_ALL, m, p))
#define __activemask() ((unsigned)gbx_double_warp(OP_ACTIVEMASK, 0, 0, 0, 0, 32, GBX_DOUBLE_SITE))
#define __match_any_sync(m, v) gbx_double_match(GBX_DOUBLE_SITE, OP_MATCH_ANY, m, v)
#define __match_all_sync(m, v, p) gbx_double_match(GBX_DOUBLE_SITE, OP_MATCH_ALL, m, v, p)
#define __shfl_sync(...) gbx_double_shfl(GBX_DOUBLE_SITE, OP_SHFL_IDX, __VA_ARGS__)
#define __shfl_up_sync(...) gbx_double_shfl(GBX_DOUBLE_SITE, OP_SHFL_UP, __VA_ARGS__)
#define __shfl_down_sync(...) gbx_double_shfl(GBX_DOUBLE_SITE, OP_SHFL_DOWN, __VA_ARGS__)
#define __shfl_xor_sync(...) gbx_double_shfl(GBX_DOUBLE_SITE, OP_SHFL_XOR, __VA_ARGS__)
#define __reduce_add_sync(m, v) gbx_double_reduce_add(GBX_DOUBLE_SITE, m, v)
#define __reduce_min_sync(m, v) gbx_double_reduce_min(GBX_DOUBLE_SITE, m, v)
#define __reduce_max_sync(m, v) gbx_double_reduce_max(GBX_DOUBLE_SITE, m, v)
#define __reduce_and_sync(m, v) gbx_double_reduce_and(GBX_DOUBLE_SITE, m, v)
#define __reduce_or_sync(m, v) gbx_double_reduce_or(GBX_DOUBLE_SITE, m, v)
#define __reduce_xor_sync(m, v) gbx_double_reduce_xor(GBX_DOUBLE_SITE, m, v)
#define __syncthreads() ((void)gbx_double_barrier(GBX_DOUBLE_SITE, OP_SYNCTHREADS, 0))
#define __syncthreads_count(p) gbx_double_barrier(GBX_DOUBLE_SITE, OP_SYNCTHREADS_COUNT, p)
#define __syncthreads_and(p) gbx_double_barrier(GBX_DOUBLE_SITE, OP_SYNCTHREADS_AND, p)
#define __syncthreads_or(p) gbx_double_barrier(GBX_DOUBLE_SITE, OP_SYNCTHREADS_OR, p)
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline unsigned __brev(unsigned x) { return __builtin_bitreverse32(x); }
static inline unsigned long long __brevll(unsigned long long x) { return __builtin_bitreverse64(x); }
// The kernel's source follows: call sites name its lines.
#line 1 "source.cu"
)";

}  // namespace

const std::string& warp_shim() {
  static const std::string text = [] {
    // The op numbers of WarpOp (warps.h), one macro each.
    const char* macro[kOpEnd] = {
        nullptr,        "SYNCWARP",          "BALLOT",          "ANY",           "ALL",
        "ACTIVEMASK",   "MATCH_ANY",         "MATCH_ALL",       "SHFL_IDX",      "SHFL_UP",
        "SHFL_DOWN",    "SHFL_XOR",          "REDUCE_ADD",      "REDUCE_MIN_U",  "REDUCE_MIN_S",
        "REDUCE_MAX_U", "REDUCE_MAX_S",      "REDUCE_AND",      "REDUCE_OR",     "REDUCE_XOR",
        "SYNCTHREADS",  "SYNCTHREADS_COUNT", "SYNCTHREADS_AND", "SYNCTHREADS_OR"};
    std::string defs;
    for (unsigned op = 1; op < kOpEnd; ++op)
      if (!macro[op]) die("warp_shim: op %u has no macro name", op);
    for (unsigned op = 1; op < kOpEnd; ++op)
      defs += "#define OP_" + std::string(macro[op]) + " " + std::to_string(op) + "u\n";
    std::string shim = kShim;
    const size_t at = shim.find("static void (*gbx_double_warp_hook)");
    return shim.substr(0, at) + defs + shim.substr(at);
  }();
  return text;
}

std::string lane_launcher(const std::string& kernel, size_t params) {
  std::string call;
  for (size_t i = 0; i < params; ++i)
    call += (i ? ", *(gbx_double_" : "*(gbx_double_") + kernel + "_" + std::to_string(i) +
            "*)args[" + std::to_string(i) + "]";
  return "\n// GBX CUDA double: one thread of " + kernel + " (warp mode).\nextern \"C\" void " +
         "gbx_double_lane_" + kernel +
         "(void* const* args, const unsigned* c) {\n"
         "  gridDim.x = c[0]; gridDim.y = c[1]; gridDim.z = c[2];\n"
         "  blockDim.x = c[3]; blockDim.y = c[4]; blockDim.z = c[5];\n"
         "  blockIdx.x = c[6]; blockIdx.y = c[7]; blockIdx.z = c[8];\n"
         "  threadIdx.x = c[9]; threadIdx.y = c[10]; threadIdx.z = c[11];\n  " +
         kernel + "(" + call + ");\n}\n";
}

bool names_warp_intrinsic(const std::string& source) {
  for (const char* name : kIntrinsics)
    if (source.find(name) != std::string::npos) return true;
  return false;
}

bool warp_mode(const Kernel& k) {
  if (k.warps) return true;
  const char* v = std::getenv("GBX_CUDA_DOUBLE_WARPS");  // read at each launch: tests set it
  if (!v || !*v || std::strcmp(v, "auto") == 0) return false;
  if (std::strcmp(v, "all") == 0) return true;
  die("unknown GBX_CUDA_DOUBLE_WARPS '%s' (auto, all)", v);
}

}  // namespace gbx_double
