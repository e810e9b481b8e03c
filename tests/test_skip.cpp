// Skips are per case and never hide a failure (skip.h, doctest_main.cpp): a failing case
// beside a skipped one fails the executable; a skip beside passing cases passes it, saying so;
// only an executable whose every case skipped exits 77 (CTest: skipped).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "skip.h"
#include "test_util.h"

using namespace gbx;

namespace {
test::CommandResult selftest(const std::string& plan, const std::string& filter = "",
                             const std::string& require_shared = "") {
  return test::run_command("GBX_TEST_REQUIRE_SHARED=" + require_shared +
                           " GBX_SKIP_SELFTEST=" + plan + " " GBX_TEST_SKIP_SELFTEST +
                           (filter.empty() ? "" : " '--test-case=" + filter + "'"));
}
}  // namespace

TEST_CASE("a failing case beside a skipped one fails the executable") {
  const auto r = selftest("sf");
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("[skipped] a case that skips: the self-test asked for a skip") !=
        std::string::npos);
  CHECK(r.output.find("1 + 1 == 3") != std::string::npos);
}

TEST_CASE("a skipped case beside passing ones passes and is counted") {
  const auto r = selftest("sp");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("1 of 4 test cases skipped") != std::string::npos);
}

TEST_CASE("an executable whose every case skipped exits 77, CTest's skip code") {
  CHECK(selftest("s", "a case that skips").exit_code == 77);
  CHECK(selftest("", "").exit_code == 0);  // nothing skipped, nothing failed
}

TEST_CASE("CTest judges skips by the exit code, never by a line of output") {
  // SKIP_REGULAR_EXPRESSION marks a whole executable skipped whatever its exit code: a failed
  // case beside a skip line would pass as a skip.
  std::ifstream f(std::string(GBX_TEST_BUILD_DIR) + "/tests/CTestTestfile.cmake");
  REQUIRE(f.good());
  std::stringstream text;
  text << f.rdbuf();
  CHECK(text.str().find("SKIP_REGULAR_EXPRESSION") == std::string::npos);
  CHECK(text.str().find("SKIP_RETURN_CODE") != std::string::npos);
}

TEST_CASE("GBX_TEST_REQUIRE_SHARED=1 fails a skip for ../shared material, and only that one") {
  const std::string shared = "a case whose ../shared file is missing";
  CHECK(selftest("h", shared).exit_code == 77);  // without the switch: a skip
  const auto r = selftest("h", shared, "1");
  CAPTURE(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("[required] " + shared + ": ") != std::string::npos);
  CHECK(r.output.find("GBX_TEST_REQUIRE_SHARED=1") != std::string::npos);
  CHECK(r.output.find("[skipped]") == std::string::npos);
  // A skip for anything else (no gdb, no CUDA device, ...) stays a skip.
  CHECK(selftest("s", "a case that skips", "1").exit_code == 77);
  CHECK(selftest("s", "a case that skips", "0").exit_code == 77);

  CHECK(test::names_shared("no test ROMs at /x/tests/../../shared/testroms"));
  CHECK(test::names_shared(
      std::filesystem::path(GBX_TEST_SOURCE_DIR).parent_path().parent_path().string() +
      "/shared/games/libbet.gb is absent"));
  CHECK_FALSE(test::names_shared("no gdb"));
  CHECK_FALSE(test::names_shared("no DMG expectation (/t/mealybug/expected-dmg/m.png)"));
}
