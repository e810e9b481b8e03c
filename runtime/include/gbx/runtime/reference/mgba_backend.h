#pragma once
// The mgba backend: the differential reference. One libmgba (0.10.1) Game Boy core per env,
// forced to the DMG model and started in mGBA's skip-BIOS state; envs are stepped over a
// thread pool. It follows the GBX frame rule instruction by instruction: an env runs
// instructions until its T-cycle count within the frame reaches 70224 and carries the
// overshoot into the next frame, so its counters compare with the generated kernels'.
//
// Actions (one int32 per env, held for the whole step): bit0 A, bit1 B, bit2 SELECT,
// bit3 START, bit4 RIGHT, bit5 LEFT, bit6 UP, bit7 DOWN (1 = pressed); higher bits ignored.
// This is mGBA's own GB key order, passed to core->setKeys unchanged.
//
// Timing model worth knowing when comparing (details in notes/mgba_facts.md):
// - An interrupt dispatch (20 T-cycles) is not an instruction: instr_count counts executed
//   opcodes only, and step_instruction() runs a dispatch together with the handler's first
//   instruction.
// - mGBA advances a halted CPU from one scheduled event to the next, so mid-frame, while
//   halted, cycle_count sits on the next mGBA event (not yet run). A frame that ends in
//   HALT ends exactly at 70224 (nothing happens before that event); the wake-up and the
//   instructions after it are on exact time.
// - Illegal opcodes trap like the kernels do: the env stops before executing it and reports
//   GBX_TRAP_ILLEGAL_OPCODE with its PC and opcode (mGBA itself would hang on it).
// - read_memory is the CPU's view with two exceptions: OAM is returned raw (mGBA's view
//   hides it in PPU modes 2-3) and JOYP is computed without raising the joypad interrupt.
// - Save states: see save_state() below.
// - Serial: bytes are captured when the program writes SC with bits 7 and 0 set (start,
//   internal clock): the SB value at that moment. At most GBX_SERIAL_CAPACITY bytes.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbx/runtime/backends/backend.h"

namespace gbx {

// What the last step_instruction() did.
enum class MgbaStepKind : uint8_t {
  Instruction,  // one opcode executed (after an interrupt dispatch, if one was due)
  Halted,       // the CPU is halted: mGBA moved it to its next event, or it hit the frame end
  Trapped,      // the env stopped on an illegal opcode; nothing ran
};

class MgbaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<MgbaBackend>> create(const Rom& rom, const BackendConfig& cfg);
  ~MgbaBackend() override;

  std::string name() const override { return "mgba"; }
  int num_envs() const override;
  Status reset(uint64_t seed) override;
  Status reset(const std::vector<uint8_t>& mask) override;
  Status set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) override;
  // mgba blobs hold mGBA's own serialized core (core->saveState), what mGBA 0.10 leaves out
  // of it (cartridge RAM, a serial transfer in progress) and the GBX counters (cycles, frames,
  // instructions, serial capture, trap). Kernel blobs (cpu,
  // cuda) are refused: mapping GBX's lazy timer/PPU fields onto mGBA's event scheduler would
  // not be exact. mGBA serializes only at an instruction boundary, so an env halted between
  // M-cycles (see run_unit) cannot be saved until it wakes; that is an error, not a wait.
  Result<std::vector<uint8_t>> save_state(int env) override;
  Status load_state(int env, const std::vector<uint8_t>& blob) override;
  Status step(const std::vector<int32_t>& actions) override;
  Status step_frames(const std::vector<int32_t>& actions,
                     const std::vector<int32_t>& frames) override;
  Status sync() override { return ok_status(); }
  Result<CpuState> get_cpu_state(int env) override;
  Result<std::vector<uint8_t>> read_memory(int env, uint32_t lo, uint32_t hi) override;
  // The last frame mGBA finished (VBlank start) as shades; needs BackendConfig::render.
  Result<std::vector<uint8_t>> read_screen(int env) override;
  // Battery RAM through libmgba's savedata API (cartridge RAM only: mGBA's MBC3 clock follows
  // the host clock, so clock carts are refused).
  Status load_battery(const BatterySave& save) override;
  Result<BatterySave> read_battery(int env) override;
  // Filled by step() per cfg.stage (obs_v0 / reward_v0), zeros until then.
  Result<std::vector<float>> read_obs(int env) override;
  Result<float> read_reward(int env) override;
  Result<std::string> serial_output(int env) override;

  // Verify's fine-grained stepping. One call executes one instruction (see MgbaStepKind),
  // keeps the frame bookkeeping of step() (cycle_in_frame wraps at 70224) and does not run
  // the stage epilog. The env's action stays whatever step() or set_action() set last.
  Status step_instruction(int env);
  Result<MgbaStepKind> last_step_kind(int env);
  Status set_action(int env, int32_t action);
  // T-cycles since reset (the same number as get_cpu_state().cycle_count).
  Result<int64_t> cycles(int env);
  Result<int> cycle_in_frame(int env);
  // Frames completed since reset under the frame rule.
  Result<int64_t> frames(int env);

 private:
  struct Impl;
  explicit MgbaBackend(std::unique_ptr<Impl> impl);
  // step and step_frames: env i runs (*env_frames)[i] frames (null: frames_per_step each).
  Status run_frames(const std::vector<int32_t>& actions, const std::vector<int32_t>* env_frames);
  std::unique_ptr<Impl> impl_;
};

// Whether this build has the mgba device (GBX_WITH_MGBA: libmgba-dev was there at configure).
bool mgba_built_in();

Result<std::unique_ptr<Backend>> make_mgba_backend(const Rom& rom, const BackendConfig& cfg);

}  // namespace gbx
