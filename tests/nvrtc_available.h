#pragma once
// For suites whose cases need NVRTC. Without one (no toolkit, no wheel: see
// gbx/engine/nvrtc_library.h) those cases return early and, once the whole run is over with
// nothing failed, one "[skipped] CUDA unavailable: ..." line is printed, which CTest reports
// as a skip. Printing it only at the end, only without failures, means a skip never hides a
// failure of the cases that did run. Include from one file per test executable.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "failure_counter.h"
#include "gbx/engine/nvrtc_library.h"

namespace gbx::test {

inline std::string g_nvrtc_skip_reason;

inline bool nvrtc_or_skip() {
  auto nv = NvrtcLibrary::get();
  if (nv) return true;
  g_nvrtc_skip_reason = nv.error().message;
  return false;
}

struct NvrtcSkipReporter : FailureCounter {
  using FailureCounter::FailureCounter;
  void test_run_end(const doctest::TestRunStats&) override {
    if (!g_nvrtc_skip_reason.empty() && g_failed_asserts == 0)
      std::printf("[skipped] %s\n", g_nvrtc_skip_reason.c_str());
  }
};
REGISTER_LISTENER("gbx_nvrtc_skip", 2, NvrtcSkipReporter);

}  // namespace gbx::test

// First statement of a test case that compiles with NVRTC.
#define GBX_REQUIRE_NVRTC() \
  if (!gbx::test::nvrtc_or_skip()) return
