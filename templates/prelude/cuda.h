// Device prelude: CUDA (NVRTC). One thread steps one env.
#define GBX_DEVICE_CUDA 1
#define GBX_FN static __device__ __forceinline__
#define GBX_NOINLINE static __device__ __noinline__
// Kernel parameters whose address the kernel takes (the Machine points at them) stay in the
// parameter space instead of being copied to local memory (sm_70 and later; older archs get
// the copy). The CUDA driver test double compiles this source for the host, where the
// qualifier does not exist.
#if defined(__CUDACC__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700)
#define GBX_GRID_CONSTANT __grid_constant__
#else
#define GBX_GRID_CONSTANT
#endif
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
