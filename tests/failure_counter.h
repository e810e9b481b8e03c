#pragma once
// A doctest listener that counts failed assertions and exceptions, for suites that print a
// "[skipped]" line (CTest then reports the whole executable as skipped): they print it only
// while nothing has failed, so a skip can never hide a failure. Include from one file per
// test executable (it registers the listener).
#include <doctest/doctest.h>

namespace gbx::test {

inline int g_failed_asserts = 0;

struct FailureCounter : doctest::IReporter {
  explicit FailureCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
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
REGISTER_LISTENER("gbx_failure_counter", 1, FailureCounter);

}  // namespace gbx::test
