#pragma once
// Per-case skips. A case that cannot run here (no SM83 archive, no NVRTC, no CUDA device, a C
// ROM that was not built) calls skip_case(why) and returns: it prints one
// "[skipped] <case>: <why>" line. A skip never hides a failure: the executable's exit code is
// doctest's (any failed case fails it), and only when every case that ran was skipped does it
// exit 77, which CTest (SKIP_RETURN_CODE) reports as a skip. doctest_main.cpp defines these.
#include <string>

namespace gbx::test {

void skip_case(const std::string& why);
// Assertions that failed so far in this run (earlier cases included).
int failed_asserts();

}  // namespace gbx::test

// Skips the rest of the current test case.
#define GBX_SKIP(why)            \
  do {                           \
    ::gbx::test::skip_case(why); \
    return;                      \
  } while (0)
