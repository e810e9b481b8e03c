// Returns chain (engine/src/spec_blocks.cpp): a RET goes straight on into the block after the
// CALL that reached it when the popped PC is that return site; a RET that returns elsewhere,
// and a JP HL through a jump table, look the PC up in the dispatch's table (spec_run) from
// the block itself. Bit-exact either way.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/asm.h"
#include "phase_rom.h"
#include "spec_share.h"

using namespace gbx;

namespace {

std::string hex4(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04X", v);
  return buf;
}

}  // namespace

TEST_CASE("a RET chains to its call's return site; a RET to elsewhere does not") {
  // loop: CALL sub; INC B; CALL skip; INC D; INC E; JR loop
  // sub:  INC C; RET                    returns to its site (INC B)
  // skip: POP HL; INC HL; PUSH HL; RET  returns one byte past its site: INC D never runs
  Asm a;
  a.op("LD SP,d16", 0xDFF0);
  a.label("loop").op("CALL a16", "sub");
  const uint16_t site = a.here();
  a.op("INC B").op("CALL a16", "skip");
  const uint16_t skip_site = a.here();
  a.op("INC D").op("INC E").op("JR r8", "loop");
  a.label("sub").op("INC C").op("RET");
  a.label("skip").op("POP HL").op("INC HL").op("PUSH HL").op("RET");
  const Rom rom = test::assembled("RETCHAIN", a);

  const auto plan = test::profiled_plan(rom, 4);
  const std::string s = test::specialized_source(plan);
  // sub's RET chains to its site. skip's site never ran (no block there, no chain), and the
  // address it really returns to is no call's return site: that RET looks its PC up in the
  // dispatch's table (spec_run), which finds the block at skip_site + 1.
  CHECK(s.find("if (cpu.pc == 0x" + hex4(site) + " && ") != std::string::npos);
  CHECK(s.find("if (cpu.pc == 0x" + hex4(skip_site) + " && ") == std::string::npos);
  CHECK(s.find("if (cpu.pc == 0x" + hex4((uint16_t)(skip_site + 1)) + " && ") == std::string::npos);

  // Bit-exact against the interpreter, and the blocks carried the run.
  auto dut = test::run_beside_interpreter(rom, plan, 2, 5, 4);
  CHECK(test::spec_share(*dut, 2).share() > 0.9);
}

TEST_CASE("a JP HL through a jump table enters its targets' blocks from the block, exactly") {
  // loop: C counts; HL = table[C & 3]; JP HL into one of four targets, each back to loop.
  // No traversal knows HL there: the JP HL's block looks the PC up (spec_run) and enters the
  // target's block under the dispatch's rule. Two banks' worth of targets is not needed: the
  // rule (room, bank) is the dispatch's own code.
  Asm a;
  a.op("LD SP,d16", 0xDFF0);
  a.label("loop").op("INC C").op("LD A,C").op("AND d8", 3).op("ADD A,A").op("LD E,A");
  a.op("LD D,d8", 0).op("LD HL,d16", "table").op("ADD HL,DE");
  a.op("LD A,(HL+)").op("LD H,(HL)").op("LD L,A").op("JP (HL)");
  std::vector<uint8_t> table;
  for (const char* t : {"INC B", "INC D", "INC E", "DEC B"}) {
    const uint16_t at = a.here();
    table.push_back((uint8_t)at);
    table.push_back((uint8_t)(at >> 8));
    a.op(t).op("JR r8", "loop");
  }
  a.label("table").bytes(table);
  const Rom rom = test::assembled("JUMPTBL", a);

  const auto plan = test::profiled_plan(rom, 4);
  const std::string s = test::specialized_source(plan);
  CHECK(s.find("GBX_TAIL return spec_run(gbx_spec_slot[cpu.pc], io, m, limit - bus.cycles, n);") !=
        std::string::npos);
  auto dut = test::run_beside_interpreter(rom, plan, 2, 5, 4);
  CHECK(test::spec_share(*dut, 2).share() > 0.9);
}

TEST_CASE("a RET with many return sites chains through one switch on the PC, exactly") {
  // loop: (CALL sub; r_i; NOP x (28 - i)) for i = 0..9; CALL skip; INC D; INC E; JP loop
  // sub:  INC C; RET          ten return sites: a switch on the PC, not ten compares
  // skip: POP HL; INC HL; PUSH HL; CALL sub2; RET    (returns one byte past its site)
  // sub2: RET                 its one site is inside skip
  // Each site's block (up to the next CALL) does something of its own, and the blocks shrink
  // as the PCs grow: a case that went on into the next (a missing break) takes the next
  // site's block, whose room test passes where its own failed, near an event (checked: the
  // states then differ). The ten blocks hold more than a function's 256 instructions, so some
  // cases are tail calls into another function.
  Asm a;
  a.op("LD SP,d16", 0xDFF0);
  a.label("loop");
  std::vector<uint16_t> sites;
  const char* ops[] = {"INC B", "DEC B", "INC D", "DEC D", "INC H", "DEC L"};
  for (int i = 0; i < 10; ++i) {
    a.op("CALL a16", "sub");
    sites.push_back(a.here());
    a.op(ops[i % 6]);
    for (int j = i; j < 28; ++j) a.op("NOP");
  }
  a.op("CALL a16", "skip").op("INC D").op("INC E").op("JP a16", "loop");
  a.label("sub").op("INC C").op("RET");
  a.label("skip").op("POP HL").op("INC HL").op("PUSH HL").op("CALL a16", "sub2").op("RET");
  a.label("sub2").op("RET");
  const Rom rom = test::assembled("RETMANY", a);

  const auto plan = test::profiled_plan(rom, 4);
  const std::string s = test::specialized_source(plan);
  const size_t sw = s.find("  switch (cpu.pc) {\n    case 0x" + hex4(sites.front()) + ":\n");
  REQUIRE(sw != std::string::npos);
  for (uint16_t site : sites)
    CHECK(s.find("    case 0x" + hex4(site) + ":\n", sw) < s.find("  }\n", sw));
  // Some cases are tail calls into another function, some gotos in this one.
  const std::string sw_text = s.substr(sw, s.find("  }\n", sw) - sw);
  CHECK(sw_text.find("#if GBX_DEVICE_CPU\n  if (bus.cycles + ") != std::string::npos);
  CHECK(sw_text.find("goto block_") != std::string::npos);
  // Three targets or fewer keep their compares (sub2's RET: one).
  CHECK(s.find("if (cpu.pc == 0x") != std::string::npos);

  auto dut = test::run_beside_interpreter(rom, plan, 2, 5, 4);
  CHECK(test::spec_share(*dut, 2).share() > 0.9);
}

TEST_CASE("PUSH and POP across a stack window's end in a block, exactly") {
  // kernel/spec_bus.h spec_stack_pair: both bytes in WRAM or both in HRAM take one test;
  // a pair across WRAM's end (echo RAM), WRAM's start (absent cartridge RAM), HRAM's end
  // (IE) or HRAM's start (unused I/O) goes byte by byte, as the interpreter's (whose bytes
  // test_hw_quirks checks against mGBA).
  Asm a;
  a.op("DI").label("loop").op("XOR A").op("LD (a16),A", 0xC000).op("LD BC,d16", 0x0537);
  const uint16_t sps[] = {0xE001, 0xC001, 0x0000, 0xFF81, 0xFFFE, 0xD000};
  for (int k = 0; k < 6; ++k) {
    a.op("LD SP,d16", sps[k]).op("PUSH BC").op("POP DE").op("INC C");
    a.op("LD A,E").op("LD (a16),A", 0xC200 + 2 * k).op("LD A,D").op("LD (a16),A", 0xC201 + 2 * k);
  }
  a.op("LDH A,(a8)", 0xFF).op("LD (a16),A", 0xC20C).op("XOR A").op("LDH (a8),A", 0xFF);
  a.op("LD A,(a16)", 0xC000).op("LD (a16),A", 0xC20D).op("JP a16", "loop");
  const Rom rom = test::assembled("STACKEDGE", a);

  const auto plan = test::profiled_plan(rom, 4);
  auto dut = test::run_beside_interpreter(rom, plan, 2, 5, 4);
  CHECK(test::spec_share(*dut, 2).share() > 0.9);
  auto m = dut->read_memory(0, 0xC200, 0xC20E);
  REQUIRE(m.ok());
  CHECK(m.value()[8] == 0x3B);  // FFFE, inside HRAM: the fourth INC C's BC
  CHECK(m.value()[9] == 0x05);
}
