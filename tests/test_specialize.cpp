// ROM-specialized kernels (docs/internals/specialization.md): block discovery on known programs,
// and the exactness rule: a specialized kernel's end state (every state field, memory, framebuffer,
// as a save state holds them) is byte-identical to the interpreter's, on every built-in ROM
// and on ROMs that run code from WRAM/HRAM (rewriting it) and from switched ROM banks.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "spec_share.h"
#include "test_util.h"

using namespace gbx;

namespace {

std::vector<OpcodeEntry> opcode_table() {
  auto b = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(b.ok());
  return b.value().opcodes();
}

// Copies a routine to WRAM (0xC100) and HRAM (0xFF90), calls both in a loop and rewrites the
// WRAM copy's immediate every round (as OAM DMA routines run from HRAM, and as self-modifying
// code does). Results go to WRAM 0xC000-0xC002.
std::vector<uint8_t> ram_code_rom() {
  Asm r(0x0000);  // the routine, position-independent: LD A,d8; ADD A,C; LD C,A; INC D; RET
  r.op("LD A,d8", 7).op("ADD A,C").op("LD C,A").op("INC D").op("RET");
  auto routine_bytes = r.assemble_flat();
  REQUIRE_MESSAGE(routine_bytes.ok(), (routine_bytes.ok() ? "" : routine_bytes.error().message));
  const auto routine = routine_bytes.value();
  Asm a;
  a.op("LD SP,d16", 0xDFF0);
  for (uint16_t dst : {(uint16_t)0xC100, (uint16_t)0xFF90}) {
    a.op("LD HL,d16", "routine").op("LD DE,d16", dst).op("LD B,d8", (int)routine.size());
    const std::string l = "copy" + std::to_string(dst);
    a.label(l).op("LD A,(HL+)").op("LD (DE),A").op("INC DE").op("DEC B").op("JR NZ,r8", l);
  }
  a.op("LD C,d8", 0).op("LD D,d8", 0);
  a.label("loop")
      .op("CALL a16", 0xC100)
      .op("CALL a16", 0xFF90)
      .op("LD HL,d16", 0xC101)
      .op("INC (HL)")
      .op("LD A,C")
      .op("LD (a16),A", 0xC000)
      .op("LD A,D")
      .op("LD (a16),A", 0xC001)
      .op("LD A,(a16)", 0xC101)
      .op("LD (a16),A", 0xC002)
      .op("JR r8", "loop");
  a.label("routine").bytes(routine);
  RomSpec spec;
  spec.title = "RAMCODE";
  auto placed = a.place(spec);
  REQUIRE_MESSAGE(placed.ok(), (placed.ok() ? "" : placed.error().message));
  return build_rom(spec);
}

// Code assembled at 0x4000 into `bank` of the ROM.
void place_bank(RomSpec& spec, int bank, const Asm& b) {
  auto code = b.assemble_flat();
  REQUIRE_MESSAGE(code.ok(), (code.ok() ? "" : code.error().message));
  spec.patches.emplace_back((uint32_t)bank * 0x4000u, code.value());
}

// At 0x4000 of banks 2 and 3 of an MBC1 ROM, a routine with the same addresses and other code:
// a loop of `rounds` that counts in B (bank 2) or C (bank 3), then RET.
void add_bank_loops(RomSpec& spec, int rounds) {
  for (int bank : {2, 3}) {
    Asm b(0x4000);
    b.op("LD E,d8", rounds).label("l");
    if (bank == 2)
      b.op("INC B").op("LD A,B").op("ADD A,d8", 3).op("LD B,A");
    else
      b.op("INC C").op("LD A,C").op("XOR d8", 0x5A).op("LD C,A");
    b.op("DEC E").op("JR NZ,r8", "l").op("RET");
    place_bank(spec, bank, b);
  }
}

// An MBC1 ROM of 128 KiB (banks 0-7), for the banked-code ROMs below.
RomSpec mbc1_128k(const char* title) {
  RomSpec spec;
  spec.title = title;
  spec.cart_type = 0x01;
  spec.rom_size_code = 0x02;
  return spec;
}

void require_ok(const Status& st) { REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message)); }

// MBC1, 128 KiB: the same address 0x4000 holds a different loop in banks 2 and 3; the main
// loop switches between them and calls it. A kernel specialized for one bank must not run
// its block while the other is mapped.
std::vector<uint8_t> banked_code_rom() {
  RomSpec spec = mbc1_128k("BANKCODE");
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD A,d8", 0).op("LD B,d8", 0).op("LD C,d8", 0);
  a.label("loop")
      .op("LD A,d8", 2)
      .op("LD (a16),A", 0x2000)
      .op("CALL a16", 0x4000)
      .op("LD A,d8", 3)
      .op("LD (a16),A", 0x2000)
      .op("CALL a16", 0x4000)
      .op("LD A,B")
      .op("LD (a16),A", 0xC000)
      .op("LD A,C")
      .op("LD (a16),A", 0xC001)
      .op("JR r8", "loop");
  require_ok(a.place(spec));
  add_bank_loops(spec, 10);
  return build_rom(spec);
}

// MBC1, 128 KiB, banked calls the way Pokemon Red makes them: a home-bank trampoline saves
// the bank (HRAM 80), writes the new one, calls through HL, and writes the old one back.
// Blocks in bank 0 go on past those MBC writes. At 0x4000 banks 2 and 3 hold other code; at
// 0x4010 bank 2's routine writes the bank in C010, 3 and 2 in turn: after a 3 the next
// instructions come from bank 3 (INC D x3), after a 2 from bank 2 (DEC D), so both paths are
// hot and a block of the switchable window must end at the write.
std::vector<uint8_t> trampoline_rom() {
  RomSpec spec = mbc1_128k("TRAMPOLN");
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD A,d8", 1).op("LDH (a8),A", 0x80).op("LD (a16),A", 0x2000);
  a.op("LD B,d8", 0).op("LD C,d8", 0).op("LD D,d8", 0).op("LD A,d8", 2).op("LD (a16),A", 0xC010);
  a.label("loop")
      .op("LD E,d8", 2)
      .op("LD HL,d16", 0x4000)
      .op("CALL a16", "bankswitch")
      .op("LD E,d8", 3)
      .op("LD HL,d16", 0x4000)
      .op("CALL a16", "bankswitch")
      .op("LD A,(a16)", 0xC010)  // 2 -> 3: the routine switches to bank 3
      .op("XOR d8", 1)
      .op("LD (a16),A", 0xC010)
      .op("LD E,d8", 2)
      .op("LD HL,d16", 0x4010)
      .op("CALL a16", "bankswitch")
      .op("LD A,(a16)", 0xC010)  // 3 -> 2: it writes its own bank, and goes on in bank 2
      .op("XOR d8", 1)
      .op("LD (a16),A", 0xC010)
      .op("LD E,d8", 2)
      .op("LD HL,d16", 0x4010)
      .op("CALL a16", "bankswitch")
      .op("LD A,B")
      .op("LD (a16),A", 0xC000)
      .op("LD A,C")
      .op("LD (a16),A", 0xC001)
      .op("LD A,D")
      .op("LD (a16),A", 0xC002)
      .op("JR r8", "loop");
  a.label("bankswitch")
      .op("LDH A,(a8)", 0x80)
      .op("PUSH AF")
      .op("LD A,E")
      .op("LDH (a8),A", 0x80)
      .op("LD (a16),A", 0x2000)
      .op("CALL a16", "jp_hl")
      .op("POP AF")
      .op("LDH (a8),A", 0x80)
      .op("LD (a16),A", 0x2000)
      .op("RET");
  a.label("jp_hl").op("JP HL");
  require_ok(a.place(spec));
  for (int bank : {2, 3}) {
    Asm b(0x4000);
    if (bank == 2)
      b.op("INC B").op("INC B").op("RET");
    else
      b.op("INC C").op("DEC C").op("INC C").op("RET");
    for (int i = bank == 2 ? 3 : 4; i < 0x10; ++i) b.op("NOP");  // to 0x4010
    if (bank == 2)
      b.op("LD A,(a16)", 0xC010).op("LD (a16),A", 0x2000).op("DEC D").op("RET");  // 4016: DEC D
    else
      b.op("NOP")
          .op("NOP")
          .op("NOP")
          .op("NOP")
          .op("NOP")
          .op("NOP")
          .op("INC D")
          .op("INC D")
          .op("INC D")
          .op("RET");  // 4016: INC D
    place_bank(spec, bank, b);
  }
  return build_rom(spec);
}

// MBC1, 128 KiB: banked code calls a bank 0 routine that switches the bank under it, so its
// RET lands in the other bank. Banks 2 and 3 hold the same shape at 0x4000 (CALL flip; then
// INC B in bank 2, INC C in bank 3; RET); flip toggles the bank in C010 and writes it. A
// chain from flip's RET to a return site in the switchable window must test the bank: bank
// 2's call returns into bank 3's INC C, and bank 3's into bank 2's INC B. The main loop calls
// 0x4000 from bank 0 with either bank mapped (a chain from bank 0 into 4000-7FFF, tested too).
std::vector<uint8_t> cross_bank_return_rom() {
  RomSpec spec = mbc1_128k("XBANKRET");
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD B,d8", 0).op("LD C,d8", 0);
  a.label("loop")
      .op("LD A,d8", 0)
      .op("LD (a16),A", 0xC010)
      .op("LD A,d8", 2)
      .op("LD (a16),A", 0x2000)
      .op("CALL a16", 0x4000)  // bank 2 -> flip -> bank 3's INC C
      .op("LD A,d8", 1)
      .op("LD (a16),A", 0xC010)
      .op("LD A,d8", 3)
      .op("LD (a16),A", 0x2000)
      .op("CALL a16", 0x4000)  // bank 3 -> flip -> bank 2's INC B
      .op("LD A,B")
      .op("LD (a16),A", 0xC000)
      .op("LD A,C")
      .op("LD (a16),A", 0xC001)
      .op("JR r8", "loop");
  constexpr uint16_t kFlip = 0x3000;
  a.org(kFlip)
      .op("LD A,(a16)", 0xC010)
      .op("XOR d8", 1)
      .op("LD (a16),A", 0xC010)
      .op("ADD A,d8", 2)
      .op("LD (a16),A", 0x2000)
      .op("RET");
  require_ok(a.place(spec));
  for (int bank : {2, 3}) {
    Asm b(0x4000);
    b.op("CALL a16", kFlip).op(bank == 2 ? "INC B" : "INC C").op("RET");
    place_bank(spec, bank, b);
  }
  return build_rom(spec);
}

// MBC1, 128 KiB: Pokemon Red's far calls. Callers load the bank in B and the function in HL
// and call the home-bank trampoline, which saves the bank (HRAM B8) on the stack, writes the
// new one, pushes the address of its tail and jumps through HL; the banked function's RET goes
// to the tail, which writes the old bank back and returns to the caller (BC is the trampoline's:
// the counts are in WRAM). Callers in bank 0 and in bank 1 (a switchable-bank caller returns
// into its own bank); functions at 0x4000 of banks 2 and 3 (one address, two banks) and at
// 0x4010 of bank 2, which calls a bank 0 helper.
std::vector<uint8_t> far_call_rom() {
  RomSpec spec = mbc1_128k("FARCALL");
  constexpr uint16_t kSwitch = 0x3000, kTail = 0x300E, kHelper = 0x3020;
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD A,d8", 1).op("LDH (a8),A", 0xB8).op("LD (a16),A", 0x2000);
  a.op("XOR A").op("LD (a16),A", 0xC010).op("LD (a16),A", 0xC011).op("LD (a16),A", 0xC012);
  a.label("loop")
      .op("LD B,d8", 2)
      .op("LD HL,d16", 0x4000)
      .op("CALL a16", kSwitch)  // bank 2: C011 + 1
      .op("LD B,d8", 3)
      .op("LD HL,d16", 0x4000)
      .op("CALL a16", kSwitch)  // bank 3: C012 + 2
      .op("LD B,d8", 2)
      .op("LD HL,d16", 0x4010)
      .op("CALL a16", kSwitch)   // bank 2: the helper (C010 + 1) twice
      .op("CALL a16", 0x4000)    // bank 1 (mapped): a far call of its own, then C010 + 1
      .op("LD A,(a16)", 0xC010)  // the round's counts, copied whole
      .op("LD (a16),A", 0xC000)
      .op("LD A,(a16)", 0xC011)
      .op("LD (a16),A", 0xC001)
      .op("LD A,(a16)", 0xC012)
      .op("LD (a16),A", 0xC002)
      .op("JR r8", "loop");
  a.org(kSwitch)
      .op("LDH A,(a8)", 0xB8)
      .op("PUSH AF")
      .op("LD A,B")
      .op("LDH (a8),A", 0xB8)
      .op("LD (a16),A", 0x2000)
      .op("LD BC,d16", kTail)
      .op("PUSH BC")
      .op("JP HL");
  a.org(kTail).op("POP BC").op("LD A,B").op("LDH (a8),A", 0xB8).op("LD (a16),A", 0x2000).op("RET");
  a.org(kHelper).op("LD HL,d16", 0xC010).op("INC (HL)").op("RET");
  require_ok(a.place(spec));
  for (int bank : {1, 2, 3}) {
    Asm b(0x4000);
    if (bank == 1) b.op("LD B,d8", 3).op("LD HL,d16", 0x4000).op("CALL a16", kSwitch);
    b.op("LD HL,d16", bank == 1 ? 0xC010 : bank == 2 ? 0xC011 : 0xC012).op("INC (HL)");
    if (bank == 3) b.op("INC (HL)");
    b.op("RET");
    if (bank == 2) {
      while (b.here() < 0x4010) b.op("NOP");
      b.op("CALL a16", kHelper).op("CALL a16", kHelper).op("RET");
    }
    place_bank(spec, bank, b);
  }
  return build_rom(spec);
}

// An interrupt requested while IME is off and enabled by EI is taken after the one instruction
// that follows EI (Pan Docs: EI's effect is delayed by one instruction). The main loop raises
// the timer flag by hand under DI, enables it with EI and runs a block of INC B; the handler
// records B, so a kernel that ran the whole block before dispatching records a larger count.
std::vector<uint8_t> ei_pending_rom() {
  Asm a;
  a.org(0x0050).op("LD A,B").op("LD (a16),A", 0xC000).op("RETI");
  a.org(0x0150);
  a.op("LD SP,d16", 0xDFF0).op("LD A,d8", 0x04).op("LDH (a8),A", 0xFF);  // IE: timer
  a.label("loop")
      .op("DI")
      .op("LD B,d8", 0)
      .op("LD A,d8", 0x04)
      .op("LDH (a8),A", 0x0F)  // IF: timer pending
      .op("EI")
      .op("INC B")
      .op("INC B")
      .op("INC B")
      .op("INC B")
      .op("JR r8", "loop");
  RomSpec spec;
  spec.title = "EIPEND";
  auto placed = a.place(spec);
  REQUIRE_MESSAGE(placed.ok(), (placed.ok() ? "" : placed.error().message));
  return build_rom(spec);
}

// MBC1: a button held at power-on maps bank 3 instead of bank 2, whose loop at 0x4000 (the
// same addresses, other code) then runs forever. Profiled without input, the plan holds bank
// 2's blocks only; run with a button, the kernel must refuse every one of them.
std::vector<uint8_t> button_bank_rom() {
  RomSpec spec = mbc1_128k("BTNBANK");
  Asm a;
  a.op("LD SP,d16", 0xDFF0).op("LD A,d8", 0x10).op("LDH (a8),A", 0x00);  // P1: the buttons
  a.op("LDH A,(a8)", 0x00).op("AND d8", 0x0F).op("CP d8", 0x0F).op("LD A,d8", 2);
  a.op("JR Z,r8", "pick").op("LD A,d8", 3);
  a.label("pick").op("LD (a16),A", 0x2000);
  a.label("loop").op("CALL a16", 0x4000).op("JR r8", "loop");
  auto placed = a.place(spec);
  REQUIRE_MESSAGE(placed.ok(), (placed.ok() ? "" : placed.error().message));
  add_bank_loops(spec, 250);
  return build_rom(spec);
}

std::unique_ptr<Backend> make_cpu(const Rom& rom, std::shared_ptr<const SpecPlan> plan, int envs) {
  BackendConfig cfg;
  cfg.num_envs = envs;
  cfg.stage = Stage::FullStep;
  cfg.render = true;
  cfg.threads = 1;
  cfg.specialize = std::move(plan);
  auto be = make_backend("cpu", rom, cfg);
  REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
  return std::move(be.value());
}

// Profiles `rom`, builds the specialized kernel and steps it beside the interpreter with the
// same random actions (and some steps of several frames); every env's save state must match.
// Returns how much of the run the specialized blocks carried, and what the plan covers.
struct Carried {
  test::SpecShare dut;
  double coverage = 0;
};
Carried check_identical(const Rom& rom, int frames, uint64_t seed) {
  CAPTURE(rom.name);
  ProfileRunOptions po;
  po.frames = 60;
  po.seed = seed;
  auto prof = profile_rom(rom, po);
  REQUIRE_MESSAGE(prof.ok(), (prof.ok() ? "" : prof.error().message));
  auto plan = spec_plan_for(rom, prof.value());
  REQUIRE(plan.ok());
  const int envs = 3;
  auto ref = make_cpu(rom, nullptr, envs);
  auto dut = make_cpu(rom, plan.value(), envs);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> actions(envs);
  for (int f = 0; f < frames; ++f) {
    for (auto& x : actions) x = (int32_t)(rng() % 4 == 0 ? rng() & 0xFF : 0);
    REQUIRE(ref->step(actions).ok());
    REQUIRE(dut->step(actions).ok());
  }
  for (int env = 0; env < envs; ++env) {
    CAPTURE(env);
    auto a = ref->save_state(env);
    auto b = dut->save_state(env);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a.value() == b.value());
    auto sa = ref->get_cpu_state(env).value();
    auto sb = dut->get_cpu_state(env).value();
    CHECK(sa.pc == sb.pc);
    CHECK(sa.cycle_count == sb.cycle_count);
    CHECK(sa.instr_count == sb.instr_count);
  }
  Carried c{test::spec_share(*dut, envs), test::plan_coverage(prof.value(), *plan.value())};
  CHECK(test::spec_share(*ref, envs).in_blocks == 0);  // the interpreter runs no block
  MESSAGE(rom.name << ": " << c.dut.in_blocks << " of " << c.dut.retired
                   << " instructions retired in specialized blocks (" << 100 * c.dut.share()
                   << "%); the plan covers " << 100 * c.coverage << "% of the profile");
  // Blocks are refused near events and frame ends, and code in RAM runs on the interpreter, so
  // the share stays below the plan's coverage (measured: 46-100% of it, RAM code 52%); a guard
  // that refused blocks it should take drops it towards 0.
  CHECK(c.dut.share() >= c.coverage / 3);
  return c;
}

}  // namespace

// C000 onwards after one interpreter step of the ROM: where the banked-code ROMs copy their
// counts at the end of each round.
std::vector<uint8_t> counts_after_a_step(const Rom& rom, uint32_t n) {
  auto be = make_cpu(rom, nullptr, 1);
  REQUIRE(be->step({}).ok());
  auto m = be->read_memory(0, 0xC000, 0xC000 + n);
  REQUIRE(m.ok());
  return m.value();
}

TEST_CASE("ALU_LOOP: blocks start at the entry's jump target and at the loop's JR target") {
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  const auto table = opcode_table();
  std::vector<uint32_t> counts(rom.value().bytes.size(), 0);
  // 3E 00 06 00 | 3C 80 04 18 FB at 0x0150: the loop (0x0154-0x0158) ran 1000 times.
  counts[0x100] = counts[0x101] = 1;
  counts[0x150] = counts[0x152] = 1;
  for (uint32_t a : {0x154u, 0x155u, 0x156u, 0x157u}) counts[a] = 1000;
  const SpecProfile p = spec_profile_from_counts(table, rom.value().bytes, counts, 1);
  REQUIRE(p.blocks.size() == 3);
  CHECK(p.blocks[0].addr == 0x154);  // hottest first
  CHECK(p.blocks[0].instructions == 4);
  CHECK(p.blocks[0].length == 5);
  CHECK(p.blocks[0].count == 1000);
  CHECK(p.blocks[0].weight == 4000);
  auto plan = make_spec_plan(table, rom.value().bytes, p);
  REQUIRE(plan.ok());
  // 99% of 4004 instructions: the loop alone is 99.9%.
  REQUIRE(plan.value()->blocks.size() == 1);
  CHECK(plan.value()->blocks[0].addr == 0x154);
  // The profile round-trips through its JSON form.
  auto back = spec_profile_from_json(spec_profile_to_json(p));
  REQUIRE(back.ok());
  CHECK(back.value().blocks.size() == 3);
  CHECK(back.value().rom_sha256 == p.rom_sha256);
  // A profile of another ROM is refused.
  auto other = load_rom("builtin:MEM_RWB");
  REQUIRE(other.ok());
  CHECK(!make_spec_plan(table, other.value().bytes, p).ok());
}

TEST_CASE(
    "blocks end at transfers, EI/DI, HALT and MBC writes in 4000-7FFF, not at other accesses") {
  const auto table = opcode_table();
  std::vector<uint8_t> rom(0x8000, 0);
  // INC A; LDH (80),A (HRAM); LD (C000),A (WRAM); LDH (40),A (I/O); LDH A,(41) (I/O);
  // LD (9800),A (VRAM): the block goes on; LD (2000),A (MBC); INC A; HALT.
  const uint8_t code[] = {0x3C, 0xE0, 0x80, 0xEA, 0x00, 0xC0, 0xE0, 0x40, 0xF0,
                          0x41, 0xEA, 0x00, 0x98, 0xEA, 0x00, 0x20, 0x3C, 0x76};
  std::copy(code, code + sizeof code, rom.begin() + 0x200);
  // In bank 0 the block goes on past the MBC write (its code stays mapped) up to HALT ...
  auto b = spec_decode_block(table, rom, 0, 0x200, 32);
  CHECK(b.size() == 8);
  CHECK(spec_disassemble(b[6]) == "LD ($2000),A");
  // ... in the switchable window it ends there: the next instruction is the new bank's.
  std::copy(code, code + sizeof code, rom.begin() + 0x4200);
  auto bx = spec_decode_block(table, rom, 1, 0x4200, 32);
  CHECK(bx.size() == 7);
  CHECK(spec_disassemble(bx[6]) == "LD ($2000),A");
  // HALT is never inside a block; EI ends one after itself.
  const uint8_t code2[] = {0x3C, 0x76, 0x3C, 0xFB, 0x3C};
  std::copy(code2, code2 + sizeof code2, rom.begin() + 0x300);
  CHECK(spec_decode_block(table, rom, 0, 0x300, 32).size() == 1);
  CHECK(spec_decode_block(table, rom, 0, 0x302, 32).size() == 2);
  // The length cap and the end of the 16 KiB region.
  CHECK(spec_decode_block(table, rom, 0, 0x1000, 5).size() == 5);
  CHECK(spec_decode_block(table, rom, 0, 0x3FFE, 32).size() == 2);
  CHECK(spec_disassemble(b[2]) == "LD ($C000),A");
  CHECK(spec_disassemble(b[3]) == "LDH ($40),A");
}

TEST_CASE("the specialized source names ROM, bank:address, disassembly and family templates") {
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  ProfileRunOptions po;
  po.frames = 2;
  auto prof = profile_rom(rom.value(), po);
  REQUIRE(prof.ok());
  auto plan = spec_plan_for(rom.value(), prof.value());
  REQUIRE(plan.ok());
  REQUIRE(!plan.value()->blocks.empty());
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  SynthParams sp;
  sp.specialize = plan.value();
  auto src = generate(bundle.value(), sp);
  REQUIRE(src.ok());
  const std::string& s = src.value().source;
  CHECK(s.find("// 00:0154  3C        INC A") != std::string::npos);
  CHECK(s.find("// 00:0157  18 FB     JR $0154") != std::string::npos);
  CHECK(s.find("#line 3 \"templates/sm83/family/inc_r.tmpl\"") != std::string::npos);
  CHECK(s.find(plan.value()->rom_sha256) != std::string::npos);
  {
    // Chains, with every executed block in the plan: the entry's JP goes on into 0x0150, that
    // block falls into the loop at 0x0154, and the loop goes round to itself.
    SpecLimits all;
    all.coverage = 1.0;
    auto full = spec_plan_for(rom.value(), prof.value(), all);
    REQUIRE(full.ok());
    const std::string fsrc = test::specialized_source(full.value());
    auto count = [&](const std::string& what) {
      size_t n = 0;
      for (size_t at = fsrc.find(what); at != std::string::npos; at = fsrc.find(what, at + 1)) ++n;
      return n;
    };
    CHECK(count("if (cpu.pc == 0x0150 && bus.cycles + ") == 1);
    CHECK(count("if (cpu.pc == 0x0154 && bus.cycles + ") == 2);
    // All three blocks in one function: its declaration and its body; the bodies with the
    // carried count are that function's and spec_run's.
    CHECK(count("GBX_NOINLINE u32 spec_fn_") == 2);
    CHECK(count("u32 n0) {") == 2);
  }
  CHECK(sp.canonical().find("specialize=" + plan.value()->rom_sha256.substr(0, 16)) !=
        std::string::npos);
  // Instruction-budget kernels are not specialized.
  sp.run_mode = RunMode::Instructions;
  CHECK(!generate(bundle.value(), sp).ok());
}

TEST_CASE("the profiling kernel counts instructions per ROM offset") {
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.stage = Stage::EmulateOnly;
  cfg.profile = true;
  auto be = CpuBackend::create(rom.value(), cfg);
  REQUIRE(be.ok());
  REQUIRE(be.value()->step({}).ok());
  const auto& c = be.value()->profile_counts();
  REQUIRE(c.size() == rom.value().bytes.size());
  CHECK(c[0x150] == 1);
  CHECK(c[0x151] == 0);  // an operand byte, never an instruction
  CHECK(c[0x154] > 1000);
  // The four loop instructions ran the same number of times (the frame may end inside).
  CHECK(c[0x157] + 1 >= c[0x154]);
  uint64_t total = 0;
  for (uint32_t x : c) total += x;
  CHECK((int64_t)total == be.value()->get_cpu_state(0).value().instr_count);
}

TEST_CASE("specialized and interpreter kernels end identically on every built-in ROM") {
  int n = 0;
  for (const auto& b : builtin_roms()) {
    auto rom = load_rom("builtin:" + b.name);
    REQUIRE(rom.ok());
    check_identical(rom.value(), std::max(40, b.frames_to_finish + 8), 7 + (uint64_t)n);
    ++n;
  }
  CHECK(n >= 10);
}

TEST_CASE("RAM-resident, self-modifying and banked code run identically when specialized") {
  {
    auto rom = rom_from_bytes("RAMCODE", ram_code_rom());
    REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
    check_identical(rom.value(), 30, 3);
    // The routines ran from RAM: C000 holds the running sum, C002 the rewritten immediate.
    auto be = make_cpu(rom.value(), nullptr, 1);
    REQUIRE(be->step({}).ok());
    auto m = be->read_memory(0, 0xC000, 0xC003);
    REQUIRE(m.ok());
    CHECK(m.value()[2] != 7);
  }
  {
    auto rom = rom_from_bytes("BANKCODE", banked_code_rom());
    REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
    ProfileRunOptions po;
    po.frames = 4;
    auto prof = profile_rom(rom.value(), po);
    REQUIRE(prof.ok());
    int at4000 = 0;
    for (const auto& b : prof.value().blocks)
      if (b.addr == 0x4000) ++at4000;
    CHECK(at4000 == 2);  // one block per bank at the same address
    check_identical(rom.value(), 30, 5);
  }
  {
    auto rom = rom_from_bytes("TRAMPOLN", trampoline_rom());
    REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
    const Carried c = check_identical(rom.value(), 30, 7);
    // A round adds 2 to B (bank 2), 1 to C (bank 3) and 3 - 1 to D: bank 3's INC D x3 ran
    // after bank 2's own switch, bank 2's DEC D after its write of bank 2 (C000-C002 hold B,
    // C, D after a round).
    const auto v = counts_after_a_step(rom.value(), 3);
    CHECK(v[1] != 0);
    CHECK(v[0] == (uint8_t)(2 * v[1]));
    CHECK(v[2] == (uint8_t)(2 * v[1]));
    CHECK(c.dut.share() > 0.5);
    // The trampoline's block (LDH A,(80); PUSH AF, found in bank 0) runs through its MBC
    // write up to the CALL: 6 instructions, not 5.
    const auto& bytes = rom.value().bytes;
    const uint8_t head[] = {0xF0, 0x80, 0xF5};
    const auto at = std::search(bytes.begin(), bytes.begin() + 0x4000, head, head + 3);
    REQUIRE(at != bytes.begin() + 0x4000);
    const auto table = opcode_table();  // the instructions point into it
    auto b = spec_decode_block(table, bytes, 0, (uint16_t)(at - bytes.begin()), 32);
    REQUIRE(b.size() == 6);
    CHECK(spec_disassemble(b[4]) == "LD ($2000),A");
    CHECK(b[5].op->family == "call");
  }
}

TEST_CASE("chains across ROM banks test the bank: a bank 0 routine that switches returns right") {
  auto rom = rom_from_bytes("XBANKRET", cross_bank_return_rom());
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  const Carried c = check_identical(rom.value(), 30, 9);
  CHECK(c.dut.share() > 0.5);
  // Every round runs one INC B (bank 2's, after bank 3's call) and one INC C.
  const auto v = counts_after_a_step(rom.value(), 2);
  CHECK(v[0] != 0);
  CHECK(v[0] == v[1]);
}

TEST_CASE("far calls through a home-bank trampoline run as chains, exactly") {
  auto rom = rom_from_bytes("FARCALL", far_call_rom());
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  const Carried c = check_identical(rom.value(), 30, 11);
  CHECK(c.dut.share() > 0.9);
  // A round: C011 + 1 (bank 2), C012 + 4 (bank 3, from bank 0 and from bank 1), C010 + 3 (the
  // helper twice, bank 1's caller once); C000-C002 hold them after a round.
  const auto v = counts_after_a_step(rom.value(), 3);
  CHECK(v[1] != 0);
  CHECK(v[0] == (uint8_t)(3 * v[1]));
  CHECK(v[2] == (uint8_t)(4 * v[1]));
  // The trampoline's JP HL chains to the functions its callers load into HL, each bank tested;
  // the banked functions' RETs to the trampoline's tail; the tail's RET to the callers.
  ProfileRunOptions po;
  po.frames = 4;
  auto prof = profile_rom(rom.value(), po);
  REQUIRE(prof.ok());
  SpecLimits all;
  all.coverage = 1.0;
  auto plan = spec_plan_for(rom.value(), prof.value(), all);
  REQUIRE(plan.ok());
  const std::string src = test::specialized_source(plan.value());
  CHECK(src.find("if (cpu.pc == 0x4000 && bus.romx == GBX_LAUNCH(bus.m, rom) + 0x8000u") !=
        std::string::npos);
  CHECK(src.find("if (cpu.pc == 0x4000 && bus.romx == GBX_LAUNCH(bus.m, rom) + 0xC000u") !=
        std::string::npos);
  CHECK(src.find("if (cpu.pc == 0x4010 && bus.romx == GBX_LAUNCH(bus.m, rom) + 0x8000u") !=
        std::string::npos);
  CHECK(src.find("if (cpu.pc == 0x300E && bus.rom0 == GBX_LAUNCH(bus.m, rom) + 0x0u") !=
        std::string::npos);
}

TEST_CASE("blocks of a bank that is not mapped are refused: none runs, the end state matches") {
  auto rom = rom_from_bytes("BTNBANK", button_bank_rom());
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  ProfileRunOptions po;
  po.frames = 20;
  po.actions = "none";
  auto prof = profile_rom(rom.value(), po);
  REQUIRE(prof.ok());
  auto plan = spec_plan_for(rom.value(), prof.value());
  REQUIRE(plan.ok());
  bool bank2 = false;
  for (const SpecBlock& b : plan.value()->blocks) {
    CHECK(b.bank != 3);
    bank2 = bank2 || b.bank == 2;
  }
  REQUIRE(bank2);
  auto ref = make_cpu(rom.value(), nullptr, 1);
  auto dut = make_cpu(rom.value(), plan.value(), 1);
  for (int f = 0; f < 20; ++f) {
    const std::vector<int32_t> held{0xFF};  // every button: P1's low nibble reads below 0x0F
    REQUIRE(ref->step(held).ok());
    REQUIRE(dut->step(held).ok());
  }
  CHECK(ref->save_state(0).value() == dut->save_state(0).value());
  const CpuState st = dut->get_cpu_state(0).value();
  CHECK(st.b == 0);  // bank 2's loop never ran: the button mapped bank 3, which counts in C
  const test::SpecShare sh = test::spec_share(*dut, 1);
  CHECK(sh.retired > 100000);
  CHECK(sh.in_blocks == 0);
  // Without the button the same kernel runs bank 2's blocks nearly all the time.
  auto again = make_cpu(rom.value(), plan.value(), 1);
  for (int f = 0; f < 20; ++f) REQUIRE(again->step({0}).ok());
  CHECK(test::spec_share(*again, 1).share() > 0.9);
}

TEST_CASE("an interrupt pending when EI takes effect is taken after one instruction, blocks too") {
  auto rom = rom_from_bytes("EIPEND", ei_pending_rom());
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  check_identical(rom.value(), 10, 11);
  auto be = make_cpu(rom.value(), nullptr, 1);
  REQUIRE(be->step({}).ok());
  auto m = be->read_memory(0, 0xC000, 0xC001);
  REQUIRE(m.ok());
  CHECK(m.value()[0] == 1);
}

TEST_CASE("auto: steps go on while the specialized kernel compiles, then it swaps in exactly") {
  // Tier-up must never make a step wait: after the step that starts the background compile,
  // further steps return while it is still "compiling" (a step that waited would find it
  // done). After the swap, the env ends exactly where the plain interpreter does.
  auto rom = load_rom("builtin:ARROWS");
  REQUIRE(rom.ok());
  const int envs = 2;
  BackendConfig cfg;
  cfg.num_envs = envs;
  cfg.stage = Stage::FullStep;
  cfg.threads = 1;
  cfg.render = true;  // as make_cpu's reference: the framebuffer is compared too
  cfg.specialize_auto_frames = 8;
  auto dut = CpuBackend::create(rom.value(), cfg);
  REQUIRE_MESSAGE(dut.ok(), (dut.ok() ? "" : dut.error().message));
  auto ref = make_cpu(rom.value(), nullptr, envs);
  CHECK(dut.value()->specialize_status() == "profiling");
  std::mt19937_64 rng(7);
  std::vector<int32_t> actions(envs);
  int steps_while_compiling = 0;
  int frames = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (dut.value()->specialize_status() != "specialized" || frames < 200) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    for (auto& x : actions) x = (int32_t)(rng() % 4 == 0 ? rng() & 0xFF : 0);
    REQUIRE(ref->step(actions).ok());
    REQUIRE(dut.value()->step(actions).ok());
    ++frames;
    const std::string st = dut.value()->specialize_status();
    REQUIRE_MESSAGE(st.rfind("failed", 0) != 0, st);
    if (st == "compiling") ++steps_while_compiling;
  }
  CHECK(steps_while_compiling >= 1);
  for (int env = 0; env < envs; ++env) {
    CAPTURE(env);
    auto a = ref->save_state(env);
    auto b = dut.value()->save_state(env);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a.value() == b.value());
  }
}

TEST_CASE("finish_tier_up waits for the compile and swaps the specialized kernel in") {
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 1;
  cfg.stage = Stage::FullStep;
  cfg.render = true;  // as make_cpu's reference: the framebuffer is compared too
  cfg.threads = 1;
  cfg.specialize_auto_frames = 2;
  auto dut = CpuBackend::create(rom.value(), cfg);
  REQUIRE_MESSAGE(dut.ok(), (dut.ok() ? "" : dut.error().message));
  auto ref = make_cpu(rom.value(), nullptr, 1);
  REQUIRE(dut.value()->finish_tier_up().ok());  // still profiling: nothing to wait for
  CHECK(dut.value()->specialize_status() == "profiling");
  for (int i = 0; i < 2; ++i) {
    REQUIRE(ref->step({}).ok());
    REQUIRE(dut.value()->step({}).ok());
  }
  CHECK(dut.value()->specialize_status() == "compiling");
  const std::string interpreter_key = dut.value()->kernel_key();
  REQUIRE(dut.value()->finish_tier_up().ok());
  CHECK(dut.value()->specialize_status() == "specialized");
  CHECK(dut.value()->kernel_key() != interpreter_key);
  for (int i = 0; i < 20; ++i) {
    REQUIRE(ref->step({}).ok());
    REQUIRE(dut.value()->step({}).ok());
  }
  CHECK(ref->save_state(0).value() == dut.value()->save_state(0).value());
}

TEST_CASE("a specialization that fails is an error from finish_tier_up, the interpreter goes on") {
  // The specialized kernel is generated from the templates when the profile ends: a copy of
  // them whose specialized-block helpers do not compile makes that compile fail.
  test::TempDir d;
  const auto templates = d.path / "templates";
  std::filesystem::copy(std::filesystem::path(GBX_TEST_SOURCE_DIR) / ".." / "templates", templates,
                        std::filesystem::copy_options::recursive);
  setenv("GBX_TEMPLATE_DIR", templates.c_str(), 1);
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 1;
  cfg.threads = 1;
  cfg.specialize_auto_frames = 2;
  auto dut = CpuBackend::create(rom.value(), cfg);
  REQUIRE_MESSAGE(dut.ok(), (dut.ok() ? "" : dut.error().message));
  std::ofstream(templates / "kernel" / "spec_bus.h") << "#error broken on purpose\n";
  for (int i = 0; i < 2; ++i) REQUIRE(dut.value()->step({}).ok());
  const Status st = dut.value()->finish_tier_up();
  unsetenv("GBX_TEMPLATE_DIR");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().kind == ErrorKind::Compile);
  CHECK(st.error().message.find("the ROM-specialized kernel failed: ") == 0);
  CHECK(dut.value()->specialize_status().rfind("failed: ", 0) == 0);
  CHECK(dut.value()->step({}).ok());                // still the interpreter
  CHECK_FALSE(dut.value()->finish_tier_up().ok());  // asked again: the same failure
}

TEST_CASE("the tools under --specialize auto: verify checks, bench times the specialized kernel") {
  // A run never waits for the compile, so a verify or a bench that did not would check or
  // time the profiling interpreter while it claims the specialized kernel.
  test::TempDir d;
  const std::string gbx = test::tool("gbx-run");
  const std::string verify = gbx +
                             " verify --ref cpu --dut cpu --dut-specialize auto:4 --rom "
                             "builtin:ARROWS --frames-per-step 2 --actions seeded_random "
                             "--seed 3 --screen --out '" +
                             d.path.string() + "' --steps ";
  auto v = test::run_command(verify + "12");
  CAPTURE(v.output);
  CHECK(v.exit_code == 0);
  CHECK(v.output.find("verify: match (12 steps") == 0);
  CHECK(v.output.find("dut cpu specialized from step 3,") != std::string::npos);
  // Too few steps to reach the specialized kernel: refused, not a vacuous match.
  auto short_run = test::run_command(verify + "2");
  CAPTURE(short_run.output);
  CHECK(short_run.exit_code == 2);
  CHECK(test::count_lines(short_run.output) == 1);
  CHECK(short_run.output.find("runs from step 3; --steps 2 ends before it") != std::string::npos);

  const auto json_path = d.path / "bench.json";
  auto b = test::run_command(gbx +
                             " bench --backend cpu --rom builtin:ARROWS --specialize auto:4 "
                             "--envs 2 --steps 3 --warmup-steps 1 --json '" +
                             json_path.string() + "'");
  CAPTURE(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK(b.output.find("specialized kernel timed, in after ") != std::string::npos);
  std::ifstream f(json_path);
  const auto sweep = nlohmann::json::parse(f);
  CHECK(sweep["config"]["specialize"] == "auto:4");
  // The profile's 4 steps and at least three re-profiling windows of 4 on the kernel
  // (tier_up_now settles the tier-up before the timed window).
  CHECK(sweep["results"][0]["tier_up_steps"] >= 4 + 3 * 4);
  CHECK(b.output.find(std::to_string(sweep["results"][0]["tier_up_steps"].get<int>()) +
                      " tier-up steps") != std::string::npos);

  // bench-stages: @spec variants run the kernel --specialize names, profiled and compiled
  // before the warm-up; without --specialize they are refused.
  auto st = test::run_command(gbx +
                              " bench-stages --rom builtin:ARROWS --envs 2 --rounds 2 "
                              "--steps-per-round 1 --variants emulate_only@t1 "
                              "emulate_only@t1@spec --specialize auto:4");
  CAPTURE(st.output);
  CHECK(st.exit_code == 0);
  CHECK(st.output.find("emulate_only@t1@spec ") != std::string::npos);
  auto no_plan = test::run_command(gbx +
                                   " bench-stages --rom builtin:ARROWS --variants emulate_only "
                                   "emulate_only@spec");
  CHECK(no_plan.exit_code == 2);
  CHECK(no_plan.output.find("needs --specialize") != std::string::npos);

  // A run says which steps ran on it; here none did (the profile outlasts the run).
  auto r = test::run_command(gbx + " run --rom builtin:ARROWS --specialize auto:8 --frames 3");
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("specialize auto:8: still profiling when the run ended (3 steps)") !=
        std::string::npos);
  auto m = test::run_command(gbx + " run --backend mgba --specialize auto --frames 1");
  CHECK(m.exit_code == 2);
  CHECK(m.output ==
        "error: --specialize is for the cpu and cuda backends (mgba runs mGBA's own "
        "interpreter)\n");
}
