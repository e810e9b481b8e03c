// The one bus: every address the CPU reads or writes goes through bus_read / bus_write, so
// the per-env memory layout is defined here alone. Memory model dmg: ROM shared by all envs,
// per-env writable regions (gbx_abi.h). Memory model flat64k: 64 KiB of plain RAM.
#if GBX_MEMORY_MODEL_FLAT64K
GBX_FN u8 bus_read(Core& c, u32 addr) { return mem_at(c, addr & 0xFFFFu); }
GBX_FN void bus_write(Core& c, u32 addr, u8 v) { mem_at(c, addr & 0xFFFFu) = v; }
GBX_FN void oam_dma(Machine& b, u8 page) {
  (void)b;
  (void)page;
}
GBX_FN void dma_settle(Machine& b, i64 now) {
  (void)b;
  (void)now;
}
GBX_FN u8 view_read(Machine& b, u32 addr) { return mem_at(b, addr & 0xFFFFu); }
// No PPU, so no OAM scan to disturb (the OAM corruption bug below).
GBX_FN void oam_bug_idu(Machine& b) { (void)b; }
GBX_FN void oam_bug_read_idu(Machine& b) { (void)b; }
#else
// OAM DMA bus conflicts (Pan Docs "OAM DMA Transfer"): for 160 M-cycles the DMA owns the bus
// its source is on (external: ROM, cartridge RAM, WRAM; or VRAM), and OAM. A CPU read on the
// DMA's bus gets the byte the DMA is moving in that M-cycle (the bus holds it); OAM reads
// give 0xFF; writes there are lost. So code must run from HRAM meanwhile.
GBX_FN u32 dma_bus_of(u32 addr) { return (addr - 0x8000u < 0x2000u) ? 1u : 0u; }

GBX_FN i64 dma_start(const Machine& b) { return b.dma_end - 640; }

// The bytes of a DMA written to FF46 land in OAM when it starts, whoever notices first that
// `now` has reached the start: a bus access (dma_blocks) or the event (service_events) that a
// halted CPU wakes for. The screen up to the start is drawn with the old bytes either way, so
// the result does not depend on which it was, nor on where steps end. The source cannot
// change in between (its bus is the DMA's from the start, and the set-up is 2 M-cycles).
GBX_FN u8 bus_read_dma(Machine& b, u32 addr);

GBX_NOINLINE void dma_settle(Machine& b, i64 now) {
  if (!b.dma_pending || now < dma_start(b)) return;
  const u32 src = (b.dma_pending - 1u) << 8;
  b.dma_pending = 0;
  lcd_catch_up(b, dma_start(b));
  if (src - 0xC000u <= 0x1F00u) {
    // WRAM, the usual source (a shadow OAM): a plain copy, not 160 decoded reads (the copy
    // was ~2.7% of game_loop's specialized run, one DMA a frame).
    const u32 from = GBX_MEM_WRAM + (src - 0xC000u);
    for (u32 i = 0; i < 160u; ++i) mem_at(b, GBX_MEM_OAM + i) = mem_at(b, from + i);
  } else {
    for (u32 i = 0; i < 160u; ++i)
      mem_at(b, GBX_MEM_OAM + i) = bus_read_dma(b, (src + i) & 0xFFFFu);
  }
  ppu_schedule(b, io_time(b));  // objects decide the mode 3 length of lines to come
  events_reschedule(b);
}

// Restarted while one runs, the old DMA keeps the bus through the new one's set-up M-cycles
// (mooneye oam_dma_start, verified on DMG/MGB/SGB/SGB2/CGB/AGB: "when OAM DMA is restarted
// while a previous one is running, the previous one is not immediately stopped").
GBX_NOINLINE bool dma_blocks(Machine& b, u32 addr) {
  dma_settle(b, io_time(b));
  if (io_time(b) < dma_start(b) && io_time(b) - (dma_start(b) - 8) >= (i64)b.dma_overlap)
    return false;  // not yet
  if (addr >= 0xFF00u) return false;
  if (addr >= 0xFE00u) return true;
  return dma_bus_of(addr) == dma_bus_of((u32)*io_reg(b, 0xFF46) << 8);
}

// What a blocked read returns: on the DMA's source bus, the byte being copied now (already
// in OAM, which the CPU cannot change meanwhile); OAM itself reads 0xFF.
GBX_NOINLINE u8 dma_conflict_read(Machine& b, u32 addr) {
  if (addr - 0xFE00u < 0x100u) return 0xFF;
  const i64 i = (io_time(b) - dma_start(b)) >> 2;  // < 0: the restarted DMA's set-up
  return mem_at(b, GBX_MEM_OAM + (u32)(i < 0 ? 0 : i < 160 ? i : 159));
}

// OAM corruption bug (DMG only; Pan Docs "OAM Corruption Bug", gbdev.io/pandocs/
// OAM_Corruption_Bug.html). In mode 2 the PPU reads OAM one 8-byte row per M-cycle, rows 0-19
// in order. When the CPU puts an OAM address (FE00-FEFF, the unusable FEA0-FEFF included) on
// the address bus in that M-cycle, the row being read is rewritten from the row before it:
// by a read or write the CPU makes (OAM is locked, the read gives 0xFF, the write is lost),
// and by the 16-bit increment/decrement unit (IDU), which drives the address bus with the
// register's old value even where nothing is read or written (INC rr, DEC rr, the SP
// decrement of PUSH / CALL / RST / interrupt dispatch, the HL step of LD A,[HL+/-]).
// Row 0 (objects 0 and 1) is never changed. The formulas are Pan Docs'; SameBoy (Core/
// memory.c GB_trigger_oam_bug / GB_trigger_oam_bug_read / GB_trigger_oam_bug_read_increase)
// applies them the same way, byte by byte (every operation is bitwise, so bytes = words).
//
// The row read in the M-cycle of cycle `at` (1-19), or 0 where the bug cannot happen: LCD
// off, VBlank, the first line after the LCD is switched on (no OAM scan), mode 3 and later,
// row 0. SameBoy (Core/display.c) steps its row every 4 dots of mode 2, from 2 dots in;
// GBX_OAM_BUG_DOT_SHIFT places the steps on this model's dots, where blargg oam_bug
// 4-scanline_timing and 5-timing_bug (DMG-verified) put them.
#define GBX_OAM_BUG_DOT_SHIFT 4
GBX_FN u32 oam_bug_row(Machine& b, i64 at) {
  if (!ppu_lcd_on(b) || ppu_first_line(b, at)) return 0;
  const i64 pos = ppu_pos(b, at);
  const i64 dot = pos % GBX_LINE_DOTS;
  if (pos >= 144 * GBX_LINE_DOTS || dot >= GBX_MODE2_DOTS) return 0;
  const u32 row = (u32)((dot + GBX_OAM_BUG_DOT_SHIFT) >> 2);
  return row < 20u ? row : 0u;
}

// OAM is about to change under the PPU: the renderer draws the lines before now with the old
// bytes; objects decide the mode 3 length of lines to come (as an OAM write, bus_write_slow).
GBX_FN void oam_bug_before(Machine& b) {
  lcd_before_write(b);
  ppu_service(b, io_time(b));
}
GBX_FN void oam_bug_after(Machine& b) {
  if (*io_reg(b, 0xFF41) & 0x08) {
    ppu_schedule(b, io_time(b));
    events_reschedule(b);
  }
}

GBX_FN u8& oam_byte(Machine& b, u32 row, u32 i) { return mem_at(b, GBX_MEM_OAM + 8u * row + i); }

// Write corruption (a CPU write, or the IDU): in row r, word 0 becomes ((a ^ c) & (b ^ c)) ^ c
// with a = its own word 0, b = word 0 and c = word 2 of row r-1; words 1-3 are copied from
// row r-1.
GBX_FN void oam_bug_write_row(Machine& b, u32 r) {
  for (u32 i = 0; i < 2u; ++i) {
    const u8 x = oam_byte(b, r, i), y = oam_byte(b, r - 1, i), z = oam_byte(b, r - 1, 4 + i);
    oam_byte(b, r, i) = (u8)(((x ^ z) & (y ^ z)) ^ z);
  }
  for (u32 i = 2; i < 8u; ++i) oam_byte(b, r, i) = oam_byte(b, r - 1, i);
}

// Read corruption (a CPU read): as a write, with b | (a & c). The result also lands in word 0
// of row r-1: Pan Docs does not say so, SameBoy's GB_trigger_oam_bug_read does (in every
// version); blargg's ROMs pass either way.
GBX_FN void oam_bug_read_row(Machine& b, u32 r) {
  for (u32 i = 0; i < 2u; ++i) {
    const u8 x = oam_byte(b, r, i), y = oam_byte(b, r - 1, i), z = oam_byte(b, r - 1, 4 + i);
    oam_byte(b, r, i) = oam_byte(b, r - 1, i) = (u8)(y | (x & z));
  }
  for (u32 i = 2; i < 8u; ++i) oam_byte(b, r, i) = oam_byte(b, r - 1, i);
}

// Read during increase/decrease (LD A,[HL+/-], POP's first read): a read and an IDU write in
// one M-cycle. Unless r is one of rows 0-3 or the last row (19), word 0 of row r-1 becomes
// (b & (a | c | d)) | (a & c & d) with a = word 0 of row r-2, b = word 0 of row r-1, c = word 0
// of row r, d = word 2 of row r-1, and row r-1 is then copied to rows r and r-2. The read's own
// corruption follows (bus_read_slow).
GBX_FN void oam_bug_read_idu_row(Machine& b, u32 r) {
  if (r < 4u || r >= 19u) return;
  for (u32 i = 0; i < 2u; ++i) {
    const u8 w = oam_byte(b, r - 2, i), x = oam_byte(b, r - 1, i), y = oam_byte(b, r, i);
    const u8 z = oam_byte(b, r - 1, 4 + i);
    oam_byte(b, r - 1, i) = (u8)((x & (w | y | z)) | (w & y & z));
  }
  for (u32 i = 0; i < 8u; ++i) oam_byte(b, r, i) = oam_byte(b, r - 2, i) = oam_byte(b, r - 1, i);
}

// The IDU drove an OAM address in the M-cycle just charged (callers check the address).
GBX_NOINLINE void oam_bug_idu(Machine& b) {
  const u32 r = oam_bug_row(b, io_time(b));
  if (!r) return;
  oam_bug_before(b);
  oam_bug_write_row(b, r);
  oam_bug_after(b);
}
GBX_NOINLINE void oam_bug_read_idu(Machine& b) {
  const u32 r = oam_bug_row(b, io_time(b));
  if (!r) return;
  oam_bug_before(b);
  oam_bug_read_idu_row(b, r);
  oam_bug_after(b);
}

// The reads the fast path takes (ROM, WRAM, HRAM): false for any other address.
GBX_FN bool bus_read_window(const Core& c, u32 addr, u8& v) {
  if (addr < 0x4000u) {
    v = c.rom0[addr];
  } else if (addr < 0x8000u) {
    v = c.romx[addr - 0x4000u];
  } else if (addr - 0xC000u < 0x2000u) {
    v = mem_at(c, GBX_MEM_WRAM + (addr - 0xC000u));
  } else if (addr - 0xFF80u < 0x7Fu) {
    v = mem_at(c, GBX_MEM_IO + (addr & 0xFFu));  // HRAM
  } else {
    return false;
  }
  return true;
}

#if GBX_DEVICE_CPU
// The OAM DMA check of an access the gate sent to the slow path (bus_read): true if the DMA
// blocks it. Moves the gate: HRAM opens once the DMA's bytes have landed, all of it after
// dma_end.
GBX_FN bool dma_gate_blocks(Machine& b, u32 addr) {
  if (io_time(b) >= b.dma_end) {
    b.dma_gate = 0;
    return false;
  }
  const bool blocked = dma_blocks(b, addr);  // may land the DMA's bytes
  if (!b.dma_pending) b.dma_gate = GBX_DMA_GATE_EXT;
  return blocked;
}
#endif

// The writes the fast path takes (WRAM, HRAM): false for any other address.
GBX_FN bool bus_write_window(Core& c, u32 addr, u8 v) {
  if (addr - 0xC000u < 0x2000u) {
    mem_at(c, GBX_MEM_WRAM + (addr - 0xC000u)) = v;
    return true;
  }
  if (addr - 0xFF80u < 0x7Fu) {
    mem_at(c, GBX_MEM_IO + (addr & 0xFFu)) = v;
    return true;
  }
  return false;
}

GBX_NOINLINE u8 bus_read_slow(Machine& b, u32 addr) {
#if GBX_DEVICE_CPU
  // The OAM DMA check the fast path leaves here (every access while the gate is closed),
  // then the fast path's own windows.
  if (dma_gate_blocks(b, addr)) return dma_conflict_read(b, addr);
  u8 v;
  if (bus_read_window(b, addr, v)) return v;
#endif
  if (addr < 0xA000u)
    return ppu_vram_open(b) || !ppu_vram_locked(b) ? mem_at(b, GBX_MEM_VRAM + (addr - 0x8000u))
                                                   : (u8)0xFF;
  if (addr < 0xC000u) return cart_ram_read(b, addr);
  if (addr < 0xFE00u) return mem_at(b, GBX_MEM_WRAM + ((addr - 0xC000u) & 0x1FFFu));  // echo
  if (addr < 0xFF00u) {
    if (!ppu_oam_locked(b)) return mem_at(b, GBX_MEM_OAM + (addr - 0xFE00u));
    const u32 r = oam_bug_row(b, io_time(b));
    if (r) {
      oam_bug_before(b);
      oam_bug_read_row(b, r);
      oam_bug_after(b);
    }
    return 0xFF;
  }
  return io_read(b, addr);
}

// The fast paths work on the Core; the slow ones get the Machine, synced around the call.
//
// OAM DMA on the cpu: a gate, not a clock test. While a DMA may own a bus, accesses must take
// the slow path, which checks the clock against dma_end (as the GPU's fast path below does in
// every access). The FF46 write closes the gate (Machine::dma_gate, OR'ed into the address:
// GBX_DMA_GATE_ALL takes every address out of the fast windows); once the DMA's bytes have
// landed, HRAM opens again (GBX_DMA_GATE_EXT: the DMA's own wait loop there runs at full
// speed, and nothing is left for an HRAM access to trigger); the first slow access after
// dma_end opens the rest. Every access the clock test would send to the slow path still goes
// there, so the results are the same. The interpreter ran 1.05-1.18x faster on the games than
// with the clock test (docs/benchmarks/games.md, 2026-11-27 night).
#if GBX_DEVICE_CPU
GBX_FN u8 bus_read(Core& c, u32 addr) {
  const u32 gated = addr | c.dma_gate;
  if (gated < 0x4000u) return c.rom0[gated];
  if (gated < 0x8000u) return c.romx[gated - 0x4000u];
  if (gated - 0xC000u < 0x2000u) return mem_at(c, GBX_MEM_WRAM + (gated - 0xC000u));
  if ((gated & 0xFFFFu) - 0xFF80u < 0x7Fu) return mem_at(c, GBX_MEM_IO + (addr & 0xFFu));  // HRAM
  if (gated - 0x8000u < 0x2000u && io_time(c) < c.vram_open)
    return mem_at(c, GBX_MEM_VRAM + (gated - 0x8000u));
  return bus_read_slow(c, addr);
}
#else
GBX_FN u8 bus_read(Core& c, u32 addr) {
  if (GBX_UNLIKELY(io_time(c) < c.dma_end)) {
    Machine& m = core_spill(c);
    const bool blocked = dma_blocks(m, addr);  // may land the DMA's bytes (events move)
    const u8 v = blocked ? dma_conflict_read(m, addr) : (u8)0;
    core_reload(c);
    if (blocked) return v;
  }
  u8 v;
  if (bus_read_window(c, addr, v)) return v;
  v = bus_read_slow(core_spill(c), addr);
  core_reload(c);
  return v;
}
#endif

GBX_NOINLINE void bus_write_slow(Machine& b, u32 addr, u8 v) {
#if GBX_DEVICE_CPU
  // As bus_read_slow: the OAM DMA check, then the fast path's windows.
  if (dma_gate_blocks(b, addr) || bus_write_window(b, addr, v)) return;
#endif
  if (addr - 0x8000u < 0x2000u || addr - 0xFE00u < 0x100u) lcd_before_write(b);
  if (addr < 0x8000u)
    mbc_write(b, addr, v);
  else if (addr < 0xA000u) {
    if (ppu_vram_open(b) || !ppu_vram_write_locked(b))
      mem_at(b, GBX_MEM_VRAM + (addr - 0x8000u)) = v;
  } else if (addr < 0xC000u)
    cart_ram_write(b, addr, v);
  else if (addr < 0xFE00u)
    mem_at(b, GBX_MEM_WRAM + ((addr - 0xC000u) & 0x1FFFu)) = v;
  else if (addr < 0xFF00u) {
    if (ppu_oam_write_locked(b)) {
      const u32 r = oam_bug_row(b, io_time(b));
      if (r) {
        ppu_service(b, io_time(b));
        oam_bug_write_row(b, r);
        oam_bug_after(b);
      }
      return;
    }
    ppu_service(b, io_time(b));
    mem_at(b, GBX_MEM_OAM + (addr - 0xFE00u)) = v;
    // Objects decide the mode 3 length of lines to come, so the HBlank event may move.
    if (*io_reg(b, 0xFF41) & 0x08) {
      ppu_schedule(b, io_time(b));
      events_reschedule(b);
    }
  } else
    io_write(b, addr, v);
}

#if GBX_DEVICE_CPU
GBX_FN void bus_write(Core& c, u32 addr, u8 v) {  // the gate: see bus_read
  const u32 gated = addr | c.dma_gate;
  if (gated - 0xC000u < 0x2000u) {
    mem_at(c, GBX_MEM_WRAM + (gated - 0xC000u)) = v;
    return;
  }
  if ((gated & 0xFFFFu) - 0xFF80u < 0x7Fu) {  // HRAM
    mem_at(c, GBX_MEM_IO + (addr & 0xFFu)) = v;
    return;
  }
  if (gated - 0x8000u < 0x2000u && io_time(c) < c.vram_open) {
    mem_at(c, GBX_MEM_VRAM + (gated - 0x8000u)) = v;
    return;
  }
  bus_write_slow(c, addr, v);
}
#else
GBX_FN void bus_write(Core& c, u32 addr, u8 v) {
  if (GBX_UNLIKELY(io_time(c) < c.dma_end)) {
    const bool blocked = dma_blocks(core_spill(c), addr);
    core_reload(c);
    if (blocked) return;
  }
  if (bus_write_window(c, addr, v)) return;
  bus_write_slow(core_spill(c), addr, v);
  core_reload(c);
}
#endif

// What the DMA reads: the source bus without the CPU's access windows (DMG: sources at
// 0xE000 and above read WRAM, like the echo region).
GBX_FN u8 bus_read_dma(Machine& b, u32 addr) {
  if (addr < 0x4000u) return b.rom0[addr];
  if (addr < 0x8000u) return b.romx[addr - 0x4000u];
  if (addr < 0xA000u) return mem_at(b, GBX_MEM_VRAM + (addr - 0x8000u));
  if (addr < 0xC000u) return cart_ram_read(b, addr);
  return mem_at(b, GBX_MEM_WRAM + ((addr - 0xC000u) & 0x1FFFu));
}

// The memory view (epilogs' ram()/peek, the host's read_memory): the bytes memory holds, not
// what a CPU access would get at this cycle. VRAM and OAM read as held while the PPU locks them
// (mode 3; modes 2-3) and no OAM DMA blanks a bus: a reward or a host read at a step's end
// wants the tile map or the sprite table, not the 0xFF of the mode the frame ended in (after
// an LCD off/on the step ends at an arbitrary dot, about a third of a frame in mode 3).
// Cartridge RAM reads as the CPU would (0xFF while disabled); I/O as of the current cycle.
// Below OAM that is what the DMA reads: the buses without the CPU's access windows.
GBX_FN u8 view_read(Machine& b, u32 addr) {
  addr &= 0xFFFFu;
  if (addr < 0xFE00u) return bus_read_dma(b, addr);
  if (addr < 0xFF00u) return mem_at(b, GBX_MEM_OAM + (addr - 0xFE00u));
  if (addr - 0xFF80u < 0x7Fu) return mem_at(b, GBX_MEM_IO + (addr & 0xFFu));  // HRAM
  return io_read(b, addr);
}

// OAM DMA: the 160 bytes are copied at once when it starts (dma_settle: the CPU cannot
// observe or change OAM before the transfer ends, and reads of the source bus see exactly
// these bytes, one per M-cycle). The bus is owned for 160 M-cycles starting two M-cycles
// after the write (Pan Docs: one M-cycle of set-up after the writing one; mooneye
// oam_dma_start: OAM still reads its old bytes in the M-cycle after the write).
GBX_FN void oam_dma(Machine& b, u8 page) {
  const i64 now = io_time(b);
  const bool running = now >= dma_start(b) && now < b.dma_end;
  b.dma_overlap = running ? (u8)(b.dma_end < now + 8 ? b.dma_end - now : 8) : 0;
  b.dma_pending = (u16)(page + 1u);
  b.dma_end = now + 8 + 640;
#if GBX_DEVICE_CPU
  b.dma_gate = GBX_DMA_GATE_ALL;
#endif
}
#endif

#if GBX_CORE_SPLIT
// A bus read for code holding a Machine (the host's memory view, epilogs): through the Core.
GBX_FN u8 bus_read(Machine& m, u32 addr) {
  Core c = core_of(m);
  const u8 v = bus_read(c, addr);
  core_spill(c);
  return v;
}
#endif
