// Interrupt dispatch (Pan Docs "Interrupts"): the highest-priority pending source (lowest
// bit of IE & IF) is serviced in 5 M-cycles: two idle, push PC high, push PC low, jump.
GBX_FN u32 lowest_bit_index(u8 v) {
  return (v & 1) ? 0 : (v & 2) ? 1 : (v & 4) ? 2 : (v & 8) ? 3 : 4;
}

GBX_FN void service_events(Machine& bus);

// Which interrupt is taken is decided only after the pushes (mooneye "ie_push", the
// Cycle-Accurate Game Boy Docs): IE is sampled after the PC high byte is pushed, so a push
// that lands on IE (SP = 0x0000 -> the byte goes to 0xFFFF) can cancel the dispatch; the
// low byte's push cannot. With nothing left pending, PC becomes 0x0000 and IF is untouched.
#if GBX_CORE_SPLIT
GBX_FN void service_events(Core& c) {
  service_events(core_spill(c));
  core_reload(c);
}
#endif

GBX_FN void interrupt_dispatch(Cpu& cpu, Core& bus) {
  cpu.ime = 0;
  idle(bus);
  idle_idu(bus, cpu.sp);  // the first SP decrement, as in a push (OAM corruption bug)
  wr(bus, --cpu.sp, (u8)(cpu.pc >> 8));
  const u8 ie = bus.ie;
  wr(bus, --cpu.sp, (u8)cpu.pc);
  if (bus.cycles >= bus.next_event) service_events(bus);  // requests raised meanwhile count
  const u8 pending = (u8)(ie & bus.iflag & 0x1F);
  if (pending) {
    const u32 bit = lowest_bit_index(pending);
    bus.iflag &= (u8) ~(1u << bit);
    cpu.pc = (u16)(0x40u + 8u * bit);
  } else {
    cpu.pc = 0x0000;
  }
  idle(bus);
}

// The buttons held change at `at` (a frame start of the step: press or release).
GBX_FN void joyp_event_service(Machine& bus) {
  joyp_update(bus, *io_reg(bus, 0xFF00), 0);
  bus.joyp_event = GBX_NEVER;
}

// Everything scheduled for a cycle at or before now: the start of an OAM DMA (first, so that
// what the PPU does from that cycle on sees its bytes), timer reloads, PPU interrupts, the end
// of a serial transfer, the release of the buttons.
GBX_FN void service_events(Machine& bus) {
  if (bus.dma_pending) dma_settle(bus, bus.cycles);
  if (bus.cycles >= bus.timer_event) {
    timer_sync(bus, bus.cycles);
    timer_schedule(bus);
  }
  ppu_service(bus, bus.cycles);
  serial_service(bus, bus.cycles);
  if (bus.cycles >= bus.joyp_event) joyp_event_service(bus);
  events_reschedule(bus);
}

// STOP mode (DMG): the system clock stops, so the 16-bit system counter (DIV, the timer, the
// APU's length clock) is reset and held at 0 until the CPU wakes (Pan Docs "Using the STOP
// Instruction", "FF04 - DIV"; SameBoy sm83_cpu.c enter_stop_mode). Held here as: no timer
// event while stopped, and the counter's epoch moved to the wake-up cycle (stop_leave) or, at
// a step's end, to that cycle (timer_hold_stopped), so nothing counts across the sleep.
GBX_FN void stop_enter(Machine& bus) {
  apu_div_reset(bus, io_time(bus));
  timer_write_div(bus, io_time(bus));
  GBX_COLD(bus, apu_synced) = io_time(bus);
  bus.run_state = GBX_RUN_STOPPED;
  timer_schedule(bus);
  events_reschedule(bus);
}

// The counter still reads 0 at `now` (the CPU is in STOP mode): nothing has counted since.
GBX_FN void timer_hold_stopped(Machine& bus, i64 now) {
  GBX_COLD(bus, div_epoch) = now;
  if (GBX_COLD(bus, timer_synced) < now) GBX_COLD(bus, timer_synced) = now;
  GBX_COLD(bus, apu_synced) = now;
}

// STOP ends when one of P10-P13 is low (Pan Docs: "STOP is terminated by one of the P10 to
// P13 lines going low"), i.e. a button is held whose row P1 selects; the counter starts again
// from 0.
GBX_FN void stop_leave(Machine& bus) {
  timer_hold_stopped(bus, bus.cycles);
  bus.run_state = GBX_RUN_ACTIVE;
  timer_schedule(bus);
  events_reschedule(bus);
}

#if GBX_CORE_SPLIT
GBX_FN void stop_enter(Core& c) {
  stop_enter(core_spill(c));
  core_reload(c);
}
GBX_FN void stop_leave(Core& c) {
  stop_leave(core_spill(c));
  core_reload(c);
}
#endif
