// Uniform dispatch (synthesis option dispatch=uniform; docs/internals/divergence.md, "Uniform
// dispatch"). The register-operand opcodes (LD r,r' / LD r,d8 / LD (HL),r, ALU A,r / A,d8,
// INC/DEC r and (HL), NOP, and the whole CB page) run one path: operand, operation and
// destination come from a descriptor (gbx_uniform_base / gbx_uniform_cb, made by the generator
// from sm83/opcodes.tsv), so lanes of a GPU warp on LD B,C, ADD A,(HL) and BIT 7,H issue the
// same instructions; in a switch each opcode is a path of its own, and a warp issues every
// path its lanes take. The M-cycles are the families' own, in their order, through the same
// helpers (fetch8, rd, wr: sm83/cpu.h): the immediate or the (HL) read, the operation, the
// (HL) write. The other opcodes keep their cases.
//
// Descriptor: src 0-2 (B C D E H L (HL) A), src is d8 bit 3, dst 4-6, write bit 7, operation
// 8-12 (0 LD, 1-8 ADD ADC SUB SBC AND XOR OR CP, 9 INC, 10 DEC, 11-18 RLC RRC RL RR SLA SRA
// SWAP SRL, 19 BIT, 20 RES, 21 SET), bit index 13-15, bit 16 set in every descriptor (0: the
// opcode keeps its case), bit 17: PREFIX CB (the descriptor is the CB page's, by the next byte).
#if GBX_UNIFORM_DISPATCH || GBX_THREADED_DISPATCH
#if GBX_DEVICE_CUDA
#define GBX_UNIFORM_TABLE __device__ const
#else
#define GBX_UNIFORM_TABLE static const
#endif
// The tables follow this file in the kernel (kernel/step.tmpl UNIFORM_TABLE).
#endif

#if GBX_THREADED_DISPATCH
// The CB page in the cpu's threaded dispatch (kernel/step.tmpl): all 256 opcodes on one path,
// by the same descriptors (gbx_uniform_cb), in the families' M-cycles: the (HL) read, the
// operation, the (HL) write. The Cpu lives in memory there (gbx_run_env), so a register is
// its byte, by offset: no branch picks it. Any branch left (the operation, (HL) or not) is a
// conditional one, which the CPU predicts from history, where a switch per opcode is one
// indirect jump shared by all 256.
GBX_FN u8* cb_reg(Cpu& cpu, u32 i) {
  // B C D E H L (HL) A: Cpu's bytes (sm83/cpu.h), (HL) never read through it.
  static_assert(__builtin_offsetof(Cpu, a) == 0 && __builtin_offsetof(Cpu, b) == 2 &&
                    __builtin_offsetof(Cpu, l) == 7,
                "cb_reg: the Cpu's register bytes moved");
  return (u8*)&cpu + ((0x0000070605040302ull >> (8u * i)) & 0xFFu);
}
GBX_FN void cb_execute(Cpu& cpu, Core& bus, u32 d) {
  const u32 src = d & 7u, dst = (d >> 4) & 7u, op = (d >> 8) & 31u, bit = (d >> 13) & 7u;
  u32 v = src == 6u ? rd(bus, GET16(HL)) : *cb_reg(cpu, src);
  if (!(d & 0x80u)) {  // BIT, the one that writes nothing: sm83/family/cb_bit.tmpl
    cpu.f = (u8)(flags(!(v & (1u << bit)), 0, 1, 0) | (cpu.f & FLAG_C));
    return;
  }
  // RES and SET by a select; the rotates by their own switch. The empty asm keeps the compiler
  // from folding the test into that switch: one jump table over RES, SET and the rotates is
  // again an indirect jump shared by most of the page, what this path is here to avoid.
  if (op >= 20u) {
    v = op == 20u ? v & ~(1u << bit) : v | (1u << bit);
  } else {
    u32 rot = op;
    asm("" : "+r"(rot));
    switch (rot) {
      case 11:
        v = rot_rlc(cpu, (u8)v);
        break;
      case 12:
        v = rot_rrc(cpu, (u8)v);
        break;
      case 13:
        v = rot_rl(cpu, (u8)v);
        break;
      case 14:
        v = rot_rr(cpu, (u8)v);
        break;
      case 15:
        v = rot_sla(cpu, (u8)v);
        break;
      case 16:
        v = rot_sra(cpu, (u8)v);
        break;
      case 17:
        v = rot_swap(cpu, (u8)v);
        break;
      default:
        v = rot_srl(cpu, (u8)v);
        break;
    }
  }
  if (dst == 6u)
    wr(bus, GET16(HL), (u8)v);
  else
    *cb_reg(cpu, dst) = (u8)v;
}
#endif

#if GBX_UNIFORM_DISPATCH

// The divergence meter's marks (measure/src/bench/divergence_ptx.cpp): on the double, each
// conditional part of the path a lane runs is a trace record of its own; in the PTX NVRTC
// makes, an empty inline-asm comment opens and closes each part, so the meter prices every
// part by its own instructions. The comments emit no instruction.
#if defined(GBX_DEVICE_TRACE)
#define GBX_UPART(k) GBX_TRACE_UNIT(GBX_TRACE_PART + (k))
#define GBX_UPART_END(k) ((void)0)
#define GBX_UPATH(mark) ((void)0)
#elif GBX_DEVICE_CUDA
#define GBX_UPART(k) asm volatile("// gbx-part " #k)
#define GBX_UPART_END(k) asm volatile("// gbx-part-end " #k)
#define GBX_UPATH(mark) asm volatile("// gbx-path " mark)
#else
#define GBX_UPART(k) ((void)0)
#define GBX_UPART_END(k) ((void)0)
#define GBX_UPATH(mark) ((void)0)
#endif

// Register i of the SM83 encoding: selects, not a switch, so every lane runs the same code.
GBX_FN u32 uniform_reg(const Cpu& cpu, u32 i) {
  u32 v = cpu.b;
  v = i == 1 ? cpu.c : v;
  v = i == 2 ? cpu.d : v;
  v = i == 3 ? cpu.e : v;
  v = i == 4 ? cpu.h : v;
  v = i == 5 ? cpu.l : v;
  v = i == 7 ? cpu.a : v;
  return v;
}
GBX_FN void uniform_set(Cpu& cpu, u32 i, u32 v) {
  cpu.b = (u8)(i == 0 ? v : cpu.b);
  cpu.c = (u8)(i == 1 ? v : cpu.c);
  cpu.d = (u8)(i == 2 ? v : cpu.d);
  cpu.e = (u8)(i == 3 ? v : cpu.e);
  cpu.h = (u8)(i == 4 ? v : cpu.h);
  cpu.l = (u8)(i == 5 ? v : cpu.l);
  cpu.a = (u8)(i == 7 ? v : cpu.a);
}

// The operation on v (its result; F as the family sets it), by the families' own helpers.
// Operation n is the meter's part n + 8 (a literal: the mark's text is the number).
#define GBX_UOP(n, part, stmt) \
  case n:                      \
    GBX_UPART(part);           \
    stmt;                      \
    GBX_UPART_END(part);       \
    break
GBX_FN u32 uniform_op(Cpu& cpu, u32 op, u32 bit, u32 v) {
  u32 r = v;
  switch (op) {
    GBX_UOP(1, 9, (alu_add(cpu, (u8)v), r = cpu.a));
    GBX_UOP(2, 10, (alu_adc(cpu, (u8)v), r = cpu.a));
    GBX_UOP(3, 11, (alu_sub(cpu, (u8)v), r = cpu.a));
    GBX_UOP(4, 12, (alu_sbc(cpu, (u8)v), r = cpu.a));
    GBX_UOP(5, 13, (alu_and(cpu, (u8)v), r = cpu.a));
    GBX_UOP(6, 14, (alu_xor(cpu, (u8)v), r = cpu.a));
    GBX_UOP(7, 15, (alu_or(cpu, (u8)v), r = cpu.a));
    GBX_UOP(8, 16, alu_cp(cpu, (u8)v));
    GBX_UOP(9, 17, r = alu_inc(cpu, (u8)v));
    GBX_UOP(10, 18, r = alu_dec(cpu, (u8)v));
    GBX_UOP(11, 19, r = rot_rlc(cpu, (u8)v));
    GBX_UOP(12, 20, r = rot_rrc(cpu, (u8)v));
    GBX_UOP(13, 21, r = rot_rl(cpu, (u8)v));
    GBX_UOP(14, 22, r = rot_rr(cpu, (u8)v));
    GBX_UOP(15, 23, r = rot_sla(cpu, (u8)v));
    GBX_UOP(16, 24, r = rot_sra(cpu, (u8)v));
    GBX_UOP(17, 25, r = rot_swap(cpu, (u8)v));
    GBX_UOP(18, 26, r = rot_srl(cpu, (u8)v));
    // BIT: sm83/family/cb_bit.tmpl
    GBX_UOP(19, 27, cpu.f = (u8)(flags(!(v & (1u << bit)), 0, 1, 0) | (cpu.f & FLAG_C)));
    GBX_UOP(20, 28, r = v & ~(1u << bit));  // RES
    GBX_UOP(21, 29, r = v | (1u << bit));   // SET
  }
  return r & 0xFFu;
}
#undef GBX_UOP

// One instruction whose opcode (and, for the CB page, its second byte) gave descriptor d.
GBX_FN void uniform_execute(Cpu& cpu, Core& bus, u32 d) {
  const u32 src = d & 7u, dst = (d >> 4) & 7u, op = (d >> 8) & 31u, bit = (d >> 13) & 7u;
  u32 v;
  if (d & 8u) {
    GBX_UPART(1);
    v = fetch8(cpu, bus);
    GBX_UPART_END(1);
  } else if (src == 6) {
    GBX_UPART(2);
    v = rd(bus, GET16(HL));
    GBX_UPART_END(2);
  } else {
    v = uniform_reg(cpu, src);
  }
  if (op) v = uniform_op(cpu, op, bit, v);
  if (d & 0x80u) {
    if (dst == 6) {
      GBX_UPART(3);
      wr(bus, GET16(HL), (u8)v);
      GBX_UPART_END(3);
    } else {
      uniform_set(cpu, dst, v);
    }
  }
}
#endif
