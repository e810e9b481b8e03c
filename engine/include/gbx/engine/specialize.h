#pragma once
// ROM-specialized kernels (docs/internals/specialization.md): the cartridge's hot code as
// straight-line blocks keyed by (ROM bank, address), found from a profile of the interpreter and
// the ROM's static control flow. The SM83 knowledge here is the opcode table's (lengths, cycles,
// families); which families end a block is listed in specialize.cpp.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbx/engine/generator.h"
#include "gbx/engine/result.h"

namespace gbx {

// One block: its first instruction at `addr` in ROM bank `bank` (ROM offset
// bank * 0x4000 + (addr & 0x3FFF)).
struct SpecBlock {
  uint32_t bank = 0;
  uint16_t addr = 0;
  uint64_t count = 0;         // profiled entries (executions of its first instruction)
  uint64_t weight = 0;        // profiled instructions retired inside it
  uint32_t length = 0;        // bytes
  uint32_t instructions = 0;  // instructions
};

// A profile: every block the profiled run executed, hottest first.
struct SpecProfile {
  std::string rom_sha256;
  int64_t frames = 0;
  uint64_t total_instructions = 0;  // instructions executed from ROM
  std::vector<SpecBlock> blocks;
};

// The hot set a specialized kernel is built for, with the ROM bytes it embeds.
struct SpecPlan {
  std::string rom_sha256;
  std::string profile_hash;  // over the hot set's (bank, address, length) list
  std::vector<uint8_t> rom;
  std::vector<SpecBlock> blocks;  // ordered by (bank, address)
};

struct SpecLimits {
  double coverage = 0.99;     // hot set: blocks covering this share of profiled instructions
  size_t max_blocks = 4096;   // ... and at most this many blocks
  int max_instructions = 32;  // per block
  // ... and at most this many instructions in all: compile time grows with them (about 1 ms
  // of clang -O2 per instruction measured here), so a cold compile stays near 10 s.
  size_t max_total_instructions = 4096;
};

// One decoded instruction of a block.
struct SpecInstr {
  uint16_t addr = 0;
  uint8_t bytes[3] = {0, 0, 0};
  int length = 1;
  int cycles = 4;  // T-cycles, taken
  const OpcodeEntry* op = nullptr;
  const OpcodeEntry* cb = nullptr;  // the CB entry when op is PREFIX CB
};

// The instructions of the block starting at (bank, addr), as the specializer emits it:
// stops at a control transfer, EI/DI (included), before HALT/STOP/illegal opcodes/LD B,B, after
// a constant-address access that reaches neither ROM nor WRAM/HRAM (MBC, I/O, IE, VRAM, OAM,
// cartridge RAM), at the end of the 16 KiB region, and at `max_instructions`. `stop_at` (ROM
// offsets, may be empty) lists leaders another block starts at: the block stops before them.
std::vector<SpecInstr> spec_decode_block(const std::vector<OpcodeEntry>& table,
                                         const std::vector<uint8_t>& rom, uint32_t bank,
                                         uint16_t addr, int max_instructions,
                                         const std::vector<uint8_t>& stop_at = {});

// Blocks from per-ROM-offset instruction counts (the profiling kernel's output).
SpecProfile spec_profile_from_counts(const std::vector<OpcodeEntry>& table,
                                     const std::vector<uint8_t>& rom,
                                     const std::vector<uint32_t>& counts, int64_t frames,
                                     const SpecLimits& limits = {});

std::string spec_profile_to_json(const SpecProfile& p);
Result<SpecProfile> spec_profile_from_json(const std::string& text);

// The hot set of `profile` for `rom` (whose SHA-256 must match the profile's).
Result<std::shared_ptr<const SpecPlan>> make_spec_plan(const std::vector<OpcodeEntry>& table,
                                                       std::vector<uint8_t> rom,
                                                       const SpecProfile& profile,
                                                       const SpecLimits& limits = {});

// Why the planned block `b` ends where it does (docs/benchmarks/games.md, "Per-game profile"):
// "jump" (JP, JR, CALL, RET, RETI, RST), "branch" (a conditional one), "ei_di", "mbc_write"
// (a constant-address write to 0000-7FFF; other accesses do not end blocks), "halt_stop" (HALT,
// STOP, an illegal opcode or LD B,B next), "size_limit" (`limits.max_instructions`), "bank_end"
// (the 16 KiB region ends), "block_starts" (the next instruction starts a profiled block: a jump
// target, a return address), "cold" (the next instruction never ran in the profile). `starts` marks
// the ROM offsets a profiled block starts at (may be empty: then "cold" covers both).
std::string spec_block_end(const std::vector<OpcodeEntry>& table, const std::vector<uint8_t>& rom,
                           const SpecBlock& b, const SpecLimits& limits,
                           const std::vector<uint8_t>& starts);

// "LD A,$3E", "JR NZ,$0150": the instruction with its operands filled in.
std::string spec_disassemble(const SpecInstr& in);

}  // namespace gbx
