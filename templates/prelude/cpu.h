// Device prelude: CPU (clang + ORC JIT). No libc, no system headers, no static constructors.
#define GBX_DEVICE_CPU 1
#define GBX_FN static inline __attribute__((always_inline))
#define GBX_NOINLINE static __attribute__((noinline))
// A call that must not grow the stack (specialized blocks' chains across functions).
#define GBX_TAIL [[clang::musttail]]
#define GBX_RESTRICT __restrict__
#define GBX_LIKELY(x) __builtin_expect(!!(x), 1)
#define GBX_UNLIKELY(x) __builtin_expect(!!(x), 0)
typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef long long i64;
typedef unsigned long long u64;
// Divergence meter hook: CUDA kernels only (prelude/cuda.h); nothing on the CPU.
#define GBX_TRACE_UNIT(u) ((void)0)
