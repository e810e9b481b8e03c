#pragma once
// Value rules of a kernel save state (docs/guide/states.md "What a load checks"): every record
// of the blob (the GbxState fields, "mem", "seen") against the ranges the kernels rely on, so
// that no loaded state makes a kernel index memory outside its env, run forever or overflow a
// cycle counter. decode_env_state applies them before it writes anything.
#include <cstdint>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/runtime/states/save_state.h"

namespace gbx {

// Bounds the timing rules use, in T-cycles (4194304 a second).
// cycle_count at most 2^50 (8.5 years of emulated time): far from the 2^63 where the kernels'
// i64 cycle arithmetic overflows.
constexpr int64_t kStateMaxCycles = int64_t{1} << 50;
// The earliest a sync point or an epoch can be: reset puts div_epoch at -0xABCC and ppu_epoch
// at -70168 (runtime/src/states/env_state.cpp); every later one is a cycle of the run.
constexpr int64_t kStateEarliest = -(int64_t{1} << 20);
// How far after cycle_count a sync point (the cycle a counter was caught up to) may be: an
// I/O access's cycle inside the last instruction, never more than a few M-cycles.
constexpr int64_t kStateSyncAhead = int64_t{1} << 16;
// How far after cycle_count a scheduled event may be: TIMA's next reload (at most 256
// increments of 1024 cycles), the serial transfer's end (4096), an OAM DMA's end (648), CH3's
// next fetch (4102).
constexpr int64_t kStateEventAhead = int64_t{1} << 20;

// What the rules see of one blob: its records by name, and what the loading backend runs.
struct StateRuleInput {
  const std::vector<SaveStateRecord>* records = nullptr;  // fields in table order, mem, seen
  unsigned mbc = 0;                                       // GBX_MBC_* of the loaded ROM
  bool flat64k = false;
  uint32_t seen_bytes = 0;  // the loading kernel's seen() set bytes (0: none)
};

// The first rule the blob breaks, as one line ("field 'lcd_fifo.x' is 0, must be ..."), or
// success. Records the input lacks are skipped (decode_env_state checks names and sizes first).
Status check_state_values(const StateRuleInput& in);

// Record names the rule table covers (each GbxState field, "mem", "seen"): a test keeps every
// field of GBX_STATE_FIELDS in this list, so a new field comes with its rule.
std::vector<std::string> state_rule_records();

}  // namespace gbx
