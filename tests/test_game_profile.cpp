// The per-game profile (gbx/measure/bench/game_profile.h, `gbx-synth profile --report`): on ROMs
// whose every frame is known, its counts are exact.
#include <doctest/doctest.h>

#include <string>

#include "gbx/measure/bench/game_profile.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom_builder.h"

using namespace gbx;

namespace {

Rom rom_of(const Asm& a) {
  RomSpec spec;
  spec.title = "PROFILE";
  REQUIRE(a.place(spec).ok());
  auto bytes = try_build_rom(spec);
  REQUIRE(bytes.ok());
  auto rom = rom_from_bytes("profile", bytes.value());
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  return rom.value();
}

GameProfileOptions opts(bool plan) {
  GameProfileOptions o;
  o.frames = 48;
  o.run.frames = 24;  // the plan's profile
  o.run.options["frames_per_step"] = int64_t{24};
  o.run.options["release_after_frames"] = int64_t{8};
  o.run.actions = "none";
  o.run.options["num_envs"] = int64_t{1};
  o.plan = plan;
  return o;
}

}  // namespace

TEST_CASE("a frame of HALT: five instructions a frame, one MBC write, halted nearly always") {
  // Post-boot the LCD is on: one VBlank a frame wakes the HALT, its handler returns at once.
  Asm a;
  a.op("DI");
  a.op("LD A,d8", 0x01);
  a.op("LDH (a8),A", io::kIE);
  a.op("XOR A");
  a.op("LDH (a8),A", io::kIF);
  a.op("EI");
  a.label("loop");
  a.op("HALT");
  a.op("LD A,d8", 0x05);
  a.op("LD (a16),A", 0x2000);  // a bank switch on an MBC; on this ROM a write nothing takes
  a.op("JR r8", "loop");
  a.org(0x40);
  a.op("RETI");
  const Rom rom = rom_of(a);
  auto g = profile_game(rom, opts(true));
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  const GameProfile& p = g.value();
  CHECK(p.frames == 48);
  CHECK(p.cycles >= 47 * 70224u);
  // The set-up (NOP and JP 0150 at 0100, then 6 instructions) runs once; then 5 a frame (HALT, LD,
  // LD, JR, RETI).
  CHECK(p.instructions >= 5 * 47u);
  CHECK(p.instructions <= 5 * 49u + 8);
  CHECK(p.interrupts >= 47u);
  CHECK(p.interrupts <= 49u);
  CHECK(p.halts >= p.interrupts);  // the last HALT may wait past the trace
  CHECK(p.halts <= p.interrupts + 1);
  CHECK(p.mbc_writes == p.interrupts);
  CHECK(p.bank_switches == 0);
  CHECK(p.handlers.at("vblank") == p.interrupts);
  CHECK(p.regions.at("rom0") == p.instructions);
  CHECK(p.halted_share() > 0.99);
  CHECK(p.halted_share() < 1.0);
  // Blocks: LD A / LD (a16),A / JR and RETI both end at a jump; HALT is in none. The MBC write
  // does not end the block: bank 0 code reads the same bytes whatever bank it selects.
  REQUIRE(p.planned);
  CHECK(p.block_ends.count("mbc_write") == 0);
  CHECK(p.block_ends.count("jump") == 1);
  CHECK(p.in_plan + p.halts <= p.instructions);
  CHECK(p.in_plan >= 4 * 47u);
  CHECK(p.outside_plan.at("rom0") >= p.halts);
  CHECK(p.spec_total > 0);
  CHECK(p.spec_retired > 0);
  CHECK(p.spec_retired <= p.spec_total);
}

TEST_CASE("a busy loop in HRAM: 70224 / 12 instructions a frame, never halted") {
  // JR -2 (12 T-cycles taken) copied to FF80 and run there with interrupts off, as a game
  // runs its OAM DMA routine from HRAM.
  Asm a;
  a.op("DI");
  a.op("LD A,d8", 0x18);
  a.op("LDH (a8),A", 0x80);
  a.op("LD A,d8", 0xFE);
  a.op("LDH (a8),A", 0x81);
  a.op("JP a16", 0xFF80);
  const Rom rom = rom_of(a);
  auto g = profile_game(rom, opts(false));
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  const GameProfile& p = g.value();
  CHECK_FALSE(p.planned);
  CHECK(p.halted_cycles == 0);
  CHECK(p.interrupts == 0);
  CHECK(p.io_writes == 0);  // FF80 and FF81 are HRAM, not I/O
  const double per_frame = p.instructions_per_frame();
  CHECK(per_frame > 70224.0 / 12 - 1);
  CHECK(per_frame < 70224.0 / 12 + 1);
  // Post-boot: NOP and JP 0150 at 0100, then the six instructions above in bank 0.
  CHECK(p.regions.at("rom0") == 8);
  CHECK(p.regions.at("hram") + 8 == p.instructions);
  CHECK(p.families.at("jr") == p.regions.at("hram"));
  CHECK(p.classes.at("jump") == p.instructions - 6);  // the two JPs, then the JRs
}

TEST_CASE("asleep with nothing to wake it: halted to the end of the trace") {
  // IME off, IE 0, the LCD off: no interrupt can end the HALT (and with the LCD off the PPU
  // schedules nothing), so the trace must end on its own.
  Asm a;
  a.op("DI");
  a.op("XOR A");
  a.op("LDH (a8),A", io::kIE);
  a.op("LDH (a8),A", io::kLCDC);
  a.op("HALT");
  a.op("NOP");
  const Rom rom = rom_of(a);
  auto g = profile_game(rom, opts(false));
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  const GameProfile& p = g.value();
  CHECK(p.halts == 1);
  CHECK(p.instructions == 7);  // NOP, JP 0150, then DI, XOR, LDH, LDH, HALT
  CHECK(p.cycles >= 47 * 70224u);
  CHECK(p.halted_share() > 0.99);
}
