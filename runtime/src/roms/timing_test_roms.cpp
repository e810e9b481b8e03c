// The built-in timing test ROMs (conventions: test_rom_kit.h): timer reload, PPU modes, STAT
// blocking, OAM DMA conflicts, the IE push, APU registers and the joypad interrupt.
#include "test_rom_kit.h"

namespace gbx::test_rom_kit {
namespace {

// ---- Timing ROMs ([D].6). Cycle arithmetic in the comments: an instruction's memory
// accesses happen one per M-cycle, in order (fetch, operands, then the data access), and an
// I/O access happens at its M-cycle's io_time (templates/hw/machine.h); "t0 + n" is n T after
// the io_time of the DIV write that resets the system counter.

void nops(Asm& a, int n) { a.bytes(std::vector<uint8_t>((size_t)n, 0x00)); }

// Ends a ROM that kept its results at `base` with the mooneye verdict (`gbx-run testrom`):
// LD B,B with B,C,D,E,H,L = 3,5,8,13,21,34 when they equal `expected`, else with 0x42s.
// (Without the ldbb_trap debug option LD B,B does nothing and the ROM runs on to `done`.)
void mooneye_verdict(Asm& a, uint16_t base, const std::vector<uint8_t>& expected) {
  a.op("LD HL,d16", base).op("LD DE,d16", "verdict_table").op("LD C,d8", (int)expected.size());
  a.label("verdict_loop").op("LD A,(DE)").op("CP (HL)").op("JR NZ,r8", "verdict_fail");
  a.op("INC HL").op("INC DE").op("DEC C").op("JR NZ,r8", "verdict_loop");
  a.op("LD B,d8", 3).op("LD C,d8", 5).op("LD D,d8", 8).op("LD E,d8", 13);
  a.op("LD H,d8", 21).op("LD L,d8", 34).op("LD B,B").op("JP a16", "done");
  a.label("verdict_fail").op("LD A,d8", 0x42).op("LD B,A").op("LD C,A").op("LD D,A");
  a.op("LD E,A").op("LD H,A").op("LD L,A").op("LD B,B").op("JP a16", "done");
  a.label("verdict_table").bytes(expected);
}

// Timer overflow and TAC (Pan Docs "Timer and Divider Registers", "Timer obscure
// behaviour"). Each case resets DIV at t0 (counter 0), enables TAC = 05 (TIMA counts falling
// edges of counter bit 3: at t0 + 16k) at t0 + 20, so the edges that count are t0+32, t0+48...
// - RELOAD: TIMA = FF overflows at t0+32. Read at t0+32: 00 (the overflow M-cycle); at
//   t0+44: TMA (33), reloaded at t0+36; IF bit 2 set.
// - CANCEL: TIMA = FE overflows at t0+48; writing 77 at t0+48 (the 00 M-cycle) cancels the
//   reload and the interrupt: TIMA reads 77 at t0+56, IF bit 2 clear.
// - IGNORE: writing 77 at t0+52 (the reload M-cycle) is ignored: TIMA = TMA = 33.
// - TMA: writing TMA = 55 at t0+52 (the reload M-cycle) also loads TIMA: 55.
// - TAC: TIMA = 10. TAC <- 04 at t0+40 (counter bit 3 = 1 -> selected bit 9 = 0: the
//   multiplexer output falls) ticks TIMA: 10 + edge at 32 + glitch = 12. The control case
//   writes at t0+52 (bit 3 = 0, no glitch) after the edges at 32 and 48: also 12. A missing
//   glitch reads 11, a spurious one 13.
const char kTimerReloadExpected[] =
    "RELOAD 00 33 04\nCANCEL 77 00\nIGNORE 33 04\nTMA 55\nTAC 12 12\n";
std::vector<uint8_t> timer_reload() {
  constexpr uint16_t kR = 0xC000;  // results
  Program p;
  Asm& a = p.a;
  auto setup = [&](uint8_t tima) {
    a.op("XOR A")
        .op("LDH (a8),A", io::kTAC)
        .op("LDH (a8),A", io::kIF)
        .op("LD C,d8", io::kTIMA)
        .op("LD HL,d16", 0xFF07)
        .op("LD A,d8", 0x33)
        .op("LDH (a8),A", io::kTMA)
        .op("LD A,d8", tima)
        .op("LDH (a8),A", io::kTIMA)
        .op("LDH (a8),A", io::kDIV)   // t0
        .op("LD A,d8", 0x05)          // t0+4, t0+8
        .op("LDH (a8),A", io::kTAC);  // t0+12, 16, write at t0+20
  };
  auto save = [&](int slot) { a.op("LD (a16),A", kR + slot); };
  auto save_if = [&](int slot) {
    a.op("LDH A,(a8)", io::kIF).op("AND d8", 0x04);
    save(slot);
  };
  p.begin();
  setup(0xFF);
  a.op("NOP").op("LD A,(C)");     // read at t0+32
  a.op("LD B,A").op("LD A,(C)");  // read at t0+44
  a.op("LD D,A");
  save_if(2);
  a.op("LD A,B");
  save(0);
  a.op("LD A,D");
  save(1);
  setup(0xFE);
  a.op("LD A,d8", 0x77);
  nops(a, 3);
  a.op("LD (C),A").op("LD A,(C)");  // write at t0+48, read at t0+56
  save(3);
  save_if(4);
  setup(0xFE);
  a.op("LD A,d8", 0x77);
  nops(a, 4);
  a.op("LD (C),A").op("LD A,(C)");  // write at t0+52, read at t0+60
  save(5);
  save_if(6);
  setup(0xFE);
  a.op("LD A,d8", 0x55);
  nops(a, 3);
  a.op("LDH (a8),A", io::kTMA).op("LD A,(C)");  // write at t0+52, read at t0+60
  save(7);
  setup(0x10);
  a.op("LD A,d8", 0x04).op("NOP").op("LD (HL),A").op("LD A,(C)");  // TAC at t0+40
  save(8);
  setup(0x10);
  a.op("LD A,d8", 0x04);
  nops(a, 4);
  a.op("LD (HL),A").op("LD A,(C)");  // TAC at t0+52
  save(9);
  a.op("XOR A").op("LDH (a8),A", io::kTAC);
  auto show = [&](int slot) {
    a.op("LD A,d8", ' ').op("CALL a16", "print_char").op("LD A,(a16)", kR + slot);
    p.print_hex_a();
  };
  p.print("RELOAD");
  show(0), show(1), show(2);
  p.print("\nCANCEL");
  show(3), show(4);
  p.print("\nIGNORE");
  show(5), show(6);
  p.print("\nTMA");
  show(7);
  p.print("\nTAC");
  show(8), show(9);
  p.print("\n");
  mooneye_verdict(a, kR, {0x00, 0x33, 0x04, 0x77, 0x00, 0x33, 0x04, 0x55, 0x12, 0x12});
  return p.finish(spec_named("TIMER_RELOAD"));
}

// PPU timing (Pan Docs "Rendering" / "Mode 3 length", "LCD Status Registers", "Accessing
// VRAM and OAM", "LY", "STAT interrupt"). The LCD is switched on at cycle E (a dot-0 line
// start); every CPU access then falls on a dot = 0 mod 4 of its line. A sample waits with
// HALT (IME = 0, IE = STAT, STAT = LYC source) for line L: the LYC source rises at dot 0 and
// the CPU resumes with its next fetch at dot 4; `n` NOPs later an LDH read happens at dot
// 12 + 4n, an `LD A,(a16)` read or `LD (a16),A` write at dot 16 + 4n.
// - FIRST: right after switching on, line 0 has no OAM scan: STAT mode 0 at dot 12 (not 2),
//   and OAM is readable at dot 52 (object 0's Y = 60).
// - M3: mode 3 runs from dot 80 for 172 + SCX % 8 dots + object penalties. SCX = 0: mode 3
//   at dot 248, mode 0 at 256 (end 252). SCX = 7: mode 3 at 256, mode 0 at 260 (end 259).
//   SCX = 0 with one object at OAM X = 8 on the line (6 + 5 dots: its tile's first pixel):
//   mode 3 at 260, mode 0 at 264 (end 263).
// - VRAM (9FF0 = 5A): reads FF in mode 3 (dot 248), 5A in mode 0 (dot 256); a write in
//   mode 3 (dot 248) is lost: still 5A.
// - OAM: reads FF in mode 2 (dot 40), 60 in mode 0 (dot 256).
// - HALT IRQ: IME = 1, HALT until line L's LYC interrupt; the dispatch (5 M-cycles) starts
//   on the M-cycle the CPU would have taken it between two instructions (mooneye
//   halt_ime1_timing2-GS, measured on a DMG: no later than in running code), then `JP` at
//   0x48 (4 M), 7 NOPs and an LDH read: dot 4 + 20 + 16 + 28 + 8 = 76, still mode 2 (80,
//   mode 3, if leaving HALT cost one more M-cycle).
// - LY153: woken on line 153 by LYC = 153, LY reads 00 at dot 12 (LY is 153 only for the
//   first M-cycle of the line). Woken by LYC = 0 from line 150, the CPU is still on line 153
//   (STAT mode 1 and the LYC flag: 05), not on line 0.
// - STATW: writing STAT in mode 1 requests a STAT interrupt on the DMG (IF bit 1: 02); in
//   mode 2 with LY != LYC it does not (00).
const char kPpuModesExpected[] =
    "FIRST 00 60\nM3 SCX0 03 00\nM3 SCX7 03 00\nM3 OBJ 03 00\nVRAM FF 5A 5A\nOAM FF 60\n"
    "HALT IRQ 02\nLY153 00 05\nSTATW 02 00\n";
std::vector<uint8_t> ppu_modes() {
  constexpr uint8_t kLY = 0x44, kLYC = 0x45, kSTAT = 0x41, kSCX = 0x43;
  constexpr uint16_t kR = 0xC000;
  Program p;
  Asm& a = p.a;
  a.org(0x0048).op("JP a16", "isr_stat");
  p.begin();
  auto save = [&](int slot) { a.op("LD (a16),A", kR + slot); };
  // HALT until line `line` starts (A is kept for a write sample when keep_a is set).
  auto wait_line = [&](int line) {
    a.op("LD A,d8", line).op("LDH (a8),A", kLYC).op("XOR A").op("LDH (a8),A", io::kIF).op("HALT");
  };
  auto ldh_sample = [&](int line, int dot, uint8_t reg, int slot, bool mode_only) {
    wait_line(line);
    nops(a, (dot - 12) / 4);
    a.op("LDH A,(a8)", reg);
    if (mode_only) a.op("AND d8", 0x03);
    save(slot);
  };
  auto mem_sample = [&](int line, int dot, uint16_t addr, int slot) {
    wait_line(line);
    nops(a, (dot - 16) / 4);
    a.op("LD A,(a16)", addr);
    save(slot);
  };
  a.label("vbl").op("LDH A,(a8)", kLY).op("CP d8", 0x90).op("JR NZ,r8", "vbl");
  a.op("XOR A").op("LDH (a8),A", io::kLCDC);  // LCD off in VBlank
  a.op("LD HL,d16", 0xFE00).op("LD B,d8", 160);
  a.label("oam_clear").op("LD (HL+),A").op("DEC B").op("JR NZ,r8", "oam_clear");
  a.op("LD HL,d16", 0xFE00).op("LD (HL),d8", 0x50 + 16).op("INC HL").op("LD (HL),d8", 8);
  a.op("LD A,d8", 0x5A).op("LD (a16),A", 0x9FF0);
  a.op("XOR A").op("LDH (a8),A", kSCX).op("LD A,d8", 0x40).op("LDH (a8),A", kSTAT);
  a.op("LD A,d8", 0x02).op("LDH (a8),A", io::kIE);
  a.op("LD A,d8", 0x93).op("LDH (a8),A", io::kLCDC);  // on: dot 0 of line 0
  a.op("LDH A,(a8)", kSTAT).op("AND d8", 0x03);       // dot 12
  save(0);                                            // dots 24-36
  a.op("LD A,(a16)", 0xFE00);                         // dot 52
  save(1);
  ldh_sample(0x20, 248, kSTAT, 2, true);
  ldh_sample(0x21, 256, kSTAT, 3, true);
  a.op("LD A,d8", 7).op("LDH (a8),A", kSCX);
  ldh_sample(0x28, 256, kSTAT, 4, true);
  ldh_sample(0x29, 260, kSTAT, 5, true);
  a.op("XOR A").op("LDH (a8),A", kSCX);
  mem_sample(0x30, 248, 0x9FF0, 8);
  mem_sample(0x31, 256, 0x9FF0, 9);
  wait_line(0x32);
  a.op("LD A,d8", 0x11);  // dots 4, 8; 56 NOPs from dot 12; the write at 12 + 4 * 56 + 12 = 248
  nops(a, 56);
  a.op("LD (a16),A", 0x9FF0);
  mem_sample(0x33, 256, 0x9FF0, 10);
  mem_sample(0x34, 40, 0xFE00, 11);
  mem_sample(0x35, 256, 0xFE00, 12);
  ldh_sample(0x50, 260, kSTAT, 6, true);
  ldh_sample(0x51, 264, kSTAT, 7, true);
  // HALT with IME = 1 on line 0x58: the ISR samples and returns after the HALT.
  a.op("LD A,d8", 0x58).op("LDH (a8),A", kLYC).op("XOR A").op("LDH (a8),A", io::kIF);
  a.op("EI").op("HALT").op("DI");
  ldh_sample(153, 12, kLY, 14, false);
  wait_line(150);
  a.op("XOR A").op("LDH (a8),A", kLYC).op("LDH (a8),A", io::kIF).op("HALT");
  a.op("LDH A,(a8)", kSTAT).op("AND d8", 0x07);
  save(15);
  // Still on line 153 (mode 1): STAT write with LYC != LY.
  a.op("LD A,d8", 0x10).op("LDH (a8),A", kLYC).op("XOR A").op("LDH (a8),A", io::kIF);
  a.op("LD A,d8", 0x40).op("LDH (a8),A", kSTAT).op("LDH A,(a8)", io::kIF).op("AND d8", 0x02);
  save(16);
  // Mode 2 of line 0x60, LY != LYC.
  a.op("LD A,d8", 0x60).op("LDH (a8),A", kLYC).op("XOR A").op("LDH (a8),A", io::kIF).op("HALT");
  a.op("LD A,d8", 0x10).op("LDH (a8),A", kLYC).op("XOR A").op("LDH (a8),A", io::kIF);
  a.op("LD A,d8", 0x40).op("LDH (a8),A", kSTAT).op("LDH A,(a8)", io::kIF).op("AND d8", 0x02);
  save(17);
  auto show = [&](int slot) {
    a.op("LD A,d8", ' ').op("CALL a16", "print_char").op("LD A,(a16)", kR + slot);
    p.print_hex_a();
  };
  p.print("FIRST");
  show(0), show(1);
  p.print("\nM3 SCX0");
  show(2), show(3);
  p.print("\nM3 SCX7");
  show(4), show(5);
  p.print("\nM3 OBJ");
  show(6), show(7);
  p.print("\nVRAM");
  show(8), show(9), show(10);
  p.print("\nOAM");
  show(11), show(12);
  p.print("\nHALT IRQ");
  show(13);
  p.print("\nLY153");
  show(14), show(15);
  p.print("\nSTATW");
  show(16), show(17);
  p.print("\n");
  mooneye_verdict(a, kR,
                  {0x00, 0x60, 0x03, 0x00, 0x03, 0x00, 0x03, 0x00, 0xFF, 0x5A, 0x5A, 0xFF, 0x60,
                   0x02, 0x00, 0x05, 0x02, 0x00});
  a.label("isr_stat");  // fetched from dot 40
  nops(a, 7);
  a.op("LDH A,(a8)", kSTAT).op("AND d8", 0x03);  // dot 76
  save(13);
  a.op("RETI");
  return p.finish(spec_named("PPU_MODES"));
}

// STAT blocking (Pan Docs "STAT interrupt": the interrupt is requested on a rising edge of
// the OR of the enabled sources). HBlank and LYC = 0x20 sources enabled from line 0x1D: the
// HBlank of line 0x1F holds the line high into line 0x20, where LY = LYC keeps it high for
// the whole line, so neither line 0x20's start nor its HBlank requests anything. The ISR
// records LY: 1D 1E 1F 21 22 (5 interrupts before line 0x23).
// Then the DMG's mode-2 source pulses at the start of line 144 too (mooneye
// "vblank_stat_intr", verified on DMG): with only that source enabled, HALT from line 143
// wakes on line 144 (LY 90), not on the next frame's line 0.
const char kStatBlockExpected[] = "BLOCK 05 1D 1E 1F 21 22\nM2 144 90\n";
std::vector<uint8_t> stat_block() {
  constexpr uint8_t kLY = 0x44, kLYC = 0x45, kSTAT = 0x41;
  Program p;
  Asm& a = p.a;
  a.org(0x0048).op("PUSH AF").op("LDH A,(a8)", kLY).op("LD (HL+),A").op("POP AF").op("RETI");
  p.begin();
  a.op("XOR A").op("LDH (a8),A", kSTAT).op("LD A,d8", 0x20).op("LDH (a8),A", kLYC);
  a.op("LD A,d8", 0x02).op("LDH (a8),A", io::kIE).op("LD HL,d16", 0xC000);
  a.label("w1").op("LDH A,(a8)", kLY).op("CP d8", 0x1C).op("JR NZ,r8", "w1");
  a.label("w2").op("LDH A,(a8)", kLY).op("CP d8", 0x1D).op("JR NZ,r8", "w2");
  // At most ~40 dots into line 0x1D (mode 2): no STAT-write interrupt.
  a.op("LD A,d8", 0x48).op("LDH (a8),A", kSTAT).op("XOR A").op("LDH (a8),A", io::kIF).op("EI");
  a.label("w3").op("LDH A,(a8)", kLY).op("CP d8", 0x23).op("JR NZ,r8", "w3");
  a.op("DI").op("XOR A").op("LDH (a8),A", kSTAT).op("LD A,L").op("LDH (a8),A", kCount);
  p.print("BLOCK ");
  p.print_hex_at(kCount);
  a.op("LD HL,d16", 0xC000).op("LD B,d8", 5);
  a.label("show").op("LD A,d8", ' ').op("CALL a16", "print_char").op("LD A,(HL+)");
  p.print_hex_a();
  a.op("DEC B").op("JR NZ,r8", "show");
  a.label("w4").op("LDH A,(a8)", kLY).op("CP d8", 0x30).op("JR NZ,r8", "w4");
  a.op("LD A,d8", 0x20).op("LDH (a8),A", kSTAT);  // mode 2/3 of line 0x30: no STAT-write IRQ
  a.label("w5").op("LDH A,(a8)", kLY).op("CP d8", 0x8F).op("JR NZ,r8", "w5");
  a.op("XOR A").op("LDH (a8),A", io::kIF).op("HALT").op("LDH A,(a8)", kLY).op("LDH (a8),A", kCount);
  a.op("XOR A").op("LDH (a8),A", kSTAT);
  p.print("\nM2 144 ");
  p.print_hex_at(kCount);
  p.print("\n");
  return p.finish(spec_named("STAT_BLOCK"));
}

// OAM DMA (Pan Docs "OAM DMA Transfer"): the transfer starts 2 M-cycles after the write to
// FF46 (one of set-up) and moves one byte per M-cycle; a CPU read on the DMA's bus gets the
// byte being moved. From HRAM: write FF46 = C1 at t (source C100.., bytes 30 + i); reads of
// C000 (same external bus) at t+8, t+16, t+24 get bytes 0, 2, 4: 30 32 34; OAM reads FF.
const char kDmaExpected[] = "DMA 30 32 34 FF\n";
std::vector<uint8_t> dma_conflict() {
  Program p;
  Asm& a = p.a;
  p.begin();
  a.op("LD HL,d16", 0xC100).op("LD A,d8", 0x30).op("LD B,d8", 160);
  a.label("fill").op("LD (HL+),A").op("INC A").op("DEC B").op("JR NZ,r8", "fill");
  a.op("LD A,d8", 0x99).op("LD (a16),A", 0xC000);
  a.op("LD HL,d16", "hram_code").op("LD DE,d16", 0xFF90).op("LD B,d8", 19);
  a.label("copy").op("LD A,(HL+)").op("LD (DE),A").op("INC DE").op("DEC B").op("JR NZ,r8", "copy");
  a.op("LD HL,d16", 0xC000).op("CALL a16", 0xFF90);
  p.print("DMA ");
  a.op("LD A,D");
  p.print_hex_a();
  p.print(" ");
  a.op("LD A,B");
  p.print_hex_a();
  p.print(" ");
  a.op("LD A,C");
  p.print_hex_a();
  p.print(" ");
  a.op("LDH A,(a8)", 0x80);
  p.print_hex_a();
  p.print("\n");
  a.op("JR r8", "done");
  // 19 bytes run at FF90: write FF46 (t), three reads of (HL), an OAM read stored to FF80,
  // then 160 M-cycles of waiting.
  a.label("hram_code")
      .db({0x3E, 0xC1, 0xE0, 0x46, 0x56, 0x46, 0x4E, 0xFA, 0x00, 0xFE, 0xE0, 0x80, 0x3E, 0x28, 0x3D,
           0x20, 0xFD, 0xC9, 0x00});
  return p.finish(spec_named("DMA_CONFLICT"));
}

// ie_push (Cycle-Accurate Game Boy Docs, mooneye "ie_push"): the dispatch decides which
// interrupt to take after pushing PC's high byte. With SP = 0000 that byte lands on IE
// (FFFF): PC = 10xx writes IE = 10, the pending timer interrupt (IF = 04) is no longer
// enabled, so the CPU jumps to 0000 instead of 0050 and IF keeps bit 2.
const char kIePushExpected[] = "IEPUSH 10 04\n";
std::vector<uint8_t> ie_push() {
  Program p;
  Asm& a = p.a;
  a.org(0x0000).op("JP a16", "at_zero");
  a.org(0x0050).op("JP a16", "done");
  p.begin();
  a.op("JP a16", "trigger");
  a.label("report");
  p.print("IEPUSH ");
  p.print_hex_at(kSeenB);
  p.print(" ");
  p.print_hex_at(kCount);
  p.print("\n");
  a.op("JP a16", "done");
  a.org(0x1000)
      .label("trigger")
      .op("LD A,d8", 0x04)
      .op("LDH (a8),A", io::kIE)
      .op("LDH (a8),A", io::kIF)
      .op("LD SP,d16", 0x0000)
      .op("EI")
      .op("NOP")
      .op("NOP")
      .label("at_zero")
      .op("DI")
      .op("LD SP,d16", 0xFFFE)
      .op("LDH A,(a8)", io::kIE)
      .op("LDH (a8),A", kSeenB)
      .op("LDH A,(a8)", io::kIF)
      .op("AND d8", 0x04)
      .op("LDH (a8),A", kCount)
      .op("XOR A")
      .op("LDH (a8),A", io::kIE)
      .op("JP a16", "report");
  return p.finish(spec_named("IE_PUSH"));
}

// APU registers without sound (Pan Docs "Audio Registers"; read masks as in its register
// table / gbdev "Sound Controller"): zeros written to FF10-FF25 read back as the masks.
// NR52 (channel bits): all DACs off -> F0; CH1 triggered with length 2 and length enabled
// -> F1, off after two 256 Hz length clocks (2 frames later: F0; length 2, not 1, so that
// the extra length clock hardware gives when length is enabled in the first half of a
// sequencer period (templates/hw/io.h) cannot empty the counter before the trigger reloads
// it); length 64 -> on after
// 10 frames, off after 20 (64 / 256 s = 14.9 frames); triggered without length -> stays on
// (F1); its DAC switched off (NR12 = 0) -> F0. Power off (NR52 = 0): NR52 70, every
// register cleared (NR12 reads 00) and writes ignored (NR10 <- 7F still reads 80).
const char kApuExpected[] =
    "APU 80 3F 00 FF BF FF 3F 00 FF BF 7F FF 9F FF BF FF FF 00 00 BF 00 00\n"
    "NR52 F0 F1 F0 F1 F1 F0 F1 F0\nOFF 70 80 00\n";
std::vector<uint8_t> apu_regs() {
  Program p;
  Asm& a = p.a;
  constexpr uint8_t kNR52 = 0x26;
  p.begin();
  a.op("LD A,d8", 0x80).op("LDH (a8),A", kNR52);
  a.op("LD HL,d16", 0xFF10).op("LD B,d8", 22).op("XOR A");
  a.label("zero").op("LD (HL+),A").op("DEC B").op("JR NZ,r8", "zero");
  p.print("APU");
  a.op("LD HL,d16", 0xFF10).op("LD B,d8", 22);
  a.label("mask").op("LD A,d8", ' ').op("CALL a16", "print_char").op("LD A,(HL+)");
  p.print_hex_a();
  a.op("DEC B").op("JR NZ,r8", "mask");
  auto nr52 = [&]() {  // read first: printing takes 4096 T a byte
    a.op("LDH A,(a8)", kNR52).op("LD D,A").op("LD A,d8", ' ').op("CALL a16", "print_char");
    a.op("LD A,D");
    p.print_hex_a();
  };
  auto wait_frames = [&](int n) { a.op("LD E,d8", n).op("CALL a16", "wait_frames"); };
  p.print("\nNR52");
  nr52();
  a.op("LD A,d8", 0xF0).op("LDH (a8),A", 0x12).op("LD A,d8", 0x3E).op("LDH (a8),A", 0x11);
  a.op("LD A,d8", 0xC0).op("LDH (a8),A", 0x14);
  nr52();
  wait_frames(2);
  nr52();
  a.op("XOR A").op("LDH (a8),A", 0x11).op("LD A,d8", 0xC0).op("LDH (a8),A", 0x14);
  nr52();
  wait_frames(10);
  nr52();
  wait_frames(10);
  nr52();
  a.op("LD A,d8", 0x3F).op("LDH (a8),A", 0x11).op("LD A,d8", 0x80).op("LDH (a8),A", 0x14);
  wait_frames(2);
  nr52();
  a.op("XOR A").op("LDH (a8),A", 0x12);
  nr52();
  a.op("LD A,d8", 0xF0).op("LDH (a8),A", 0x12);
  a.op("XOR A").op("LDH (a8),A", kNR52).op("LD A,d8", 0x7F).op("LDH (a8),A", 0x10);
  p.print("\nOFF");
  nr52();
  a.op("LD A,d8", ' ').op("CALL a16", "print_char").op("LDH A,(a8)", 0x10);
  p.print_hex_a();
  a.op("LD A,d8", ' ').op("CALL a16", "print_char").op("LDH A,(a8)", 0x12);
  p.print_hex_a();
  p.print("\n");
  a.op("JR r8", "done");
  // wait_frames: E = number of VBlank starts (LY = 0x90) to wait for. Clobbers A, E.
  a.label("wait_frames")
      .label("wf_out")
      .op("LDH A,(a8)", 0x44)
      .op("CP d8", 0x90)
      .op("JR Z,r8", "wf_out")
      .label("wf_in")
      .op("LDH A,(a8)", 0x44)
      .op("CP d8", 0x90)
      .op("JR NZ,r8", "wf_in")
      .op("DEC E")
      .op("JR NZ,r8", "wait_frames")
      .op("RET");
  return p.finish(spec_named("APU_REGS"));
}

// Joypad (Pan Docs "Joypad Input"): buttons selected (P1 = 10), joypad interrupt enabled;
// the ISR at 0x60 counts into kCount and keeps P1 in kSeenB. Prints only that it is ready:
// the tests step it with actions and read HRAM.
const char kJoypadExpected[] = "JOYPAD READY\n";
std::vector<uint8_t> joypad_irq() {
  Program p;
  Asm& a = p.a;
  a.org(0x0060).op("JP a16", "isr_joy");
  p.begin();
  p.print(kJoypadExpected);
  a.op("XOR A")
      .op("LDH (a8),A", kCount)
      .op("LD A,d8", 0x10)
      .op("LDH (a8),A", 0x00)
      .op("LDH (a8),A", io::kIE)
      .op("XOR A")
      .op("LDH (a8),A", io::kIF)
      .op("EI")
      .label("idle")
      .op("HALT")
      .op("NOP")
      .op("JR r8", "idle");
  a.label("isr_joy")
      .op("PUSH AF")
      .op("LDH A,(a8)", kCount)
      .op("INC A")
      .op("LDH (a8),A", kCount)
      .op("LDH A,(a8)", 0x00)
      .op("LDH (a8),A", kSeenB)
      .op("POP AF")
      .op("RETI");
  return p.finish(spec_named("JOYPAD_IRQ"));
}

}  // namespace

void add_timing_test_roms(std::vector<BuiltinRom>& t) {
  t.push_back({"TIMER_RELOAD", "TIMA overflow: 00 cycle, reload cycle, writes in both; TAC glitch",
               timer_reload, kTimerReloadExpected, frames_for(kTimerReloadExpected)});
  t.push_back({"PPU_MODES",
               "mode 3 length (SCX, objects), VRAM/OAM lockout, first line, HALT IRQ, LY 153, "
               "STAT write",
               ppu_modes, kPpuModesExpected, frames_for(kPpuModesExpected, 30 * kCyclesPerFrame)});
  t.push_back({"STAT_BLOCK", "STAT interrupt line: HBlank and LYC sources block each other",
               stat_block, kStatBlockExpected, frames_for(kStatBlockExpected, kCyclesPerFrame)});
  t.push_back({"DMA_CONFLICT", "OAM DMA: reads on its bus return the byte being moved",
               dma_conflict, kDmaExpected, frames_for(kDmaExpected)});
  t.push_back({"IE_PUSH", "the dispatch's PC push overwrites IE: jump to 0000", ie_push,
               kIePushExpected, frames_for(kIePushExpected)});
  t.push_back({"APU_REGS", "sound registers: read masks, NR52 length counters, power off", apu_regs,
               kApuExpected, frames_for(kApuExpected, 26 * kCyclesPerFrame)});
  t.push_back({"JOYPAD_IRQ", "joypad interrupt counter (stepped with actions by the tests)",
               joypad_irq, kJoypadExpected, frames_for(kJoypadExpected)});
}

}  // namespace gbx::test_rom_kit
