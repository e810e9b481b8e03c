// A doctest executable for test_skip only: which cases skip, fail or pass is chosen by
// GBX_SKIP_SELFTEST (letters s, f, p, h: one case each, in that order; h skips for a file under
// ../shared that is not there).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "skip.h"

namespace {
std::string plan() {
  const char* p = std::getenv("GBX_SKIP_SELFTEST");
  return p ? p : "";
}
}  // namespace

TEST_CASE("a case that skips") {
  if (plan().find('s') == std::string::npos) return;
  GBX_SKIP("the self-test asked for a skip");
}

TEST_CASE("a case that fails") {
  if (plan().find('f') == std::string::npos) return;
  CHECK(1 + 1 == 3);
}

TEST_CASE("a case that passes") {
  if (plan().find('p') == std::string::npos) return;
  CHECK(1 + 1 == 2);
}

TEST_CASE("a case whose ../shared file is missing") {
  if (plan().find('h') == std::string::npos) return;
  const std::string file = std::string(GBX_TEST_SOURCE_DIR) + "/../../shared/no-such-suite/x.gb";
  GBX_SKIP(file + " is absent");
}
