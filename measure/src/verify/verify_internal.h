// What the pieces of verify share: the run (verify.cpp), its option parsing
// (verify_options.cpp) and the mismatch bundle it writes (mismatch_bundle.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gbx/measure/verify/verify.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx::verify_detail {

// The options' --frames-per-step (VerifyOptions::options, filled by with_defaults).
inline int frames_per_step(const VerifyOptions& o) {
  return (int)option_int(o.options, "frames_per_step");
}

// v as `digits` upper-case hex digits.
std::string hex(uint32_t v, int digits);

// A register's value as the report shows it (F with its flags spelled out).
std::string reg_text(const std::string& reg, int v);

// What verify compares of one backend at one step.
struct Snapshot {
  CpuState cpu;
  std::vector<std::vector<uint8_t>> mem;  // one per compared region
  std::vector<std::string> mem_sha;
  std::vector<uint8_t> screen;  // 160x144 shades, when the screens are compared
};

struct BundleInput {
  const VerifyOptions* opts;
  const Rom* rom;
  Backend* ref;
  Backend* dut;
  int64_t step, detected_at, last_match;
  const Snapshot* ref_snap;
  const Snapshot* dut_snap;
  const std::vector<FieldDiff>* diffs;
};

// Writes the mismatch bundle (report, states, memory dumps, repro.sh); returns its directory.
Result<std::filesystem::path> write_bundle(const BundleInput& in);

}  // namespace gbx::verify_detail
