// ROM-specialized blocks (docs/internals/specialization.md). A block is the cartridge's own
// code from (bank, address), emitted from the same family templates with its immediates as
// constants.
// It runs only when no scheduled event, frame end or OAM DMA can fall inside it (the dispatch
// loop checks, step.tmpl), so nothing but an access beyond ROM / WRAM / HRAM can observe the
// clock: the block keeps the cycle counter, memory pointers and CPU registers in locals and
// charges cycles exactly as the interpreter does. Such an access goes through the
// interpreter's own slow path with the counter written back first; when it changed what the
// block was admitted on, the block ends after that instruction (`left`, spec_left), where
// the interpreter takes over at the same boundary.
// The fast paths mirror bus_read / bus_write (hw/bus.h) with no DMA in progress.
struct SpecBus {
  Machine& m;
  u8* GBX_RESTRICT mem;
  const u8* rom0;
  const u8* romx;
  i64 cycles;
  bool left;
  bool ime;  // the block's IME: EI, DI and RETI end blocks, so it holds through one
  // The block's code is in the switchable window (4000-7FFF): a bank switch ends it. A bank 0
  // block goes on after one (engine/src/specialize.cpp constant_access_quiet).
  bool romx_code;
};

// The one layout rule (hw/machine.h mem_at), on the block's local memory base.
GBX_FN u8& spec_mem(SpecBus& b, u32 off) {
#if GBX_LAYOUT_INTERLEAVED
  return b.mem[(u64)off * b.m.mem_pitch];
#else
  return b.mem[off];
#endif
}

// A block's registers, read field by field from the caller's Cpu. A struct copy loads it 8
// bytes at a time, right after the interpreter's byte stores to it: a store-to-load forward
// that fails, paid at every block entry (the cpu interpreter keeps its Cpu in memory).
GBX_FN Cpu spec_cpu_in(const Cpu& io) {
  Cpu c;
  c.a = io.a;
  c.f = io.f;
  c.b = io.b;
  c.c = io.c;
  c.d = io.d;
  c.e = io.e;
  c.h = io.h;
  c.l = io.l;
  c.pc = io.pc;
  c.sp = io.sp;
  c.ime = io.ime;
  c.ei_delay = io.ei_delay;
  c.halt_bug = io.halt_bug;
  return c;
}

GBX_FN void spec_sync(SpecBus& b) {
  b.rom0 = b.m.rom0;
  b.romx = b.m.romx;
  b.cycles = b.m.cycles;
  b.left = true;
}

// A slow read or write through the interpreter's own path (VRAM, I/O, cartridge RAM, ...)
// leaves the block only when it changed what the dispatch admitted the block on (step.tmpl):
// the next event, the OAM DMA, the ROM window it runs from (bank 0 code also leaves when the
// 0000-3FFF window moves), the cycle count, or an interrupt now pending.
// Otherwise the interpreter's loop top would do nothing at the next boundary but fetch (no
// event or frame end inside the block, nothing it would dispatch, still running), so the
// block goes on, exactly as the interpreter would (a VRAM copy loop no longer drops to the
// interpreter at every write). A pending interrupt counts only with IME set: with IME clear
// the loop top passes over it (HALT, which it would wake, ends blocks). Tobu Tobu Girl copies
// to VRAM with interrupts off and VBlank's request pending: every write left the block, 111
// times a frame, and the copy loop's rest ran as a tail, 50 tails a frame.
// On the cpu the slow access and its checks are one call out of line (spec_slow_access), so a
// block's code holds the fast paths and a call. Inlined at every access whose address is not
// a constant (PUSH, POP, CALL, RET, (HL)), they made the push_pop class's block function 113
// KB for 128 instructions (73 KB now; that class 1.21x, side by side). The call takes and
// returns plain values, so the block's locals stay out of memory; the window pointers are
// read back from the Machine after it. A GPU inlines it, as before.
struct SpecMark {
  i64 next_event, dma_end, cycles;
  const u8* rom0;
  const u8* romx;
};
GBX_FN SpecMark spec_mark(const Machine& m) {
  return SpecMark{m.next_event, m.dma_end, m.cycles, m.rom0, m.romx};
}
GBX_FN bool spec_left(const Machine& m, const SpecMark& k, bool romx_code, bool ime) {
  return !(m.next_event == k.next_event && m.dma_end == k.dma_end && m.cycles == k.cycles &&
           m.rom0 == k.rom0 && (m.romx == k.romx || !romx_code) &&
           !(ime && (m.ie & m.iflag & 0x1F)) && m.run_state == GBX_RUN_ACTIVE);
}
// A read (write: false) or write of `v` at `addr` through the interpreter's slow path at
// `cycles`; returns the byte read | 0x100 when the block must leave after this instruction.
#if GBX_DEVICE_CPU
GBX_NOINLINE
#else
GBX_FN
#endif
u32 spec_slow_access(Machine& m, i64 cycles, u32 addr, u32 v, bool write, bool romx_code,
                     bool ime) {
  m.cycles = cycles;
  const SpecMark k = spec_mark(m);
  if (write)
    bus_write_slow(m, addr, (u8)v);
  else
    v = bus_read_slow(m, addr);
  return (v & 0xFFu) | (spec_left(m, k, romx_code, ime) ? 0x100u : 0u);
}
GBX_FN u8 spec_slow(SpecBus& b, u32 addr, u8 v, bool write) {
  const u32 r = spec_slow_access(b.m, b.cycles, addr, v, write, b.romx_code, b.ime);
  spec_sync(b);
  b.left = (r & 0x100u) != 0;
  return (u8)r;
}

GBX_FN void idle(SpecBus& b) { b.cycles += 4; }
// RETI ends its block, and the dispatch loop's top sets the threaded dispatch's bound after
// every block (kernel/step.tmpl), so the block itself has none to set.
GBX_FN void fast_until_update(SpecBus& b) { (void)b; }

GBX_FN u8 rd(SpecBus& b, u32 addr) {
  b.cycles += 4;
  addr &= 0xFFFFu;
  if (addr < 0x4000u) return b.rom0[addr];
  if (addr < 0x8000u) return b.romx[addr - 0x4000u];
  if (addr - 0xC000u < 0x2000u) return spec_mem(b, GBX_MEM_WRAM + (addr - 0xC000u));
  if (addr - 0xFF80u < 0x7Fu) return spec_mem(b, GBX_MEM_IO + (addr & 0xFFu));
#if GBX_DEVICE_CPU
  if (addr - 0x8000u < 0x2000u && b.cycles - 3 < b.m.vram_open)  // io_time (hw/ppu.h)
    return spec_mem(b, GBX_MEM_VRAM + (addr - 0x8000u));
#endif
  return spec_slow(b, addr, 0, false);
}

GBX_FN void wr(SpecBus& b, u32 addr, u8 v) {
  b.cycles += 4;
  addr &= 0xFFFFu;
  if (addr - 0xC000u < 0x2000u) {
    spec_mem(b, GBX_MEM_WRAM + (addr - 0xC000u)) = v;
    return;
  }
  if (addr - 0xFF80u < 0x7Fu) {
    spec_mem(b, GBX_MEM_IO + (addr & 0xFFu)) = v;
    return;
  }
#if GBX_DEVICE_CPU
  if (addr - 0x8000u < 0x2000u && b.cycles - 3 < b.m.vram_open) {
    spec_mem(b, GBX_MEM_VRAM + (addr - 0x8000u)) = v;
    return;
  }
#endif
  spec_slow(b, addr, v, true);
}

// LDH's accesses (sm83/cpu.h rd_high): the same as any, the address is often a constant.
GBX_FN u8 rd_high(SpecBus& b, u32 addr) { return rd(b, addr); }
GBX_FN void wr_high(SpecBus& b, u32 addr, u8 v) { wr(b, addr, v); }

// The IDU helpers of sm83/cpu.h: an OAM address goes through the interpreter's slow path
// and always ends the block.
GBX_FN void idle_idu(SpecBus& b, u32 addr) {
  b.cycles += 4;
  if (GBX_UNLIKELY((addr & 0xFFFFu) - 0xFE00u < 0x100u)) {
    b.m.cycles = b.cycles;
    oam_bug_idu(b.m);
    spec_sync(b);
  }
}
GBX_FN u8 rd_idu(SpecBus& b, u32 addr) {
  addr &= 0xFFFFu;
  if (GBX_UNLIKELY(addr - 0xFE00u < 0x100u)) {
    b.cycles += 4;
    b.m.cycles = b.cycles;
    oam_bug_read_idu(b.m);
    const u8 v = bus_read_slow(b.m, addr);
    spec_sync(b);
    return v;
  }
  return rd(b, addr);
}

// The opcode and immediates come from the block's constants: the fetch is charged, not done.
GBX_FN void spec_fetch(Cpu& cpu, SpecBus& b, u16 next_pc) {
  b.cycles += 4;
  cpu.pc = next_pc;
}
GBX_FN u8 spec_imm8(Cpu& cpu, SpecBus& b, u8 v) {
  b.cycles += 4;
  cpu.pc++;
  return v;
}
GBX_FN u16 spec_imm16(Cpu& cpu, SpecBus& b, u16 v) {
  b.cycles += 8;
  cpu.pc += 2;
  return v;
}
// The stack's two bytes at `lo` and lo + 1 when both are in WRAM or both in HRAM (a block
// runs with no OAM DMA): one window test for the pair, as sm83/cpu.h stack_pair, and one
// 16-bit store or load (stack_store says why). The cpu only: a GPU's blocks keep the
// byte-wise path its kernels were measured with.
#if GBX_DEVICE_CPU && !GBX_LAYOUT_INTERLEAVED
#define GBX_SPEC_STACK_PAIR 1
GBX_FN u8* spec_stack_pair(SpecBus& b, u32 lo) {
  if (lo - 0xC000u < 0x1FFFu) return &spec_mem(b, GBX_MEM_WRAM + (lo - 0xC000u));
  if (lo - 0xFF80u < 0x7Eu) return &spec_mem(b, GBX_MEM_IO + (lo & 0xFFu));
  return nullptr;
}
#else
#define GBX_SPEC_STACK_PAIR 0
#endif
GBX_FN void push16(Cpu& cpu, SpecBus& b, u16 v) {
#if GBX_SPEC_STACK_PAIR
  u8* const pair = spec_stack_pair(b, (u16)(cpu.sp - 2u));
  if (GBX_LIKELY(pair != nullptr)) return stack_push_pair(cpu, b.cycles, pair, v);
#endif
  wr(b, --cpu.sp, (u8)(v >> 8));
  wr(b, --cpu.sp, (u8)v);
}
GBX_FN u16 pop16(Cpu& cpu, SpecBus& b) {
#if GBX_SPEC_STACK_PAIR
  const u8* const pair = spec_stack_pair(b, cpu.sp);
  if (GBX_LIKELY(pair != nullptr)) return stack_pop_pair(cpu, b.cycles, pair);
#endif
  const u8 lo = rd_idu(b, cpu.sp++);
  const u8 hi = rd(b, cpu.sp++);
  return (u16)(lo | (hi << 8));
}

#if GBX_DEVICE_CUDA
#define GBX_SPEC_TABLE __device__ const
#else
#define GBX_SPEC_TABLE static const
#endif
