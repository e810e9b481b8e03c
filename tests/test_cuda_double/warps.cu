// Kernels for test_cuda_double's warp-mode cases (tests/test_cuda_double/warps.cpp): compiled
// by NVRTC for sm_90 and cached like GBX's kernels, so the double runs them through its host
// compile of this very source. Expected values are computed in warps.cpp from the CUDA rules.

// One block of 64 threads (two warps); 20 results a thread.
extern "C" __global__ void warp_votes(unsigned* out) {
  const unsigned t = threadIdx.x, lane = t & 31;
  unsigned* o = out + t * 20;
  o[0] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  if (lane & 1) {
    o[1] = __ballot_sync(0xaaaaaaaau, lane > 20);
    o[2] = __activemask();
    o[3] = __any_sync(0xaaaaaaaau, lane == 7);
    o[4] = __all_sync(0xaaaaaaaau, lane != 0);
  } else {
    o[1] = __ballot_sync(0x55555555u, lane < 6);
    o[2] = __activemask();
    o[3] = __any_sync(0x55555555u, lane == 7);
    o[4] = __all_sync(0x55555555u, lane != 0);
  }
  o[5] = __match_any_sync(0xffffffffu, lane / 4);
  int all = -1;
  o[6] = __match_all_sync(0xffffffffu, t / 32, &all);
  o[7] = (unsigned)all;
  o[8] = __shfl_sync(0xffffffffu, lane * 10, 3, 8);
  o[9] = __shfl_up_sync(0xffffffffu, lane * 10, 2, 16);
  o[10] = __shfl_down_sync(0xffffffffu, lane * 10, 5);
  o[11] = __shfl_xor_sync(0xffffffffu, lane * 10, 4, 4);
  o[12] = __shfl_sync(0xffffffffu, lane * 10, 33);
  const double d = __shfl_xor_sync(0xffffffffu, lane + 0.5, 1);
  o[13] = (unsigned)(d * 2);
  o[14] = __reduce_add_sync(0xffffffffu, lane);
  o[15] = (unsigned)__reduce_min_sync(0xffffffffu, (int)lane - 5);
  int none = -1;
  o[16] = __match_all_sync(0xffffffffu, lane / 16, &none);
  o[17] = (unsigned)none;
  o[18] = __reduce_max_sync(0xffffffffu, lane * 3u);
  o[19] = __popc(o[0]) + 100 * __ffs(o[1]);
}

// Blocks of 48 threads: warp 1 of each block has 16 lanes; its lanes 12..15 exit half way.
extern "C" __global__ void partial_warp(unsigned* out) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  unsigned* o = out + t * 4;
  o[0] = __ballot_sync(0xffffffffu, 1);
  o[1] = __shfl_xor_sync(0xffffffffu, t, 8);
  if (threadIdx.x >= 32 && lane >= 12) return;
  o[2] = __ballot_sync(0xffffffffu, 1);
  o[3] = __match_any_sync(0xffffffffu, threadIdx.x / 32);
}

// The two arms of a branch meet at their own __syncwarp(); each lane then reads what its
// neighbour wrote before it.
extern "C" __global__ void syncwarp_exchange(unsigned* buf, unsigned* out) {
  const unsigned t = threadIdx.x;
  if (t & 1) {
    buf[t] = t * 3;
    __syncwarp();
  } else {
    buf[t] = t * 5 + 1;
    __syncwarp();
  }
  out[t] = buf[t ^ 1];
}

// Blocks of 64: each thread reads what a thread of the other warp stored in shared memory.
extern "C" __global__ void block_exchange(unsigned* out) {
  __shared__ unsigned s[64];
  const unsigned t = threadIdx.x;
  s[t] = blockIdx.x * 1000 + t;
  __syncthreads();
  const unsigned v = s[(t + 32) % 64];
  const int n = __syncthreads_count(t % 4 == 0);
  out[blockIdx.x * 64 + t] = v + ((unsigned)n << 16);
}

// Undefined on a GPU, each aborts on the double.
extern "C" __global__ void bad_masks(unsigned* out) {
  const unsigned lane = threadIdx.x & 31;
  out[lane] = lane < 16 ? __ballot_sync(0x0000ffffu, 1) : __ballot_sync(0xffffffffu, 1);
}

extern "C" __global__ void bad_self(unsigned* out) {
  __syncwarp(1u);
  out[threadIdx.x] = 1;
}

extern "C" __global__ void bad_exited_source(unsigned* out) {
  if (threadIdx.x == 0) return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, threadIdx.x, 0);
}

extern "C" __global__ void bad_barrier(unsigned* out) {
  if (threadIdx.x < 16)
    __syncwarp();
  else
    __syncthreads();
  out[threadIdx.x] = 1;
}

// Lanes 0..15 vote among themselves first; lanes 16..31 wait at the second vote for them
// (legal from sm_70 on: a lane waits for the lanes its mask names, wherever they are).
extern "C" __global__ void arrive_later(unsigned* out) {
  const unsigned lane = threadIdx.x & 31;
  unsigned first = 0;
  if (lane < 16) first = __ballot_sync(0x0000ffffu, lane & 1);
  out[lane * 2] = first;
  out[lane * 2 + 1] = __ballot_sync(0xffffffffu, lane >= 16 || lane == 3);
}

extern "C" __global__ void bad_never_meet(unsigned* out) {
  if (threadIdx.x < 16)
    __syncwarp();
  else
    out[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
}

// 96 KiB of locals a lane: the double's lane stacks hold it, and its stack meter sees it.
extern "C" __global__ void deep_stack(unsigned* out) {
  volatile unsigned char big[96 * 1024];
  for (unsigned i = 0; i < sizeof big; i += 4096) big[i] = (unsigned char)(i >> 12);
  big[sizeof big - 1] = 1;
  __syncwarp();
  out[threadIdx.x] = big[(threadIdx.x % 24) * 4096] + big[sizeof big - 1];
}
