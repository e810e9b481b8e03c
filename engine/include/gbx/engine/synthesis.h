#pragma once
// Synthesis parameters: every field is part of the kernel's identity (and its cache key).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gbx {

struct SpecPlan;  // gbx/engine/specialize.h

enum class Stage { EmulateOnly, RewardOnly, ObsOnly, FullStep };
enum class Device { Cpu, Cuda };
enum class MemoryModel { Dmg, Flat64k };
// Per-env memory layout (gbx_abi.h GBX_MEM_PITCH): one env's bytes together, or byte-interleaved
// across envs (coalesced on a GPU).
enum class MemLayout { EnvMajor, Interleaved };
enum class RunMode { Frames, Instructions };
// What the obs stages write: obs_v0's 32 floats, or the screen.
enum class ObsKind { Vec, Pixels };
// Screen observation layouts (docs/guide/screen.md): full u8[144][160], half u8[72][80] (top-left
// pixel of each 2x2), packed u8[144][40] (4 pixels a byte, leftmost in the high bits).
enum class ObsFormat { Full, Half, Packed };

// PPU pixel model (docs/machine/ppu-fifo.md): the scanline renderer (each line drawn at one dot
// with the registers then in force) or the dot-by-dot pixel FIFO (templates/hw/ppu_fifo.h). A
// kernel contains only the chosen one.
enum class PpuModel { Line, Fifo };
// The default: fifo, chosen by the measurements in docs/machine/ppu-fifo.md ("Cost": at most a
// few percent on game-shaped workloads, as lines without mode-3 writes take the line path).
inline constexpr PpuModel kDefaultPpu = PpuModel::Fifo;

// How the step loop dispatches an opcode (docs/internals/divergence.md, "Uniform dispatch"):
// switch, one case per opcode; or uniform, where the register-operand opcodes (LD r,r', ALU
// A,r, INC/DEC r, LD r,d8, the CB page, NOP: 420 of 512) run one shared path with their
// operands and operation read from a table the generator makes from sm83/opcodes.tsv, so GPU
// lanes on LD B,C and ADD A,(HL) issue the same instructions; the rest keep their cases.
enum class Dispatch { Switch, Uniform };

// A hook (BackendConfig::hooks): execution reaching `addr` at an instruction fetch is counted
// per env and step. bank >= 0 (addresses 4000-7FFF only): only while that ROM bank is mapped
// there; -1: any bank.
struct HookAddr {
  int32_t bank = -1;
  uint16_t addr = 0;
  bool operator==(const HookAddr& o) const { return bank == o.bank && addr == o.addr; }
};

// seen(key) (docs/guide/rewards.md): a per-env open-addressing set of 32-bit keys in the env's
// writable memory after cartridge RAM. Capacity: the keys it holds exactly (1..this).
constexpr uint32_t kSeenCapacityMax = 65536;
constexpr size_t kMaxHooks = 64;  // hooks per kernel
// Table slots for a capacity: the power of two >= capacity * 4 / 3 (load <= 0.75).
uint32_t seen_table_slots(uint32_t capacity);
// Bytes per env: 8 (u32 count, u8 key-0 flag, 3 unused) + 4 per slot, little-endian.
uint32_t seen_table_bytes(uint32_t capacity);

struct SynthParams {
  Stage stage = Stage::FullStep;
  Device device = Device::Cpu;
  MemoryModel memory_model = MemoryModel::Dmg;
  RunMode run_mode = RunMode::Frames;
  int obs_dim = 32;
  ObsKind obs = ObsKind::Vec;
  ObsFormat obs_format = ObsFormat::Full;  // used when obs is pixels
  bool render = false;  // draw the framebuffer even when no output reads it (screenshots)
  std::vector<std::string> debug;  // debug options, e.g. "trace"; sorted when hashed
  // User expressions (gbx/engine/user_expr.h), injected at POST_STEP_DISPATCH: a reward that
  // replaces the stage's, a done flag, and values whose previous step prev(i) reads.
  std::string reward_expr;
  std::string done_expr;
  std::vector<std::string> track;

  bool has_user_exprs() const {
    return !reward_expr.empty() || !done_expr.empty() || !track.empty();
  }
  // seen(key) / seen_count(): capacity of the per-env key set. Part of the kernel's identity
  // (and state layout) only when an expression names seen or seen_count.
  uint32_t seen_capacity = 0;
  bool uses_seen() const;
  // Bytes per env the seen set takes (0 when no expression uses it).
  uint32_t seen_bytes() const { return uses_seen() ? seen_table_bytes(seen_capacity) : 0; }
  // Hooks counted per env and step into GbxParams::hits (hit(i) in expressions).
  std::vector<HookAddr> hooks;
  bool rtc_lock = false;  // cartridge clocks (MBC3 RTC) never advance
  MemLayout layout = MemLayout::EnvMajor;
  PpuModel ppu = kDefaultPpu;
  Dispatch dispatch = Dispatch::Switch;
  // Warp-level scheduling of cuda kernels (docs/internals/divergence.md, "Warp-level
  // scheduling"): 0, every running lane takes its next loop iteration together (SIMT as the
  // hardware does it); B >= 1, at each iteration only the lanes whose next unit (opcode, block,
  // halt, interrupt) is the warp's most common run it, the others wait, and a lane that has
  // waited B iterations is served first. Each env's emulated time is its own, so the results
  // are the same; only the issue order differs. No effect on cpu kernels (not in their hash).
  int warp_majority = 0;
  // Register cap of the cuda kernels (__maxnreg__ on each entry; docs/gpu.md "Registers and
  // occupancy"): 0, ptxas's own choice; N (16..255), at most N registers a thread, so more
  // warps fit an SM at the price of spills. No effect on cpu kernels (not in their hash).
  int max_registers = 0;
  // Profiling interpreter: counts instructions executed per ROM offset into
  // GbxParams::profile_counts. Not compiled in otherwise.
  bool profile = false;
  // ROM-specialized kernel (docs/internals/specialization.md): the plan's hot blocks compiled in
  // beside the interpreter. Its ROM SHA-256 and hot-set hash are in canonical(); the blocks' code
  // is in the source, and so in the key.
  std::shared_ptr<const SpecPlan> specialize;

  // Canonical "key=value;..." string used in hashes, metadata and comments.
  std::string canonical() const;
};

std::string_view to_string(Stage s);
std::string_view to_string(Device d);
std::string_view to_string(MemoryModel m);
std::string_view to_string(MemLayout l);
std::string_view to_string(RunMode r);
std::string_view to_string(PpuModel m);
std::optional<PpuModel> parse_ppu_model(std::string_view s);
std::string_view to_string(Dispatch d);
std::optional<Dispatch> parse_dispatch(std::string_view s);
std::string_view to_string(ObsKind k);
std::string_view to_string(ObsFormat f);
std::optional<Stage> parse_stage(std::string_view s);
std::optional<ObsKind> parse_obs_kind(std::string_view s);
std::optional<ObsFormat> parse_obs_format(std::string_view s);
std::optional<Device> parse_device(std::string_view s);
std::optional<MemoryModel> parse_memory_model(std::string_view s);
std::optional<MemLayout> parse_mem_layout(std::string_view s);
std::optional<RunMode> parse_run_mode(std::string_view s);
const std::vector<Stage>& all_stages();

// Which outputs a stage writes; the others are left untouched.
inline bool stage_writes_obs(Stage s) { return s == Stage::ObsOnly || s == Stage::FullStep; }
inline bool stage_writes_reward(Stage s) { return s == Stage::RewardOnly || s == Stage::FullStep; }
// Whether a kernel with these parameters draws the screen.
inline bool synth_renders(const SynthParams& p) {
  return p.render || (p.obs == ObsKind::Pixels && stage_writes_obs(p.stage));
}
// The pixel model a kernel is built with: a kernel that draws nothing has no renderer, and the
// two models' code outside the renderer is the same (mode 3's length, STAT and the VRAM/OAM
// locks come from hw/ppu.h in both), so it is built, keyed and cached as line's whatever `ppu`
// says.
inline PpuModel synth_ppu(const SynthParams& p) {
  return synth_renders(p) ? p.ppu : PpuModel::Line;
}
// Bytes of one env's pixels observation in format f.
inline int pixels_obs_bytes(ObsFormat f) {
  return f == ObsFormat::Full ? 144 * 160 : f == ObsFormat::Half ? 72 * 80 : 144 * 40;
}

}  // namespace gbx
