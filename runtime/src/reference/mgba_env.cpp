// One env of the mGBA reference backend (mgba_env.h): the logger, the serial tap, frame
// capture and the run deadline.
// Built only with mGBA (GBX_WITH_MGBA, runtime/CMakeLists.txt).
#if GBX_WITH_MGBA
#include "mgba_env.h"

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <mutex>

namespace gbx::mgba_detail {

// The stepping loop (MgbaEnv::run_unit, mgba_env.h) leans on how Debian's libmgba 0.10.1 runs a
// halted SM83 (see run_unit); these offsets were read from that build's GBProcessEvents/GBHalt
// machine code. A different mGBA needs that loop re-checked, not just a rebuild.
static_assert(offsetof(struct GB, memory) + offsetof(struct GBMemory, ime) == 0x234);
static_assert(offsetof(struct GB, memory) + offsetof(struct GBMemory, ie) == 0x235);
static_assert(offsetof(struct GB, timing) + offsetof(struct mTiming, globalCycles) == 0x938);
static_assert(offsetof(struct GB, cpuBlocked) == 0x9F0);
static_assert(offsetof(struct GB, earlyExit) == 0x9F1);
static_assert(offsetof(struct SM83Core, cycles) == 0x14);
static_assert(offsetof(struct SM83Core, executionState) == 0x1C);
static_assert(offsetof(struct SM83Core, halted) == 0x20);

namespace {

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

}  // namespace

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

uint8_t shade_of_color(color_t c) {
  const unsigned grey = ((c & 0xFF) + ((c >> 8) & 0xFF) + ((c >> 16) & 0xFF)) / 3;
  return grey >= 0xD5 ? 0 : grey >= 0x80 ? 1 : grey >= 0x2B ? 2 : 3;
}

void frame_ended(void* context) {
  MgbaEnv& e = *static_cast<MgbaEnv*>(context);
  for (int y = 0; y < GBX_SCREEN_H; ++y)
    for (int x = 0; x < GBX_SCREEN_W; ++x)
      e.screen[(size_t)y * GBX_SCREEN_W + x] = shade_of_color(e.video[y * kVideoStride + x]);
  e.screen_blank = false;
}

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

}  // namespace gbx::mgba_detail

#endif  // GBX_WITH_MGBA
