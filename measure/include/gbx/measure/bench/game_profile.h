#pragma once
// What a game's code does, instruction by instruction, and how much of it the ROM-specialized
// kernel covers (docs/benchmarks/games.md, "Per-game profile"; `gbx-synth profile --report`).
// One env runs on the cpu backend's interpreter in run mode instructions, one instruction (or
// halted skip, or interrupt dispatch) per kernel call, so the host sees every PC, opcode, write
// address and halted cycle without any counter in the kernel source; the joypad follows the
// run's step shape (an action per step, held for the first frames), switched at the first
// instruction boundary past each frame boundary.
#include <cstdint>
#include <map>
#include <string>

#include "gbx/engine/result.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx {

struct GameProfileOptions {
  // The state, step shape (frames_per_step, release_after_frames), actions (random or none:
  // ActionPolicy, env 0's sequence) and seed of the trace; with `plan`, also the profile run
  // the plan is made from (profile_rom: run.envs envs, run.frames frames, the same state).
  ProfileRunOptions run;
  int frames = 120;  // traced (rounded up to whole steps)
  // The specialized plan, then its coverage measured on the specialized cpu kernel over the
  // traced steps.
  bool plan = true;
};

struct GameProfile {
  int64_t frames = 0;
  uint64_t instructions = 0;                 // retired (CB-prefixed: one)
  uint64_t cycles = 0;                       // T-cycles traced
  uint64_t halted_cycles = 0;                // asleep in HALT (or STOP)
  uint64_t interrupts = 0;                   // dispatches
  uint64_t halts = 0;                        // HALT instructions
  std::map<std::string, uint64_t> families;  // opcode family (CB: the CB family) -> retired
  std::map<std::string, uint64_t> classes;   // load, alu, jump, stack, cb_bit, cb_other, control
  std::map<std::string, uint64_t> regions;   // where the PC was: rom0, romx, wram, hram, other
  std::map<std::string, uint64_t> handlers;  // retired inside an interrupt handler, by vector
  uint64_t mbc_writes = 0;                   // writes to 0000-7FFF
  uint64_t bank_switches = 0;                // ... that changed the ROM bank at 4000-7FFF
  uint64_t io_writes = 0;                    // writes to FF00-FF7F, FFFF
  uint64_t joypad_reads = 0;                 // reads of FF00
  uint64_t copy_ops = 0;                     // LD A,(HL+/-) and LD (HL+/-),A
  // The plan (GameProfileOptions::plan): its blocks, instructions traced at an address inside one
  // (ROM code in the bank the block belongs to), and why its blocks end, weighted by how often
  // the profile entered each block (engine spec_block_end's reasons).
  bool planned = false;
  uint64_t plan_blocks = 0;
  uint64_t in_plan = 0;
  std::map<std::string, uint64_t> block_ends;
  std::map<std::string, uint64_t> outside_plan;  // traced outside every block, by region
  // Measured on the specialized cpu kernel over the same steps: instructions retired inside
  // blocks over all it retired (its wait-loop skips count as the instructions they stand for).
  uint64_t spec_retired = 0;
  uint64_t spec_total = 0;

  // Per 70224 T-cycles traced (the trace starts where the state is, inside a frame).
  double instructions_per_frame() const {
    return cycles ? (double)instructions * 70224.0 / (double)cycles : 0;
  }
  double halted_share() const { return cycles ? (double)halted_cycles / cycles : 0; }
};

Result<GameProfile> profile_game(const Rom& rom, const GameProfileOptions& opts);

// The report: a header line and one section per table (name, then "key value share" lines).
std::string game_profile_text(const std::string& name, const GameProfile& p);
// The same as a JSON object (kind "gbx-game-profile").
std::string game_profile_json(const std::string& name, const GameProfile& p);

}  // namespace gbx
