// One env of the mGBA reference backend: an mGBA core stepped by GBX's units (an
// instruction, an interrupt dispatch, a slice of HALT), with its serial tap, frame capture
// and run deadline. Internal to mgba_backend.cpp and mgba_env.cpp; only built with mGBA
// (GBX_WITH_MGBA).
#pragma once

// clang-format off
// mGBA's struct layouts depend on its build flags: flags.h must come before any other mGBA
// header, or struct GB / struct mCore would not match the library.
#include <mgba/flags.h>
// clang-format on

#include <mgba-util/vfs.h>
#include <mgba/core/config.h>
#include <mgba/core/core.h>
#include <mgba/core/log.h>
#include <mgba/core/timing.h>
#include <mgba/core/version.h>
#include <mgba/gb/core.h>
#include <mgba/gb/interface.h>
#include <mgba/internal/gb/gb.h>
#include <mgba/internal/gb/io.h>
#include <mgba/internal/gb/memory.h>
#include <mgba/internal/gb/video.h>
#include <mgba/internal/sm83/sm83.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gbx/runtime/reference/mgba_backend.h"
#include "gbx_abi.h"

namespace gbx::mgba_detail {

constexpr int kFrameCycles = 70224;
// The GB core's mTiming counts 2 units per T-cycle in single speed (DMG has no other).
constexpr int64_t kUnitsPerCycle = 2;
constexpr int64_t kFrameUnits = kFrameCycles * kUnitsPerCycle;
constexpr int kObsDim = 32;

// Starts mGBA's process-wide logger (once); verbose makes it print.
void install_logger(bool verbose);

bool is_illegal_opcode(uint8_t op);

// Opcode fetch points: a plain fetch, or the re-fetch of the HALT bug.
inline bool at_instruction_boundary(const SM83Core* cpu) {
  return cpu->executionState == SM83_CORE_FETCH || cpu->executionState == SM83_CORE_HALT_BUG;
}

enum class Unit { Instruction, Dispatch, HaltSlice, Trap };

struct MgbaEnv;

constexpr size_t kVideoStride = 256;  // mGBA's widest GB picture (SGB border), in pixels

// Shade (0-3) of one of mGBA's DMG output colours (its default palette is four greys).
uint8_t shade_of_color(color_t c);

// mGBA's videoFrameEnded callback: the frame as shades into MgbaEnv::screen.
void frame_ended(void* context);

// A link-port "driver" that only listens: mGBA tells drivers about every SB/SC write and
// schedules the transfer itself either way, so attaching it changes no timing.
struct SerialTap {
  struct GBSIODriver driver;  // first member: mGBA hands back &driver
  MgbaEnv* env;
};

struct MgbaEnv {
  struct mCore* core = nullptr;
  struct GB* gb = nullptr;
  struct SM83Core* cpu = nullptr;
  SerialTap tap{};
  struct mTimingEvent deadline {};

  int64_t mgba_mark = 0;    // mGBA time (units) at the last accounting point
  int64_t units = 0;        // timing units since reset
  int64_t frame_units = 0;  // units into the current frame, overshoot carried
  int64_t frames = 0;
  int64_t instr = 0;
  int32_t action = 0;
  std::string serial;
  uint8_t trap_kind = GBX_TRAP_NONE;
  uint16_t trap_pc = 0;
  uint8_t trap_opcode = 0;
  MgbaStepKind last_kind = MgbaStepKind::Instruction;

  // With BackendConfig::render: mGBA's software renderer draws into `video` (one row of
  // kVideoStride pixels per line, written as lines are drawn); at each frame end (VBlank
  // start, mGBA's videoFrameEnded) the frame is copied to `screen` as shades, so `screen` is
  // the last complete frame as GBX's front buffer is.
  std::vector<color_t> video;
  std::vector<uint8_t> screen;
  bool screen_blank = false;  // `screen` cleared for an LCD that is off
  struct mCoreCallbacks frame_callbacks {};

  MgbaEnv() = default;
  MgbaEnv(const MgbaEnv&) = delete;
  MgbaEnv& operator=(const MgbaEnv&) = delete;
  ~MgbaEnv() {
    if (!core) return;
    mCoreConfigDeinit(&core->config);
    core->deinit(core);  // frees core, its GB and SM83Core, and closes the ROM's VFile
  }

  // Elapsed time as mGBA counts it. GBProcessEvents adds every batch of CPU cycles it hands
  // to mTimingTick to timing.globalCycles (USE_DEBUGGERS is on in this build) and restarts
  // cpu->cycles from 0, so globalCycles + cycles grows by exactly the units each M-cycle
  // and each halted wait consumed, however events split them. (mTimingCurrentTime() is
  // masterCycles + cycles; adding it to globalCycles counts processed time twice, and
  // masterCycles alone is 32-bit and wraps after ~30000 frames.)
  int64_t mgba_time() const { return static_cast<int64_t>(gb->timing.globalCycles) + cpu->cycles; }

  // Folds the time since the last mark into the counters; the frame rule wraps here.
  void account() {
    int64_t now = mgba_time();
    // mGBA moves a halted CPU's clock to its next event before running it. Nothing happens
    // in between, so the state at the frame end is the current one: a frame that ends in
    // HALT ends exactly at 70224, and the rest of the jump counts in the next frame.
    if (cpu->halted) now = std::min(now, mgba_mark + (kFrameUnits - frame_units));
    units += now - mgba_mark;
    frame_units += now - mgba_mark;
    mgba_mark = now;
    while (frame_units >= kFrameUnits) {
      frame_units -= kFrameUnits;
      ++frames;
    }
  }

  // Side-effect-free byte of the bus view.
  uint8_t peek(uint16_t addr) {
    if (addr >= GB_BASE_OAM && addr < GB_BASE_UNUSABLE) return gb->video.oam.raw[addr & 0xFF];
    if (addr == GB_BASE_IO + GB_REG_JOYP) {
      // GBIORead recomputes JOYP into io[] and may raise the joypad interrupt: put back
      // everything that path can touch.
      const uint8_t joyp = gb->memory.io[GB_REG_JOYP];
      const uint8_t iflag = gb->memory.io[GB_REG_IF];
      const bool halted = cpu->halted;
      const bool pending = cpu->irqPending;
      const uint8_t value = GBView8(cpu, addr, -1);
      gb->memory.io[GB_REG_JOYP] = joyp;
      gb->memory.io[GB_REG_IF] = iflag;
      cpu->halted = halted;
      cpu->irqPending = pending;
      return value;
    }
    return GBView8(cpu, addr, -1);
  }

  // Brings mGBA's state up to the current time: every event due at or before now has run,
  // so I/O registers read back as of this instruction boundary. It is exactly what the next
  // SM83Tick would do first, so the emulation does not change. Not while halted: there
  // GBProcessEvents would move the CPU on to its next event.
  void flush_events() {
    if (!cpu->halted && cpu->cycles >= cpu->nextEvent) cpu->irqh.processEvents(cpu);
  }

  // Runs one unit: an instruction, an interrupt dispatch, or a stretch of HALT.
  Unit run_unit() {
    if (trap_kind != GBX_TRAP_NONE) return Unit::Trap;
    Unit kind = Unit::Instruction;
    // A halted SM83 advances only through GBProcessEvents, which moves it from event to
    // event. SM83Tick is never called while halted: in 0.10.1 it re-runs processEvents
    // until the CPU wakes, forever if it never does (HALT with IE=0). With IME=1 and IE!=0,
    // GBProcessEvents itself loops until an interrupt wakes the CPU, so a deadline event at
    // the frame end sets earlyExit to hand control back. The deadline exists only then, to
    // leave mGBA's event sequence otherwise untouched.
    while (cpu->halted || cpu->cycles >= cpu->nextEvent) {
      const bool arm = cpu->halted && gb->memory.ime && gb->memory.ie;
      if (arm) {
        const int64_t left = std::max<int64_t>(kFrameUnits - frame_units, kUnitsPerCycle);
        mTimingDeschedule(&gb->timing, &deadline);
        mTimingSchedule(&gb->timing, &deadline, static_cast<int32_t>(left));
      }
      cpu->irqh.processEvents(cpu);
      if (arm) mTimingDeschedule(&gb->timing, &deadline);
      if (cpu->halted) {
        kind = Unit::HaltSlice;
        break;
      }
    }
    if (kind != Unit::HaltSlice) {
      // Here cycles < nextEvent, so the first SM83Tick goes straight to the fetch, where
      // _SM83Step dispatches if irqPending is set and fetches the opcode otherwise.
      if (cpu->irqPending) {
        kind = Unit::Dispatch;
      } else {
        const uint8_t op = peek(cpu->pc);
        if (is_illegal_opcode(op)) {
          trap_kind = GBX_TRAP_ILLEGAL_OPCODE;
          trap_pc = cpu->pc;
          trap_opcode = op;
          return Unit::Trap;
        }
      }
      // One tick per M-cycle until the next fetch. A HALT-bug HALT ends at the re-fetch,
      // which then runs as its own instruction (core->step would run both at once). A HALT
      // that halts ends the unit at once: GBHalt may leave executionState short of FETCH
      // (when the next event is not on the M-cycle grid, e.g. a serial bit), and only
      // GBProcessEvents brings it back; another SM83Tick here would never return.
      do {
        SM83Tick(cpu);
      } while (!cpu->halted && !at_instruction_boundary(cpu));
      if (kind == Unit::Instruction) ++instr;
      flush_events();
    }
    // The LCD off blanks the screen (Pan Docs "LCDC.7"), and GBX's front buffer with it;
    // mGBA's buffer keeps the last frame, so the adapter blanks its copy, until the next
    // frame mGBA finishes.
    if (!screen.empty() && !screen_blank && !(gb->memory.io[GB_REG_LCDC] & 0x80)) {
      std::fill(screen.begin(), screen.end(), 0);
      screen_blank = true;
    }
    account();
    return kind;
  }

  void run_frame() {
    const int64_t target = frames + 1;
    while (frames < target && trap_kind == GBX_TRAP_NONE) run_unit();
  }

  void step_instruction() {
    Unit u;
    do {
      u = run_unit();
    } while (u == Unit::Dispatch);
    last_kind = u == Unit::Instruction ? MgbaStepKind::Instruction
                : u == Unit::HaltSlice ? MgbaStepKind::Halted
                                       : MgbaStepKind::Trapped;
  }

  void set_keys(int32_t a) {
    action = a;
    core->setKeys(core, static_cast<uint32_t>(a) & 0xFF);
  }

  void clear_counters() {
    mgba_mark = mgba_time();
    units = frame_units = frames = instr = 0;
    serial.clear();
    trap_kind = GBX_TRAP_NONE;
    trap_pc = 0;
    trap_opcode = 0;
    last_kind = MgbaStepKind::Instruction;
  }
};

// The serial tap's driver callbacks and the run deadline's timing event.
bool tap_init(struct GBSIODriver*);
void tap_deinit(struct GBSIODriver*);
void tap_write_sb(struct GBSIODriver*, uint8_t);
uint8_t tap_write_sc(struct GBSIODriver* driver, uint8_t value);
void deadline_reached(struct mTiming*, void* context, uint32_t);

}  // namespace gbx::mgba_detail
