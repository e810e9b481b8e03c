// Per-env machine state while an env runs: loaded from the SoA state on entry, stored back on
// exit. The CPU registers live in Cpu (sm83/cpu.h); everything the bus touches lives here.
#define GBX_NEVER 0x7fffffffffffffffLL
// A time long past: "no reload happened recently" (differences with it cannot overflow).
#define GBX_NEVER_PAST (-(1LL << 62))
#define GBX_FRAME_CYCLES 70224

// The hot part of the machine: what every M-cycle touches (the cycle counter, the next event,
// the ROM windows, the memory base, IE/IF). On a GPU the step and the CPU helpers work on a
// Core, a local whose address is never taken, so NVRTC/ptxas keep it in registers. The
// Machine behind it is what the out-of-line slow paths take by reference (which puts it in
// local memory); it holds the current values only across a slow-path call: core_spill()
// before, core_reload() after. On the CPU the Machine itself is the core (GBX_CORE_SPLIT 0):
// x86-64 has too few registers for both the Cpu and a Core, and a separate Core measured
// ~20% slower on ALU_LOOP (README "Hot fields").
// Specialized blocks (kernel/spec_bus.h) and the profile counter take the Machine itself, so
// those kernels keep it whole.
#if GBX_DEVICE_CUDA && !GBX_SPECIALIZED && !GBX_PROFILE
#define GBX_CORE_SPLIT 1
#else
#define GBX_CORE_SPLIT 0
#endif

// GBX_CORE_SPLIT also decides where the cold fields live. A GPU keeps the Machine in local
// memory (the slow paths take it by reference), so every field is stack frame; there the
// fields only the slow paths touch (timer/PPU/serial/APU/RTC epochs, serial length, per-env
// buffers) stay in the state arrays and are read and written there through `p` and `env`
// (global memory, as local memory is, and coalesced the same way), and the launch constants
// (ROM, its size, the controller kind, cartridge RAM size) are read from the kernel
// parameters (__grid_constant__: no copy). On the CPU they are Machine fields, copied in by
// machine_load and out by the step's end, as before.
#if GBX_CORE_SPLIT
#define GBX_COLD(b, field) ((b).p->s.field[(b).env])
#define GBX_LAUNCH(b, field) ((b).p->field)
#else
#define GBX_COLD(b, field) ((b).field)
#define GBX_LAUNCH(b, field) ((b).field)
#endif

// With GBX_CORE_SPLIT the cold fields are not here (GBX_COLD, GBX_LAUNCH); the CPU's order of
// the others is the one its kernel was measured with.
struct Machine {
  i64 cycles;            // T-cycles since reset; every bus access charges 4 before it happens
  i64 next_event;        // earliest cycle at which service_events() must run
  u8* GBX_RESTRICT mem;  // this env's byte 0 of writable memory: read it through mem_at()
#if GBX_LAYOUT_INTERLEAVED
  u32 mem_pitch;  // distance between this env's consecutive bytes (GBX_MEM_PITCH)
#endif
#if !GBX_CORE_SPLIT
  const u8* GBX_RESTRICT rom;
#endif
  const u8* rom0;  // 0x0000-0x3FFF window (MBC1 mode 1 can bank it)
  const u8* romx;  // 0x4000-0x7FFF window
#if !GBX_CORE_SPLIT
  u32 rom_size;
  u32 mbc;
  u32 cart_ram_size;
#endif
  u32 cart_ram_offset;  // offset of the selected RAM bank inside cartridge RAM
#if GBX_CORE_SPLIT
  u32 env;
  const GbxParams* p;  // the launch's parameters: cold fields and launch constants
#endif
  u8 ie;
  u8 iflag;
  u8 mbc_rom_bank;
  u8 mbc_ram_bank;
  u8 mbc_ram_enable;
  u8 mbc_mode;
  u8 run_state;
  u8 joyp_buttons;  // active-high: bit0 A, 1 B, 2 Select, 3 Start, 4 Right, 5 Left, 6 Up, 7 Down
#if !GBX_CORE_SPLIT
  i64 div_epoch;     // cycle at which the 16-bit system counter was 0
  i64 timer_synced;  // TIMA is up to date at this cycle
#endif
  i64 timer_event;  // cycle at which the next TIMA overflow becomes visible in IF
#if !GBX_CORE_SPLIT
  i64 ppu_epoch;  // cycle at which the PPU was at line 0, dot 0
#endif
  i64 ppu_event;  // cycle of the next VBlank / STAT interrupt
#if !GBX_CORE_SPLIT
  i64 serial_event;  // cycle at which the serial transfer in progress completes
#endif
  i64 dma_end;  // the OAM DMA in progress owns its bus until this cycle
#if !GBX_CORE_SPLIT
  u8* GBX_RESTRICT serial_buf;
  u32 serial_len;
  i64 tima_reload;  // cycle of the last TIMA reload from TMA, or of the pending one
#endif
  i64 joyp_event;  // cycle at which the step's buttons are released (release_after_frames)
#if !GBX_CORE_SPLIT
  i64 apu_synced;        // APU length counters are up to date at this cycle
  u16* apu_length;       // GBX_APU_WORDS: 4 length counters (ch1-ch4), then CH1 sweep, CH3 state
  u8* GBX_RESTRICT rtc;  // MBC3 clock: S M H DL DH counting, then the latched copies
  i64 rtc_second_start;  // cycle at which the clock's current second began
#endif
  u8 mbc_rom_bank_hi;  // MBC5 ROM bank bit 8
  u8 mbc_rtc_latch;    // MBC3: last byte written to 6000-7FFF
#if GBX_RENDER
  // Scanline renderer (hw/lcd.h), only in kernels that draw: the struct lives in local memory
  // on a GPU (the slow paths take it by reference), so every field costs stack frame.
  i64 lcd_next;             // cycle of the next line end or VBlank the renderer has to process
  i64 lcd_step_end;         // this step's target cycle (run mode frames)
  i64 lcd_period;           // cycles from one step end to the next; 0: every frame is drawn
  u8* GBX_RESTRICT lcd_fb;  // the env's two framebuffers
  u8 lcd_flags;             // GBX_LCD_FLAG_*
  u8 lcd_win_line;          // window line counter
#if GBX_PPU_FIFO && !GBX_CORE_SPLIT
  u8* GBX_RESTRICT lcd_fifo;  // ppu=fifo: the env's LcdFifo (hw/ppu_fifo.h) in the state
#endif
#endif
  // Last, so the hot fields keep the layout the CPU kernel was measured with. OAM DMA
  // (hw/bus.h), not part of the saved state: both span the 2 set-up M-cycles after an FF46
  // write (a step's end lands the bytes; the overlap is lost if a step ends inside them).
  // Small, so that the GPU's per-env frame keeps its measured 128 B (test_cuda_compile).
  u16 dma_pending;  // FF46 + 1 of a DMA whose bytes are not in OAM yet (0: none)
  // A DMA restarted while one ran: the old one keeps the bus until this many T-cycles after
  // the FF46 write (1-8; 0: no overlap). The write was at dma_start() - 8.
  u8 dma_overlap;
#if GBX_DEVICE_CPU
  // The step's frame target, folded into next_event (events_reschedule), so the threaded
  // dispatch tests one bound per instruction instead of two (GBX_NEVER outside a step).
  i64 step_end;
  // The threaded dispatch's one bound (GBX_NEXT_OP in kernel/step.tmpl): next_event, or long
  // past while an enabled interrupt is requested and IME is set, so that each instruction
  // tests one bound instead of the bound, IME and IE & IF. Every change to any keeps it so:
  // events_reschedule and IE/IF writes set it (as if IME were set), irq_request lowers it,
  // RETI sets it, the loop top sets it again with IME. Lower than that is safe (the loop top
  // runs, and sets it).
  i64 fast_until;
  // OAM DMA: 0, or a gate from an FF46 write until the first slow access after dma_end
  // (GBX_DMA_GATE_*, hw/bus.h bus_read). OR'ed into every address, it keeps the fast path out.
  u32 dma_gate;
  // VRAM is the CPU's for every access before this cycle (hw/ppu.h ppu_vram_open): the fast
  // paths read and write it without asking the PPU. Not saved; LCDC writes close it.
  i64 vram_open;
#endif
#ifdef GBX_HOOK_COUNT
  u32* hook_hits;  // kernels with hooks: this env's GBX_HOOK_COUNT counters (GbxParams::hits)
#endif
};

// The one place that knows where byte `off` of this env's writable memory lives (gbx_abi.h
// GBX_MEM_PITCH: env-major or byte-interleaved across envs). Everything else goes through it.
GBX_FN u8& mem_at(const Machine& b, u32 off) {
#if GBX_LAYOUT_INTERLEAVED
  return b.mem[(u64)off * b.mem_pitch];
#else
  return b.mem[off];
#endif
}

GBX_FN u8* io_reg(Machine& b, u32 addr) { return &mem_at(b, GBX_MEM_IO + (addr & 0xFFu)); }

// When the current memory access happens: 1 T-cycle into its M-cycle (the bus helpers have
// already charged the whole M-cycle). I/O side effects are timed from here.
GBX_FN i64 io_time(const Machine& b) { return b.cycles - 3; }

// OAM DMA gates (Machine::dma_gate, hw/bus.h bus_read; cpu only): OR'ed into an address,
// they take it above 0xFFFF, out of every fast window; HRAM's window looks at the low 16 bits
// only, so the first one leaves HRAM open (no DMA can block it, and once the bytes have landed
// an access there has nothing left to trigger). The second also sets the low 7 bits, which
// takes every address out of HRAM's window too: FF00-FF7F become FF7F, FF80-FFFF become FFFF.
// It was 0x10080, added: that moved HRAM out but FF00-FF7E into the window, so an I/O read in
// the DMA's two set-up M-cycles (LDH A,(C) from HRAM right after the FF46 write) read the
// register's stored byte, not the register (LY read 0, mGBA 80: test_hw_quirks "OAM DMA
// set-up").
#define GBX_DMA_GATE_EXT 0x10000u
#define GBX_DMA_GATE_ALL 0x1007Fu
GBX_FN void dma_gate_update(Machine& b) {
#if GBX_DEVICE_CPU
  b.dma_gate = io_time(b) >= b.dma_end ? 0u : b.dma_pending ? GBX_DMA_GATE_ALL : GBX_DMA_GATE_EXT;
#else
  (void)b;
#endif
}
// The threaded dispatch's bound from the next event, IME and IE & IF (Machine::fast_until;
// cpu): with IME clear, a pending request does not stop the threaded dispatch.
GBX_FN void fast_until_set(Machine& b, u32 ime) {
#if GBX_DEVICE_CPU
  b.fast_until = ime && (b.ie & b.iflag & 0x1F) ? GBX_NEVER_PAST : b.next_event;
#else
  (void)b;
  (void)ime;
#endif
}
// Where IME is not known (a Machine-level change of IE, IF or the next event), as if it were
// set: a pending request lowers the bound, and the loop top sets it again with IME.
GBX_FN void fast_until_update(Machine& b) { fast_until_set(b, 1); }
// An interrupt request (IF bits), raised by the timer, the PPU, serial or the joypad.
GBX_FN void irq_request(Machine& b, u32 bits) {
  b.iflag |= (u8)bits;
#if GBX_DEVICE_CPU
  if (b.ie & bits & 0x1F) b.fast_until = GBX_NEVER_PAST;
#endif
}

// This env's buffers in the state arrays (see GBX_COLD).
#if GBX_CORE_SPLIT
GBX_FN u8* serial_buf_of(const Machine& b) {
  return b.p->s.serial_buf + (u64)b.env * GBX_SERIAL_CAPACITY;
}
GBX_FN u16* apu_length_of(const Machine& b) {
  return b.p->s.apu_length + GBX_APU_WORDS * (u64)b.env;
}
GBX_FN u8* rtc_of(const Machine& b) { return b.p->s.rtc_regs + (u64)b.env * GBX_RTC_BYTES; }
#else
GBX_FN u8* serial_buf_of(const Machine& b) { return b.serial_buf; }
GBX_FN u16* apu_length_of(const Machine& b) { return b.apu_length; }
GBX_FN u8* rtc_of(const Machine& b) { return b.rtc; }
#endif

#if GBX_CORE_SPLIT
struct Core {
  i64 cycles;
  i64 next_event;
  i64 dma_end;
  u8* GBX_RESTRICT mem;
#if GBX_LAYOUT_INTERLEAVED
  u32 mem_pitch;
#endif
  const u8* rom0;
  const u8* romx;
  u8 ie;
  u8 iflag;
  u8 run_state;
  u8 joyp_buttons;
  Machine* m;
};

GBX_FN void core_reload(Core& c) {
  const Machine& m = *c.m;
  c.cycles = m.cycles;
  c.next_event = m.next_event;
  c.dma_end = m.dma_end;
  c.rom0 = m.rom0;
  c.romx = m.romx;
  c.ie = m.ie;
  c.iflag = m.iflag;
  c.run_state = m.run_state;
  c.joyp_buttons = m.joyp_buttons;
}

GBX_FN Machine& core_spill(const Core& c) {
  Machine& m = *c.m;
  m.cycles = c.cycles;
  m.next_event = c.next_event;
  m.dma_end = c.dma_end;
  m.rom0 = c.rom0;
  m.romx = c.romx;
  m.ie = c.ie;
  m.iflag = c.iflag;
  m.run_state = c.run_state;
  m.joyp_buttons = c.joyp_buttons;
  return m;
}

GBX_FN Core core_of(Machine& m) {
  Core c;
  c.m = &m;
  c.mem = m.mem;
#if GBX_LAYOUT_INTERLEAVED
  c.mem_pitch = m.mem_pitch;
#endif
  core_reload(c);
  return c;
}

GBX_FN u8& mem_at(const Core& c, u32 off) {
#if GBX_LAYOUT_INTERLEAVED
  return c.mem[(u64)off * c.mem_pitch];
#else
  return c.mem[off];
#endif
}

GBX_FN i64 io_time(const Core& c) { return c.cycles - 3; }
// Declares `name`, the core of Machine `machine`, for the rest of the scope.
#define GBX_CORE_OF(name, machine) Core name = core_of(machine)
#else
typedef Machine Core;
GBX_FN void core_reload(Core& c) { (void)c; }
GBX_FN Machine& core_spill(Core& c) { return c; }
#define GBX_CORE_OF(name, machine) Machine& name = (machine)
#endif
