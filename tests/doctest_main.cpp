// The test executables' main: doctest's, plus per-case skips (skip.h), which fail instead where
// GBX_TEST_REQUIRE_SHARED=1 and the reason names ../shared. Exit codes: doctest's when anything
// failed; 77 (CTest's SKIP_RETURN_CODE) when every case that ran skipped; else 0.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "skip.h"

namespace gbx::test {
namespace {

std::string g_current_case;
std::set<std::string> g_cases_run;
std::set<std::string> g_cases_skipped;
int g_failed_asserts = 0;

// Knows which case runs (for skip lines) and counts failures.
struct CaseTracker : doctest::IReporter {
  explicit CaseTracker(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& tc) override {
    g_current_case = tc.m_name;
    g_cases_run.insert(g_current_case);
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override { ++g_failed_asserts; }
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& a) override {
    if (a.m_failed) ++g_failed_asserts;
  }
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("gbx_case_tracker", 1, CaseTracker);

}  // namespace

bool shared_required() {
  const char* v = std::getenv("GBX_TEST_REQUIRE_SHARED");
  return v && std::string(v) == "1";
}

bool names_shared(const std::string& why) {
  namespace fs = std::filesystem;
  // ../shared as the tests spell it (GBX_TEST_SOURCE_DIR/../../shared), normalized and with
  // links resolved.
  const fs::path dir = fs::path(GBX_TEST_SOURCE_DIR) / ".." / ".." / "shared";
  std::error_code ec;
  const std::vector<std::string> names = {"../shared", dir.lexically_normal().string(),
                                          fs::weakly_canonical(dir, ec).string()};
  for (const std::string& n : names)
    if (!n.empty() && why.find(n) != std::string::npos) return true;
  return false;
}

void skip_case(const std::string& why) {
  if (shared_required() && names_shared(why)) {
    const std::string msg =
        why + " (GBX_TEST_REQUIRE_SHARED=1: the suites under ../shared must run, not skip)";
    std::printf("[required] %s: %s\n", g_current_case.c_str(), msg.c_str());
    std::fflush(stdout);
    FAIL_CHECK(msg);
    return;
  }
  if (g_cases_skipped.insert(g_current_case).second)
    std::printf("[skipped] %s: %s\n", g_current_case.c_str(), why.c_str());
  std::fflush(stdout);
}

int failed_asserts() { return g_failed_asserts; }

}  // namespace gbx::test

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0) return rc;
  using namespace gbx::test;
  if (g_cases_skipped.empty()) return 0;
  std::printf("%zu of %zu test cases skipped (each says why above)\n", g_cases_skipped.size(),
              g_cases_run.size());
  return g_cases_skipped.size() == g_cases_run.size() ? 77 : 0;
}
