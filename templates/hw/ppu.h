// PPU timing (Pan Docs "Rendering", "LCD Status Registers", "STAT interrupt"), caught up
// lazily like the timer: LY, the STAT mode and the LYC flag are computed from the cycle
// counter on access; the VBlank interrupt and rising edges of the STAT line are events.
//
// A frame is 154 lines of 456 dots. Lines 0-143: mode 2 (OAM scan) dots 0-79, mode 3
// (drawing) from dot 80 for 172 dots plus the penalties of ppu_mode3_end, then mode 0
// (HBlank). Lines 144-153: mode 1 (VBlank). Pixels are drawn elsewhere (lcd.h); this file
// only says when things happen.
#define GBX_LINE_DOTS 456
#define GBX_MODE2_DOTS 80
#define GBX_MODE3_MIN_DOTS 172
// Pan Docs "LY": on line 153, LY reads 153 only briefly (one M-cycle), then 0 for the rest
// of the line (the LY=LYC comparison: GBX_LYC153_DOTS).
#define GBX_LY153_DOTS 4
// The dots at a line's end while the PPU turns to the next line (ppu_line_turning, below).
#define GBX_LINE_TURN_DOTS 4
// The LY=LYC comparison (STAT's bit 2 and the LY=LYC source) on line 153 matches 153 for as
// long as LY reads 153, then nothing for one M-cycle, then 0: gbmicrotest
// line_153_lyc153_stat_timing_b/c (LYC 153: a match at the 106th M-cycle into line 152, none
// at the 107th) and line_153_lyc0_stat_timing_b/c/d (LYC 0: none at the 107th, a match at the
// 108th), verified on a DMG-CPU-08; LY reads 0 meanwhile
// (line_153_ly_*). As at every other line change, where STAT's LY=LYC bit reads 0 while LY
// turns (ppu_line_turning).
#define GBX_LYC153_DOTS 8
// No line's mode 3 ends later than this (80 + 172 + 7 + 6 + 10 objects x 11 < 384), so
// later dots are mode 0 without looking at OAM.
#define GBX_MODE3_MAX_END 384
// The interrupt sources lead what STAT's mode bits and LY show (ppu_stat_line): the line-start
// sources (mode 2, LY=LYC, VBlank) by GBX_IRQ_LINE_LEAD dots. The end of mode 3 (mode 0's
// source, and STAT's mode 0 with it: ppu_stat_mode) comes GBX_IRQ_HBLANK_LEAD dots before
// ppu_mode3_end, where VRAM is given back (GBX_IRQ_HBLANK_LEAD_FIRST on the first line after
// the LCD is switched on).
#define GBX_IRQ_LINE_LEAD 2
#define GBX_IRQ_HBLANK_LEAD 2
// The mode-2 (OAM) source is a pulse of GBX_OAM_PULSE_DOTS dots from GBX_IRQ_OAM_LEAD dots
// before the line (ppu_stat_line).
#define GBX_IRQ_OAM_LEAD 3
#define GBX_IRQ_HBLANK_LEAD_FIRST 0
// A halted CPU sees a PPU request this many dots later than a running one (halt_wake_bound).
#define GBX_HALT_IRQ_LATE 2
// ... and the timer's request this many (one M-cycle, halt_wake_bound).
#define GBX_HALT_TIMER_LATE 4
#define GBX_OAM_PULSE_DOTS 4

GBX_FN bool ppu_lcd_on(Machine& b) { return (*io_reg(b, 0xFF40) & 0x80) != 0; }

// Dots since the start of the current frame (0..70223); 0 when the LCD is off.
GBX_FN i64 ppu_pos(Machine& b, i64 at) {
  if (!ppu_lcd_on(b)) return 0;
  return (at - GBX_COLD(b, ppu_epoch)) % GBX_FRAME_CYCLES;
}

// The first line after the LCD is switched on has no OAM scan: it starts in mode 0 instead
// of mode 2 (Pan Docs "LCD Status Registers": "mode 0 ... also when the LCD is turned on",
// gbdev wiki). ppu_epoch is then the first dot of the switch-on write's M-cycle (ppu_write_lcdc).
GBX_FN bool ppu_first_line(Machine& b, i64 at) {
  return at - GBX_COLD(b, ppu_epoch) < GBX_LINE_DOTS;
}

// The dot at which line `line`'s mode 3 ends (Pan Docs "Mode 3 length"): 80 + 172, plus
// SCX % 8 (the fine scroll discards pixels), plus 6 when the window starts on the line, plus
// per object drawn (the first 10 in OAM order whose rows cover the line; OBJ enabled):
// 6 dots, and for the first object in each 8-pixel background tile 5 - min(5, offset) more
// (offset = (OAM X + SCX % 8) % 8 inside the tile). Exception (Pan Docs "OBJ penalty
// algorithm"): an object at OAM X 0 "always incurs a 11-dot penalty, regardless of SCX", i.e.
// the first one in tile 0 pays 5 more whatever the offset, later ones 6 (mooneye
// intr_2_mode0_timing_sprites: ten at X 0 cost as much as ten at X 1). Objects at X >= 168
// are not fetched. Register values are the ones in force now: the renderer (lcd.h) calls this
// while catching up line by line.
// This is where the PPU gives VRAM back to the CPU; STAT's mode bits and the HBlank interrupt
// source change GBX_IRQ_HBLANK_LEAD dots earlier (ppu_stat_mode). With that, Pan Docs' sum is
// what hardware measures, with no correction: mooneye intr_2_mode0_timing_sprites (88 object
// layouts, verified on DMG) and gbmicrotest sprite_*/sprite4_* (1 and 4 objects at X 8-15,
// DMG-CPU-08).
GBX_NOINLINE i64 ppu_mode3_end(Machine& b, i64 line) {
  const u8 lcdc = *io_reg(b, 0xFF40);
  const i64 scx7 = *io_reg(b, 0xFF43) & 7;
  i64 dots = GBX_MODE2_DOTS + GBX_MODE3_MIN_DOTS + scx7;
  if ((lcdc & 0x20) && *io_reg(b, 0xFF4A) <= line && *io_reg(b, 0xFF4B) <= 166) dots += 6;
  if (lcdc & 0x02) {
    const i64 height = (lcdc & 0x04) ? 16 : 8;
    u8 tile[10];
    u8 extra[10];
    u32 tiles = 0, found = 0;
    i64 objects = 0;  // the objects' penalty
    for (u32 i = 0; i < 40u && found < 10u; ++i) {
      const u32 o = GBX_MEM_OAM + 4u * i;
      const i64 row = line + 16 - (i64)mem_at(b, o);
      if (row < 0 || row >= height) continue;
      ++found;
      const i64 x = mem_at(b, o + 1);
      if (x >= 168) continue;
      objects += 6;
      const u8 t = (u8)((x + scx7) >> 3);
      const u8 e = x == 0 ? (u8)5 : (u8)(5 - ((x + scx7) & 7) > 0 ? 5 - ((x + scx7) & 7) : 0);
      u32 k = 0;
      while (k < tiles && tile[k] != t) ++k;
      if (k == tiles) {
        tile[tiles] = t;
        extra[tiles++] = e;
      } else if (e > extra[k]) {
        extra[k] = e;
      }
    }
    for (u32 k = 0; k < tiles; ++k) objects += extra[k];
    dots += objects;
  }
  return dots;
}

// Mode at cycle `at` (0 with the LCD off).
GBX_FN u8 ppu_mode(Machine& b, i64 at) {
  if (!ppu_lcd_on(b)) return 0;
  const i64 pos = ppu_pos(b, at);
  const i64 line = pos / GBX_LINE_DOTS, dot = pos % GBX_LINE_DOTS;
  // The last GBX_LINE_TURN_DOTS of line 153, while the PPU turns to line 0, read mode 0: the
  // VBlank flag has already gone, line 0's OAM scan does not show yet (gbmicrotest
  // poweron_stat_006, line_153_lyc0_stat_timing_f, lcdon_to_stat1_d, DMG-CPU-08: "glitch
  // hblank" for one M-cycle between mode 1 and mode 2).
  if (line >= 144) return line == 153 && dot >= GBX_LINE_DOTS - GBX_LINE_TURN_DOTS ? 0 : 1;
  if (dot < GBX_MODE2_DOTS) return ppu_first_line(b, at) ? 0 : 2;
  if (dot < GBX_MODE2_DOTS + GBX_MODE3_MIN_DOTS) return 3;
  if (dot >= GBX_MODE3_MAX_END) return 0;
  return dot < ppu_mode3_end(b, line) ? 3 : 0;
}

GBX_FN u8 ppu_ly_at_pos(i64 pos) {
  const i64 line = pos / GBX_LINE_DOTS;
  if (line == 153 && pos % GBX_LINE_DOTS >= GBX_LY153_DOTS) return 0;
  return (u8)line;
}

// The last GBX_LINE_TURN_DOTS dots of lines 0-152, while the PPU turns to the next line
// (mooneye lcdon_timing-GS, verified on DMG): LY already reads the next line, STAT still
// reads the old mode and its LY=LYC bit reads 0, and OAM is already the PPU's when the next
// line is visible (its OAM scan starts here, 4 dots before STAT shows mode 2). The STAT
// interrupt line's LY=LYC source is low in these dots too, as the sources see them
// (ppu_stat_line).
// (GBX_LINE_TURN_DOTS: defined at the top, with the other line constants.)
GBX_FN bool ppu_line_turning(i64 pos) {
  return pos % GBX_LINE_DOTS >= GBX_LINE_DOTS - GBX_LINE_TURN_DOTS && pos / GBX_LINE_DOTS < 153;
}

// LY as the CPU reads it.
GBX_FN u8 ppu_ly(Machine& b) {
  const i64 pos = ppu_pos(b, io_time(b));
  return ppu_ly_at_pos(ppu_line_turning(pos) ? pos + GBX_LINE_TURN_DOTS : pos);
}

// LY as the LY=LYC comparison sees it at frame position `pos`.
// 0x100 (equal to no LYC) while it turns from 153 to 0.
GBX_FN u32 ppu_lyc_ly_at_pos(i64 pos) {
  const i64 line = pos / GBX_LINE_DOTS, dot = pos % GBX_LINE_DOTS;
  if (line != 153 || dot < GBX_LY153_DOTS) return (u32)line;
  return dot < GBX_LYC153_DOTS ? 0x100u : 0u;
}

GBX_FN bool ppu_lyc_match(Machine& b, i64 at) {
  return ppu_lyc_ly_at_pos(ppu_pos(b, at)) == *io_reg(b, 0xFF45);
}

// STAT's LY=LYC bit. The comparison runs only while the LCD is on: switching it off freezes
// the bit (kept in the stored STAT's bit 2) until it is switched on again, whatever LYC
// becomes meanwhile (mooneye stat_lyc_onoff, verified on DMG/MGB/SGB/SGB2/CGB/AGB).
GBX_FN bool ppu_lyc_flag(Machine& b, i64 at) {
  if (!ppu_lcd_on(b)) return (*io_reg(b, 0xFF41) & 0x04) != 0;
  return ppu_lyc_match(b, at) && !ppu_line_turning(ppu_pos(b, at));
}

// The mode-0 (HBlank) source of the STAT line after line `line`'s mode 3, at dot `dot`: it rises
// GBX_IRQ_HBLANK_LEAD dots before ppu_mode3_end (GBX_IRQ_HBLANK_LEAD_FIRST on the first line
// after the LCD is switched on) and holds to the line's end (ppu_stat_line says why).
GBX_FN bool ppu_hblank_source(Machine& b, i64 at, i64 line, i64 dot) {
  const i64 lead = ppu_first_line(b, at) ? GBX_IRQ_HBLANK_LEAD_FIRST : GBX_IRQ_HBLANK_LEAD;
  return line < 144 && dot >= GBX_MODE2_DOTS + GBX_MODE3_MIN_DOTS - lead &&
         (dot >= GBX_MODE3_MAX_END || dot >= ppu_mode3_end(b, line) - lead);
}

// The mode STAT's bits 0-1 show at cycle `at`. Mode 3 ends there when the mode-0 source rises
// (ppu_hblank_source), before ppu_mode3_end, where the PPU gives VRAM back to the CPU
// (ppu_vram_locked): STAT's mode 3 is the PPU's rendering latch, which the same signal that
// raises the HBlank interrupt clears (GateBoy, aappleby/metroboy: XYMU_RENDERINGn is reset by
// VOGA_HBLANKp, the latch of WODU_HBLANKp, and TARU_INT_HBL is WODU; STAT reads XYMU).
// Measured on a DMG-CPU-08 by gbmicrotest's ppu_sprite0_scx*, sprite*_* and win*_* (STAT read
// at single M-cycles around mode 3's end on line 1 with SCX 1-7, 1 and 4 objects, and the
// window at WX 0-14), against vram_read_l1_c/d (VRAM released at ppu_mode3_end on the same
// line) and mooneye intr_2_mode0_timing(_sprites) (STAT polled after the mode-2 interrupt,
// 88 object layouts; verified on DMG): with Pan Docs' penalties (ppu_mode3_end) STAT shows
// mode 0 GBX_IRQ_HBLANK_LEAD dots before VRAM is released.
GBX_FN u8 ppu_stat_mode(Machine& b, i64 at) {
  const u8 mode = ppu_mode(b, at);
  if (mode != 3) return mode;
  const i64 pos = ppu_pos(b, at);
  return ppu_hblank_source(b, at, pos / GBX_LINE_DOTS, pos % GBX_LINE_DOTS) ? 0 : 3;
}

GBX_FN u8 ppu_stat(Machine& b) {
  const i64 at = io_time(b);
  const u8 stat = *io_reg(b, 0xFF41);
  return (u8)(0x80 | (stat & 0x78) | (ppu_lyc_flag(b, at) ? 4 : 0) | ppu_stat_mode(b, at));
}

// The STAT interrupt line (Pan Docs "STAT interrupt"): the OR of the enabled sources. Only
// its rising edge requests the interrupt, so a source that becomes true while another keeps
// the line high requests nothing ("STAT blocking").
//
// The sources are the PPU's own signals, not STAT's mode bits (GateBoy, aappleby/metroboy
// GateBoyInterrupts.cpp, SUKO_INT_STATp: LY=LYC is ROPO_LY_MATCH_SYNCp, mode 2 TAPA_INT_OAM
// (the line-start pulse), mode 1 PARU_VBLANKp, mode 0 TARU_INT_HBL = WODU_HBLANKp and not
// VBlank, WODU set when the pixel counter reaches 167 and cleared at the line start). They
// change before what the CPU reads in STAT and LY does: measured on a DMG by gbmicrotest
// (aappleby/gbmicrotest, DMG-CPU-08), whose ROMs poll IF at single M-cycles around each edge
// (oam_int_if_edge_*, hblank_int_scx*_if_*, lyc1_int_if_edge_*, vblank_int_if_*) and time the
// dispatch from running code (*_nops, *_incs) and from HALT (*_halt), against mooneye's
// intervals between interrupts and STAT reads (intr_1_2_timing-GS, intr_2_*_timing,
// hblank_ly_scx_timing-GS, verified on DMG), which fix the relative timing:
// - the line-start sources (LY=LYC with LY as the comparison sees it, ppu_lyc_ly_at_pos; mode 1
//   from line 144 to the end of line 153) lead STAT and LY by GBX_IRQ_LINE_LEAD dots;
// - the mode 2 source is not held through the OAM scan: it is GateBoy's line-end pulse,
//   TAPA_INT_OAM = SELA_LINE_P908p and not VBlank (TOLU_VBLANKn), RUTU_LINE_END high for 8
//   half-dots (LogicBoy.cpp). Here it is high for GBX_OAM_PULSE_DOTS dots from GBX_IRQ_OAM_LEAD
//   dots before each line 1-143 and 144 (on a DMG line 144 raises it too, mooneye
//   vblank_stat_intr-GS), one dot before the line-start sources, and at line 0 only once the VBlank
//   source has fallen (GBX_IRQ_LINE_LEAD dots before it). Measured on a DMG-CPU-08 by gbmicrotest:
//   IF polled around the edge (oam_int_if_edge_b/c/d, lcdon_to_if_oam_b, line_144_oam_int_c), the
//   dispatch from HALT (oam_int_halt_b), and enabling the source in mode 2 raising nothing
//   (oam_int_nops_b, oam_int_halt_b: STAT written 20 dots into the OAM scan), against mooneye
//   intr_1_2_timing-GS (VBlank to line 0's mode-2 interrupt) and intr_2_*_timing (verified on DMG)
//   and Mealybug's m3_* screens (DMG; their writes are timed from the mode-2 interrupt woken from
//   HALT), which a lead of 4 breaks. The first line after the LCD is switched on has no line-start
//   pulse (GateBoy: RUTU_LINE_END is held low on it), so no mode 2 source;
// - the mode 0 source (ppu_hblank_source) rises GBX_IRQ_HBLANK_LEAD dots before ppu_mode3_end,
//   when STAT shows mode 0 (ppu_stat_mode), and holds to the line's end. On the first line
//   after the LCD is switched on it rises at ppu_mode3_end itself (GBX_IRQ_HBLANK_LEAD_FIRST:
//   gbmicrotest int_hblank_incs_scx*, hblank_int_l0, int_hblank_halt_scx* and lcdon_to_stat0_*,
//   timed from the switch-on): that line's pipeline starts from the switch-on, not from a line
//   start, and GateBoy counts the lines after it from a phase 8 half-dots ahead (LogicBoy.cpp:
//   "lcd phase is off by 8" coming out of reset). The mode 0 STAT shows on that first line
//   before its mode 3 (it has no OAM scan) does not raise it.
// Out of line, as ppu_schedule and halt_wake_bound: they run at PPU events and register
// writes, and inlined they cost the pixel-FIFO CUDA kernel spills (docs/machine/ppu-fifo.md).
GBX_NOINLINE bool ppu_stat_line(Machine& b, i64 at, u8 stat) {
  if (!ppu_lcd_on(b)) return (stat & 0x40) && (*io_reg(b, 0xFF41) & 0x04);  // frozen LY=LYC
  if (!(stat & 0x78)) return false;
  const i64 pos = ppu_pos(b, at);
  const i64 src = (pos + GBX_IRQ_LINE_LEAD) % GBX_FRAME_CYCLES;  // the line-start sources' view
  // LY=LYC is the signal STAT's bit 2 shows (ppu_lyc_flag; GateBoy: both read
  // ROPO_LY_MATCH_SYNCp), so it is low while the line turns, GBX_IRQ_LINE_LEAD dots ahead:
  // gbmicrotest lyc1_write_timing_d (DMG-CPU-08) writes LYC 1 three dots before line 2, where
  // the comparison still sees line 1, and takes no interrupt (lyc1_write_timing_b, LYC 1
  // written at the same dot of line 0, takes one when line 1 starts).
  if ((stat & 0x40) && ppu_lyc_ly_at_pos(src) == *io_reg(b, 0xFF45) && !ppu_line_turning(src))
    return true;
  if (!(stat & 0x38)) return false;
  const i64 src_line = src / GBX_LINE_DOTS;
  if ((stat & 0x10) && src_line >= 144) return true;
  if (stat & 0x20) {
    const i64 oam = (pos + GBX_IRQ_OAM_LEAD) % GBX_FRAME_CYCLES;  // the pulse's view
    const bool first = at - GBX_COLD(b, ppu_epoch) < GBX_LINE_DOTS - GBX_IRQ_OAM_LEAD;
    if (oam / GBX_LINE_DOTS <= 144 && oam % GBX_LINE_DOTS < GBX_OAM_PULSE_DOTS && !first &&
        src_line < 144)  // not while the VBlank source is high
      return true;
  }
  if ((stat & 0x08) && ppu_hblank_source(b, at, pos / GBX_LINE_DOTS, pos % GBX_LINE_DOTS))
    return true;
  return false;
}

// IF bits the PPU raises at cycle `at` (a candidate point of ppu_schedule).
GBX_FN u8 ppu_irq_at(Machine& b, i64 at) {
  const u8 stat = *io_reg(b, 0xFF41);
  const i64 pos = ppu_pos(b, at);
  u8 irq = (pos == 144 * GBX_LINE_DOTS - GBX_IRQ_LINE_LEAD) ? 0x01 : 0;  // with mode 1's source
  if (ppu_stat_line(b, at, stat) && !ppu_stat_line(b, at - 1, stat)) irq |= 0x02;
  return irq;
}

// The next cycle after `after` at which the PPU raises an interrupt. The STAT line can only
// rise where its sources change (ppu_stat_line): GBX_IRQ_OAM_LEAD dots before a line (the
// mode-2 pulse), GBX_IRQ_LINE_LEAD dots before it (mode 1 at line 144, a new LY, line 0's
// pulse; VBlank), at line 153's LY 0 and where mode 0's source rises.
// Looks at most one frame ahead.
GBX_NOINLINE void ppu_schedule(Machine& b, i64 after) {
  if (!ppu_lcd_on(b)) {
    b.ppu_event = GBX_NEVER;
    return;
  }
  const i64 pos = ppu_pos(b, after);
  const i64 frame_start = after - pos;
  const u8 stat = *io_reg(b, 0xFF41);
  if (!(stat & 0x78)) {  // VBlank only
    const i64 vbl = 144 * GBX_LINE_DOTS - GBX_IRQ_LINE_LEAD;
    b.ppu_event = frame_start + (pos < vbl ? vbl : vbl + GBX_FRAME_CYCLES);
    return;
  }
  const i64 first_line = pos / GBX_LINE_DOTS;
  for (i64 l = first_line; l <= first_line + 154; ++l) {
    const i64 line = l % 154;
    const i64 base = frame_start + l * GBX_LINE_DOTS;
    // The sources' line starts (the mode-2 pulse GBX_IRQ_OAM_LEAD before the next line, the
    // others and line 0's pulse GBX_IRQ_LINE_LEAD before it), LY 0 on line 153 and mode 3's
    // end, as ppu_stat_line sees them; in increasing order.
    i64 dots[3] = {-1, GBX_LINE_DOTS - GBX_IRQ_OAM_LEAD, GBX_LINE_DOTS - GBX_IRQ_LINE_LEAD};
    if (line == 153)
      dots[0] = GBX_LYC153_DOTS - GBX_IRQ_LINE_LEAD;  // LY 0 (153 ends on no LYC: no edge)
    else if (line < 144 && (stat & 0x08))
      dots[0] = ppu_mode3_end(b, line) - (base - GBX_COLD(b, ppu_epoch) < GBX_LINE_DOTS
                                              ? GBX_IRQ_HBLANK_LEAD_FIRST
                                              : GBX_IRQ_HBLANK_LEAD);
    for (u32 k = 0; k < 3; ++k) {
      if (dots[k] < 0) continue;
      const i64 at = base + dots[k];
      if (at > after && ppu_irq_at(b, at)) {
        b.ppu_event = at;
        return;
      }
    }
  }
  b.ppu_event = GBX_NEVER;
}

GBX_FN void ppu_service(Machine& b, i64 now) {
  while (b.ppu_event <= now) {
    irq_request(b, ppu_irq_at(b, b.ppu_event));
    ppu_schedule(b, b.ppu_event);
  }
}

// The cycle up to which a halted CPU may sleep when `until` is its next event. The halted CPU
// latches VBlank and STAT requests earlier in the M-cycle than the running CPU's interrupt
// check does (GateBoy, aappleby/metroboy LogicBoy.cpp tock_cpu: intf_halt_latch at phase E,
// intf_latch at phase H), so a PPU request in the last GBX_HALT_IRQ_LATE dots of an M-cycle
// wakes it one M-cycle after running code would take it (mooneye hblank_ly_scx_timing-GS woken
// from HALT against gbmicrotest hblank_int_scx* from running code, both on a DMG); one in the
// M-cycle's first dots wakes it when running code would take it (mooneye halt_ime1_timing2-GS:
// VBlank). The timer's request (IF bit 2, raised on an M-cycle edge, hw/timer.h) the halted
// CPU latches a whole M-cycle after running code sees it (the same tock_cpu: the timer bit of
// intf_halt_latch is latched at phase A, "this one latches funny, some hardware bug", and read
// for the wake-up at the next phase A): gbmicrotest int_timer_halt (woken from HALT) and
// int_timer_nops (running code), both with the timer restarted by a DIV write. Other events
// are not moved.
GBX_NOINLINE i64 halt_wake_bound(const Machine& b, i64 until) {
  const bool ppu = until == b.ppu_event;
  if (!ppu && until != b.timer_event) return until;
  i64 other = b.joyp_event < GBX_COLD(b, serial_event) ? b.joyp_event : GBX_COLD(b, serial_event);
  if (!ppu && b.ppu_event < other) other = b.ppu_event;
  if (ppu && b.timer_event < other) other = b.timer_event;
  if (b.dma_pending && b.dma_end - 640 < other) other = b.dma_end - 640;
  const i64 late = until + (ppu ? GBX_HALT_IRQ_LATE : GBX_HALT_TIMER_LATE);
  return late < other ? late : other;
}

#if GBX_CORE_SPLIT
GBX_FN i64 halt_wake_bound(const Core& c, i64 until) { return halt_wake_bound(*c.m, until); }
#endif

GBX_FN void ppu_write_lcdc(Machine& b, u8 v) {
  const i64 at = io_time(b);
  const bool was_on = ppu_lcd_on(b);
  u8* stat = io_reg(b, 0xFF41);
#if GBX_DEVICE_CPU
  b.vram_open = GBX_NEVER_PAST;  // the PPU starts, stops or changes what it fetches
#endif
  const bool line_was = ppu_stat_line(b, at, *stat);
  // Off: the LY=LYC bit freezes at its last value (ppu_lyc_flag).
  if (was_on && !(v & 0x80)) *stat = (u8)((*stat & ~0x04) | (ppu_lyc_flag(b, at) ? 0x04 : 0));
  *io_reg(b, 0xFF40) = v;
  if (!was_on && (v & 0x80)) {
    // Switching the LCD on starts a frame at line 0 (its first line without an OAM scan) and
    // the comparison again: LY 0 = LYC raises the STAT line if the frozen bit held it low.
    // The frame starts at the first dot of the write's M-cycle (io_time is its second), so
    // that the PPU's dots fall on the CPU's M-cycles as they do after the boot ROM: it too
    // switches the LCD on with an LDH write to LCDC (Pan Docs "Power Up Sequence"; gbdev's
    // DMG boot ROM disassembly), and the hand-over state's frame, measured by gbmicrotest
    // poweron_* (DMG-CPU-08, runtime/src/states/env_state.cpp kPpuDotsAtReset), starts on an
    // M-cycle's first dot. With the switch-on at io_time the frames after an LCDC write ran a
    // dot behind the post-boot one, and no one mode-3 end fit both gbmicrotest's STAT reads
    // after a switch-on (ppu_sprite0_scx*, sprite*, win*) and mooneye intr_2_mode0_timing after
    // boot (ppu_stat_mode).
    GBX_COLD(b, ppu_epoch) = at - 1;
    if (!line_was && ppu_stat_line(b, at, *stat)) irq_request(b, 0x02);
  }
  ppu_schedule(b, at);
}

// STAT write. DMG bug (Pan Docs "STAT modes" / gbdev "STAT write bug"): for one cycle the
// write acts as if every source were enabled, so in mode 0 or 1, or with LY = LYC, the line
// rises (if it was low) and requests a STAT interrupt. Mode 2 is not affected. The sources
// enabled are the PPU's signals the STAT line ORs (ppu_stat_line), not STAT's mode bits: the
// HBlank source, which is low on the first line after the LCD is switched on until that line's
// mode 3 ends although STAT reads mode 0 there (it has no OAM scan; GateBoy, aappleby/metroboy:
// TARU_INT_HBL is WODU_HBLANKp, set only when the pixel counter reaches 167), and the VBlank
// source. gbmicrotest lyc1_int_halt_a/b and lyc1_int_nops_a (DMG-CPU-08) write STAT on that
// line and take no interrupt until LY=LYC rises on line 1.
GBX_FN void ppu_write_stat(Machine& b, u8 v) {
  const i64 at = io_time(b);
  ppu_service(b, at);
  const u8 old = *io_reg(b, 0xFF41);
  const bool was = ppu_stat_line(b, at, old);
  *io_reg(b, 0xFF41) = (u8)(0x80 | (v & 0x78) | (old & 0x04));  // bit 2: ppu_lyc_flag
  if (!was && ppu_lcd_on(b)) {
    if (ppu_stat_line(b, at, 0x18) || ppu_lyc_match(b, at) ||
        ppu_stat_line(b, at, *io_reg(b, 0xFF41)))
      irq_request(b, 0x02);
  }
  ppu_schedule(b, at);
}

// LYC and the timing registers (SCX, WY, WX): a changed comparison can raise the line now.
GBX_FN void ppu_write_timing_reg(Machine& b, u32 addr, u8 v) {
  const i64 at = io_time(b);
  ppu_service(b, at);
  const u8 stat = *io_reg(b, 0xFF41);
  const bool was = ppu_stat_line(b, at, stat);
  *io_reg(b, addr) = v;
  if (!was && ppu_stat_line(b, at, stat)) irq_request(b, 0x02);
  ppu_schedule(b, at);
}

// CPU access windows (Pan Docs "Accessing VRAM and OAM"): VRAM is the PPU's in mode 3, OAM
// in modes 2 and 3; the CPU then reads 0xFF (writes: ppu_*_write_locked below).
// For reads the PPU takes them 4 dots before STAT shows the mode (mooneye lcdon_timing-GS, DMG):
// VRAM from dot 76 (dot 80 on the first line after the LCD is switched on, which has no OAM scan
// before it), OAM in the last 4 dots of the line before a visible line (ppu_line_turning).
GBX_FN bool ppu_vram_locked(Machine& b) {
  const i64 at = io_time(b);
  const u8 mode = ppu_mode(b, at);
  if (mode == 3) return true;
  if (mode != 2) return false;
  return ppu_pos(b, at) % GBX_LINE_DOTS >= GBX_MODE2_DOTS - GBX_LINE_TURN_DOTS;
}
GBX_FN bool ppu_oam_locked(Machine& b) {
  const i64 at = io_time(b);
  if (ppu_mode(b, at) >= 2) return true;
  if (!ppu_lcd_on(b)) return false;
  const i64 pos = ppu_pos(b, at);
  const i64 line = pos / GBX_LINE_DOTS;
  // Before lines 1-143, and (by the same rule) before line 0 at the end of line 153.
  return pos % GBX_LINE_DOTS >= GBX_LINE_DOTS - GBX_LINE_TURN_DOTS && (line < 143 || line == 153);
}

// Writes are refused over a shorter span than reads (mooneye lcdon_write_timing-GS, verified
// on DMG/MGB/SGB/SGB2; it measures writes at the M-cycles lcdon_timing-GS reads at): VRAM only
// while STAT shows mode 3; OAM while it shows mode 3 and in mode 2 but for its last M-cycle
// (dots 76-79 take a write), and not in the 4 dots before a line's OAM scan.
GBX_FN bool ppu_vram_write_locked(Machine& b) { return ppu_mode(b, io_time(b)) == 3; }

#if GBX_DEVICE_CPU
// The cycle up to which, from `at`, no VRAM read or write can be refused whatever the CPU
// writes meanwhile, LCDC aside (ppu_write_lcdc closes the window): the next visible line's
// dot GBX_MODE2_DOTS - GBX_LINE_TURN_DOTS, where ppu_vram_locked's lock can start first. From
// there to GBX_MODE3_MAX_END the lock's end moves with SCX, the window and OAM, so the window
// is `at` itself there (closed: the access asks the PPU). With the LCD off, never. In render
// kernels no later than the renderer's next line (lcd_next), so that a fast write needs no
// lcd_before_write.
GBX_NOINLINE i64 ppu_vram_open_until(Machine& b, i64 at) {
  i64 until = GBX_NEVER;
  if (ppu_lcd_on(b)) {
    const i64 pos = ppu_pos(b, at);
    const i64 line = pos / GBX_LINE_DOTS, dot = pos % GBX_LINE_DOTS;
    const i64 lock = GBX_MODE2_DOTS - GBX_LINE_TURN_DOTS;
    if (line < 144 && dot < lock)
      until = at - dot + lock;
    else if (line < 144 && dot < GBX_MODE3_MAX_END)
      return at;
    else if (line < 143)
      until = at - dot + GBX_LINE_DOTS + lock;
    else
      until = at - pos + GBX_FRAME_CYCLES + lock;  // line 0 of the next frame
  }
#if GBX_RENDER
  if (until > b.lcd_next) until = b.lcd_next;
#endif
  return until;
}
// VRAM is the CPU's at this access (the fast paths only compare io_time with vram_open).
// The window is computed again only by an access past it, a few times a line at most: VRAM
// writes went through ppu_mode's frame position (a 64-bit modulo) and line division each,
// 12% of 2048's specialized run.
GBX_FN bool ppu_vram_open(Machine& b) {
  const i64 at = io_time(b);
  if (at < b.vram_open) return true;
  b.vram_open = ppu_vram_open_until(b, at);
  return at < b.vram_open;
}
#else
GBX_FN bool ppu_vram_open(Machine& b) {  // no window on a GPU: every access asks the PPU
  (void)b;
  return false;
}
#endif
GBX_FN bool ppu_oam_write_locked(Machine& b) {
  const i64 at = io_time(b);
  const u8 mode = ppu_mode(b, at);
  return mode == 3 || (mode == 2 && ppu_pos(b, at) % GBX_LINE_DOTS < GBX_MODE2_DOTS - 4);
}
