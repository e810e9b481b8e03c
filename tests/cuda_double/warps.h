#pragma once
// GBX CUDA double: what the warp-mode parts share (warp_shim.cpp: the intrinsics compiled into a
// kernel's host object; warps.cpp: the scheduler that completes them).
#include <cstdint>

namespace gbx_double {

enum WarpOp : unsigned {
  kSyncwarp = 1,
  kBallot,
  kAny,
  kAll,
  kActivemask,
  kMatchAny,
  kMatchAll,
  kShflIdx,
  kShflUp,
  kShflDown,
  kShflXor,
  kReduceAdd,
  kReduceMinU,
  kReduceMinS,
  kReduceMaxU,
  kReduceMaxS,
  kReduceAnd,
  kReduceOr,
  kReduceXor,
  kSyncthreads,  // the block barriers from here on
  kSyncthreadsCount,
  kSyncthreadsAnd,
  kSyncthreadsOr,
  kOpEnd
};

extern const char* const kOpNames[kOpEnd];  // the CUDA name of each op

inline bool block_op(unsigned op) { return op >= kSyncthreads; }

// One intrinsic call, as the shim's GbxDoubleWarpCall lays it out (same member types in the
// same order, both compiled for the same host).
struct WarpCall {
  unsigned op, mask, size, pad;
  uint64_t value;  // the lane's operand: predicate, shuffled or matched value
  int arg, width;  // srcLane / delta / laneMask; the shuffle's width
  const char* site;
  uint64_t result;
  int pred;  // __match_all_sync's predicate out
};

}  // namespace gbx_double
