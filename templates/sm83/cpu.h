// SM83 registers and the helpers every instruction family is written with. Timing is charged
// by the bus helpers (rd, wr, fetch8, idle): 4 T-cycles per M-cycle, so no family body
// touches the cycle counter itself.
#define FLAG_Z 0x80
#define FLAG_N 0x40
#define FLAG_H 0x20
#define FLAG_C 0x10

struct Cpu {
  u8 a, f, b, c, d, e, h, l;
  u16 pc, sp;
  u8 ime;
  u8 ei_delay;
  u8 halt_bug;
};

// 16-bit register pairs by operand name: GET16(BC), SET16(HL, v).
#define GET16(rr) GET16_##rr
#define SET16(rr, v) SET16_##rr(v)
#define GET16_BC ((u16)((cpu.b << 8) | cpu.c))
#define GET16_DE ((u16)((cpu.d << 8) | cpu.e))
#define GET16_HL ((u16)((cpu.h << 8) | cpu.l))
#define GET16_AF ((u16)((cpu.a << 8) | cpu.f))
#define GET16_SP (cpu.sp)
#define SET16_BC(v)          \
  do {                       \
    const u16 t_ = (u16)(v); \
    cpu.b = (u8)(t_ >> 8);   \
    cpu.c = (u8)t_;          \
  } while (0)
#define SET16_DE(v)          \
  do {                       \
    const u16 t_ = (u16)(v); \
    cpu.d = (u8)(t_ >> 8);   \
    cpu.e = (u8)t_;          \
  } while (0)
#define SET16_HL(v)          \
  do {                       \
    const u16 t_ = (u16)(v); \
    cpu.h = (u8)(t_ >> 8);   \
    cpu.l = (u8)t_;          \
  } while (0)
#define SET16_AF(v)          \
  do {                       \
    const u16 t_ = (u16)(v); \
    cpu.a = (u8)(t_ >> 8);   \
    cpu.f = (u8)t_ & 0xF0;   \
  } while (0)
#define SET16_SP(v)    \
  do {                 \
    cpu.sp = (u16)(v); \
  } while (0)

GBX_FN u8 flags(u32 z, u32 n, u32 h, u32 c) {
  return (u8)((z ? FLAG_Z : 0) | (n ? FLAG_N : 0) | (h ? FLAG_H : 0) | (c ? FLAG_C : 0));
}

// The cpu backend's dmg bus (hw/bus.h: ROM windows, the OAM DMA gate, bus_read_slow) lets
// the helpers below take a whole access pair, or an LDH access, with one window test.
#if GBX_DEVICE_CPU && !GBX_MEMORY_MODEL_FLAT64K
#define GBX_CPU_BUS_FAST 1
#else
#define GBX_CPU_BUS_FAST 0
#endif

GBX_FN void idle(Core& b) { b.cycles += 4; }
GBX_FN u8 rd(Core& b, u32 addr) {
  b.cycles += 4;
  return bus_read(b, addr & 0xFFFFu);
}
GBX_FN void wr(Core& b, u32 addr, u8 v) {
  b.cycles += 4;
  bus_write(b, addr & 0xFFFFu, v);
}
// LDH's accesses, whose address is FF00-FFFF: HRAM is the one fast window there, so it is
// tested first and alone (bus_read tests ROM, WRAM and then HRAM); the rest, I/O and IE, is
// the slow path's either way. Games keep their hot variables in HRAM and read them by LDH.
GBX_FN u8 rd_high(Core& b, u32 addr) {
#if GBX_CPU_BUS_FAST
  b.cycles += 4;
  if (((addr | b.dma_gate) & 0xFFFFu) - 0xFF80u < 0x7Fu)
    return mem_at(b, GBX_MEM_IO + (addr & 0xFFu));
  // I/O and IE: with the gate open (no OAM DMA), straight to the registers, where
  // bus_read_slow ends after its gate check and window tests (joypad, LY, STAT and DIV polls).
  if (!b.dma_gate) return io_read(b, addr);
  return bus_read_slow(b, addr);
#else
  return rd(b, addr);
#endif
}
GBX_FN void wr_high(Core& b, u32 addr, u8 v) {
#if GBX_CPU_BUS_FAST
  b.cycles += 4;
  if (((addr | b.dma_gate) & 0xFFFFu) - 0xFF80u < 0x7Fu) {
    mem_at(b, GBX_MEM_IO + (addr & 0xFFu)) = v;
    return;
  }
  if (!b.dma_gate) return io_write(b, addr, v);  // as rd_high
  bus_write_slow(b, addr, v);
#else
  wr(b, addr, v);
#endif
}
// The 16-bit increment/decrement unit (IDU) drives the address bus with the register it steps,
// so an OAM address there during the OAM scan corrupts OAM like an access (hw/bus.h, "OAM
// corruption bug"). Common path: one compare of the address.
// idle_idu: an M-cycle with no access whose IDU step puts `addr` on the bus (INC rr, DEC rr,
// the SP decrement before a push).
GBX_FN void idle_idu(Core& b, u32 addr) {
  b.cycles += 4;
  if (GBX_UNLIKELY((addr & 0xFFFFu) - 0xFE00u < 0x100u)) {
    oam_bug_idu(core_spill(b));
    core_reload(b);
  }
}
// rd_idu: a read whose address the IDU steps in the same M-cycle (LD A,[HL+/-], POP's first
// byte): a read and an IDU write at once (Pan Docs "Read During Increase/Decrease").
GBX_FN u8 rd_idu(Core& b, u32 addr) {
  addr &= 0xFFFFu;
  if (GBX_UNLIKELY(addr - 0xFE00u < 0x100u)) {
    b.cycles += 4;
    oam_bug_read_idu(core_spill(b));
    core_reload(b);
    return bus_read(b, addr);
  }
  return rd(b, addr);
}
GBX_FN u8 fetch8(Cpu& cpu, Core& b) { return rd(b, cpu.pc++); }
GBX_FN u16 fetch16(Cpu& cpu, Core& b) {
#if GBX_CPU_BUS_FAST
  // Both bytes in one ROM window (and no OAM DMA gate, hw/bus.h bus_read): one test and
  // two loads instead of two reads' window tests; the clock is charged the same 8.
  const u32 g = cpu.pc | b.dma_gate;
  const u8* const w = g < 0x3FFFu             ? b.rom0 + g
                      : g - 0x4000u < 0x3FFFu ? b.romx + (g - 0x4000u)
                                              : nullptr;
  if (GBX_LIKELY(w != nullptr)) {
    b.cycles += 8;
    cpu.pc = (u16)(cpu.pc + 2u);
    return (u16)(w[0] | (w[1] << 8));
  }
#endif
  const u8 lo = fetch8(cpu, b);
  const u8 hi = fetch8(cpu, b);
  return (u16)(lo | (hi << 8));
}
#if GBX_DEVICE_CPU
// A stack pair as one 16-bit store and one 16-bit load (hosts of the cpu backend are
// little-endian; the byte-wise fallback below otherwise). A RET right after its CALL loads
// the pair the CALL stored: x86 forwards a load from one store of the same bytes, not from two
// byte stores (a failed store-to-load forward, ~12 cycles; the call_ret class's specialized
// blocks ran 0.79x with byte stores and a load that clang merged into one).
GBX_FN void stack_store(u8* pair, u16 v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  __builtin_memcpy(pair, &v, 2);
#else
  pair[0] = (u8)v;
  pair[1] = (u8)(v >> 8);
#endif
}
GBX_FN u16 stack_load(const u8* pair) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  u16 v;
  __builtin_memcpy(&v, pair, 2);
  return v;
#else
  return (u16)(pair[0] | (pair[1] << 8));
#endif
}
// A PUSH's or POP's two accesses to a pair found in one window (stack_pair, and kernel/
// spec_bus.h spec_stack_pair): both M-cycles charged at once, nothing observes the clock.
GBX_FN void stack_push_pair(Cpu& cpu, i64& cycles, u8* pair, u16 v) {
  cycles += 8;
  cpu.sp = (u16)(cpu.sp - 2u);
  stack_store(pair, v);
}
GBX_FN u16 stack_pop_pair(Cpu& cpu, i64& cycles, const u8* pair) {
  cycles += 8;
  cpu.sp = (u16)(cpu.sp + 2u);
  return stack_load(pair);
}
#endif
#if GBX_CPU_BUS_FAST
// The stack's two bytes at `lo` and lo + 1 when both are in WRAM or both in HRAM and no OAM
// DMA gate is closed (hw/bus.h bus_read): a push or pop there is two plain accesses, with
// one window test for the pair instead of one per byte (and no OAM-bug test: neither
// window is OAM). Else null, and the bytes go through rd / wr one at a time.
// Env-major layouts only (the interleaved one puts an env's consecutive bytes a pitch apart).
GBX_FN u8* stack_pair(Core& b, u32 lo) {
#if GBX_LAYOUT_INTERLEAVED
  (void)b;
  (void)lo;
#else
  const u32 g = lo | b.dma_gate;
  if (g - 0xC000u < 0x1FFFu) return &mem_at(b, GBX_MEM_WRAM + (g - 0xC000u));
  if ((g & 0xFFFFu) - 0xFF80u < 0x7Eu) return &mem_at(b, GBX_MEM_IO + (lo & 0xFFu));
#endif
  return nullptr;
}
#endif
// PUSH / CALL / RST / interrupt dispatch: the M-cycle before the two writes is the IDU's
// first SP decrement (idle_idu(bus, cpu.sp) there); the second decrement shares the first
// write's M-cycle and acts as that write (Pan Docs: "effectively behave like 3 writes").
GBX_FN void push16(Cpu& cpu, Core& b, u16 v) {
#if GBX_CPU_BUS_FAST
  u8* const pair = stack_pair(b, (u16)(cpu.sp - 2u));
  if (GBX_LIKELY(pair != nullptr)) return stack_push_pair(cpu, b.cycles, pair, v);
#endif
  wr(b, --cpu.sp, (u8)(v >> 8));
  wr(b, --cpu.sp, (u8)v);
}
// POP / RET: the first read steps SP in its M-cycle (a read during increase); the second
// read's increment does not disturb OAM (Pan Docs: POP triggers the bug 3 times, not 4).
GBX_FN u16 pop16(Cpu& cpu, Core& b) {
#if GBX_CPU_BUS_FAST
  const u8* const pair = stack_pair(b, cpu.sp);
  if (GBX_LIKELY(pair != nullptr)) return stack_pop_pair(cpu, b.cycles, pair);
#endif
  const u8 lo = rd_idu(b, cpu.sp++);
  const u8 hi = rd(b, cpu.sp++);
  return (u16)(lo | (hi << 8));
}

// 8-bit ALU (Pan Docs "CPU Instruction Set"): ADD ADC SUB SBC AND XOR OR CP.
GBX_FN void alu_add(Cpu& cpu, u8 v) {
  const u32 r = (u32)cpu.a + v;
  cpu.f = flags((u8)r == 0, 0, ((cpu.a & 0xF) + (v & 0xF)) > 0xF, r > 0xFF);
  cpu.a = (u8)r;
}
GBX_FN void alu_adc(Cpu& cpu, u8 v) {
  const u32 carry = (cpu.f & FLAG_C) ? 1 : 0;
  const u32 r = (u32)cpu.a + v + carry;
  cpu.f = flags((u8)r == 0, 0, ((cpu.a & 0xF) + (v & 0xF) + carry) > 0xF, r > 0xFF);
  cpu.a = (u8)r;
}
GBX_FN void alu_sub(Cpu& cpu, u8 v) {
  const u32 r = (u32)cpu.a - v;
  cpu.f = flags((u8)r == 0, 1, (cpu.a & 0xF) < (v & 0xF), cpu.a < v);
  cpu.a = (u8)r;
}
GBX_FN void alu_sbc(Cpu& cpu, u8 v) {
  const u32 carry = (cpu.f & FLAG_C) ? 1 : 0;
  const i32 r = (i32)cpu.a - v - (i32)carry;
  cpu.f = flags((u8)r == 0, 1, ((i32)(cpu.a & 0xF) - (i32)(v & 0xF) - (i32)carry) < 0, r < 0);
  cpu.a = (u8)r;
}
GBX_FN void alu_and(Cpu& cpu, u8 v) {
  cpu.a &= v;
  cpu.f = flags(cpu.a == 0, 0, 1, 0);
}
GBX_FN void alu_xor(Cpu& cpu, u8 v) {
  cpu.a ^= v;
  cpu.f = flags(cpu.a == 0, 0, 0, 0);
}
GBX_FN void alu_or(Cpu& cpu, u8 v) {
  cpu.a |= v;
  cpu.f = flags(cpu.a == 0, 0, 0, 0);
}
GBX_FN void alu_cp(Cpu& cpu, u8 v) {
  cpu.f = flags(cpu.a == v, 1, (cpu.a & 0xF) < (v & 0xF), cpu.a < v);
}

GBX_FN u8 alu_inc(Cpu& cpu, u8 v) {
  const u8 r = (u8)(v + 1);
  cpu.f = (u8)(flags(r == 0, 0, (v & 0xF) == 0xF, 0) | (cpu.f & FLAG_C));
  return r;
}
GBX_FN u8 alu_dec(Cpu& cpu, u8 v) {
  const u8 r = (u8)(v - 1);
  cpu.f = (u8)(flags(r == 0, 1, (v & 0xF) == 0, 0) | (cpu.f & FLAG_C));
  return r;
}

// CB rotates and shifts: RLC RRC RL RR SLA SRA SWAP SRL. Z from the result.
GBX_FN u8 rot_rlc(Cpu& cpu, u8 v) {
  const u8 r = (u8)((v << 1) | (v >> 7));
  cpu.f = flags(r == 0, 0, 0, v & 0x80);
  return r;
}
GBX_FN u8 rot_rrc(Cpu& cpu, u8 v) {
  const u8 r = (u8)((v >> 1) | (v << 7));
  cpu.f = flags(r == 0, 0, 0, v & 1);
  return r;
}
GBX_FN u8 rot_rl(Cpu& cpu, u8 v) {
  const u8 r = (u8)((v << 1) | ((cpu.f & FLAG_C) ? 1 : 0));
  cpu.f = flags(r == 0, 0, 0, v & 0x80);
  return r;
}
GBX_FN u8 rot_rr(Cpu& cpu, u8 v) {
  const u8 r = (u8)((v >> 1) | ((cpu.f & FLAG_C) ? 0x80 : 0));
  cpu.f = flags(r == 0, 0, 0, v & 1);
  return r;
}
GBX_FN u8 rot_sla(Cpu& cpu, u8 v) {
  const u8 r = (u8)(v << 1);
  cpu.f = flags(r == 0, 0, 0, v & 0x80);
  return r;
}
GBX_FN u8 rot_sra(Cpu& cpu, u8 v) {
  const u8 r = (u8)((v >> 1) | (v & 0x80));
  cpu.f = flags(r == 0, 0, 0, v & 1);
  return r;
}
GBX_FN u8 rot_swap(Cpu& cpu, u8 v) {
  const u8 r = (u8)((v << 4) | (v >> 4));
  cpu.f = flags(r == 0, 0, 0, 0);
  return r;
}
GBX_FN u8 rot_srl(Cpu& cpu, u8 v) {
  const u8 r = (u8)(v >> 1);
  cpu.f = flags(r == 0, 0, 0, v & 1);
  return r;
}

// SP + signed 8-bit offset (ADD SP,e8 and LD HL,SP+e8): H and C from the low byte.
GBX_FN u16 sp_plus_e8(Cpu& cpu, u8 e) {
  const u16 r = (u16)(cpu.sp + (i8)e);
  cpu.f = flags(0, 0, ((cpu.sp & 0xF) + (e & 0xF)) > 0xF, ((cpu.sp & 0xFF) + e) > 0xFF);
  return r;
}
