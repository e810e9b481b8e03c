// Tails (engine/src/spec_blocks.cpp): where a block cannot run because an event falls inside
// it, or an interrupt returned into its middle, the block's tail runs the code instead of the
// interpreter. A timer interrupt every 256 T-cycles lands inside a 25-instruction loop all the
// time: the run must stay bit-exact, and the specialized code must carry nearly all of it.
#include <doctest/doctest.h>

#include <string>

#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/asm.h"
#include "phase_rom.h"
#include "spec_share.h"

using namespace gbx;

TEST_CASE("tails carry the code around interrupts that land inside blocks") {
  Asm a;
  a.org(0x0050).op("INC D").op("RETI");  // timer: counts its interrupts in D
  a.org(0x0150);
  a.op("LD SP,d16", 0xDFF0);
  a.op("LD A,d8", 0xF0).op("LDH (a8),A", 0x06);  // TMA: 16 ticks to an overflow
  a.op("LD A,d8", 0x05).op("LDH (a8),A", 0x07);  // TAC: on, 16 T a tick (256 T a period)
  a.op("LD A,d8", 0x04).op("LDH (a8),A", 0xFF);  // IE: timer
  a.op("EI");
  a.label("loop");
  for (int i = 0; i < 8; ++i) a.op("INC B").op("ADD A,B").op("LD C,A");
  a.op("JR r8", "loop");
  const Rom rom = test::assembled("TAILS", a);

  const auto plan = test::profiled_plan(rom, 4);
  CHECK(test::specialized_source(plan).find("spec_tail_") != std::string::npos);

  auto dut = test::run_beside_interpreter(rom, plan, 2, 3, 4);
  for (int env = 0; env < 2; ++env) {
    auto st = dut->get_cpu_state(env);
    REQUIRE(st.ok());
    CHECK(st.value().d > 100);  // the interrupts did happen (~274 a frame)
  }
  // Without tails the interpreter ran the rest of the interrupted block after every RETI and
  // the part before every event: about a third of the loop. With them it runs the few
  // instructions before the blocks were first entered.
  const auto share = test::spec_share(*dut, 2);
  CAPTURE(share.in_blocks);
  CAPTURE(share.retired);
  CHECK(share.share() > 0.99);
}
