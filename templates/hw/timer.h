// DIV/TIMA/TMA/TAC (Pan Docs "Timer and Divider Registers", "Timer obscure behaviour").
// Caught up lazily: on an access to a timer register, and at the next reload event. Never
// ticked per M-cycle.
//
// The 16-bit system counter is cycles - div_epoch; DIV is its high byte. TIMA counts falling
// edges of one counter bit (TAC bits 0-1 select bit 9, 3, 5 or 7) ANDed with the enable bit,
// i.e. crossings of multiples of 2^(bit+1) while enabled.
//
// Overflow (Pan Docs "Timer overflow behavior"): when TIMA overflows at edge E it reads 00
// for one M-cycle [E, E+4); at E+4 TMA is copied into TIMA and IF bit 2 is set. A TIMA write
// inside [E, E+4) cancels both; in the reload M-cycle [E+4, E+8) a TIMA write is ignored and
// a TMA write is copied into TIMA too. tima_reload is the cycle of the last (or pending)
// reload: pending while tima_reload > timer_synced.
GBX_FN u32 timer_shift(u8 tac) {
  const u8 bit = (tac & 3) == 0 ? 9 : (tac & 3) == 1 ? 3 : (tac & 3) == 2 ? 5 : 7;
  return bit + 1;
}

GBX_FN bool timer_reload_pending(const Machine& b) {
  return GBX_COLD(b, tima_reload) > GBX_COLD(b, timer_synced);
}

// The pending reload, if it is due by `now`.
GBX_FN void timer_apply_reload(Machine& b, i64 now) {
  if (timer_reload_pending(b) && GBX_COLD(b, tima_reload) <= now) {
    *io_reg(b, 0xFF05) = *io_reg(b, 0xFF06);
    irq_request(b, 0x04);
  }
}

// n >= 1 increments, the last of them at cycle `last_edge`, edges `period` T apart (>= 16,
// so no edge falls inside a reload window). No reload is pending.
GBX_FN void timer_count(Machine& b, i64 n, i64 last_edge, i64 period, i64 now) {
  u8* tima = io_reg(b, 0xFF05);
  const i64 rem = 256 - (i64)*tima;
  if (n < rem) {
    *tima = (u8)(*tima + n);
    return;
  }
  // Overflows at increments rem, rem + per, rem + 2 per, ... (per = 256 - TMA); the last
  // one decides whether its reload is still pending.
  const i64 per = 256 - (i64)*io_reg(b, 0xFF06);
  // (Mostly one overflow: an event serviced at its reload. No 64-bit division then.)
  const i64 later = n - rem < per ? 0 : ((n - rem) / per) * per;
  const i64 last_overflow = rem + later;  // 1-based increment index
  const i64 overflow_at = last_edge - (n - last_overflow) * period;
  GBX_COLD(b, tima_reload) = overflow_at + 4;
  if (last_overflow > rem) irq_request(b, 0x04);  // earlier overflows have reloaded already
  if (GBX_COLD(b, tima_reload) > now) {
    *tima = 0;
  } else {
    irq_request(b, 0x04);
    *tima = (u8)(*io_reg(b, 0xFF06) + (n - last_overflow));
  }
}

GBX_FN void timer_sync(Machine& b, i64 now) {
  if (now <= GBX_COLD(b, timer_synced)) return;
  timer_apply_reload(b, now);
  const u8 tac = *io_reg(b, 0xFF07);
  if (tac & 4) {
    const u32 s = timer_shift(tac);
    const i64 j1 = (now - GBX_COLD(b, div_epoch)) >> s;
    const i64 n = j1 - ((GBX_COLD(b, timer_synced) - GBX_COLD(b, div_epoch)) >> s);
    if (n > 0) {
      GBX_COLD(b, timer_synced) = now;  // the reload applied above is no longer pending
      timer_count(b, n, GBX_COLD(b, div_epoch) + (j1 << s), (i64)1 << s, now);
      return;
    }
  }
  GBX_COLD(b, timer_synced) = now;
}

// One increment at cycle `at` (a DIV or TAC write's falling edge); timer synced to `at`.
GBX_FN void timer_tick_at(Machine& b, i64 at) { timer_count(b, 1, at, 16, at); }

// When the next reload (IF bit 2) happens: the pending one, or the next overflow's.
GBX_FN void timer_schedule(Machine& b) {
  if (timer_reload_pending(b)) {
    b.timer_event = GBX_COLD(b, tima_reload);
    return;
  }
  const u8 tac = *io_reg(b, 0xFF07);
  if (!(tac & 4) || b.run_state == GBX_RUN_STOPPED) {  // STOP holds the counter (interrupts.h)
    b.timer_event = GBX_NEVER;
    return;
  }
  const u32 s = timer_shift(tac);
  const i64 sc = GBX_COLD(b, timer_synced) - GBX_COLD(b, div_epoch);
  const i64 rem = 256 - (i64)*io_reg(b, 0xFF05);
  b.timer_event = GBX_COLD(b, div_epoch) + (((sc >> s) + rem) << s) + 4;
}

GBX_FN u8 timer_read_div(Machine& b) { return (u8)((io_time(b) - GBX_COLD(b, div_epoch)) >> 8); }

// The multiplexer output TIMA counts falling edges of: the selected counter bit AND enable.
GBX_FN bool timer_signal(const Machine& b, u8 tac, i64 at) {
  return (tac & 4) && (((at - GBX_COLD(b, div_epoch)) >> (timer_shift(tac) - 1)) & 1);
}

// The counter restarts from the first dot of the write's M-cycle (`now`, io_time, is its
// second), so its M-cycle count steps on the CPU's M-cycle edges as the hand-over's does
// (kDivCounterAtReset puts it on the M-cycle grid): GateBoy (aappleby/metroboy LogicBoy.cpp)
// clears reg_div, a count of M-cycles, during the write and increments it on the HA clock
// edge, so the falling edges TIMA counts, and its overflows, fall on M-cycle edges there too.
GBX_FN void timer_write_div(Machine& b, i64 now) {
  timer_sync(b, now);
  // Resetting the counter while the selected bit is 1 is a falling edge: TIMA ticks.
  const bool edge = timer_signal(b, *io_reg(b, 0xFF07), now);
  GBX_COLD(b, div_epoch) = now - 1;
  if (edge) timer_tick_at(b, now - 1);
}

// Pan Docs "Timer obscure behaviour" (DMG): a TAC write that takes the multiplexer output
// from 1 to 0 (disabling, or selecting a bit that is 0) is a falling edge: TIMA ticks. The
// tick counts at the first dot of the write's M-cycle, as a DIV write's (timer_write_div), so
// an overflow it causes reloads and requests the interrupt at the end of the writing M-cycle
// (GateBoy: MOBA_TIMER_OVERFLOWp rises on the next HA edge): mooneye rapid_toggle (verified
// on DMG/MGB/SGB/SGB2/CGB/AGB) takes that interrupt before the next instruction (BC = FFD9).
GBX_FN void timer_write_tac(Machine& b, i64 now, u8 v) {
  timer_sync(b, now);
  const u8 old = *io_reg(b, 0xFF07);
  const u8 tac = (u8)(0xF8 | v);
  *io_reg(b, 0xFF07) = tac;
  if (timer_signal(b, old, now) && !timer_signal(b, tac, now)) timer_count(b, 1, now - 1, 16, now);
}

GBX_FN void timer_write_tima(Machine& b, i64 now, u8 v) {
  timer_sync(b, now);
  if (timer_reload_pending(b)) {
    GBX_COLD(b, tima_reload) = GBX_NEVER_PAST;  // written in the 00 cycle: no reload, no interrupt
  } else if (now - GBX_COLD(b, tima_reload) < 4) {
    return;  // the reload cycle: TMA wins
  }
  *io_reg(b, 0xFF05) = v;
}

GBX_FN void timer_write_tma(Machine& b, i64 now, u8 v) {
  timer_sync(b, now);
  *io_reg(b, 0xFF06) = v;
  if (!timer_reload_pending(b) && now - GBX_COLD(b, tima_reload) < 4) *io_reg(b, 0xFF05) = v;
}
