// I/O registers 0xFF00-0xFF7F and IE (Pan Docs "Memory Map", "I/O Ranges"). Registers with
// side effects are dispatched here; the rest are plain bytes in the env's I/O page.
GBX_FN void events_reschedule(Machine& b) {
  i64 next = b.timer_event < b.ppu_event ? b.timer_event : b.ppu_event;
  next = GBX_COLD(b, serial_event) < next ? GBX_COLD(b, serial_event) : next;
  next = b.joyp_event < next ? b.joyp_event : next;
  // An OAM DMA in its set-up lands its bytes when it starts (hw/bus.h dma_settle), an event
  // like the others: a halted CPU makes no access that would land them, but the PPU reads OAM.
  if (b.dma_pending && b.dma_end - 640 < next) next = b.dma_end - 640;
#if GBX_DEVICE_CPU
  next = b.step_end < next ? b.step_end : next;
#endif
  b.next_event = next;
  fast_until_update(b);
}

// Bits that read as 1 whatever was written (unused bits, write-only registers, unmapped
// registers); measured on mGBA, matching Pan Docs' register descriptions.
GBX_FN u8 io_read_mask(u32 addr) {
  const u32 r = addr & 0xFFu;
  switch (r) {
    case 0x02:
      return 0x7E;
    case 0x07:
      return 0xF8;
    case 0x0F:
      return 0xE0;
    case 0x10:
      return 0x80;
    case 0x11:
    case 0x16:
      return 0x3F;
    case 0x13:
    case 0x18:
    case 0x1B:
    case 0x1D:
    case 0x20:
      return 0xFF;
    case 0x14:
    case 0x19:
    case 0x1E:
    case 0x23:
      return 0xBF;
    case 0x1A:
      return 0x7F;
    case 0x1C:
      return 0x9F;
    case 0x26:
      return 0x70;
    case 0x41:
      return 0x80;
    case 0x03:
    case 0x15:
    case 0x1F:
      return 0xFF;
    default:
      if ((r >= 0x08 && r <= 0x0E) || (r >= 0x27 && r <= 0x2F) || (r >= 0x4C && r <= 0x7F))
        return 0xFF;
      return 0x00;
  }
}

// The input lines P10-P13 pulled low (active-high here): the held buttons of the rows P1's
// select bits (4: P14 directions, 5: P15 buttons, 0 = selected) connect to them.
GBX_FN u8 joyp_lines_low(u8 p1, u8 buttons) {
  u8 pressed = 0;
  if (!(p1 & 0x10)) pressed |= (u8)(buttons >> 4);    // P14: directions
  if (!(p1 & 0x20)) pressed |= (u8)(buttons & 0x0F);  // P15: buttons
  return pressed;
}

GBX_FN u8 joyp_read(Machine& b) {
  const u8 sel = *io_reg(b, 0xFF00) & 0x30;
  return (u8)(0xC0 | sel | (~joyp_lines_low(sel, b.joyp_buttons) & 0x0F));
}

// Pan Docs "Joypad Input", "INT $60": the joypad interrupt is requested when one of the
// input lines P10-P13 goes from high to low, i.e. a selected button is pressed or a select
// bit exposes a button already held. Both the select write and the buttons changing (at a
// frame start of the step) are such moments.
GBX_FN void joyp_update(Machine& b, u8 select_byte, u8 buttons) {
  const u8 before = joyp_read(b);
  *io_reg(b, 0xFF00) = (u8)(0xC0 | (select_byte & 0x30) | 0x0F);
  b.joyp_buttons = buttons;
  if (before & ~joyp_read(b) & 0x0F) irq_request(b, 0x10);
}

// APU without sound (Pan Docs "Audio Registers", "Audio Details"; gbdev wiki "Gameboy sound
// hardware"): registers read back through their masks; NR52 bits 0-3 say which channels are
// on. A trigger (NRx4 bit 7) with the DAC on turns a channel on; its DAC off (NRx2 & 0xF8 == 0,
// NR30 bit 7 == 0) turns it off; with length enabled (NRx4 bit 6) the length counter (64 -
// NRx1 & 63, or 256 - NR31) counts down and turns the channel off at 0.
//
// Frame sequencer: a 3-bit step counter clocked at 512 Hz by the falling edge of bit 12 of
// the system counter (DIV bit 4), i.e. every 8192 T-cycles; steps 0, 2, 4, 6 clock the length
// counters, steps 2 and 6 the CH1 sweep, step 7 the envelopes (not modelled: no output).
// Nothing ticks per cycle: apu_sync counts the edges since apu_synced from div_epoch. Edge k
// (the counter reaching k * 8192 since div_epoch) runs step (k + offset) & 7; the offset
// (GBX_APU_FS) makes the step after a power-on step 0 and keeps the count through DIV resets.
// Not modelled: envelopes, the noise channel's LFSR, any output.
#define GBX_APU_FS_SHIFT 13
#define GBX_APU_FREQ 4    // apu_length_of()[4]: CH1 frequency as written to NR13/NR14 (11 bits)
#define GBX_APU_SHADOW 5  // [5]: CH1 sweep shadow frequency
#define GBX_APU_SWEEP 6   // [6]: bits 0-3 sweep timer (1-8), bit 4 enabled, bit 5 negate used
#define GBX_APU_FS 7      // [7]: frame-sequencer step offset (bits 0-2)
#define GBX_APU_SWEEP_ON 0x10u
#define GBX_APU_SWEEP_NEG_USED 0x20u
#define GBX_APU_CH3_FREQ 8   // [8]: CH3 frequency as written to NR33/NR34 (11 bits)
#define GBX_APU_CH3_POS 9    // [9]: the sample index (0-31) CH3's next fetch reads
#define GBX_APU_CH3_GAP 10   // [10]: T-cycles from its last fetch to the next (0: none yet)
#define GBX_APU_CH3_NEXT 12  // [12-15]: cycle of CH3's next fetch (i64, low halfword first)

GBX_FN u32 apu_nrx4(u32 ch) { return 0xFF14u + 5u * ch; }

// The sequencer edge count at `t`, plus the offset: its low 3 bits are the last step run.
GBX_FN i64 apu_fs_count(Machine& b, i64 t) {
  return ((t - GBX_COLD(b, div_epoch)) >> GBX_APU_FS_SHIFT) + (apu_length_of(b)[GBX_APU_FS] & 7);
}

// gbdev "Gameboy sound hardware", Frequency Sweep: the new frequency is the shadow frequency
// plus or minus (NR10 bit 3) itself shifted right by NR10 bits 0-2; over 2047 turns CH1 off.
GBX_FN u32 apu_sweep_calc(Machine& b) {
  u16* st = apu_length_of(b);
  const u8 nr10 = *io_reg(b, 0xFF10);
  const u32 shadow = st[GBX_APU_SHADOW], delta = shadow >> (nr10 & 7);
  u32 f = shadow + delta;
  if (nr10 & 0x08) {
    f = shadow - delta;
    st[GBX_APU_SWEEP] |= GBX_APU_SWEEP_NEG_USED;
  }
  if (f > 2047) *io_reg(b, 0xFF26) &= (u8)~1u;
  return f;
}

// One sweep clock (frame-sequencer steps 2 and 6). The timer treats a period of 0 as 8; at 0
// it reloads and, enabled with a nonzero period, computes a frequency: one <= 2047 with a
// nonzero shift is written to the shadow and NR13/NR14, then computed again for the overflow
// check only (gbdev "Gameboy sound hardware").
GBX_FN void apu_sweep_clock(Machine& b) {
  u16* st = apu_length_of(b);
  const u32 period = (*io_reg(b, 0xFF10) >> 4) & 7;
  u32 timer = st[GBX_APU_SWEEP] & 15u;
  timer = timer > 1 ? timer - 1 : 0;
  if (timer == 0) {
    timer = period ? period : 8;
    if ((st[GBX_APU_SWEEP] & GBX_APU_SWEEP_ON) && period) {
      const u32 f = apu_sweep_calc(b);
      if (f <= 2047 && (*io_reg(b, 0xFF10) & 7)) {
        st[GBX_APU_SHADOW] = (u16)f;
        st[GBX_APU_FREQ] = (u16)f;
        apu_sweep_calc(b);
      }
    }
  }
  st[GBX_APU_SWEEP] = (u16)((st[GBX_APU_SWEEP] & ~15u) | timer);
}

// n length clocks.
GBX_FN void apu_length_clocks(Machine& b, i64 n) {
  u8* nr52 = io_reg(b, 0xFF26);
  for (u32 ch = 0; ch < 4; ++ch) {
    if (!(*io_reg(b, apu_nrx4(ch)) & 0x40) || apu_length_of(b)[ch] == 0) continue;
    if ((i64)apu_length_of(b)[ch] <= n) {
      apu_length_of(b)[ch] = 0;
      *nr52 &= (u8) ~(1u << ch);
    } else {
      apu_length_of(b)[ch] = (u16)(apu_length_of(b)[ch] - n);
    }
  }
}

GBX_FN void apu_sync(Machine& b, i64 now) {
  // Never backwards: an epilog reads NR52 at io_time, 3 T before the cycle the step's end
  // synced to (GPU kernels keep apu_synced in the state array, so it would stick).
  if (now <= GBX_COLD(b, apu_synced)) return;
  const i64 from = apu_fs_count(b, GBX_COLD(b, apu_synced)), to = apu_fs_count(b, now);
  GBX_COLD(b, apu_synced) = now;
  if (to <= from || !(*io_reg(b, 0xFF26) & 0x80)) return;
  // Steps 2 and 6 (count = 2 mod 4) clock the sweep, even steps the length counters; a sweep
  // step is also a length step, and the two only ever turn channels off, so the length
  // counters take their clocks in one go after the sweep.
  if ((*io_reg(b, 0xFF26) & 1) && (apu_length_of(b)[GBX_APU_SWEEP] & GBX_APU_SWEEP_ON)) {
    for (i64 k = ((from + 2) >> 2) + 1; k <= ((to + 2) >> 2); ++k) {
      apu_sweep_clock(b);
      if (!(*io_reg(b, 0xFF26) & 1)) break;
    }
  }
  apu_length_clocks(b, (to >> 1) - (from >> 1));
}

// DIV reset (a DIV write, STOP): the system counter restarts at 0. Bit 12 going from 1 to 0 is
// a sequencer edge; the step count carries on from where it was.
GBX_FN void apu_div_reset(Machine& b, i64 now) {
  apu_sync(b, now);
  const bool edge = (((now - GBX_COLD(b, div_epoch)) >> 12) & 1) != 0;
  const i64 count = apu_fs_count(b, now);
  u16* st = apu_length_of(b);
  st[GBX_APU_FS] = (u16)(count & 7);  // the new epoch starts at the same step
  GBX_COLD(b, apu_synced) = now;
  if (edge && (*io_reg(b, 0xFF26) & 0x80)) {
    const u32 step = (u32)(count + 1) & 7;
    st[GBX_APU_FS] = (u16)step;
    if (step == 2 || step == 6) {
      if ((*io_reg(b, 0xFF26) & 1) && (st[GBX_APU_SWEEP] & GBX_APU_SWEEP_ON)) apu_sweep_clock(b);
    }
    if (!(step & 1)) apu_length_clocks(b, 1);
  }
}

// Channel 3 (wave) position, DMG. While CH3 plays its frequency timer counts 2048 - freq
// ticks of 2 T-cycles; at each expiry it reloads from the frequency then in effect (a write
// to NR33/NR34 does not restart a running period), advances the sample index (0-31, two
// 4-bit samples a wave RAM byte) and reads the byte holding the new sample. A trigger resets
// the index to 0 and the first fetch (index 1, byte 0) comes 3 ticks after a full period
// (SameBoy apu.c: sample_countdown = (sample_length ^ 0x7FF) + 3 on NR34 trigger; the
// countdown reloaded with sample_length ^ 0x7FF after each read; gbdev wiki "Gameboy sound
// hardware", Trigger Event: the wave channel's position is set to 0, the sample buffer is not
// refilled). blargg's dmg_sound 09/10/12 scan this 2 T-cycles at a time: a trigger commit at
// t puts the first fetch at t + 6 + 2 * (2048 - freq).
//
// Nothing ticks per cycle: the next fetch's cycle and index are stored (GBX_APU_CH3_*), and
// apu_ch3_sync counts the periods elapsed when something needs the position (a wave RAM
// access, a frequency write, a trigger), so a ROM that never touches CH3 pays nothing.
GBX_FN i64 apu_ch3_next(const u16* st) {
  const u16* w = st + GBX_APU_CH3_NEXT;
  return (i64)((u64)w[0] | ((u64)w[1] << 16) | ((u64)w[2] << 32) | ((u64)w[3] << 48));
}

GBX_FN void apu_ch3_set_next(u16* st, i64 t) {
  u16* w = st + GBX_APU_CH3_NEXT;
  for (u32 i = 0; i < 4; ++i) w[i] = (u16)((u64)t >> (16 * i));
}

GBX_FN i64 apu_ch3_period(const u16* st) {
  return 2 * (2048 - (i64)(st[GBX_APU_CH3_FREQ] & 0x7FFu));
}

// Runs CH3's fetches due at or before `now` (the channel on): afterwards the next fetch is
// after `now`, GBX_APU_CH3_GAP before it the last one.
GBX_FN void apu_ch3_sync(Machine& b, i64 now) {
  u16* st = apu_length_of(b);
  const i64 next = apu_ch3_next(st);
  if (next > now) return;
  const i64 period = apu_ch3_period(st);
  const i64 more = (now - next) / period;  // fetches after `next` up to `now`
  st[GBX_APU_CH3_POS] = (u16)((st[GBX_APU_CH3_POS] + more + 1) & 31);
  st[GBX_APU_CH3_GAP] = (u16)period;
  apu_ch3_set_next(st, next + (more + 1) * period);
}

// The wave RAM byte (0-15) CH3 reads on the cycle `now`, or -1 when it reads none then (the
// channel on). Pan Docs "Audio Registers", FF30-FF3F: while CH3 is active the byte accessed
// is the one CH3 is currently reading, whatever the address; on monochrome consoles only on
// the same cycle CH3 reads it, otherwise reads return $FF and writes are ignored. SameBoy
// apu.c (GB_apu_read/GB_apu_write) keeps wave_form_just_read set for the one 2 MHz tick
// (2 T-cycles) after a fetch; blargg's 09 (reads) and 12 (writes) pass with exactly that
// window.
GBX_FN i32 apu_ch3_byte_read_at(Machine& b, i64 now) {
  apu_ch3_sync(b, now);
  const u16* st = apu_length_of(b);
  const i64 gap = st[GBX_APU_CH3_GAP];
  if (gap == 0 || now - (apu_ch3_next(st) - gap) >= 2) return -1;
  return (i32)(((st[GBX_APU_CH3_POS] - 1u) & 31u) >> 1);
}

// DMG wave RAM corruption on a CH3 trigger while it plays (Pan Docs "Audio Details",
// Obscure behavior; gbdev wiki "Gameboy sound hardware", Obscure Behavior: "Triggering the
// wave channel on the DMG while it reads a sample byte will alter the first four bytes of
// wave RAM"): if the trigger comes the tick before a fetch (SameBoy apu.c NR34:
// is_active && sample_countdown == 0), the byte that fetch would read (offset o) is copied
// to byte 0 when o < 4, else the 4-byte block holding it goes over bytes 0-3. blargg's
// dmg_sound 10 passes with this window and no other.
GBX_FN void apu_ch3_trigger(Machine& b, i64 now, bool playing) {
  u16* st = apu_length_of(b);
  if (playing) {
    apu_ch3_sync(b, now);
    if (apu_ch3_next(st) - now <= 2) {
      const u32 o = (st[GBX_APU_CH3_POS] & 31u) >> 1;
      if (o < 4) {
        *io_reg(b, 0xFF30) = *io_reg(b, 0xFF30 + o);
      } else {
        for (u32 i = 0; i < 4; ++i) *io_reg(b, 0xFF30 + i) = *io_reg(b, 0xFF30 + (o & ~3u) + i);
      }
    }
  }
  st[GBX_APU_CH3_POS] = 1;  // the index is 0; the first fetch advances it to 1
  st[GBX_APU_CH3_GAP] = 0;
  apu_ch3_set_next(st, now + 6 + apu_ch3_period(st));
}

GBX_FN bool apu_dac_on(Machine& b, u32 ch) {
  if (ch == 2) return (*io_reg(b, 0xFF1A) & 0x80) != 0;
  return (*io_reg(b, 0xFF12 + 5u * ch) & 0xF8) != 0;
}

// True when the sequencer's next step does not clock the length counters (an odd step).
GBX_FN bool apu_next_step_skips_length(Machine& b, i64 now) {
  return ((apu_fs_count(b, now) + 1) & 1) != 0;
}

GBX_FN void apu_write(Machine& b, u32 addr, u8 v) {
  const i64 now = io_time(b);
  apu_sync(b, now);
  u8* nr52 = io_reg(b, 0xFF26);
  u16* st = apu_length_of(b);
  if (addr == 0xFF26) {
    if (!(v & 0x80)) {
      // Power off clears every sound register (wave RAM and, on DMG, the length counters keep
      // their values).
      for (u32 r = 0xFF10; r < 0xFF26; ++r) *io_reg(b, r) = io_read_mask(r);
      *nr52 = 0x70;
      st[GBX_APU_FREQ] = 0;
      st[GBX_APU_SHADOW] = 0;
      st[GBX_APU_SWEEP] = 0;
      st[GBX_APU_CH3_FREQ] = 0;
    } else {
      if (!(*nr52 & 0x80)) {
        // Power on resets the frame sequencer: the next step is step 0.
        const i64 edges = (now - GBX_COLD(b, div_epoch)) >> GBX_APU_FS_SHIFT;
        st[GBX_APU_FS] = (u16)((7 - edges) & 7);
      }
      *nr52 = (u8)(0xF0 | (*nr52 & 0x0F));
    }
    return;
  }
  const bool length_reg = addr == 0xFF11 || addr == 0xFF16 || addr == 0xFF1B || addr == 0xFF20;
  const u32 ch = addr == 0xFF1B ? 2u : (addr - 0xFF10u) / 5u;
  if (addr < 0xFF30) {
    if (length_reg) st[ch] = (u16)(ch == 2 ? 256 - v : 64 - (v & 0x3F));
    // Powered off, only the length counters take writes (DMG).
    if (!(*nr52 & 0x80)) return;
  }
  if (addr >= 0xFF30) {
    // Wave RAM while CH3 plays: only on the cycle CH3 reads a byte, and to that byte.
    if (*nr52 & 4) {
      const i32 at = apu_ch3_byte_read_at(b, now);
      if (at >= 0) *io_reg(b, 0xFF30 + (u32)at) = v;
      return;
    }
    *io_reg(b, addr) = v;
    return;
  }
  // CH3's frequency: a running period ends at the old one, so the fetches before run first.
  if (addr == 0xFF1D || addr == 0xFF1E) {
    if (*nr52 & 4) apu_ch3_sync(b, now);
    const u32 f = st[GBX_APU_CH3_FREQ];
    st[GBX_APU_CH3_FREQ] = (u16)(addr == 0xFF1D ? (f & 0x700u) | v : (f & 0xFFu) | ((v & 7u) << 8));
  }
  const u8 old = *io_reg(b, addr);
  *io_reg(b, addr) = (u8)(v | io_read_mask(addr));
  if (addr > 0xFF23) return;
  const u32 reg = addr == 0xFF1A ? 0u : addr - 0xFF10u - 5u * ch;
  if (addr == 0xFF10) {
    // Clearing negate after a calculation used it since the trigger turns CH1 off.
    if ((old & 0x08) && !(v & 0x08) && (st[GBX_APU_SWEEP] & GBX_APU_SWEEP_NEG_USED))
      *nr52 &= (u8)~1u;
    return;
  }
  if (addr == 0xFF13) st[GBX_APU_FREQ] = (u16)((st[GBX_APU_FREQ] & 0x700u) | v);
  if (addr == 0xFF14) st[GBX_APU_FREQ] = (u16)((st[GBX_APU_FREQ] & 0xFFu) | ((v & 7u) << 8));
  if (reg == 4) {
    const u16 full = (u16)(ch == 2 ? 256 : 64);
    const bool skip = apu_next_step_skips_length(b, now);
    // Enabling length when the next step does not clock it clocks it once now; reaching 0
    // without a trigger turns the channel off (gbdev "Gameboy sound hardware", Obscure
    // Behavior).
    if (skip && !(old & 0x40) && (v & 0x40) && st[ch] != 0) {
      st[ch] = (u16)(st[ch] - 1);
      if (st[ch] == 0 && !(v & 0x80)) *nr52 &= (u8) ~(1u << ch);
    }
    if (v & 0x80) {  // trigger
      if (ch == 2) apu_ch3_trigger(b, now, (*nr52 & 4) != 0);
      // A zero length reloads to 64 (256), minus the one clock above in that case.
      if (st[ch] == 0) st[ch] = (u16)(skip && (v & 0x40) ? full - 1 : full);
      if (apu_dac_on(b, ch)) *nr52 |= (u8)(1u << ch);
      if (ch == 0) {
        // Sweep on trigger: shadow = frequency, timer reloaded (0 -> 8), enabled if period or
        // shift is nonzero, and with a nonzero shift an immediate overflow check.
        const u8 nr10 = *io_reg(b, 0xFF10);
        const u32 period = (nr10 >> 4) & 7;
        st[GBX_APU_SHADOW] = st[GBX_APU_FREQ];
        st[GBX_APU_SWEEP] = (u16)((period ? period : 8) | ((nr10 & 0x77) ? GBX_APU_SWEEP_ON : 0));
        if (nr10 & 7) apu_sweep_calc(b);
      }
    }
  }
  if (!apu_dac_on(b, ch)) *nr52 &= (u8) ~(1u << ch);
}

GBX_FN u8 apu_read(Machine& b, u32 addr) {
  if (addr == 0xFF26) apu_sync(b, io_time(b));
  if (addr >= 0xFF30 && (*io_reg(b, 0xFF26) & 4)) {
    // Wave RAM while CH3 plays (the length counter may have stopped it by now): the byte CH3
    // reads on this cycle, 0xFF on any other.
    const i64 now = io_time(b);
    apu_sync(b, now);
    if (*io_reg(b, 0xFF26) & 4) {
      const i32 at = apu_ch3_byte_read_at(b, now);
      return at >= 0 ? *io_reg(b, 0xFF30 + (u32)at) : (u8)0xFF;
    }
  }
  return *io_reg(b, addr);
}

GBX_FN void service_events(Machine& bus);

// Interrupt requests due at or before `now` (timer reload, PPU, serial) are applied before
// IF is read or written inside an instruction.
GBX_FN void events_catch_up(Machine& b, i64 now) {
  timer_sync(b, now);
  ppu_service(b, now);
  serial_service(b, now);
}

GBX_NOINLINE u8 io_read(Machine& b, u32 addr) {
  switch (addr) {
    case 0xFF00:
      return joyp_read(b);
    case 0xFF04:
      return timer_read_div(b);
    case 0xFF05:
      timer_sync(b, io_time(b));
      return *io_reg(b, addr);
    case 0xFF0F:
      events_catch_up(b, io_time(b));
      return (u8)(0xE0 | b.iflag);
    // STAT and LY: functions of the clock and the PPU registers, with no side effect, which
    // the wait-loop skip relies on (kernel/step.tmpl wait_loop_skip computes polls of them).
    case 0xFF41:
      return ppu_stat(b);
    case 0xFF44:
      return ppu_ly(b);
    case 0xFFFF:
      return b.ie;
    default:
      if (addr - 0xFF10u < 0x30u) return apu_read(b, addr);
      return *io_reg(b, addr);
  }
}

GBX_NOINLINE void io_write(Machine& b, u32 addr, u8 v);

GBX_FN void oam_dma(Machine& b, u8 page);

GBX_NOINLINE void io_write(Machine& b, u32 addr, u8 v) {
  const i64 now = io_time(b);
#if GBX_PPU_FIFO && GBX_RENDER
  if (addr - 0xFF40u < 0x0Cu) lcd_fifo_before_reg_write(b, addr, v);  // hw/ppu_fifo.h
#else
  if (addr - 0xFF40u < 0x0Cu) lcd_before_write(b);
#endif
  switch (addr) {
    case 0xFF00:
      joyp_update(b, v, b.joyp_buttons);
      return;
    case 0xFF02:
      serial_write_sc(b, v);
      events_reschedule(b);
      return;
    case 0xFF04:
      apu_div_reset(b, now);  // the frame sequencer follows the system counter being reset
      serial_div_reset(b, now);
      timer_write_div(b, now);
      break;
    case 0xFF05:
      timer_write_tima(b, now, v);
      break;
    case 0xFF06:
      timer_write_tma(b, now, v);
      break;
    case 0xFF07:
      timer_write_tac(b, now, v);
      break;
    case 0xFF0F:
      events_catch_up(b, now);
      b.iflag = v & 0x1F;
      break;
    case 0xFF40:
      ppu_service(b, now);  // interrupts due before this write happen first
      ppu_write_lcdc(b, v);
      lcd_lcdc_written(b);
      break;
    case 0xFF41:
      ppu_write_stat(b, v);
      break;
    case 0xFF44:
      return;  // LY is read-only
    case 0xFF43:
    case 0xFF45:
    case 0xFF4A:
    case 0xFF4B:
      ppu_write_timing_reg(b, addr, v);
      break;
    case 0xFF46:
      *io_reg(b, addr) = v;
      oam_dma(b, v);
      ppu_schedule(b, now);  // OAM decides future lines' mode 3 length
      break;
    case 0xFFFF:
      b.ie = v;
      fast_until_update(b);
      return;
    default:
      if (addr - 0xFF10u < 0x30u) {
        apu_write(b, addr, v);
        return;
      }
      *io_reg(b, addr) = (u8)(v | io_read_mask(addr));
      return;
  }
  timer_schedule(b);
  events_reschedule(b);
}
