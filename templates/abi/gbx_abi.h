// GBX state ABI: shared verbatim by the host runtime and every generated kernel.
// Structure of arrays over envs. Changing anything here means bumping GBX_ABI_VERSION,
// which is part of every kernel cache key.
#ifndef GBX_ABI_H
#define GBX_ABI_H

#define GBX_ABI_VERSION 13
// Save states of every ABI from this one up read as this one. v7 added GbxParams::spec_retired
// and v8 put env_frames in the reserved joyp_select slot (launch parameters); v9 widened
// apu_length to GBX_APU_WORDS halfwords per env (CH1 sweep and frame-sequencer state), v10 to
// 16 (CH3 frequency and position), and v11 added lcd_fifo (the pixel FIFO's state), a record
// older states lack, so older states do not load; v11 also added GbxParams::hits (hooks; a
// launch parameter). v12 put part_begin and part_end in the reserved slots (launch
// parameters; states unchanged). v13 added dma_pending and dma_overlap (an OAM DMA in its
// set-up across a step's end) and lcd_flags bits 3-4 (a state without its screen); a v11/v12
// state lacks the DMA fields and loads with no DMA in set-up,
// which is what those kernels left at every step's end.
#define GBX_ABI_STATE_COMPAT_MIN 11

// Per-env writable memory (memory model dmg): only the regions a cartridge cannot supply.
#define GBX_MEM_VRAM 0x0000u  // 0x8000-0x9FFF
#define GBX_MEM_WRAM 0x2000u  // 0xC000-0xDFFF (echo at 0xE000-0xFDFF)
#define GBX_MEM_OAM 0x4000u   // 0xFE00-0xFEFF
#define GBX_MEM_IO 0x4100u    // 0xFF00-0xFFFF: I/O, HRAM, IE
#define GBX_MEM_CART_RAM 0x4200u
#define GBX_MEM_FIXED_SIZE 0x4200u
// Kernels whose expressions use seen() keep each env's key set in its writable memory after
// cartridge RAM, at align64(GBX_MEM_FIXED_SIZE + cart RAM size) (flat64k: GBX_MEM_FLAT_SIZE):
// templates/epilogs/user_expr.tmpl. Other kernels' memory has no such bytes.
// Memory model flat64k: 64 KiB of plain RAM per env, no I/O.
#define GBX_MEM_FLAT_SIZE 0x10000u
// Where byte i of env e's writable memory lives in GbxParams.mem (synthesis parameter layout;
// the kernel's mem_at() and the host's StateLayout::mem_offset() are the two readers):
//   env_major:   e * mem_stride + i            (mem_stride: bytes per env)
//   interleaved: i * mem_stride + e            (mem_stride: GBX_MEM_PITCH(num_envs))
// Interleaved puts the same byte of neighbouring envs side by side, so a warp whose 32
// threads touch the same address reads one 32-byte sector instead of 32.
#define GBX_MEM_PITCH(num_envs) ((((unsigned)(num_envs)) + 31u) & ~31u)

#define GBX_SERIAL_CAPACITY 1024u
// Framebuffer: 160x144 shade indices (0-3) at 2 bits a pixel, 40 bytes a row, leftmost pixel
// in the high bits of a byte; two of them per env (front = last complete frame, back).
#define GBX_SCREEN_W 160
#define GBX_SCREEN_H 144
#define GBX_FRAMEBUFFER_BYTES 5760u
// ppu=fifo: the pixel FIFO's per-env state (templates/hw/ppu_fifo.h LcdFifo); unused (zero) by
// the line renderer.
#define GBX_LCD_FIFO_BYTES 24u

// Values a user reward/done expression may compare with their previous step (prev(i)).
#define GBX_USER_TRACK_MAX 8u

// Cartridge controller kinds (from the header's cartridge type byte).
#define GBX_MBC_NONE 0
#define GBX_MBC_1 1
#define GBX_MBC_2 2
#define GBX_MBC_3 3
#define GBX_MBC_3_RTC 4  // MBC3 with the real-time clock
#define GBX_MBC_5 5
#define GBX_MBC_5_RUMBLE 6  // RAM bank bit 3 drives the motor, not the RAM
#define GBX_MBC_1M 7        // MBC1 multicart: BANK1 bit 4 is not wired to the ROM

// MBC3 real-time clock: 5 counting registers (S M H DL DH), then the 5 latched copies.
#define GBX_RTC_BYTES 10
// apu_length halfwords per env (state_fields.h: 2 * this many bytes)
#define GBX_APU_WORDS 16u
#define GBX_RTC_CYCLES_PER_SECOND 4194304LL

// Trap kinds: an env that traps stops running; the others go on.
#define GBX_TRAP_NONE 0
#define GBX_TRAP_ILLEGAL_OPCODE 1
#define GBX_TRAP_LD_B_B 2  // debug option ldbb_trap: LD B,B reached (test-ROM convention)

// CPU run state.
#define GBX_RUN_ACTIVE 0
#define GBX_RUN_HALTED 1
#define GBX_RUN_STOPPED 2

typedef struct GbxState {
  unsigned short* pc;
  unsigned short* sp;
  unsigned char* a;
  unsigned char* f;
  unsigned char* b;
  unsigned char* c;
  unsigned char* d;
  unsigned char* e;
  unsigned char* h;
  unsigned char* l;
  unsigned char* ime;
  unsigned char* ei_delay;      // 1: IME becomes 1 after the next instruction
  unsigned char* run_state;     // GBX_RUN_*
  unsigned char* halt_bug;      // 1: the next opcode fetch does not advance PC
  long long* cycle_count;       // T-cycles since reset
  long long* instr_count;       // instructions retired since reset
  int* cycle_in_frame;          // T-cycles into the current frame (overshoot carried)
  long long* div_epoch;         // cycle_count at which the 16-bit system counter was 0
  long long* timer_synced;      // cycle_count up to which TIMA has been advanced
  long long* ppu_epoch;         // cycle_count at which the PPU was at line 0, dot 0
  long long* serial_event;      // cycle_count at which the serial transfer completes, or max
  long long* dma_end;           // cycle_count at which the OAM DMA in progress ends
  unsigned char* mbc_rom_bank;  // MBC1 BANK1 register (5 bits)
  unsigned char* mbc_ram_bank;  // MBC1 BANK2 register (2 bits)
  unsigned char* mbc_ram_enable;
  unsigned char* mbc_mode;
  unsigned char* serial_buf;  // GBX_SERIAL_CAPACITY bytes per env, env-major
  unsigned int* serial_len;   // bytes captured (may exceed capacity: extra bytes dropped)
  unsigned char* trap_kind;
  unsigned short* trap_pc;
  unsigned char* trap_opcode;
  long long* tima_reload;          // cycle of the last TIMA reload from TMA, or the pending one
  long long* apu_synced;           // cycle up to which the APU length counters have counted
  unsigned short* apu_length;      // 16 per env: length counters of channels 1-4, then APU state
                                   // (GBX_APU_* in templates/hw/io.h: CH1 frequency, sweep,
                                   // sequencer offset, CH3 frequency and position)
  unsigned char* joyp_held;        // buttons held at the end of the last step (edge detection)
  float* user_prev;                // GBX_USER_TRACK_MAX per env: tracked values at the last step
  unsigned char* user_prev_valid;  // 0 after reset: the next epilog takes prev = current
  unsigned char* mbc_rom_bank_hi;  // MBC5 ROM bank bit 8
  unsigned char* mbc_rtc_latch;    // MBC3: last value written to 6000-7FFF (latch on 00 -> 01)
  unsigned char* rtc_regs;         // GBX_RTC_BYTES per env (MBC3 clock), env-major
  long long* rtc_second_start;     // cycle_count at which the clock's current second began
  unsigned char* lcd_fb;           // GBX_FRAMEBUFFER_BYTES * 2 per env: front and back framebuffer
  unsigned char* lcd_flags;        // bit 0: front buffer index, bit 1: window WY matched,
                                   // bit 2: first frame after LCD on (not shown), bit 3: the
                                   // front buffer is not the screen (a kernel that draws
                                   // nothing ran), bit 4: the back buffer misses lines
                                   // (templates/hw/lcd.h GBX_LCD_FLAG_*)
  unsigned char* lcd_win_line;     // window internal line counter
  unsigned char* lcd_fifo;         // GBX_LCD_FIFO_BYTES per env: the pixel FIFO (ppu=fifo)
  // An OAM DMA written to FF46 whose bytes have not landed (its 2 set-up M-cycles, hw/bus.h):
  unsigned short* dma_pending;  // FF46 + 1 of that DMA (0: none); dma_end - 640 is its start
  unsigned char* dma_overlap;   // T-cycles the DMA it restarted keeps the bus (0-8)
} GbxState;

typedef struct GbxParams {
  GbxState s;
  const unsigned char* rom;  // shared by all envs, read-only
  unsigned int rom_size;     // bytes, a power of two >= 32 KiB (dmg) or 0 (flat64k)
  unsigned int mbc;          // GBX_MBC_*
  unsigned char* mem;        // per-env writable memory (layout: GBX_MEM_PITCH above)
  unsigned int mem_stride;   // env_major: bytes per env; interleaved: envs padded (pitch)
  unsigned int cart_ram_size;
  int num_envs;
  int frames;              // run mode frames: frames per step
  long long instr_budget;  // run mode instructions: instructions per step
  const int* actions;      // reserved: one int32 per env
  // One int32 per env, or null (every env runs `frames`): env i runs env_frames[i] frames
  // (0: only the stage epilog, which refreshes its outputs from the current state; < 0: the
  // env is not touched). Per-env no-op frames after resets and output refreshes run in one
  // launch this way (python/gbx/vec_env.py).
  const int* env_frames;
  const int* release_after_frames;  // one int32 per env: release after N frames (< 0: never)
  float* obs;                       // obs_dim floats per env
  float* reward;                    // one float per env
  int obs_dim;
  // A step in parts (cpu backend, several threads: the pool's end-of-step wait is then a
  // part, not a whole env step): run frames [part_begin, part_end) of the `frames` (or
  // env_frames[i]) frame step. part_end 0: the whole step. The kernel composes the parts
  // into exactly the step (kernel/step.tmpl).
  int part_begin;
  // Typed outputs beside obs and reward. Backends point all of them into one block so a
  // step's outputs for every env come back in one copy (README "Kernel outputs").
  unsigned char* pixels;               // obs kind pixels: bytes per env by obs format
  unsigned char* done;                 // one byte per env (user done expression)
  unsigned char* gather;               // gather_count bytes per env: mem[gather_addrs[i]]
  const unsigned short* gather_addrs;  // bus addresses read by the RAM-gather epilog
  int gather_count;
  int part_end;
  unsigned int* profile_counts;  // profiling kernels: instructions executed per ROM offset
  // Specialized kernels add, per env, the instructions retired inside specialized blocks (a
  // diagnostic, not machine state: tests prove with it that the blocks ran). Null: not counted.
  long long* spec_retired;
  // Kernels with hooks (GBX_HOOK_COUNT, SynthParams::hooks): per env, that many u32 counts of
  // instruction fetches at each hook address during the last step (zeroed at its start).
  unsigned int* hits;
} GbxParams;

#endif
