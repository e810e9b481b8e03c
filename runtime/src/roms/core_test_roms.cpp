// The first built-in test ROMs (conventions: test_rom_kit.h): serial output, timer and
// interrupt dispatch, the HALT bug, EI's delay, MBC1 banking and PPU interrupt timing.
#include "test_rom_kit.h"

namespace gbx::test_rom_kit {
namespace {

// Timer ISR at 0x0050, exactly the 8 bytes up to the next vector: counts into kCount.
void timer_counter_isr(Asm& a) {
  a.org(0x0050)
      .op("PUSH AF")
      .op("LDH A,(a8)", kCount)
      .op("INC A")
      .op("LDH (a8),A", kCount)
      .op("POP AF")
      .op("RETI");
}

const char kHelloExpected[] = "Hello, GBX!\n";
std::vector<uint8_t> serial_hello() {
  Program p;
  p.begin();
  p.print(kHelloExpected);
  return p.finish(spec_named("SERIAL_HELLO"));
}

// TAC = 0x05 (enabled, 262144 Hz: TIMA +1 every 16 T-cycles), TMA = 0xF0: an overflow and
// a timer interrupt every 16 increments = 256 T-cycles. The main loop leaves after the 10th
// interrupt and executes DI within ~150 T-cycles of it, well before an 11th can come, so
// the count printed is exactly 10.
const char kTimerExpected[] = "TIMER OK 0A\n";
std::vector<uint8_t> irq_timer() {
  Program p;
  Asm& a = p.a;
  timer_counter_isr(a);
  p.begin();
  a.op("XOR A")
      .op("LDH (a8),A", kCount)
      .op("LDH (a8),A", io::kTAC)  // timer off while it is set up
      .op("LDH (a8),A", io::kIF)   // drop whatever is pending (boot leaves VBlank set)
      .op("LD A,d8", 0xF0)
      .op("LDH (a8),A", io::kTMA)
      .op("LDH (a8),A", io::kTIMA)
      .op("LD A,d8", 0x04)
      .op("LDH (a8),A", io::kIE)
      .op("LD A,d8", 0x05)
      .op("LDH (a8),A", io::kTAC)
      .op("EI")
      .label("wait")
      .op("LDH A,(a8)", kCount)
      .op("CP d8", 10)
      .op("JR C,r8", "wait")
      .op("DI")
      .op("XOR A")
      .op("LDH (a8),A", io::kTAC);
  p.print("TIMER OK ");
  p.print_hex_at(kCount);
  p.print("\n");
  return p.finish(spec_named("IRQ_TIMER"));
}

// All five sources requested at once with IME = 0, then EI: dispatch goes by priority,
// bit 0 first (Pan Docs "Interrupts"). Each ISR prints its letter and clears its own IE
// bit, so a source that fires again (VBlank from a running PPU, serial from the ISR's own
// print) is not taken twice. Main waits until IE is 0.
const char kPriorityExpected[] = "VLTSJ\n";
std::vector<uint8_t> irq_priority() {
  struct Source {
    uint16_t vector;
    char letter;
    uint8_t bit;
  };
  const Source sources[] = {{0x40, 'V', 0x01},
                            {0x48, 'L', 0x02},
                            {0x50, 'T', 0x04},
                            {0x58, 'S', 0x08},
                            {0x60, 'J', 0x10}};
  Program p;
  Asm& a = p.a;
  for (const Source& s : sources) a.org(s.vector).op("JP a16", std::string("isr_") + s.letter);
  p.begin();
  a.op("LD A,d8", 0x1F)
      .op("LDH (a8),A", io::kIE)
      .op("LDH (a8),A", io::kIF)
      .op("EI")
      .label("wait")
      .op("LDH A,(a8)", io::kIE)
      .op("AND d8", 0x1F)
      .op("JR NZ,r8", "wait")
      .op("DI");
  p.print("\n");
  a.op("JR r8", "done");
  for (const Source& s : sources) {
    a.label(std::string("isr_") + s.letter)
        .op("PUSH AF")
        .op("LD A,d8", s.letter)
        .op("CALL a16", "print_char")
        .op("LDH A,(a8)", io::kIE)
        .op("AND d8", ~s.bit & 0xFF)
        .op("LDH (a8),A", io::kIE)
        .op("POP AF")
        .op("RETI");
  }
  return p.finish(spec_named("IRQ_PRIORITY"));
}

// Part 1 (Pan Docs "halt"): IME = 0 with an interrupt pending (IE & IF != 0), HALT does not
// halt and the byte after it is read twice, so `INC A` runs twice: A = 0 -> 2.
// Part 2: IME = 1, nothing pending; HALT halts until the timer overflows (TIMA = 0xF0,
// ~256 T-cycles), the ISR at 0x0050 runs once and returns after HALT, where `INC B` runs
// once (no HALT bug with IME = 1). TMA = 0 puts the next overflow 4096 T-cycles later,
// long after the DI that follows.
const char kHaltExpected[] = "HALT BUG A=02\nHALT WAKE 01 B=01\n";
std::vector<uint8_t> halt_bug() {
  Program p;
  Asm& a = p.a;
  timer_counter_isr(a);
  p.begin();
  a.op("XOR A")
      .op("LDH (a8),A", io::kTAC)
      .op("LDH (a8),A", kCount)
      .op("LD A,d8", 0x04)
      .op("LDH (a8),A", io::kIE)
      .op("LDH (a8),A", io::kIF)  // timer requested by hand, IME = 0
      .op("XOR A")
      .op("HALT")
      .op("INC A")
      .op("LD B,A")
      .op("XOR A")
      .op("LDH (a8),A", io::kIF);
  p.print("HALT BUG A=");
  a.op("LD A,B");
  p.print_hex_a();
  p.print("\n");
  a.op("XOR A")
      .op("LDH (a8),A", io::kIF)
      .op("LDH (a8),A", io::kTMA)
      .op("LD B,A")
      .op("LD A,d8", 0xF0)
      .op("LDH (a8),A", io::kTIMA)
      .op("LD A,d8", 0x05)
      .op("LDH (a8),A", io::kTAC)
      .op("EI")
      .op("NOP")  // IME is 1 before HALT (EI's delay never overlaps HALT here)
      .op("HALT")
      .op("INC B")
      .op("DI")
      .op("XOR A")
      .op("LDH (a8),A", io::kTAC);
  p.print("HALT WAKE ");
  p.print_hex_at(kCount);
  p.print(" B=");
  a.op("LD A,B");
  p.print_hex_a();
  p.print("\n");
  return p.finish(spec_named("HALT_BUG"));
}

// Pan Docs "EI": IME is set only after the instruction following EI. With the timer
// interrupt requested by hand (the timer itself stays off):
// - `EI; DI` never dispatches: the count stays 00.
// - `EI; INC B; INC B` dispatches after the first INC B: the ISR sees B = 01.
const char kEiExpected[] = "EI DI 00\nEI INC 01 B=01\n";
std::vector<uint8_t> ei_delay() {
  Program p;
  Asm& a = p.a;
  a.org(0x0050).op("JP a16", "isr_timer");
  p.begin();
  a.op("XOR A")
      .op("LDH (a8),A", io::kTAC)
      .op("LDH (a8),A", kCount)
      .op("LD A,d8", 0xFF)
      .op("LDH (a8),A", kSeenB)
      .op("LD A,d8", 0x04)
      .op("LDH (a8),A", io::kIE)
      .op("LDH (a8),A", io::kIF)
      .op("EI")
      .op("DI");
  p.print("EI DI ");
  p.print_hex_at(kCount);
  p.print("\n");
  a.op("LD B,d8", 0)
      .op("LD A,d8", 0x04)
      .op("LDH (a8),A", io::kIF)
      .op("EI")
      .op("INC B")
      .op("INC B")
      .op("DI");
  p.print("EI INC ");
  p.print_hex_at(kCount);
  p.print(" B=");
  p.print_hex_at(kSeenB);
  p.print("\n");
  a.op("JR r8", "done");
  a.label("isr_timer")
      .op("PUSH AF")
      .op("LDH A,(a8)", kCount)
      .op("INC A")
      .op("LDH (a8),A", kCount)
      .op("LD A,B")
      .op("LDH (a8),A", kSeenB)
      .op("POP AF")
      .op("RETI");
  return p.finish(spec_named("EI_DELAY"));
}

// Pan Docs "MBC1", on a 128 KiB ROM (banks 0-7, bank n holds n at its first byte) with
// 32 KiB of RAM (4 banks):
// - ROM: 0x2000 <- 0 selects bank 1 (00->01), then 1..7 select themselves, and 8 selects
//   bank 0: the 00->01 check looks at all 5 bits, then the number is masked to 3 bits.
// - RAM (enabled with 0x0A at 0x0000): in mode 1 (0x6000 <- 1) 0x4000 picks the RAM bank;
//   bank k gets 0x10+k, all are read back. In mode 0 A000-BFFF is always RAM bank 0.
// - RAM disabled (0x00 at 0x0000): writes are ignored; re-enabled, bank 0 still holds 0x10.
//   What a read of disabled RAM returns is not printed: Pan Docs calls it open bus ("often
//   $FF, but not guaranteed") and mGBA 0.10 returns the last cartridge-bus byte.
const char kMbc1Expected[] = "ROM 01 01 02 03 04 05 06 07 00\nRAM 10 11 12 13\nMODE0 10\nLOCK 10\n";
std::vector<uint8_t> mbc1_banks() {
  Program p;
  Asm& a = p.a;
  p.begin();
  p.print("ROM");
  a.op("LD C,d8", 0)
      .label("rom_loop")
      .op("LD A,C")
      .op("LD (a16),A", 0x2000)
      .op("LD A,d8", ' ')
      .op("CALL a16", "print_char")
      .op("LD A,(a16)", 0x4000)
      .op("CALL a16", "print_hex")
      .op("INC C")
      .op("LD A,C")
      .op("CP d8", 9)
      .op("JR NZ,r8", "rom_loop")
      .op("LD A,d8", 1)
      .op("LD (a16),A", 0x2000);
  p.print("\nRAM");
  a.op("LD A,d8", 0x0A)
      .op("LD (a16),A", 0x0000)
      .op("LD A,d8", 1)
      .op("LD (a16),A", 0x6000)
      .op("LD C,d8", 0)
      .label("ram_write")
      .op("LD A,C")
      .op("LD (a16),A", 0x4000)
      .op("ADD A,d8", 0x10)
      .op("LD (a16),A", 0xA000)
      .op("INC C")
      .op("LD A,C")
      .op("CP d8", 4)
      .op("JR NZ,r8", "ram_write")
      .op("LD C,d8", 0)
      .label("ram_read")
      .op("LD A,C")
      .op("LD (a16),A", 0x4000)
      .op("LD A,d8", ' ')
      .op("CALL a16", "print_char")
      .op("LD A,(a16)", 0xA000)
      .op("CALL a16", "print_hex")
      .op("INC C")
      .op("LD A,C")
      .op("CP d8", 4)
      .op("JR NZ,r8", "ram_read")
      .op("XOR A")
      .op("LD (a16),A", 0x6000);
  p.print("\nMODE0 ");
  a.op("LD A,(a16)", 0xA000);
  p.print_hex_a();
  a.op("XOR A")
      .op("LD (a16),A", 0x0000)  // RAM off
      .op("LD A,d8", 0x55)
      .op("LD (a16),A", 0xA000)  // ignored
      .op("LD A,d8", 0x0A)
      .op("LD (a16),A", 0x0000);
  p.print("\nLOCK ");
  a.op("LD A,(a16)", 0xA000);
  p.print_hex_a();
  p.print("\n");
  a.op("XOR A").op("LD (a16),A", 0x0000);

  RomSpec s = spec_named("MBC1_BANKS");
  s.cart_type = 0x03;      // MBC1+RAM+BATTERY
  s.rom_size_code = 0x02;  // 128 KiB, 8 banks
  s.ram_size_code = 0x03;  // 32 KiB, 4 banks
  // Bank 0's marker is its byte 0x0000 (the 0x00 fill, RST 00 is never used).
  for (uint8_t bank = 1; bank < 8; ++bank) s.patches.push_back({bank * 0x4000u, {bank}});
  return p.finish(s);
}

// PPU timing without pixels (Pan Docs "LCD Status Registers", "Interrupts"): the VBlank
// interrupt comes at the start of line 144, so its ISR reads LY = 0x90; an LYC=0x42 STAT
// interrupt reads LY = 0x42; with the LCD switched off (in VBlank, as hardware requires)
// LY reads 0. Three VBlanks are waited for in a HALT loop first.
const char kPpuExpected[] = "VBL 90 03\nLYC 42\nOFF 00\n";
std::vector<uint8_t> ppu_timing() {
  constexpr uint8_t kLY = 0x44, kLYC = 0x45, kSTAT = 0x41;
  Program p;
  Asm& a = p.a;
  for (uint16_t vec : {0x40, 0x48}) a.org(vec).op("JP a16", "isr");
  p.begin();
  a.op("JP a16", "main");
  {
    a.label("isr")
        .op("PUSH AF")
        .op("LDH A,(a8)", kLY)
        .op("LDH (a8),A", kSeenB)
        .op("LDH A,(a8)", kCount)
        .op("INC A")
        .op("LDH (a8),A", kCount)
        .op("POP AF")
        .op("RETI");
  }
  a.label("main")
      .op("XOR A")
      .op("LDH (a8),A", kCount)
      .op("LDH (a8),A", io::kIF)
      .op("LD A,d8", 0x01)
      .op("LDH (a8),A", io::kIE)
      .op("EI")
      .label("vbl_wait")
      .op("HALT")
      .op("NOP")
      .op("LDH A,(a8)", kCount)
      .op("CP d8", 3)
      .op("JR C,r8", "vbl_wait")
      .op("DI");
  p.print("VBL ");
  p.print_hex_at(kSeenB);
  p.print(" ");
  p.print_hex_at(kCount);
  p.print("\n");
  a.op("LD A,d8", 0x42)
      .op("LDH (a8),A", kLYC)
      .op("LD A,d8", 0x40)  // STAT: LYC=LY interrupt only
      .op("LDH (a8),A", kSTAT)
      .op("XOR A")
      .op("LDH (a8),A", io::kIF)
      .op("LD A,d8", 0x02)
      .op("LDH (a8),A", io::kIE)
      .op("EI")
      .op("HALT")
      .op("NOP")
      .op("DI");
  p.print("LYC ");
  p.print_hex_at(kSeenB);
  p.print("\n");
  a.label("ly_wait")  // switch the LCD off only in VBlank
      .op("LDH A,(a8)", kLY)
      .op("CP d8", 0x91)
      .op("JR NZ,r8", "ly_wait")
      .op("LD A,d8", 0x11)
      .op("LDH (a8),A", io::kLCDC)
      .op("LDH A,(a8)", kLY)
      .op("LDH (a8),A", kSeenB)
      .op("LD A,d8", 0x91)
      .op("LDH (a8),A", io::kLCDC);
  p.print("OFF ");
  p.print_hex_at(kSeenB);
  p.print("\n");
  return p.finish(spec_named("PPU_TIMING"));
}

}  // namespace

void add_core_test_roms(std::vector<BuiltinRom>& t) {
  t.push_back({"SERIAL_HELLO", "prints a greeting over the serial port", serial_hello,
               kHelloExpected, frames_for(kHelloExpected)});
  t.push_back({"IRQ_TIMER", "timer interrupts at 262144 Hz, TMA reload, ISR at 0x0050", irq_timer,
               kTimerExpected, frames_for(kTimerExpected, 10 * 256)});
  t.push_back({"IRQ_PRIORITY", "all five interrupts pending at once: dispatch order", irq_priority,
               kPriorityExpected, frames_for(kPriorityExpected)});
  t.push_back({"HALT_BUG", "HALT with IME=0 and a pending interrupt; HALT woken by the timer",
               halt_bug, kHaltExpected, frames_for(kHaltExpected, 300)});
  t.push_back({"EI_DELAY", "EI takes effect after the next instruction; EI;DI takes none", ei_delay,
               kEiExpected, frames_for(kEiExpected)});
  t.push_back({"MBC1_BANKS",
               "MBC1 ROM banks 0-8, RAM banks 0-3 in mode 1, mode 0, RAM write-protect", mbc1_banks,
               kMbc1Expected, frames_for(kMbc1Expected)});
  t.push_back({"PPU_TIMING", "VBlank and LYC interrupts read LY; LY is 0 with the LCD off",
               ppu_timing, kPpuExpected, frames_for(kPpuExpected, 5 * kCyclesPerFrame)});
}

}  // namespace gbx::test_rom_kit
