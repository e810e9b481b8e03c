// Interrupt dispatch (Pan Docs "Interrupts"): the highest-priority pending source (lowest
// bit of IE & IF) is serviced in 5 M-cycles: two idle, push PC, jump to 0x40 + 8 * bit.
GBX_FN u32 lowest_bit_index(u8 v) {
  return (v & 1) ? 0 : (v & 2) ? 1 : (v & 4) ? 2 : (v & 8) ? 3 : 4;
}

GBX_FN void interrupt_dispatch(Cpu& cpu, Bus& bus, u8 pending) {
  cpu.ime = 0;
  idle(bus);
  idle(bus);
  push16(cpu, bus, cpu.pc);
  const u32 bit = lowest_bit_index(pending);
  bus.iflag &= (u8)~(1u << bit);
  cpu.pc = (u16)(0x40u + 8u * bit);
  idle(bus);
}

// Everything scheduled for a cycle at or before now: timer overflows, PPU interrupts, the end
// of a serial transfer.
GBX_FN void service_events(Bus& bus) {
  if (bus.cycles >= bus.timer_event) {
    timer_sync(bus, bus.cycles);
    timer_schedule(bus);
  }
  ppu_service(bus, bus.cycles);
  serial_service(bus, bus.cycles);
  events_reschedule(bus);
}

// STOP mode (DMG): DIV is reset; the CPU sleeps until a button is pressed.
GBX_FN void stop_enter(Bus& bus) {
  timer_write_div(bus, io_time(bus));
  timer_schedule(bus);
  events_reschedule(bus);
  bus.run_state = GBX_RUN_STOPPED;
}
