#pragma once
// A range of an env's bus as a command line names it, "LO:HI" in hex: what gbx-run run prints
// (--read-mem, --read-mem-raw) and what gbx-run verify compares (--mem-region), read with
// Backend::read_memory.
#include <cstdint>
#include <string>

#include "gbx/engine/result.h"

namespace gbx {

// A bus range [lo, hi) given as "LO:HI" in hex (HI exclusive, LO < HI <= 0x10000).
struct MemRegion {
  uint32_t lo = 0, hi = 0;
  std::string label() const;     // "C000:C100"
  std::string file_tag() const;  // "C000_C100"
};
// `flag` names the option in error messages.
Result<MemRegion> parse_mem_region(const std::string& text,
                                   const std::string& flag = "--mem-region");

}  // namespace gbx
