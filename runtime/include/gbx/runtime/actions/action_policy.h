#pragma once
// Where a benchmark's actions come from (issue [F].3: lockstep envs measure only the best
// case, real RL envs diverge). An action is the joypad byte the kernel takes per env per step
// (bit set = button held; README "Actions").
//   random  a byte per env per step from a counter-based generator seeded by `seed`: the same
//           seed gives the same actions whatever the thread count or backend.
//   none    every action 0: all envs run in lockstep (the best case: no env diverges).
//   FILE    raw bytes, one per env per step, step-major: env e at step s takes byte
//           (s * num_envs + e) mod file size, so a file of num_envs * steps bytes gives every
//           env its own sequence and any non-empty file works for any env count.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

struct ActionPolicy {
  enum class Kind { Random, None, File };
  Kind kind = Kind::Random;
  uint64_t seed = 1;
  std::string file;            // Kind::File: the path as given
  std::vector<uint8_t> bytes;  // Kind::File: its contents (never empty)

  // "random", "none" or a file path (read here; unreadable or empty: an Input error).
  static Result<ActionPolicy> parse(const std::string& spec, uint64_t seed);

  // The actions of `step` (0 = the first step after reset) for envs 0..num_envs-1, into out.
  void fill(int64_t step, int num_envs, std::vector<int32_t>& out) const;

  std::string name() const;  // "random", "none" or "file"
  // What sweeps record: {"policy": name, "seed": s} (random) or {"policy": "file",
  // "file": path, "bytes": size} or {"policy": "none"}.
  nlohmann::json to_json() const;
};

}  // namespace gbx
