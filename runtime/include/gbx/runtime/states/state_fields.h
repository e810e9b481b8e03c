#pragma once
// Every GbxState array (templates/abi/gbx_abi.h): name and bytes per env, in declaration order,
// one per line. Allocation, binding, device mirrors and save states iterate over this list, so
// a new state field is added here and in gbx_abi.h, nowhere else.
// clang-format off
#define GBX_STATE_FIELDS(X)            \
  X(pc, 2)                             \
  X(sp, 2)                             \
  X(a, 1)                              \
  X(f, 1)                              \
  X(b, 1)                              \
  X(c, 1)                              \
  X(d, 1)                              \
  X(e, 1)                              \
  X(h, 1)                              \
  X(l, 1)                              \
  X(ime, 1)                            \
  X(ei_delay, 1)                       \
  X(run_state, 1)                      \
  X(halt_bug, 1)                       \
  X(cycle_count, 8)                    \
  X(instr_count, 8)                    \
  X(cycle_in_frame, 4)                 \
  X(div_epoch, 8)                      \
  X(timer_synced, 8)                   \
  X(ppu_epoch, 8)                      \
  X(serial_event, 8)                   \
  X(dma_end, 8)                        \
  X(mbc_rom_bank, 1)                   \
  X(mbc_ram_bank, 1)                   \
  X(mbc_ram_enable, 1)                 \
  X(mbc_mode, 1)                       \
  X(serial_buf, GBX_SERIAL_CAPACITY)   \
  X(serial_len, 4)                     \
  X(trap_kind, 1)                      \
  X(trap_pc, 2)                        \
  X(trap_opcode, 1)                    \
  X(tima_reload, 8)                    \
  X(apu_synced, 8)                     \
  X(apu_length, 2 * GBX_APU_WORDS)     \
  X(joyp_held, 1)                      \
  X(user_prev, 4 * GBX_USER_TRACK_MAX) \
  X(user_prev_valid, 1)                \
  X(mbc_rom_bank_hi, 1)                \
  X(mbc_rtc_latch, 1)                  \
  X(rtc_regs, GBX_RTC_BYTES)           \
  X(rtc_second_start, 8)               \
  X(lcd_fb, 2 * GBX_FRAMEBUFFER_BYTES) \
  X(lcd_flags, 1)                      \
  X(lcd_win_line, 1)                   \
  X(lcd_fifo, GBX_LCD_FIFO_BYTES)      \
  X(dma_pending, 2)                    \
  X(dma_overlap, 1)
// clang-format on
