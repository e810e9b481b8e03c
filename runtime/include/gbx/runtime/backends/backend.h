#pragma once
// The interface every backend (cpu, cuda, mgba) implements. Addresses are Game Boy bus
// addresses (0x0000-0xFFFF); reading memory never has side effects.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx {

struct CpuState {
  uint16_t pc = 0, sp = 0;
  uint8_t a = 0, f = 0, b = 0, c = 0, d = 0, e = 0, h = 0, l = 0;
  uint8_t ime = 0;
  uint8_t run_state = 0;     // GBX_RUN_*
  int64_t cycle_count = -1;  // T-cycles since reset; -1 if the backend cannot report it
  int64_t instr_count = -1;  // instructions since reset; -1 if unknown
  uint8_t trap_kind = 0;
  uint16_t trap_pc = 0;
  uint8_t trap_opcode = 0;
};

// Battery-backed cartridge contents, what a .sav file holds (runtime/src/states/battery_file.cpp).
struct BatterySave {
  std::vector<uint8_t> ram;  // cartridge RAM, the header's size (MBC2: 512 half-bytes)
  bool has_rtc = false;      // MBC3 clock: S M H DL DH, counting and latched
  uint8_t rtc_live[5] = {};
  uint8_t rtc_latched[5] = {};
};

struct BackendConfig {
  int num_envs = 1;
  int frames_per_step = 1;
  Stage stage = Stage::FullStep;
  int threads = 0;       // cpu/mgba: 0 = all cores
  int device_index = 0;  // cuda
  bool verbose = false;
  // Synthesis choices beyond the stage (cpu/cuda). flat64k + instructions is the
  // per-instruction conformance configuration.
  MemoryModel memory_model = MemoryModel::Dmg;
  RunMode run_mode = RunMode::Frames;
  int64_t instructions_per_step = 1;  // run mode instructions
  // Buttons of a step's action are held for this many frames, then released (< 0: never).
  int release_after_frames = -1;
  // Synthesis debug options (e.g. "ldbb_trap": LD B,B stops the env; testrom uses it).
  std::vector<std::string> debug;
  int block_size = 0;  // cuda: threads per block (multiple of 32); 0 = throughput_launch_shape
  // User reward / done / tracked expressions compiled into the kernel (cpu/cuda;
  // gbx/engine/user_expr.h).
  std::string reward_expr;
  std::string done_expr;
  std::vector<std::string> track;
  // seen(key) capacity (SynthParams::seen_capacity; used only when an expression names seen).
  uint32_t seen_capacity = 0;
  // cpu/cuda: hooks counted per env and step (SynthParams::hooks): the "hits" output, hit(i).
  std::vector<HookAddr> hooks;
  bool rtc_lock = false;                   // cartridge clocks never advance (synthesis parameter)
  MemLayout layout = MemLayout::EnvMajor;  // per-env memory layout (synthesis parameter)
  PpuModel ppu = kDefaultPpu;              // pixel model: line | fifo (synthesis parameter)
  Dispatch dispatch = Dispatch::Switch;    // opcode dispatch: switch | uniform (synthesis)
  int warp_majority = 0;  // cuda: warp-level scheduling bound, 0 = SIMT (synthesis; SynthParams)
  int max_registers = 0;  // cuda: the kernels' register cap, 0 = ptxas's (synthesis)
  ObsKind obs = ObsKind::Vec;  // what the obs stages write (obs_v0 or the screen)
  ObsFormat obs_format = ObsFormat::Full;
  bool render = false;                 // draw the screen whatever the stage (screenshots)
  std::vector<uint16_t> gather_addrs;  // RAM gather: bytes the obs stages copy out per env
  // cpu: count instructions per ROM offset (the profiling interpreter, gbx/engine/specialize.h)
  bool profile = false;
  // cpu/cuda: a ROM-specialized kernel for this plan (its ROM must be the backend's ROM).
  std::shared_ptr<const SpecPlan> specialize;
  // cpu/cuda: specialize automatically: profile this many frames on the profiling interpreter,
  // then compile the specialized kernel in the background and swap it in between steps once
  // it is ready (0: off). Steps never wait for that compile.
  int specialize_auto_frames = 0;
  // cuda: a kernel the cache does not hold yet starts as a quick compile (NVRTC
  // --Ofast-compile=max: about 1.5 s, a kernel many times slower) while the optimized kernel
  // compiles on a background thread; it is swapped in between steps when ready (README
  // "Compile time"). Off: create() waits for the optimized compile. Benchmarks keep it off.
  bool tiered_start = false;
};

// One named, typed output of a step, for all envs: env-major inside its section.
struct OutputSection {
  std::string name;        // obs_v0 | pixels | reward | done | gather
  std::string dtype;       // f32 | u8
  std::vector<int> shape;  // per env
  size_t offset = 0;       // bytes from the start of the block (64-byte aligned)
  size_t bytes_per_env = 0;
};

// Every output of a step for all envs in one contiguous block, so one copy returns them.
struct OutputBlock {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  int num_envs = 0;
  std::vector<OutputSection> sections;
  const OutputSection* find(const std::string& name) const {
    for (const auto& sec : sections)
      if (sec.name == name) return &sec;
    return nullptr;
  }
};

// The sections a kernel backend allocates for this configuration, in block order: obs_v0
// f32[32] (obs vec) or pixels u8[...] (obs pixels), reward f32, done u8, gather u8[k] (when
// gather addresses are given), hits u32[hooks] (when hooks are given). Returns the block size in
// bytes.
size_t output_layout(const BackendConfig& cfg, int num_envs, std::vector<OutputSection>& out);

// The synthesis parameters a kernel backend compiles for this configuration.
inline SynthParams synth_params_for(const BackendConfig& cfg, Device device, int obs_dim) {
  SynthParams p;
  p.stage = cfg.stage;
  p.device = device;
  p.memory_model = cfg.memory_model;
  p.run_mode = cfg.run_mode;
  p.obs_dim = obs_dim;
  p.debug = cfg.debug;
  p.reward_expr = cfg.reward_expr;
  p.done_expr = cfg.done_expr;
  p.track = cfg.track;
  p.seen_capacity = cfg.seen_capacity;
  p.hooks = cfg.hooks;
  p.rtc_lock = cfg.rtc_lock;
  p.layout = cfg.layout;
  p.ppu = cfg.ppu;
  p.dispatch = cfg.dispatch;
  p.warp_majority = cfg.warp_majority;
  p.max_registers = cfg.max_registers;
  p.obs = cfg.obs;
  p.obs_format = cfg.obs_format;
  p.render = cfg.render;
  p.profile = cfg.profile;
  p.specialize = cfg.specialize;
  return p;
}

// Hooks the ROM can reach: addresses 0000-9FFF, A000-FDFF (cartridge RAM, WRAM, echo) and
// FF80-FFFE (HRAM); a bank only on 4000-7FFF and below the ROM's bank count. One clear error.
Status check_hooks(const Rom& rom, const std::vector<HookAddr>& hooks);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual int num_envs() const = 0;
  // Every env to the reset state: DMG post-boot unless set_reset_state() chose blobs. seed is
  // reserved for randomized starts.
  virtual Status reset(uint64_t seed) = 0;
  // Envs whose mask byte is non-zero go back to the reset state, on the device itself; the
  // others are untouched. mask has one byte per env.
  virtual Status reset(const std::vector<uint8_t>& mask) {
    (void)mask;
    return unsupported("reset a subset of envs");
  }
  // The reset state: no blobs = DMG post-boot, one blob = shared by every env, num_envs()
  // blobs = one per env. Every blob is checked before any is kept.
  virtual Status set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) {
    (void)blobs;
    return unsupported("keep a reset state");
  }
  // One env's machine state as a save-state blob (gbx/runtime/states/save_state.h), and back. A
  // blob of another ROM, state ABI, format version or backend kind is refused in one line and
  // leaves the env untouched.
  virtual Result<std::vector<uint8_t>> save_state(int env) {
    (void)env;
    return unsupported("save states");
  }
  virtual Status load_state(int env, const std::vector<uint8_t>& blob) {
    (void)env;
    (void)blob;
    return unsupported("load states");
  }
  // Env src's whole machine state into every env whose dst_mask byte is set (src itself
  // excepted), on the backend (cuda: device to device, no host copy); their outputs are
  // zeroed, as by a reset. For go-explore and "swarm" restarts from one env's state.
  virtual Status copy_state(int src, const std::vector<uint8_t>& dst_mask) {
    (void)src;
    (void)dst_mask;
    return unsupported("copy states between envs");
  }
  // Advances every env by frames_per_step frames, then runs the stage epilog.
  // actions: one int32 per env (may be empty = no input). May be asynchronous (cuda).
  virtual Status step(const std::vector<int32_t>& actions) = 0;
  // One call with a frame count per env (frames: one int32 per env): env i runs frames[i]
  // frames with actions[i] (actions may be empty = no input), then the stage epilog; 0 runs
  // only the epilog (its outputs refreshed from the current state, e.g. after a reset);
  // < 0 leaves the env untouched. The no-op frames after resets (python/gbx/vec_env.py
  // noop_max) run in one such call. May be asynchronous (cuda).
  virtual Status step_frames(const std::vector<int32_t>& actions,
                             const std::vector<int32_t>& frames) {
    (void)actions;
    (void)frames;
    return unsupported("run per-env frame counts");
  }
  virtual Status sync() = 0;
  virtual Result<CpuState> get_cpu_state(int env) = 0;
  // Every env's registers and counters (cuda: one transfer for all envs; verify keeps the
  // per-env get_cpu_state).
  virtual Result<std::vector<CpuState>> cpu_states() {
    std::vector<CpuState> out;
    for (int e = 0; e < num_envs(); ++e) {
      auto s = get_cpu_state(e);
      if (!s) return s.take_error();
      out.push_back(*s);
    }
    return out;
  }
  // Bytes [lo, hi) of env's bus view (hi exclusive, <= 0x10000).
  virtual Result<std::vector<uint8_t>> read_memory(int env, uint32_t lo, uint32_t hi) = 0;
  // The same range with cartridge RAM as the env holds it (current bank) even while the
  // controller disables it.
  virtual Result<std::vector<uint8_t>> read_memory_raw(int env, uint32_t lo, uint32_t hi) {
    (void)env, (void)lo, (void)hi;
    return make_error(ErrorKind::Usage, "the " + name() + " backend has no raw memory view");
  }
  // Battery RAM (and clock): load_battery puts `save` into every env now and at each reset;
  // read_battery returns env's.
  virtual Status load_battery(const BatterySave& save) {
    (void)save;
    return make_error(ErrorKind::Usage, "the " + name() + " backend cannot load battery RAM");
  }
  virtual Result<BatterySave> read_battery(int env) {
    (void)env;
    return make_error(ErrorKind::Usage, "the " + name() + " backend cannot read battery RAM");
  }
  // Stage outputs and serial capture; empty when the backend does not produce them.
  virtual Result<std::vector<float>> read_obs(int env) {
    (void)env;
    return std::vector<float>{};
  }
  virtual Result<float> read_reward(int env) {
    (void)env;
    return 0.0f;
  }
  // The step's outputs for all envs (layout: output_layout()); views stay valid until the
  // next step or reset.
  virtual Result<OutputBlock> outputs() {
    return make_error(ErrorKind::Usage, "the " + name() + " backend has no output block");
  }
  // env's pixels observation (obs kind pixels) in the configured format.
  virtual Result<std::vector<uint8_t>> read_pixels(int env) {
    (void)env;
    return make_error(ErrorKind::Usage, "the " + name() + " backend has no pixels output");
  }
  // env's last complete frame: 160x144 shade indices 0-3, row-major. Needs a kernel that
  // renders (BackendConfig::render or a pixels obs stage).
  virtual Result<std::vector<uint8_t>> read_screen(int env) {
    (void)env;
    return make_error(ErrorKind::Usage, "the " + name() + " backend cannot read the screen");
  }
  virtual Result<std::string> serial_output(int env) {
    (void)env;
    return std::string{};
  }
  // Cache key of the kernel this backend runs ("" for mgba).
  virtual std::string kernel_key() const { return {}; }
  // The ROM-specialized kernel under BackendConfig::specialize_auto_frames (README
  // "ROM-specialized kernels"): "profiling", "compiling", "specialized" or "failed: why";
  // "off" without auto. A step that ends the profile starts the compile; the first step
  // after the compile is done swaps the kernel in, so the step after that runs on it.
  virtual std::string specialize_status() const { return "off"; }
  // How many times auto re-profiled because the blocks stopped covering what ran (tier_up.h
  // watch(); cpu backend).
  virtual int specialize_retiers() const { return 0; }
  // Waits for a kernel compiling in the background (the specialized kernel under auto; on
  // cuda also the optimized one after a tiered start) and puts it in for the next step.
  // Nothing to wait for is no error. Runs never call it (they must not wait on a compile);
  // verify and bench do, so that what they check or time is the kernel they name.
  virtual Status finish_tier_up() { return ok_status(); }
  // Per env, the instructions retired inside ROM-specialized blocks since the backend was made
  // (GbxParams::spec_retired): 0 while an interpreter kernel runs; empty where a backend has
  // no such kernels (mgba). Tests use it to prove the specialized code ran, not only that the
  // end state matched.
  virtual Result<std::vector<int64_t>> specialized_instr_counts() { return std::vector<int64_t>{}; }
  // Test-only: overwrites one register of env (a name accepted by set_cpu_register). Verify's
  // --inject-fault uses it to prove the mismatch path end to end.
  virtual Status debug_poke_register(int env, const std::string& reg, uint16_t value) {
    (void)env;
    (void)value;
    return make_error(ErrorKind::Usage, "the " + name() + " backend cannot set register " + reg);
  }

 protected:
  Error unsupported(const std::string& what) const {
    return make_error(ErrorKind::Usage, "the " + name() + " backend cannot " + what + " yet");
  }
};

// The register names verify compares, in its comparison order.
inline const std::vector<std::string>& cpu_register_names() {
  static const std::vector<std::string> names = {"PC", "SP", "A", "F", "B",
                                                 "C",  "D",  "E", "H", "L"};
  return names;
}

// Sets register `reg` (cpu_register_names(), upper case) of s; 8-bit registers take the low
// byte of value. False for an unknown name.
inline bool set_cpu_register(CpuState& s, const std::string& reg, uint16_t value) {
  uint16_t* r16 = reg == "PC" ? &s.pc : reg == "SP" ? &s.sp : nullptr;
  uint8_t* r8 = reg == "A"   ? &s.a
                : reg == "F" ? &s.f
                : reg == "B" ? &s.b
                : reg == "C" ? &s.c
                : reg == "D" ? &s.d
                : reg == "E" ? &s.e
                : reg == "H" ? &s.h
                : reg == "L" ? &s.l
                             : nullptr;
  if (r16)
    *r16 = value;
  else if (r8)
    *r8 = static_cast<uint8_t>(value);
  else
    return false;
  return true;
}

// Value of register `reg` in s; -1 for an unknown name.
inline int get_cpu_register(const CpuState& s, const std::string& reg) {
  if (reg == "PC") return s.pc;
  if (reg == "SP") return s.sp;
  if (reg == "A") return s.a;
  if (reg == "F") return s.f;
  if (reg == "B") return s.b;
  if (reg == "C") return s.c;
  if (reg == "D") return s.d;
  if (reg == "E") return s.e;
  if (reg == "H") return s.h;
  if (reg == "L") return s.l;
  return -1;
}

// The argument checks of every Backend::step_frames: one frame count per env, actions empty
// or one per env.
inline Status check_step_frames(int num_envs, const std::vector<int32_t>& actions,
                                const std::vector<int32_t>& frames) {
  if ((int)frames.size() != num_envs)
    return make_error(ErrorKind::Usage, "step_frames: " + std::to_string(frames.size()) +
                                            " frame counts for " + std::to_string(num_envs) +
                                            " envs");
  if (!actions.empty() && (int)actions.size() != num_envs)
    return make_error(ErrorKind::Usage, "step_frames: " + std::to_string(actions.size()) +
                                            " actions for " + std::to_string(num_envs) + " envs");
  return ok_status();
}

// Factory: "cpu", "cuda" or "mgba". Compiles/loads kernels before returning, so nothing
// timed afterwards includes compilation.
Result<std::unique_ptr<Backend>> make_backend(const std::string& name, const Rom& rom,
                                              const BackendConfig& config);

}  // namespace gbx
