// GBX CUDA double: fibers, the lanes of a warp in warp mode (warps.cpp). A fiber is a stack of
// its own and a saved stack pointer. On x86-64 a switch pushes the callee-saved registers of
// the System V ABI (rbx, rbp, r12-r15, the MXCSR and x87 control words) on the old stack and
// pops them from the new one: a few nanoseconds, where glibc's swapcontext also makes a
// sigprocmask system call (1.6 us a switch and back on the 2-core CI VM, 2026-11-28). Other
// architectures (or -DGBX_CUDA_DOUBLE_UCONTEXT) use makecontext/swapcontext. Under
// AddressSanitizer every switch is announced (__sanitizer_start/finish_switch_fiber), so ASan
// knows which stack is live.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "cuda_double.h"

#if defined(__SANITIZE_ADDRESS__)
#define GBX_DOUBLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GBX_DOUBLE_ASAN 1
#endif
#endif
#ifdef GBX_DOUBLE_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if GBX_DOUBLE_ASM_SWITCH
// gbx_double_switch(save, load): saves the current context's stack pointer in *save and resumes
// the context whose stack pointer is `load`.
extern "C" void gbx_double_switch(void** save, void* load);
asm(R"(
  .text
  .p2align 4
  .globl gbx_double_switch
  .hidden gbx_double_switch
  .type gbx_double_switch, @function
gbx_double_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gbx_double_switch, .-gbx_double_switch
)");
#endif

namespace gbx_double {

// ---- stacks --------------------------------------------------------------------------------

FiberStack::~FiberStack() {
  if (map) munmap(map, map_bytes);
}

FiberStack* lane_stack(size_t i) {
  static std::vector<std::unique_ptr<FiberStack>> pool;  // under the driver lock
  while (pool.size() <= i) {
    auto s = std::make_unique<FiberStack>();
    s->map_bytes = kLaneGuardBytes + kLaneStackBytes;
    void* m = mmap(nullptr, s->map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) die("warp mode: no memory for lane stack %zu", pool.size());
    s->map = m;
    // Stacks grow down: the guard below the stack turns an overflow into a fault here instead
    // of a write into the next lane's stack.
    if (mprotect(m, kLaneGuardBytes, PROT_NONE) != 0) die("warp mode: mprotect failed");
    s->bottom = static_cast<uint8_t*>(m) + kLaneGuardBytes;
    pool.push_back(std::move(s));
  }
  return pool[i].get();
}

size_t stack_depth(const FiberStack& s) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t pages = kLaneStackBytes / page;
  std::vector<unsigned char> resident(pages);
  if (mincore(s.bottom, kLaneStackBytes, resident.data()) != 0) return 0;
  for (size_t i = 0; i < pages; ++i)
    if (resident[i] & 1) return (pages - i) * page;  // the deepest page ever touched
  return 0;
}

// ---- switching -----------------------------------------------------------------------------

void make_context(FiberContext& c, FiberStack& s, void (*entry)()) {
  c.stack_bottom = s.bottom;
  c.stack_size = kLaneStackBytes;
#ifdef GBX_DOUBLE_ASAN
  // The last fiber on this stack ended inside instrumented frames that never returned, so
  // their redzones are still poisoned; the next lane's (uninstrumented) kernel frames would
  // read as overflows.
  __asan_unpoison_memory_region(s.bottom, kLaneStackBytes);
#endif
#if GBX_DOUBLE_ASM_SWITCH
  // The frame gbx_double_switch pops: control words, r15..r12, rbx, rbp, then `entry` as the
  // return address, at a 16-byte boundary so that `entry` starts as if called (rsp = 8 mod 16).
  uint64_t* top = reinterpret_cast<uint64_t*>(s.bottom + kLaneStackBytes);
  uint64_t* sp = top - 9;
  uint32_t controls[2] = {0, 0};
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(controls[0]), "=m"(controls[1]));
  std::memcpy(&sp[0], controls, 8);
  for (int i = 1; i <= 6; ++i) sp[i] = 0;
  sp[7] = reinterpret_cast<uint64_t>(entry);
  sp[8] = 0;  // `entry`'s return address: it never returns
  c.sp = sp;
#else
  if (getcontext(&c.uc) != 0) die("warp mode: getcontext failed");
  c.uc.uc_stack.ss_sp = s.bottom;
  c.uc.uc_stack.ss_size = kLaneStackBytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
#endif
}

void switch_context(FiberContext& from, FiberContext& to, bool from_ends) {
#ifdef GBX_DOUBLE_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(from_ends ? nullptr : &fake, to.stack_bottom, to.stack_size);
#else
  (void)from_ends;
#endif
#if GBX_DOUBLE_ASM_SWITCH
  gbx_double_switch(&from.sp, to.sp);
#else
  if (swapcontext(&from.uc, &to.uc) != 0) die("warp mode: swapcontext failed");
#endif
#ifdef GBX_DOUBLE_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

void fiber_started(FiberContext& scheduler) {
#ifdef GBX_DOUBLE_ASAN
  // The stack this fiber was started from: the one the scheduler's context lives on.
  __sanitizer_finish_switch_fiber(nullptr, &scheduler.stack_bottom, &scheduler.stack_size);
#else
  (void)scheduler;
#endif
}

}  // namespace gbx_double
