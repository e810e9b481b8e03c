#include "gbx/runtime/mgba_backend.h"

#if !GBX_WITH_MGBA
namespace gbx {
bool mgba_built_in() { return false; }

Result<std::unique_ptr<Backend>> make_mgba_backend(const Rom&, const BackendConfig&) {
  return make_error(ErrorKind::Usage,
                    "the mgba device is not built in: install the Debian package libmgba-dev "
                    "and rebuild (pip install . again)");
}
}  // namespace gbx
#else

#include "gbx/engine/cache.h"
#include "gbx/runtime/env_state.h"
#include "gbx/runtime/save_state.h"
#include "gbx/runtime/worker_pool.h"

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

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>

#include "gbx_abi.h"

namespace gbx {

constexpr size_t kMgbaCoreBytes = 190u * 1024u;
namespace {

// The stepping loop below leans on how Debian's libmgba 0.10.1 runs a halted SM83 (see
// run_unit); these offsets were read from that build's GBProcessEvents/GBHalt machine code.
// A different mGBA needs that loop re-checked, not just a rebuild.
static_assert(offsetof(struct GB, memory) + offsetof(struct GBMemory, ime) == 0x234);
static_assert(offsetof(struct GB, memory) + offsetof(struct GBMemory, ie) == 0x235);
static_assert(offsetof(struct GB, timing) + offsetof(struct mTiming, globalCycles) == 0x938);
static_assert(offsetof(struct GB, cpuBlocked) == 0x9F0);
static_assert(offsetof(struct GB, earlyExit) == 0x9F1);
static_assert(offsetof(struct SM83Core, cycles) == 0x14);
static_assert(offsetof(struct SM83Core, executionState) == 0x1C);
static_assert(offsetof(struct SM83Core, halted) == 0x20);

constexpr int kFrameCycles = 70224;
// The GB core's mTiming counts 2 units per T-cycle in single speed (DMG has no other).
constexpr int64_t kUnitsPerCycle = 2;
constexpr int64_t kFrameUnits = kFrameCycles * kUnitsPerCycle;
constexpr int kObsDim = 32;

// mGBA logs through one process-wide default logger; it is installed once and prints only
// while some backend was created verbose.
std::atomic<bool> g_verbose{false};

void log_to_stderr(struct mLogger*, int category, enum mLogLevel level, const char* format,
                   va_list args) {
  if (!g_verbose.load(std::memory_order_relaxed)) return;
  // Game errors and stubs fire per instruction in some ROMs; debug levels would drown stderr.
  if (level & (mLOG_DEBUG | mLOG_STUB)) return;
  char line[512];
  std::vsnprintf(line, sizeof line, format, args);
  std::fprintf(stderr, "mgba %s: %s\n", mLogCategoryName(category), line);
}

struct mLogger g_logger = {log_to_stderr, nullptr};

void install_logger(bool verbose) {
  static std::once_flag once;
  std::call_once(once, [] { mLogSetDefaultLogger(&g_logger); });
  if (verbose) g_verbose.store(true, std::memory_order_relaxed);
}

bool is_illegal_opcode(uint8_t op) {
  switch (op) {
    case 0xD3:
    case 0xDB:
    case 0xDD:
    case 0xE3:
    case 0xE4:
    case 0xEB:
    case 0xEC:
    case 0xED:
    case 0xF4:
    case 0xFC:
    case 0xFD:
      return true;
    default:
      return false;
  }
}

// Opcode fetch points: a plain fetch, or the re-fetch of the HALT bug.
bool at_instruction_boundary(const SM83Core* cpu) {
  return cpu->executionState == SM83_CORE_FETCH || cpu->executionState == SM83_CORE_HALT_BUG;
}

enum class Unit { Instruction, Dispatch, HaltSlice, Trap };

struct MgbaEnv;

constexpr size_t kVideoStride = 256;  // mGBA's widest GB picture (SGB border), in pixels

// Shade (0-3) of one of mGBA's DMG output colours (its default palette is four greys).
uint8_t shade_of_color(color_t c) {
  const unsigned grey = ((c & 0xFF) + ((c >> 8) & 0xFF) + ((c >> 16) & 0xFF)) / 3;
  return grey >= 0xD5 ? 0 : grey >= 0x80 ? 1 : grey >= 0x2B ? 2 : 3;
}

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

bool tap_init(struct GBSIODriver*) { return true; }
void tap_deinit(struct GBSIODriver*) {}
void tap_write_sb(struct GBSIODriver*, uint8_t) {}
uint8_t tap_write_sc(struct GBSIODriver* driver, uint8_t value) {
  MgbaEnv* env = reinterpret_cast<SerialTap*>(driver)->env;
  if ((value & 0x81) == 0x81 && env->serial.size() < GBX_SERIAL_CAPACITY)
    env->serial.push_back(static_cast<char>(env->gb->memory.io[GB_REG_SB]));
  return value;
}

void deadline_reached(struct mTiming*, void* context, uint32_t) {
  static_cast<struct GB*>(context)->earlyExit = true;
}

}  // namespace

// One env's state as read from an mgba blob, checked against the core it will go into.
struct MgbaSnapshot {
  int64_t units = 0, frame_units = 0, frames = 0, instr = 0, lag = 0;
  int32_t action = 0;
  uint8_t trap_kind = GBX_TRAP_NONE, trap_opcode = 0, last_kind = 0;
  uint16_t trap_pc = 0;
  std::vector<uint8_t> serial, sram, core;
  // The serial transfer in progress, which mGBA 0.10's serializer leaves out.
  int32_t sio_bits = 0, sio_period = 0, sio_next = 0, sio_until = 0;
  uint8_t sio_pending_sb = 0, sio_scheduled = 0;
};

namespace {
void frame_ended(void* context) {
  MgbaEnv& e = *static_cast<MgbaEnv*>(context);
  for (int y = 0; y < GBX_SCREEN_H; ++y)
    for (int x = 0; x < GBX_SCREEN_W; ++x)
      e.screen[(size_t)y * GBX_SCREEN_W + x] = shade_of_color(e.video[y * kVideoStride + x]);
  e.screen_blank = false;
}
}  // namespace

struct MgbaBackend::Impl {
  BackendConfig cfg;
  std::vector<uint8_t> rom;  // shared by every core: mGBA maps a const-memory VFile in place
  Rom rom_id;                // name and SHA-256 only: what save states are checked against
  // Validated blobs reset() loads: none = mGBA's skip-BIOS reset, one = shared, or one per env.
  std::vector<MgbaSnapshot> reset_states;
  std::vector<std::unique_ptr<MgbaEnv>> envs;
  std::unique_ptr<WorkerPool> pool;
  std::vector<float> obs;
  std::vector<float> reward;

  Status check_env(int env) const {
    if (env < 0 || env >= static_cast<int>(envs.size()))
      return make_error(ErrorKind::Usage, "env " + std::to_string(env) + " is out of range (" +
                                              std::to_string(envs.size()) + " envs)");
    return ok_status();
  }

  std::vector<uint8_t> battery;  // cartridge RAM put into every env at each reset
  bool has_battery = false;

  Status apply_battery(MgbaEnv& e) {
    if (!has_battery) return ok_status();
    if (!e.core->savedataRestore(e.core, battery.data(), battery.size(), true))
      return make_error(ErrorKind::Runtime, "mGBA refused the cartridge RAM");
    return ok_status();
  }

  Status reset_env(MgbaEnv& e) {
    e.core->reset(e.core);
    std::fill(e.screen.begin(), e.screen.end(), 0);  // as the kernels' framebuffer at reset
    e.screen_blank = false;
    if (e.gb->model != GB_MODEL_DMG)
      return make_error(
          ErrorKind::Runtime,
          "mGBA reset into model " + std::string(GBModelToName(e.gb->model)) + " instead of DMG");
    if (e.gb->sio.driver != &e.tap.driver) GBSIOSetDriver(&e.gb->sio, &e.tap.driver);
    // mGBA hides Up+Down and Left+Right pressed together from P1 unless told otherwise (a
    // frontend's choice); a DMG's joypad matrix reports both, as the kernels do, and random
    // actions press both often.
    e.gb->allowOpposingDirections = true;
    e.flush_events();
    e.set_keys(0);
    e.clear_counters();
    return apply_battery(e);
  }

  Result<std::vector<uint8_t>> save_env(MgbaEnv& e) const {
    // core->saveState would tick a CPU that is between M-cycles up to the next fetch, and
    // ticking a halted SM83 may never return (see run_unit).
    if (e.cpu->executionState != SM83_CORE_FETCH)
      return make_error(ErrorKind::Runtime,
                        "mgba cannot save this env now: its CPU is halted between M-cycles "
                        "(mGBA serializes only at an instruction boundary); step it first");
    std::vector<uint8_t> core(e.core->stateSize(e.core));
    if (!e.core->saveState(e.core, core.data()))
      return make_error(ErrorKind::Runtime, "mGBA could not serialize the core");
    const auto* serial = reinterpret_cast<const uint8_t*>(e.serial.data());
    std::vector<SaveStateRecord> r = {
        scalar_record("units", e.units),
        scalar_record("frame_units", e.frame_units),
        scalar_record("frames", e.frames),
        scalar_record("instr", e.instr),
        // Time mGBA has run past the last accounting point (a halted CPU's jump to its event).
        scalar_record("unaccounted", e.mgba_time() - e.mgba_mark),
        scalar_record("action", e.action),
        scalar_record("trap_kind", e.trap_kind),
        scalar_record("trap_pc", e.trap_pc),
        scalar_record("trap_opcode", e.trap_opcode),
        scalar_record("last_kind", static_cast<uint8_t>(e.last_kind)),
        {"serial", std::vector<uint8_t>(serial, serial + e.serial.size())},
        // Cartridge RAM is not part of mGBA's serialized core (mGBA keeps it as save data).
        {"sram", e.gb->sramSize
                     ? std::vector<uint8_t>(e.gb->memory.sram, e.gb->memory.sram + e.gb->sramSize)
                     : std::vector<uint8_t>{}},
        {"mgba_core", std::move(core)},
        // mGBA 0.10 does not serialize the link port: a state saved mid-transfer would load
        // with SC bit 7 set and no transfer running, and a program waiting on it would hang.
        scalar_record("sio_bits", e.gb->sio.remainingBits),
        scalar_record("sio_pending_sb", e.gb->sio.pendingSB),
        scalar_record("sio_period", e.gb->sio.period),
        scalar_record("sio_next", e.gb->sio.nextEvent),
        scalar_record("sio_scheduled",
                      static_cast<uint8_t>(mTimingIsScheduled(&e.gb->timing, &e.gb->sio.event))),
        scalar_record("sio_until", mTimingUntil(&e.gb->timing, &e.gb->sio.event)),
    };
    return write_save_state(rom_id, MemoryModel::Dmg, SaveStateKind::Mgba, r);
  }

  // Every record present with the size this build's cores need; nothing is applied yet.
  Result<MgbaSnapshot> parse_snapshot(const std::vector<uint8_t>& blob) const {
    auto parsed = read_save_state(blob, rom_id, MemoryModel::Dmg, SaveStateKind::Mgba);
    if (!parsed) return parsed.take_error();
    const SaveStateBlob& b = *parsed;
    MgbaSnapshot s;
    Error err;
    bool ok = true;
    auto get = [&](auto& out, const char* name) {
      if (!ok) return;
      auto v = scalar_from<std::decay_t<decltype(out)>>(b, name);
      if (v)
        out = *v;
      else
        ok = false, err = v.take_error();
    };
    get(s.units, "units");
    get(s.frame_units, "frame_units");
    get(s.frames, "frames");
    get(s.instr, "instr");
    get(s.lag, "unaccounted");
    get(s.action, "action");
    get(s.trap_kind, "trap_kind");
    get(s.trap_pc, "trap_pc");
    get(s.trap_opcode, "trap_opcode");
    get(s.last_kind, "last_kind");
    get(s.sio_bits, "sio_bits");
    get(s.sio_pending_sb, "sio_pending_sb");
    get(s.sio_period, "sio_period");
    get(s.sio_next, "sio_next");
    get(s.sio_scheduled, "sio_scheduled");
    get(s.sio_until, "sio_until");
    if (!ok) return err;
    const MgbaEnv& e = *envs.front();
    auto bytes = [&](std::vector<uint8_t>& out, const char* name, size_t max,
                     bool exact) -> Status {
      const SaveStateRecord* r = find_record(b, name);
      if (!r)
        return make_error(ErrorKind::Input, std::string("save state has no '") + name + "' record");
      if (exact ? r->bytes.size() != max : r->bytes.size() > max)
        return make_error(ErrorKind::Input,
                          std::string("save state record '") + name + "' is " +
                              std::to_string(r->bytes.size()) + " bytes, this core " +
                              (exact ? "needs " : "takes at most ") + std::to_string(max));
      out = r->bytes;
      return ok_status();
    };
    if (Status st = bytes(s.serial, "serial", GBX_SERIAL_CAPACITY, false); !st)
      return st.take_error();
    if (Status st = bytes(s.sram, "sram", e.gb->sramSize, true); !st) return st.take_error();
    if (Status st = bytes(s.core, "mgba_core", e.core->stateSize(e.core), true); !st)
      return st.take_error();
    return s;
  }

  Status load_env(MgbaEnv& e, const MgbaSnapshot& s) {
    // GBDeserialize checks the state before it changes anything, so a refusal leaves the env.
    if (!e.core->loadState(e.core, s.core.data()))
      return make_error(ErrorKind::Input, "mGBA refused the core state inside the save state");
    if (!s.sram.empty()) std::memcpy(e.gb->memory.sram, s.sram.data(), s.sram.size());
    if (e.gb->sio.driver != &e.tap.driver) GBSIOSetDriver(&e.gb->sio, &e.tap.driver);
    struct GBSIO& sio = e.gb->sio;
    sio.remainingBits = s.sio_bits;
    sio.pendingSB = s.sio_pending_sb;
    sio.period = s.sio_period;
    sio.nextEvent = s.sio_next;
    if (s.sio_scheduled) {
      // GBDeserialize leaves its event list in timing.reroot; put it back the same way.
      mTimingSchedule(&e.gb->timing, &sio.event, s.sio_until);
      e.gb->timing.reroot = e.gb->timing.root;
      e.gb->timing.root = nullptr;
    }
    e.set_keys(s.action);
    e.units = s.units;
    e.frame_units = s.frame_units;
    e.frames = s.frames;
    e.instr = s.instr;
    e.mgba_mark = e.mgba_time() - s.lag;
    e.serial.assign(s.serial.begin(), s.serial.end());
    e.trap_kind = s.trap_kind;
    e.trap_pc = s.trap_pc;
    e.trap_opcode = s.trap_opcode;
    e.last_kind = static_cast<MgbaStepKind>(s.last_kind);
    return ok_status();
  }

  void clear_outputs(int i) {
    std::fill_n(obs.begin() + static_cast<ptrdiff_t>(i) * kObsDim, kObsDim, 0.0f);
    reward[i] = 0.0f;
  }

  Result<std::unique_ptr<MgbaEnv>> make_env() {
    auto e = std::make_unique<MgbaEnv>();
    e->core = GBCoreCreate();
    if (!e->core) return make_error(ErrorKind::Runtime, "mGBA could not create a GB core");
    if (!e->core->init(e->core)) {
      std::free(e->core);  // init failed before anything else was allocated
      e->core = nullptr;
      return make_error(ErrorKind::Runtime, "mGBA could not initialize a GB core");
    }
    // No port name: nothing is read from the user's mGBA config, so no BIOS file is found
    // and reset takes mGBA's skip-BIOS path. mGBA picks a model per cartridge kind from its
    // configuration (gb/core.c, _GBCoreReset: "gb.model" for a plain cartridge, "sgb.model"
    // for an SGB flag at 0x146, "cgb.model" for CGB-only, "cgb.hybridModel" for 0x143 = 0x80,
    // "cgb.sgbModel" for both flags); a DMG runs every one of them as a DMG game, and so do
    // GBX's kernels. CGB-only cartridges never get here (rom.cpp refuses them).
    mCoreInitConfig(e->core, nullptr);
    for (const char* key :
         {"gb.model", "sgb.model", "cgb.model", "cgb.hybridModel", "cgb.sgbModel"})
      mCoreConfigSetValue(&e->core->config, key, "DMG");
    e->gb = static_cast<struct GB*>(e->core->board);
    e->cpu = static_cast<struct SM83Core*>(e->core->cpu);
    // GBIsROM wants the logo bytes, so mCoreLoadFile would refuse our micro-ROMs;
    // loadROM itself does not check them.
    struct VFile* vf = VFileFromConstMemory(rom.data(), rom.size());
    if (!vf || !e->core->loadROM(e->core, vf)) {
      if (vf) vf->close(vf);
      return make_error(ErrorKind::Input, "mGBA refused the ROM image");
    }
    e->tap.driver.init = tap_init;
    e->tap.driver.deinit = tap_deinit;
    e->tap.driver.writeSB = tap_write_sb;
    e->tap.driver.writeSC = tap_write_sc;
    e->tap.env = e.get();
    if (cfg.render) {
      // Before the reset: mGBA attaches its software renderer only to a core with a buffer.
      e->video.assign(kVideoStride * 224, 0);
      e->screen.assign((size_t)GBX_SCREEN_W * GBX_SCREEN_H, 0);
      e->core->setVideoBuffer(e->core, e->video.data(), kVideoStride);
      e->frame_callbacks.context = e.get();
      e->frame_callbacks.videoFrameEnded = frame_ended;
      e->core->addCoreCallbacks(e->core, &e->frame_callbacks);
    }
    e->deadline.context = e->gb;
    e->deadline.callback = deadline_reached;
    e->deadline.name = "GBX frame deadline";
    e->deadline.priority = 0xFF;  // after mGBA's own events due at the same time
    if (Status st = reset_env(*e); !st) return st.take_error();
    return e;
  }

  void run_epilog(int i) {
    MgbaEnv& e = *envs[i];
    const SM83Core* c = e.cpu;
    uint8_t m[16];
    for (int k = 0; k < 16; ++k) m[k] = e.peek(static_cast<uint16_t>(0xC000 + k));
    auto u8 = [](int v) { return static_cast<float>(v & 0xFF) / 255.0f; };
    if (stage_writes_obs(cfg.stage)) {
      float* o = &obs[static_cast<size_t>(i) * kObsDim];
      o[0] = static_cast<float>(c->pc) / 65535.0f;
      o[1] = static_cast<float>(c->sp) / 65535.0f;
      const uint8_t regs[8] = {c->a, c->f.packed, c->b, c->c, c->d, c->e, c->h, c->l};
      for (int k = 0; k < 8; ++k) o[2 + k] = u8(regs[k]);
      for (int k = 0; k < 16; ++k) o[10 + k] = u8(m[k]);
      o[26] = u8(m[0] ^ m[1]);
      o[27] = u8(m[2] + 5 * m[3]);
      o[28] = u8(m[4] ^ c->a);
      o[29] = u8(m[5] + c->b);
      o[30] = u8(m[6] ^ c->c);
      o[31] = u8(m[7] + c->d);
    }
    if (stage_writes_reward(cfg.stage)) reward[i] = u8(c->a ^ ((m[0] + 3 * m[1]) & 0xFF));
  }
};

MgbaBackend::MgbaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MgbaBackend::~MgbaBackend() = default;

Result<std::unique_ptr<MgbaBackend>> MgbaBackend::create(const Rom& rom, const BackendConfig& cfg) {
  if (cfg.num_envs < 1)
    return make_error(ErrorKind::Usage,
                      "mgba backend needs at least 1 env, got " + std::to_string(cfg.num_envs));
  if (cfg.frames_per_step < 1)
    return make_error(ErrorKind::Usage, "mgba backend needs frames_per_step >= 1, got " +
                                            std::to_string(cfg.frames_per_step));
  if (cfg.threads < 0)
    return make_error(ErrorKind::Usage, "thread count must be >= 0 (0 = all cores), got " +
                                            std::to_string(cfg.threads));
  if (std::strncmp(projectVersion, "0.10.", 5) != 0)
    return make_error(ErrorKind::Runtime, std::string("mgba backend is written against libmgba "
                                                      "0.10.x, found ") +
                                              projectVersion);
  if (rom.bytes.size() < 0x150)
    return make_error(ErrorKind::Input,
                      "ROM '" + rom.name + "' is too small for a cartridge header");
  // One mGBA core per env costs ~185 KiB (measured with libmgba 0.10.1): refuse counts that
  // cannot fit before creating any, rather than grinding through millions of cores.
  if (auto st =
          check_env_count(cfg.num_envs, MemoryModel::Dmg, rom.header.ram_size, kMgbaCoreBytes);
      !st)
    return st.take_error();
  install_logger(cfg.verbose);

  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->rom = rom.bytes;
  impl->rom_id.name = rom.name;
  impl->rom_id.sha256 =
      rom.sha256.size() == 64
          ? rom.sha256
          : sha256_hex(std::string_view(reinterpret_cast<const char*>(rom.bytes.data()),
                                        rom.bytes.size()));
  impl->envs.reserve(static_cast<size_t>(cfg.num_envs));
  for (int i = 0; i < cfg.num_envs; ++i) {
    auto env = impl->make_env();
    if (!env) return env.take_error();
    impl->envs.push_back(std::move(env.value()));
  }
  int threads = cfg.threads > 0
                    ? cfg.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, cfg.num_envs);
  impl->pool = std::make_unique<WorkerPool>(threads);
  impl->obs.assign(static_cast<size_t>(cfg.num_envs) * kObsDim, 0.0f);
  impl->reward.assign(static_cast<size_t>(cfg.num_envs), 0.0f);
  return std::unique_ptr<MgbaBackend>(new MgbaBackend(std::move(impl)));
}

int MgbaBackend::num_envs() const { return static_cast<int>(impl_->envs.size()); }

Status MgbaBackend::reset(uint64_t seed) {
  (void)seed;  // reserved for randomized starts; mGBA's reset is deterministic
  return reset(std::vector<uint8_t>(impl_->envs.size(), 1));
}

Status MgbaBackend::reset(const std::vector<uint8_t>& mask) {
  const int n = num_envs();
  if (static_cast<int>(mask.size()) != n)
    return make_error(ErrorKind::Usage, "reset mask has " + std::to_string(mask.size()) +
                                            " entries for " + std::to_string(n) + " envs");
  const auto& states = impl_->reset_states;
  for (int i = 0; i < n; ++i) {
    if (!mask[i]) continue;
    MgbaEnv& e = *impl_->envs[i];
    Status st = states.empty() ? impl_->reset_env(e)
                               : impl_->load_env(e, states[states.size() == 1 ? 0 : i]);
    if (!st) return st;
    impl_->clear_outputs(i);
  }
  return ok_status();
}

Status MgbaBackend::set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) {
  const int n = num_envs();
  if (!blobs.empty() && blobs.size() != 1 && static_cast<int>(blobs.size()) != n)
    return make_error(ErrorKind::Usage, "set_reset_state takes 0, 1 or " + std::to_string(n) +
                                            " blobs, got " + std::to_string(blobs.size()));
  std::vector<MgbaSnapshot> states;
  for (size_t i = 0; i < blobs.size(); ++i) {
    auto s = impl_->parse_snapshot(blobs[i]);
    if (!s) {
      if (blobs.size() == 1) return s.take_error();
      return make_error(ErrorKind::Input,
                        "reset state " + std::to_string(i) + ": " + s.error().message);
    }
    states.push_back(std::move(*s));
  }
  impl_->reset_states = std::move(states);
  return ok_status();
}

Result<std::vector<uint8_t>> MgbaBackend::save_state(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->save_env(*impl_->envs[env]);
}

Status MgbaBackend::load_state(int env, const std::vector<uint8_t>& blob) {
  if (Status st = impl_->check_env(env); !st) return st;
  auto s = impl_->parse_snapshot(blob);
  if (!s) return s.take_error();
  if (Status st = impl_->load_env(*impl_->envs[env], *s); !st) return st;
  impl_->clear_outputs(env);
  return ok_status();
}

Status MgbaBackend::step(const std::vector<int32_t>& actions) {
  const int n = num_envs();
  if (!actions.empty() && static_cast<int>(actions.size()) != n)
    return make_error(ErrorKind::Usage, "step got " + std::to_string(actions.size()) +
                                            " actions for " + std::to_string(n) + " envs");
  return run_frames(actions, nullptr);
}

Status MgbaBackend::step_frames(const std::vector<int32_t>& actions,
                                const std::vector<int32_t>& frames) {
  if (Status st = check_step_frames(num_envs(), actions, frames); !st) return st;
  return run_frames(actions, &frames);
}

Status MgbaBackend::run_frames(const std::vector<int32_t>& actions,
                               const std::vector<int32_t>* env_frames) {
  const int n = num_envs();
  const bool epilog = impl_->cfg.stage != Stage::EmulateOnly;
  auto step_env = [&](int i) {
    const int frames = env_frames ? (*env_frames)[i] : impl_->cfg.frames_per_step;
    if (frames < 0) return;  // step_frames: this env is not touched
    MgbaEnv& e = *impl_->envs[i];
    const int32_t action = actions.empty() ? 0 : actions[i];
    const int release = impl_->cfg.release_after_frames;
    e.set_keys(release == 0 ? 0 : action);
    for (int f = 0; f < frames; ++f) {
      if (f > 0 && f == release) e.set_keys(0);  // release_after_frames, as the kernel does
      e.run_frame();
    }
    if (epilog) impl_->run_epilog(i);
  };
  // Chunks of one env: cores differ in cost (halted ones are cheap).
  impl_->pool->run(
      n,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) step_env((int)i);
      },
      1);
  return ok_status();
}

Result<CpuState> MgbaBackend::get_cpu_state(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  const MgbaEnv& e = *impl_->envs[env];
  const SM83Core* c = e.cpu;
  CpuState s;
  s.pc = c->pc;
  s.sp = c->sp;
  s.a = c->a;
  s.f = c->f.packed;
  s.b = c->b;
  s.c = c->c;
  s.d = c->d;
  s.e = c->e;
  s.h = c->h;
  s.l = c->l;
  s.ime = e.gb->memory.ime ? 1 : 0;
  // mGBA has no stopped state on DMG: STOP runs as a 2-byte no-op there.
  s.run_state = c->halted ? GBX_RUN_HALTED : GBX_RUN_ACTIVE;
  s.cycle_count = e.units / kUnitsPerCycle;
  s.instr_count = e.instr;
  s.trap_kind = e.trap_kind;
  s.trap_pc = e.trap_pc;
  s.trap_opcode = e.trap_opcode;
  return s;
}

Result<std::vector<uint8_t>> MgbaBackend::read_screen(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  if (!impl_->cfg.render)
    return make_error(ErrorKind::Usage,
                      "the mgba backend draws only when created with render (BackendConfig)");
  return impl_->envs[env]->screen;
}

Result<std::vector<uint8_t>> MgbaBackend::read_memory(int env, uint32_t lo, uint32_t hi) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  if (lo > hi || hi > 0x10000)
    return make_error(ErrorKind::Usage, "memory range [" + std::to_string(lo) + ", " +
                                            std::to_string(hi) + ") is not inside the 64 KiB bus");
  MgbaEnv& e = *impl_->envs[env];
  std::vector<uint8_t> out;
  out.reserve(hi - lo);
  for (uint32_t a = lo; a < hi; ++a) out.push_back(e.peek(static_cast<uint16_t>(a)));
  return out;
}

Status MgbaBackend::load_battery(const BatterySave& save) {
  if (save.has_rtc)
    return make_error(ErrorKind::Usage,
                      "the mgba backend cannot load an MBC3 clock (mGBA's follows the host "
                      "clock); use --backend cpu");
  impl_->battery = save.ram;
  impl_->has_battery = true;
  for (auto& e : impl_->envs)
    if (Status st = impl_->apply_battery(*e); !st) return st;
  return ok_status();
}

Result<BatterySave> MgbaBackend::read_battery(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  MgbaEnv& e = *impl_->envs[env];
  void* data = nullptr;
  const size_t n = e.core->savedataClone(e.core, &data);
  BatterySave save;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  save.ram.assign(p, p + std::min(n, impl_->battery.size()));
  std::free(data);
  if (save.ram.size() != impl_->battery.size())
    return make_error(ErrorKind::Runtime, "mGBA returned " + std::to_string(n) +
                                              " bytes of cartridge RAM, expected " +
                                              std::to_string(impl_->battery.size()));
  return save;
}

Result<std::vector<float>> MgbaBackend::read_obs(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  const auto first = impl_->obs.begin() + static_cast<ptrdiff_t>(env) * kObsDim;
  return std::vector<float>(first, first + kObsDim);
}

Result<float> MgbaBackend::read_reward(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->reward[env];
}

Result<std::string> MgbaBackend::serial_output(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->serial;
}

Status MgbaBackend::step_instruction(int env) {
  if (Status st = impl_->check_env(env); !st) return st;
  impl_->envs[env]->step_instruction();
  return ok_status();
}

Result<MgbaStepKind> MgbaBackend::last_step_kind(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->last_kind;
}

Status MgbaBackend::set_action(int env, int32_t action) {
  if (Status st = impl_->check_env(env); !st) return st;
  impl_->envs[env]->set_keys(action);
  return ok_status();
}

Result<int64_t> MgbaBackend::cycles(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->units / kUnitsPerCycle;
}

Result<int> MgbaBackend::cycle_in_frame(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return static_cast<int>(impl_->envs[env]->frame_units / kUnitsPerCycle);
}

Result<int64_t> MgbaBackend::frames(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->frames;
}

bool mgba_built_in() { return true; }

Result<std::unique_ptr<Backend>> make_mgba_backend(const Rom& rom, const BackendConfig& cfg) {
  auto b = MgbaBackend::create(rom, cfg);
  if (!b) return b.take_error();
  return std::unique_ptr<Backend>(std::move(b.value()));
}

}  // namespace gbx

#endif  // GBX_WITH_MGBA
