#pragma once
// For suites whose cases need NVRTC. Without one (no toolkit, no wheel: see
// gbx/engine/nvrtc_library.h) each such case is skipped, saying why (skip.h).
#include <doctest/doctest.h>

#include "gbx/engine/nvrtc_library.h"
#include "skip.h"

namespace gbx::test {

inline bool nvrtc_or_skip() {
  auto nv = NvrtcLibrary::get();
  if (nv) return true;
  skip_case(nv.error().message);
  return false;
}

}  // namespace gbx::test

// First statement of a test case that compiles with NVRTC.
#define GBX_REQUIRE_NVRTC() \
  if (!gbx::test::nvrtc_or_skip()) return
