#include "gbx/runtime/states/state_rules.h"

#include <cstring>
#include <functional>

#include "gbx/runtime/states/state_fields.h"
#include "gbx_abi.h"

namespace gbx {
namespace {

// templates/hw/machine.h: "no event" and "no TIMA reload pending".
constexpr int64_t kNever = INT64_MAX;
constexpr int64_t kNeverPast = -(int64_t{1} << 62);
constexpr int64_t kFrameCycles = 70224;  // Pan Docs "LCD timing": 154 lines of 456 dots
constexpr int64_t kLineDots = 456;

struct View {
  const StateRuleInput& in;
  const SaveStateRecord* rec(const char* name) const {
    for (const SaveStateRecord& r : *in.records)
      if (r.name == name) return &r;
    return nullptr;
  }
  // Little-endian element `i` of `width` bytes (0 when the record is missing or short).
  uint64_t u(const char* name, size_t i = 0, size_t width = 0) const {
    const SaveStateRecord* r = rec(name);
    if (!r) return 0;
    if (!width) width = r->bytes.size();
    if ((i + 1) * width > r->bytes.size() || width > 8) return 0;
    uint64_t v = 0;
    for (size_t k = 0; k < width; ++k) v |= (uint64_t)r->bytes[i * width + k] << (8 * k);
    return v;
  }
  int64_t s64(const char* name, size_t i = 0) const { return (int64_t)u(name, i, 8); }
  int64_t cycles() const { return s64("cycle_count"); }
};

// "" when the rule holds, else the line naming the field, its value and the rule.
using Check = std::function<std::string(const View&)>;
struct Rule {
  const char* record;
  Check check;
};

std::string fail(const std::string& label, int64_t v, const std::string& must) {
  return "field '" + label + "' is " + std::to_string(v) + ", must be " + must;
}

std::string span(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

// Element i (width bytes) of `record` within [lo, hi]; `label` names it in the message.
std::string in_range(const View& v, const char* record, size_t i, size_t width,
                     const std::string& label, uint64_t lo, uint64_t hi, const char* why) {
  const uint64_t x = v.u(record, i, width);
  if (x >= lo && x <= hi) return "";
  return fail(label, (int64_t)x, span((int64_t)lo, (int64_t)hi) + " (" + why + ")");
}

Rule range(const char* name, uint64_t lo, uint64_t hi, const char* why) {
  return {name, [=](const View& v) { return in_range(v, name, 0, 0, name, lo, hi, why); }};
}

// Every value is one the machine can hold (a register, a byte of memory, a float).
Rule any(const char* name) {
  return {name, [](const View&) { return std::string(); }};
}

// A cycle stamp: at kStateEarliest or later and at most `ahead` after cycle_count, or the
// field's sentinel (0: none).
Rule cycle_stamp(const char* name, int64_t ahead, int64_t sentinel, const char* why) {
  return {name, [=](const View& v) {
            const int64_t x = v.s64(name), c = v.cycles();
            if (sentinel && x == sentinel) return std::string();
            if (x >= kStateEarliest && x <= c + ahead) return std::string();
            return fail(name, x,
                        std::to_string(kStateEarliest) + " to cycle_count + " +
                            std::to_string(ahead) + " = " + std::to_string(c + ahead) +
                            (sentinel ? " or " + std::to_string(sentinel) : "") + " (" + why + ")");
          }};
}

// The MBC registers each controller has, at their widths (templates/hw/cartridge.h mbc_write;
// Pan Docs "Memory Bank Controllers"). Without a controller they keep their reset values.
Rule mbc_reg(const char* name) {
  return {name, [=](const View& v) {
            const unsigned k = v.in.mbc;
            const bool mbc1 = k == GBX_MBC_1 || k == GBX_MBC_1M, mbc2 = k == GBX_MBC_2;
            const bool mbc3 = k == GBX_MBC_3 || k == GBX_MBC_3_RTC;
            const bool mbc5 = k == GBX_MBC_5 || k == GBX_MBC_5_RUMBLE;
            uint64_t hi = 0;
            const std::string n = name;
            if (n == "mbc_rom_bank")
              hi = mbc1 ? 0x1F : mbc2 ? 0x0F : mbc3 ? 0x7F : mbc5 ? 0xFF : 1;
            else if (n == "mbc_ram_bank")
              hi = mbc1 ? 0x03 : (mbc3 || mbc5) ? 0x0F : 0;
            else if (n == "mbc_ram_enable")
              hi = 1;
            else if (n == "mbc_mode")
              hi = mbc1 ? 1 : 0;
            else if (n == "mbc_rom_bank_hi")
              hi = mbc5 ? 1 : 0;
            else if (n == "mbc_rtc_latch")
              hi = mbc3 ? 0xFF : 0;
            return in_range(v, name, 0, 0, name, 0, hi,
                            "the register's width on this cartridge's controller");
          }};
}

// The MBC3 clock (Pan Docs "MBC3"): S, M (6 bits), H (5), DL (8), DH (day bit 8, halt,
// carry: 0xC1), counting then latched (templates/hw/cartridge.h rtc_write).
std::string rtc_check(const View& v) {
  static const uint8_t bits[5] = {0x3F, 0x3F, 0x1F, 0xFF, 0xC1};
  for (size_t i = 0; i < GBX_RTC_BYTES; ++i) {
    const uint64_t x = v.u("rtc_regs", i, 1);
    if (x & ~(uint64_t)bits[i % 5])
      return fail("rtc_regs[" + std::to_string(i) + "]", (int64_t)x,
                  "within mask " + std::to_string(bits[i % 5]) + " (the clock register's bits)");
  }
  return "";
}

// apu_length (templates/hw/io.h GBX_APU_*): length counters 64 (CH1, CH2, CH4) and 256 (CH3)
// down to 0; CH1 frequency and sweep shadow, CH3 frequency (11 bits); the sweep word (timer
// 0-8, bits 4-5 flags); the sequencer offset (3 bits); CH3's sample index (0-31) and fetch gap
// (2 * (2048 - frequency) at most); word 11 unused; words 12-15 CH3's next fetch cycle.
std::string apu_check(const View& v) {
  static const uint16_t hi[12] = {64, 64, 256, 64, 0x7FF, 0x7FF, 0x3F, 7, 0x7FF, 31, 4096, 0};
  for (size_t i = 0; i < 12; ++i) {
    const std::string label = "apu_length[" + std::to_string(i) + "]";
    std::string e = in_range(v, "apu_length", i, 2, label, 0, hi[i], "templates/hw/io.h GBX_APU_*");
    if (!e.empty()) return e;
  }
  if ((v.u("apu_length", 6, 2) & 15u) > 8u)
    return fail("apu_length[6]", (int64_t)v.u("apu_length", 6, 2),
                "a sweep timer (bits 0-3) of 0-8");
  const int64_t next = (int64_t)v.u("apu_length", 3, 8), c = v.cycles();
  if (next < kStateEarliest || next > c + kStateEventAhead)
    return fail("apu_length[12-15]", next,
                std::to_string(kStateEarliest) + " to cycle_count + " +
                    std::to_string(kStateEventAhead) + " (CH3's next fetch)");
  return "";
}

// LcdFifo (templates/hw/ppu_fifo.h), byte offsets.
enum FifoByte {
  kActive = 0,
  kLine = 1,
  kDotLo = 2,
  kDotHi = 3,
  kBgN = 6,
  kFstep = 11,
  kFx = 12,
  kX = 16,
  kDiscard = 17,
  kWin = 18,
  kObjNext = 19,
  kStall = 20,
  kLastTile = 21,
  kScx7 = 22,
};
constexpr uint8_t kWinShift = 0x08, kWinObj = 0x10, kIdleLine = 0xFF;

std::string fifo_check(const View& v) {
  const SaveStateRecord* r = v.rec("lcd_fifo");
  if (!r || r->bytes.size() != GBX_LCD_FIFO_BYTES) return "";
  const uint8_t* f = r->bytes.data();
  auto bad = [](const char* sub, int64_t x, const std::string& must) {
    return fail(std::string("lcd_fifo.") + sub, x, must);
  };
  struct Max {
    const char* name;
    int at;
    uint8_t hi;
    const char* why;
  };
  static const Max maxes[] = {
      {"active", kActive, 1, "a flag"},
      {"bg_n", kBgN, 8, "pixels in the 8-pixel background FIFO"},
      {"fstep", kFstep, 6, "the fetcher's steps"},
      {"fx", kFx, 31, "a column of the 32-tile map"},
      {"x", kX, 160, "a screen x, 160 when the line is done"},
      {"discard", kDiscard, 7, "pixels of a tile"},
      {"obj_next", kObjNext, 10, "the line's at most 10 objects"},
      {"stall", kStall, 13, "the first fetch's 13 dots or an object's penalty"},
      {"scx7", kScx7, 7, "SCX % 8"},
  };
  for (const Max& m : maxes)
    if (f[m.at] > m.hi)
      return bad(m.name, f[m.at], "0-" + std::to_string(m.hi) + " (" + m.why + ")");
  if (f[kLine] > 143 && f[kLine] != kIdleLine)
    return bad("line", f[kLine], "0-143 or 255 (a visible line, or none)");
  const int dots = f[kDotLo] | f[kDotHi] << 8;
  if (dots >= kLineDots) return bad("dot", dots, "0-455 (dots of one line)");
  if (f[kLastTile] > 21 && f[kLastTile] != 0xFF)
    return bad("last_tile", f[kLastTile], "0-21 or 255 (the tile of an object at X < 168)");
  if ((f[kWin] & kWinObj) && (f[kObjNext] < 1))
    return bad("obj_next", f[kObjNext], "1-10 while an object fetch is under way (win bit 4)");
  if ((f[kWin] & kWinShift) && f[kX] < 1)
    return bad("x", f[kX], "at least 1 while the line is drawn a pixel left (win bit 3)");
  if (!f[kActive]) return "";
  if (v.in.flat64k) return bad("active", 1, "0 (memory model flat64k has no PPU)");
  // Active: the line in progress is the one LY says. The FIFO renderer ends a line's record
  // when the line's pixels are out, idles it when the LCD is switched off (lcd_lcdc_written),
  // and kernels without the FIFO idle a loaded one at their step's start (kernel/step.tmpl),
  // so every state a kernel saves holds it active only on the PPU's current visible line.
  const uint64_t lcdc = v.u("mem", GBX_MEM_IO + 0x40, 1);
  if (!(lcdc & 0x80)) return bad("active", 1, "0 while the LCD is off (LCDC bit 7 clear)");
  const int64_t c = v.cycles(), epoch = v.s64("ppu_epoch");
  if (c < epoch)
    return bad("active", 1, "0 before the LCD's first frame starts (cycle_count < ppu_epoch)");
  const int64_t ly = (c - epoch) % kFrameCycles / kLineDots;
  if (f[kLine] != ly)
    return bad("line", f[kLine],
               std::to_string(ly) + " (LY: the FIFO is active only on the PPU's line)");
  return "";
}

// lcd_win_line: the window's line counter, reset at VBlank and LCD on. The line renderer
// (lcd_fifo all zero) adds one per line drawn, so at most 144; the pixel FIFO adds one per
// window start too, which a program can repeat on a line, so every byte value is reachable.
std::string win_line_check(const View& v) {
  const SaveStateRecord* r = v.rec("lcd_fifo");
  bool fifo_used = false;
  if (r)
    for (uint8_t b : r->bytes) fifo_used |= b != 0;
  if (fifo_used) return "";
  return in_range(v, "lcd_win_line", 0, 1, "lcd_win_line", 0, 144,
                  "lines drawn with the window in a frame");
}

// The seen() set (templates/epilogs/user_expr.tmpl): u32 count, u8 key-0 flag, 3 zero bytes,
// u32 slots probed linearly until an empty one: the count must match the keys held, and one
// slot at least must be empty, or a probe for a new key never ends.
std::string seen_check(const View& v) {
  const SaveStateRecord* r = v.rec("seen");
  if (!r || !v.in.seen_bytes || r->bytes.size() != v.in.seen_bytes || r->bytes.size() < 12)
    return "";
  const size_t slots = (r->bytes.size() - 8) / 4;
  const uint64_t count = v.u("seen", 0, 4), flag = r->bytes[4];
  if (flag > 1) return fail("seen[4]", (int64_t)flag, "0-1 (key 0 is in the set)");
  if (r->bytes[5] || r->bytes[6] || r->bytes[7])
    return fail("seen[5-7]", r->bytes[5] | r->bytes[6] << 8 | r->bytes[7] << 16, "0 (unused)");
  size_t held = 0;
  for (size_t i = 0; i < slots; ++i) held += v.u("seen", 2 + i, 4) != 0;
  if (held >= slots)
    return fail(
        "seen", (int64_t)held,
        "fewer keys than its " + std::to_string(slots) + " slots (a probe ends at an empty one)");
  if (count != held + flag)
    return fail("seen.count", (int64_t)count,
                "the keys it holds (" + std::to_string(held + flag) + ")");
  return "";
}

// An OAM DMA whose bytes have not landed (hw/bus.h): FF46 + 1 of its page, only in its set-up,
// the 2 M-cycles from the FF46 write (dma_end - 648) to its start (dma_end - 640), at which
// the event that lands it has run by any step's end.
std::string dma_pending_check(const View& v) {
  const int64_t x = (int64_t)v.u("dma_pending");
  if (x == 0) return "";
  if (x > 256) return fail("dma_pending", x, "0-256 (FF46 + 1 of a DMA in its set-up)");
  const int64_t start = v.s64("dma_end") - 640, c = v.cycles();
  if (c >= start - 8 && c < start) return "";
  return fail("dma_pending", x,
              "0 unless cycle_count (" + std::to_string(c) + ") is in the DMA's set-up, " +
                  span(start - 8, start - 1) + " (dma_end - 648 to dma_end - 641)");
}

// In GBX_STATE_FIELDS order, one entry per record (a new field: one entry). The rules run in
// this order and stop at the first failure, so cycle_count (then instr_count) is in range
// before the rules that compare with it: no cycle_count + slack overflows.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> t = {
      any("pc"),
      any("sp"),
      any("a"),
      {"f",
       [](const View& v) {
         const int64_t x = (int64_t)v.u("f");
         if (!(x & 0x0F)) return std::string();
         return fail("f", x,
                     "a multiple of 16 (flags ZNHC are bits 4-7, bits 0-3 read 0: Pan Docs "
                     "\"CPU Registers and Flags\")");
       }},
      any("b"),
      any("c"),
      any("d"),
      any("e"),
      any("h"),
      any("l"),
      range("ime", 0, 1, "a flag"),
      range("ei_delay", 0, 1, "a flag"),
      range("run_state", GBX_RUN_ACTIVE, GBX_RUN_STOPPED, "active, halted or stopped"),
      range("halt_bug", 0, 1, "a flag"),
      range("cycle_count", 0, (uint64_t)kStateMaxCycles, "T-cycles since reset"),
      {"instr_count",
       [](const View& v) {
         const int64_t n = v.s64("instr_count"), c = v.cycles();
         if (n >= 0 && n <= c) return std::string();
         return fail("instr_count", n,
                     "0 to cycle_count = " + std::to_string(c) +
                         " (an instruction takes 4 T-cycles or more)");
       }},
      range("cycle_in_frame", 0, kFrameCycles - 1, "T-cycles into a frame"),
      cycle_stamp("div_epoch", kStateSyncAhead, 0, "the cycle DIV was last reset"),
      cycle_stamp("timer_synced", kStateSyncAhead, 0, "the cycle TIMA was caught up to"),
      cycle_stamp("ppu_epoch", kStateSyncAhead, 0, "the cycle the LCD was switched on"),
      cycle_stamp("serial_event", kStateEventAhead, kNever, "the serial transfer's end, or none"),
      cycle_stamp("dma_end", kStateEventAhead, 0, "the end of the last OAM DMA"),
      mbc_reg("mbc_rom_bank"),
      mbc_reg("mbc_ram_bank"),
      mbc_reg("mbc_ram_enable"),
      mbc_reg("mbc_mode"),
      any("serial_buf"),
      {"serial_len",
       [](const View& v) {
         const int64_t n = (int64_t)v.u("serial_len"), i = v.s64("instr_count");
         if (n <= i) return std::string();
         return fail("serial_len", n,
                     "at most instr_count = " + std::to_string(i) + " (one byte per SC write)");
       }},
      range("trap_kind", GBX_TRAP_NONE, GBX_TRAP_LD_B_B, "a GBX_TRAP_* kind"),
      any("trap_pc"),
      any("trap_opcode"),
      cycle_stamp("tima_reload", kStateEventAhead, kNeverPast, "TIMA's last or next reload"),
      cycle_stamp("apu_synced", kStateSyncAhead, 0, "the cycle the APU was caught up to"),
      {"apu_length", apu_check},
      any("joyp_held"),
      any("user_prev"),
      range("user_prev_valid", 0, 1, "a flag"),
      mbc_reg("mbc_rom_bank_hi"),
      mbc_reg("mbc_rtc_latch"),
      {"rtc_regs", rtc_check},
      cycle_stamp("rtc_second_start", kStateSyncAhead, 0, "the start of the clock's second"),
      any("lcd_fb"),
      range("lcd_flags", 0, 31, "GBX_LCD_FLAG_FRONT | WY_HIT | SKIP | NO_SCREEN | BACK_STALE"),
      {"lcd_win_line", win_line_check},
      {"lcd_fifo", fifo_check},
      {"dma_pending", dma_pending_check},
      {"dma_overlap",
       [](const View& v) {
         const int64_t x = (int64_t)v.u("dma_overlap");
         if (x == 0 || (x <= 8 && v.u("dma_pending"))) return std::string();
         return fail("dma_overlap", x,
                     "0, or 1-8 T-cycles while a DMA is in its set-up (dma_pending)");
       }},
      any("mem"),
      {"seen", seen_check},
  };
  return t;
}

}  // namespace

Status check_state_values(const StateRuleInput& in) {
  const View v{in};
  for (const Rule& r : rules()) {
    if (!v.rec(r.record)) continue;
    std::string e = r.check(v);
    if (!e.empty()) return make_error(ErrorKind::Input, std::move(e));
  }
  return ok_status();
}

std::vector<std::string> state_rule_records() {
  std::vector<std::string> out;
  for (const Rule& r : rules()) out.push_back(r.record);
  return out;
}

}  // namespace gbx
