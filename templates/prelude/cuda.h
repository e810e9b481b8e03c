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
// Only the cpu's specialized blocks tail-call (clang's musttail); nothing here.
#define GBX_TAIL
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
// Divergence meter hook (docs/internals/divergence.md): GBX_TRACE_UNIT(u) marks each dispatch
// unit the step loop runs (an opcode handler, a CB handler, a specialized block, a loop-top
// path). Empty unless the compile defines GBX_DEVICE_TRACE(u): only the CUDA driver test
// double does (tests/cuda_double/trace.cpp), so NVRTC's kernel never has it.
#ifdef GBX_DEVICE_TRACE
#define GBX_TRACE_UNIT(u) GBX_DEVICE_TRACE(u)
#else
#define GBX_TRACE_UNIT(u) ((void)0)
#endif
#define GBX_TRACE_OP 0u           // + the base opcode
#define GBX_TRACE_CB 256u         // + the CB opcode
#define GBX_TRACE_INTERRUPT 512u  // interrupt dispatch
#define GBX_TRACE_HALTED 513u     // asleep: skip to the next event
#define GBX_TRACE_STOP_LEAVE 514u
#define GBX_TRACE_EVENTS 515u   // service_events at the loop top (then the iteration's unit)
#define GBX_TRACE_UNIFORM 516u  // the uniform dispatch's shared path (sm83/uniform.h)
#define GBX_TRACE_WAIT 517u     // warp_majority: the lane waited for its turn (no unit ran)
#define GBX_TRACE_PART 2048u    // + a part of that path a lane ran (sm83/uniform.h GBX_UPART)
#define GBX_TRACE_BLOCK 1024u   // + the specialized block's index
