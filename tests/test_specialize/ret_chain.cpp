// Returns chain (engine/src/spec_blocks.cpp): a RET goes straight on into the block after the
// CALL that reached it when the popped PC is that return site, instead of going back to the
// dispatch; a RET that returns elsewhere still goes back. Bit-exact either way.
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

  ProfileRunOptions po;
  po.frames = 4;
  po.actions = "none";
  auto prof = profile_rom(rom, po);
  REQUIRE(prof.ok());
  auto plan = spec_plan_for(rom, prof.value());
  REQUIRE(plan.ok());
  const std::string s = test::specialized_source(plan.value());
  // sub's RET chains to its site. skip's site never ran (no block there, no chain), and the
  // address it really returns to is no call's return site: that RET goes back to the
  // dispatch, which finds the block at skip_site + 1 itself.
  CHECK(s.find("if (cpu.pc == 0x" + hex4(site) + " && ") != std::string::npos);
  CHECK(s.find("if (cpu.pc == 0x" + hex4(skip_site) + " && ") == std::string::npos);
  CHECK(s.find("if (cpu.pc == 0x" + hex4((uint16_t)(skip_site + 1)) + " && ") == std::string::npos);

  // Bit-exact against the interpreter, and the blocks carried the run.
  auto dut = test::run_beside_interpreter(rom, plan.value(), 2, 5, 4);
  CHECK(test::spec_share(*dut, 2).share() > 0.9);
}
