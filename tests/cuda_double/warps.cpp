// GBX CUDA double: warp mode. A launch of a kernel whose source names a warp intrinsic (or any
// launch, with GBX_CUDA_DOUBLE_WARPS=all) runs block by block, each thread of the block a fiber
// (fibers.cpp), grouped into warps as on a GPU: warp = linear thread index / 32, the last warp
// partial when the block is not a multiple of 32. A lane runs until it calls an intrinsic or
// exits; an intrinsic hands its operands to the double and sleeps. When no lane can run, the
// double checks what the sleeping lanes wait for and completes every rendezvous whose lanes
// have all arrived, computing each lane's result, or aborts on what a GPU leaves undefined.
// The rules are the PTX ISA's (vote.sync, match.sync, shfl.sync, redux.sync, bar.warp.sync,
// bar.sync; sm_70 and later):
// - an intrinsic waits for every non-exited lane its mask names, and those must execute the
//   same intrinsic with the same mask (and operand size and width). Lanes that exited (and
//   the missing lanes of a partial warp) take no part. The lanes need not call from the same
//   site (sm_70+): two __syncwarp() in the two arms of a branch meet, and a lane may wait for
//   lanes that first meet among themselves elsewhere. So a rendezvous completes once every
//   lane it names waits in the same call; lanes at one call site (file:line) whose masks
//   name each other but differ abort at once ("lanes that meet disagree"), and lanes that
//   wait for each other in calls that can never meet abort when nothing else can run.
// - the calling lane must be in its own mask; a shuffle that reads a lane that is not taking
//   part (exited, missing, not in the mask) aborts: its value is undefined on a GPU.
// - __activemask() meets the lanes of the warp waiting at the same __activemask() (same
//   file and line): the lanes converged there.
// - __syncthreads() (and _count/_and/_or) waits for every non-exited thread of the block; a
//   lane waiting at a warp intrinsic for one that waits at the block barrier is a deadlock.
// __shared__ variables are statics of the host object: blocks run one after another.
#include "warps.h"

#include <cstdio>
#include <cstring>

#include "cuda_double.h"
#include "gbx/engine/orc_compiler.h"

namespace gbx_double {

// ---- the scheduler -----------------------------------------------------------------------

namespace {

enum class LaneState : uint8_t { Ready, Waiting, Done };

struct Lane {
  FiberContext ctx;
  LaneState state = LaneState::Ready;
  unsigned coords[12] = {};
  WarpCall* call = nullptr;     // what a waiting lane waits in (on its own stack)
  FiberStack* stack = nullptr;  // from its first run until it ends
};

struct Block {
  const Kernel* kernel = nullptr;
  void* const* args = nullptr;
  const std::string* what = nullptr;
  std::vector<Lane> lanes;
  FiberContext scheduler;
  Lane* current = nullptr;
};

thread_local Block* t_block = nullptr;
std::atomic<uint64_t> g_stack_peak{0};

[[noreturn]] void lane_main() {
  Block& b = *t_block;
  fiber_started(b.scheduler);
  Lane& l = *b.current;
  b.kernel->lane(b.args, l.coords);
  l.state = LaneState::Done;
  switch_context(l.ctx, b.scheduler, true);
  die("warp mode: a finished lane was resumed");
}

void warp_hook(WarpCall* c) {
  Block* b = t_block;
  if (!b)
    die("a kernel called a warp intrinsic (%s) in a launch the double ran thread by thread: its "
        "source names none of the intrinsics warp_shim.cpp looks for",
        c->op < kOpEnd ? kOpNames[c->op] : "?");
  Lane& l = *b->current;
  l.call = c;
  l.state = LaneState::Waiting;
  switch_context(l.ctx, b->scheduler, false);
}

std::string who(const Block& b, size_t i) {
  const unsigned* c = b.lanes[i].coords;
  char s[160];
  std::snprintf(s, sizeof s, "thread (%u,%u,%u) of block (%u,%u,%u) (warp %zu, lane %zu)", c[9],
                c[10], c[11], c[6], c[7], c[8], i / 32, i % 32);
  return s;
}

std::string call_text(const WarpCall& c) {
  const std::string at = std::string(" at ") + (c.site ? c.site : "?");
  if (block_op(c.op)) return kOpNames[c.op] + at;
  if (c.op == kActivemask) return "__activemask()" + at;
  char s[96];
  std::snprintf(s, sizeof s, "%s(mask 0x%08x", kOpNames[c.op], c.mask);
  std::string t = s;
  if (c.size) t += ", " + std::to_string(c.size) + "-byte value";
  if (c.op >= kShflIdx && c.op <= kShflXor) t += ", width " + std::to_string(c.width);
  return t + ")" + at;
}

constexpr const char* kUndefined =
    "undefined on a GPU: every non-exited lane a mask names must execute the same intrinsic "
    "with the same mask (PTX ISA, vote/shfl/match/redux.sync, bar.warp.sync)";

bool same_call(const WarpCall& c, const WarpCall& d) {
  return d.op == c.op && d.mask == c.mask && d.size == c.size && d.width == c.width;
}

bool same_site(const WarpCall& c, const WarpCall& d) {
  return c.site && d.site && std::strcmp(c.site, d.site) == 0;
}

// Undefined whatever happens next: a caller outside its own mask, a bad shuffle width, and
// lanes that meet at one intrinsic (same op, same call site) with masks that name each other
// but differ.
void check_warp(const Block& b, size_t first, size_t count) {
  for (size_t i = first; i < first + count; ++i) {
    const Lane& l = b.lanes[i];
    if (l.state != LaneState::Waiting || block_op(l.call->op) || l.call->op == kActivemask)
      continue;
    const WarpCall& c = *l.call;
    if (!(c.mask >> (i - first) & 1))
      die("%s: %s calls %s, a mask that does not name the calling lane: %s", b.what->c_str(),
          who(b, i).c_str(), call_text(c).c_str(), kUndefined);
    if (c.op >= kShflIdx && c.op <= kShflXor &&
        (c.width < 1 || c.width > 32 || (c.width & (c.width - 1))))
      die("%s: %s calls %s: the width must be a power of two from 1 to 32", b.what->c_str(),
          who(b, i).c_str(), call_text(c).c_str());
    for (size_t j = first; j < first + count; ++j) {
      const Lane& m = b.lanes[j];
      if (j == i || !(c.mask >> (j - first) & 1) || m.state != LaneState::Waiting) continue;
      const WarpCall& d = *m.call;
      if (d.op == c.op && same_site(c, d) && !same_call(c, d))
        die("%s: lanes that meet disagree: %s calls %s, %s calls %s: %s", b.what->c_str(),
            who(b, i).c_str(), call_text(c).c_str(), who(b, j).c_str(), call_text(d).c_str(),
            kUndefined);
    }
  }
}

// Lane i's rendezvous can complete: every live lane its mask names waits in the same call
// (sm_70 and later: not necessarily at the same call site).
bool group_ready(const Block& b, size_t first, size_t count, size_t i) {
  const WarpCall& c = *b.lanes[i].call;
  if (c.op == kActivemask) return true;
  for (size_t j = first; j < first + count; ++j) {
    const Lane& m = b.lanes[j];
    if (!(c.mask >> (j - first) & 1) || m.state == LaneState::Done) continue;
    if (m.state != LaneState::Waiting || !same_call(c, *m.call)) return false;
  }
  return true;
}

// Nothing can run and nothing can complete: names a lane and the lane it waits for in vain.
[[noreturn]] void stuck(const Block& b) {
  for (size_t i = 0; i < b.lanes.size(); ++i) {
    const Lane& l = b.lanes[i];
    if (l.state != LaneState::Waiting || block_op(l.call->op)) continue;
    const size_t first = i / 32 * 32, count = std::min<size_t>(32, b.lanes.size() - first);
    const WarpCall& c = *l.call;
    for (size_t j = first; j < first + count; ++j) {
      const Lane& m = b.lanes[j];
      if (!(c.mask >> (j - first) & 1) || m.state != LaneState::Waiting || same_call(c, *m.call))
        continue;
      if (block_op(m.call->op))
        die("%s: %s waits in %s for %s, which waits at %s: a deadlock on a GPU", b.what->c_str(),
            who(b, i).c_str(), call_text(c).c_str(), who(b, j).c_str(), call_text(*m.call).c_str());
      die("%s: the lanes never meet: %s waits in %s for %s, which waits in %s: %s", b.what->c_str(),
          who(b, i).c_str(), call_text(c).c_str(), who(b, j).c_str(), call_text(*m.call).c_str(),
          kUndefined);
    }
  }
  die("%s: warp mode: no lane can run and no rendezvous can complete", b.what->c_str());
}

// The lane a shuffle reads (PTX ISA shfl.sync: c = ((32 - width) << 8) | (up ? 0 : 0x1f)).
unsigned shfl_source(unsigned op, unsigned lane, int arg, int width) {
  const int b = arg & 31;
  const int segmask = (32 - width) & 31;
  const int cval = op == kShflUp ? 0 : 31;
  const int max_lane = ((int)lane & segmask) | (cval & ~segmask);
  const int min_lane = (int)lane & segmask;
  int j = (int)lane;
  bool in = false;
  switch (op) {
    case kShflUp:
      j = (int)lane - b;
      in = j >= max_lane;
      break;
    case kShflDown:
      j = (int)lane + b;
      in = j <= max_lane;
      break;
    case kShflXor:
      j = (int)lane ^ b;
      in = j <= max_lane;
      break;
    default:
      j = min_lane | (b & ~segmask);
      in = j <= max_lane;
  }
  return in ? (unsigned)j : lane;
}

uint64_t fold(unsigned op, uint64_t acc, uint64_t v) {
  const uint32_t a = (uint32_t)acc, x = (uint32_t)v;
  switch (op) {
    case kReduceAdd:
      return a + x;
    case kReduceMinU:
      return std::min(a, x);
    case kReduceMaxU:
      return std::max(a, x);
    case kReduceMinS:
      return (uint32_t)std::min((int32_t)a, (int32_t)x);
    case kReduceMaxS:
      return (uint32_t)std::max((int32_t)a, (int32_t)x);
    case kReduceAnd:
      return a & x;
    case kReduceOr:
      return a | x;
    default:
      return a ^ x;
  }
}

uint64_t value_bits(const WarpCall& c) {
  return c.size >= 8 ? c.value : c.value & ((uint64_t(1) << (8 * c.size)) - 1);
}

// Completes the rendezvous of lane `i`'s group in the warp; the group's lanes become ready.
void complete(Block& b, size_t first, size_t count, size_t i) {
  const WarpCall& c = *b.lanes[i].call;
  const uint32_t exists = count == 32 ? ~0u : (1u << count) - 1;
  uint32_t group = 0;
  for (size_t j = first; j < first + count; ++j) {
    const Lane& m = b.lanes[j];
    if (m.state != LaneState::Waiting) continue;
    if (c.op == kActivemask ? (m.call->op == kActivemask && std::strcmp(m.call->site, c.site) == 0)
                            : (c.mask >> (j - first) & 1))
      group |= 1u << (j - first);
  }
  uint32_t votes = 0;
  uint64_t acc = 0;
  bool first_value = true, all_equal = true;
  for (size_t j = first; j < first + count; ++j) {
    if (!(group >> (j - first) & 1)) continue;
    const WarpCall& d = *b.lanes[j].call;
    if (d.value) votes |= 1u << (j - first);
    if (first_value) {
      acc = d.value;
    } else {
      all_equal &= value_bits(d) == value_bits(*b.lanes[first + __builtin_ctz(group)].call);
      acc = fold(c.op, acc, d.value);
    }
    first_value = false;
  }
  for (size_t j = first; j < first + count; ++j) {
    if (!(group >> (j - first) & 1)) continue;
    Lane& m = b.lanes[j];
    WarpCall& d = *m.call;
    const unsigned lane = (unsigned)(j - first);
    switch (c.op) {
      case kBallot:
        d.result = votes;
        break;
      case kAny:
        d.result = votes != 0;
        break;
      case kAll:
        d.result = votes == group;
        break;
      case kActivemask:
        d.result = group;
        break;
      case kMatchAny: {
        uint32_t same = 0;
        for (size_t k = first; k < first + count; ++k)
          if ((group >> (k - first) & 1) && value_bits(*b.lanes[k].call) == value_bits(d))
            same |= 1u << (k - first);
        d.result = same;
        break;
      }
      case kMatchAll:
        d.result = all_equal ? group : 0;
        d.pred = all_equal;
        break;
      case kShflIdx:
      case kShflUp:
      case kShflDown:
      case kShflXor: {
        const unsigned src = shfl_source(c.op, lane, d.arg, d.width);
        if (!(group >> src & 1)) {
          const Lane* s = first + src < b.lanes.size() ? &b.lanes[first + src] : nullptr;
          const char* why = !(exists >> src & 1)               ? "does not exist (a partial warp)"
                            : !(c.mask >> src & 1)             ? "is not named in the mask"
                            : s && s->state == LaneState::Done ? "has exited"
                                                               : "is not taking part";
          die("%s: %s reads lane %u in %s, which %s: its value is undefined on a GPU",
              b.what->c_str(), who(b, j).c_str(), src, call_text(d).c_str(), why);
        }
        d.result = b.lanes[first + src].call->value;
        break;
      }
      case kSyncwarp:
        d.result = 0;
        break;
      default:
        d.result = acc;
    }
    m.state = LaneState::Ready;
  }
}

// Nothing can run: completes what can be completed, or aborts.
void resolve(Block& b) {
  const size_t n = b.lanes.size();
  for (size_t first = 0; first < n; first += 32)
    check_warp(b, first, std::min<size_t>(32, n - first));
  bool progressed = false;
  for (size_t first = 0; first < n; first += 32) {
    const size_t count = std::min<size_t>(32, n - first);
    for (size_t i = first; i < first + count; ++i) {
      const Lane& l = b.lanes[i];
      if (l.state == LaneState::Waiting && !block_op(l.call->op) &&
          group_ready(b, first, count, i)) {
        complete(b, first, count, i);
        progressed = true;
      }
    }
  }
  if (progressed) return;
  // The block barrier, once every live thread waits at it (exited threads do not hold it up:
  // PTX ISA, exit).
  const WarpCall* c0 = nullptr;
  size_t i0 = 0, votes = 0, live = 0;
  for (size_t i = 0; i < n; ++i) {
    const Lane& l = b.lanes[i];
    if (l.state != LaneState::Waiting) continue;
    if (!block_op(l.call->op)) stuck(b);
    if (!c0) c0 = l.call, i0 = i;
    if (l.call->op != c0->op)
      die("%s: %s waits at %s, %s at %s: different block barriers, undefined on a GPU",
          b.what->c_str(), who(b, i0).c_str(), call_text(*c0).c_str(), who(b, i).c_str(),
          call_text(*l.call).c_str());
    votes += l.call->value != 0;
    ++live;
  }
  if (!c0) stuck(b);
  for (Lane& l : b.lanes) {
    if (l.state != LaneState::Waiting) continue;
    l.call->result = c0->op == kSyncthreadsCount ? votes
                     : c0->op == kSyncthreadsAnd ? votes == live
                                                 : votes != 0;
    l.state = LaneState::Ready;
  }
}

}  // namespace

std::string attach_lanes(const std::string& jit_key, const std::string& object,
                         const std::string& kernel, Kernel& k) {
  auto lane = gbx::jit_load_object(jit_key, object, "gbx_double_lane_" + kernel);
  if (!lane) return lane.error().message;
  auto set = gbx::jit_load_object(jit_key, object, "gbx_double_set_warp_hook");
  if (!set) return set.error().message;
  reinterpret_cast<void (*)(void (*)(WarpCall*))> (*set)(&warp_hook);
  k.lane = reinterpret_cast<LaneFn>(*lane);
  return "";
}

void run_warps(const Kernel& k, void* const* args, const unsigned d[6], const std::string& what) {
  Block b;
  b.kernel = &k;
  b.args = args;
  b.what = &what;
  const size_t n = (size_t)d[3] * d[4] * d[5];
  b.lanes.resize(n);
  std::vector<FiberStack*> free;
  size_t stacks = 0;  // lane_stack(0 .. stacks-1) used by this launch
  t_block = &b;
  for (unsigned bz = 0; bz < d[2]; ++bz)
    for (unsigned by = 0; by < d[1]; ++by)
      for (unsigned bx = 0; bx < d[0]; ++bx) {
        size_t i = 0;
        for (unsigned tz = 0; tz < d[5]; ++tz)
          for (unsigned ty = 0; ty < d[4]; ++ty)
            for (unsigned tx = 0; tx < d[3]; ++tx, ++i) {
              Lane& l = b.lanes[i];
              const unsigned c[12] = {d[0], d[1], d[2], d[3], d[4], d[5], bx, by, bz, tx, ty, tz};
              std::memcpy(l.coords, c, sizeof c);
              l.state = LaneState::Ready;
              l.call = nullptr;
            }
        size_t done = 0;
        for (;;) {
          for (Lane& l : b.lanes) {
            if (l.state != LaneState::Ready) continue;
            if (!l.stack) {  // its first run: a stack no running lane holds
              if (free.empty()) free.push_back(lane_stack(stacks++));
              l.stack = free.back();
              free.pop_back();
              make_context(l.ctx, *l.stack, &lane_main);
            }
            b.current = &l;
            switch_context(b.scheduler, l.ctx, false);
            if (l.state == LaneState::Done) {
              ++done;
              free.push_back(l.stack);  // lanes that never wait all run on one warm stack
              l.stack = nullptr;
            }
          }
          if (done == n) break;
          resolve(b);
        }
      }
  t_block = nullptr;
  uint64_t peak = g_stack_peak.load();
  for (size_t i = 0; i < stacks; ++i) peak = std::max<uint64_t>(peak, stack_depth(*lane_stack(i)));
  g_stack_peak = peak;
  // Overflow faults at the guard; failing here at 3/4 says so before a deeper path gets there.
  if (peak > kLaneStackBytes / 4 * 3)
    die("%s: warp mode: a lane used %llu KiB of its %zu KiB stack: raise kLaneStackBytes "
        "(cuda_double.h)",
        what.c_str(), (unsigned long long)peak >> 10, kLaneStackBytes >> 10);
}

}  // namespace gbx_double

// The deepest any lane stack has been used so far, in bytes (0: no launch in warp mode yet).
extern "C" __attribute__((visibility("default"))) uint64_t gbx_cuda_double_lane_stack_peak() {
  return gbx_double::g_stack_peak.load();
}
