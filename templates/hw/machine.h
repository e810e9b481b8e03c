// Per-env machine state while an env runs: loaded from the SoA state on entry, stored back on
// exit. The CPU registers live in Cpu (sm83/cpu.h); everything the bus touches lives here.
#define GBX_NEVER 0x7fffffffffffffffLL
// A time long past: "no reload happened recently" (differences with it cannot overflow).
#define GBX_NEVER_PAST (-(1LL << 62))
#define GBX_FRAME_CYCLES 70224

struct Machine {
  i64 cycles;      // T-cycles since reset; every bus access charges 4 before it happens
  i64 next_event;  // earliest cycle at which service_events() must run
  u8* GBX_RESTRICT mem;  // this env's writable memory (layout in gbx_abi.h)
  const u8* GBX_RESTRICT rom;
  const u8* rom0;  // 0x0000-0x3FFF window (MBC1 mode 1 can bank it)
  const u8* romx;  // 0x4000-0x7FFF window
  u32 rom_size;
  u32 mbc;
  u32 cart_ram_size;
  u32 cart_ram_offset;  // offset of the selected RAM bank inside cartridge RAM
  u8 ie;
  u8 iflag;
  u8 mbc_rom_bank;
  u8 mbc_ram_bank;
  u8 mbc_ram_enable;
  u8 mbc_mode;
  u8 run_state;
  u8 joyp_buttons;  // active-high: bit0 A, 1 B, 2 Select, 3 Start, 4 Right, 5 Left, 6 Up, 7 Down
  i64 div_epoch;     // cycle at which the 16-bit system counter was 0
  i64 timer_synced;  // TIMA is up to date at this cycle
  i64 timer_event;   // cycle at which the next TIMA overflow becomes visible in IF
  i64 ppu_epoch;     // cycle at which the PPU was at line 0, dot 0
  i64 ppu_event;     // cycle of the next VBlank / STAT interrupt
  i64 serial_event;  // cycle at which the serial transfer in progress completes
  i64 dma_end;       // the OAM DMA in progress owns its bus until this cycle
  u8* GBX_RESTRICT serial_buf;
  u32 serial_len;
  i64 tima_reload;   // cycle of the last TIMA reload from TMA, or of the pending one
  i64 joyp_event;    // cycle at which the step's buttons are released (release_after_frames)
  i64 apu_synced;    // APU length counters are up to date at this cycle
  u16* apu_length;   // 4 length counters (ch1-ch4), counting down at 256 Hz
  u8* GBX_RESTRICT rtc;    // MBC3 clock: S M H DL DH counting, then the latched copies
  i64 rtc_second_start;    // cycle at which the clock's current second began
  u8 mbc_rom_bank_hi;      // MBC5 ROM bank bit 8
  u8 mbc_rtc_latch;        // MBC3: last byte written to 6000-7FFF
  // Scanline renderer (hw/lcd.h), used only by kernels that draw.
  i64 lcd_next;      // cycle of the next line end or VBlank the renderer has to process
  i64 lcd_step_end;  // this step's target cycle (run mode frames)
  i64 lcd_period;    // cycles from one step end to the next; 0: every frame is drawn
  u8* GBX_RESTRICT lcd_fb;  // the env's two framebuffers
  u8 lcd_flags;             // GBX_LCD_FLAG_*
  u8 lcd_win_line;          // window line counter
};

GBX_FN u8* io_reg(Machine& b, u32 addr) { return b.mem + GBX_MEM_IO + (addr & 0xFFu); }

// When the current memory access happens: 1 T-cycle into its M-cycle (the bus helpers have
// already charged the whole M-cycle). I/O side effects are timed from here.
GBX_FN i64 io_time(const Machine& b) { return b.cycles - 3; }
