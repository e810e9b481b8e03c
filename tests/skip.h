#pragma once
// Per-case skips. A case that cannot run here (no SM83 archive, no NVRTC, no CUDA device, a C
// ROM that was not built) calls skip_case(why) and returns: it prints one
// "[skipped] <case>: <why>" line. A skip never hides a failure: the executable's exit code is
// doctest's (any failed case fails it), and only when every case that ran was skipped does it
// exit 77, which CTest (SKIP_RETURN_CODE) reports as a skip. doctest_main.cpp defines these.
//
// With GBX_TEST_REQUIRE_SHARED=1 (scripts/test.sh's switch; CI sets it) the material under
// ../shared (test ROMs, the SM83 suite, games) is required: a skip whose reason names it (its
// path, or "../shared") fails the case instead, saying so. Every skip for a missing file there
// names the path it looked at, so a new suite's skip is covered without a change here.
#include <string>

namespace gbx::test {

// Skips the current case, or fails it where the reason names ../shared and it is required.
void skip_case(const std::string& why);
// GBX_TEST_REQUIRE_SHARED=1.
bool shared_required();
// Whether `why` names the ../shared directory beside the checkout.
bool names_shared(const std::string& why);
// Assertions that failed so far in this run (earlier cases included).
int failed_asserts();

}  // namespace gbx::test

// Skips the rest of the current test case.
#define GBX_SKIP(why)            \
  do {                           \
    ::gbx::test::skip_case(why); \
    return;                      \
  } while (0)
