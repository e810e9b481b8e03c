// The SingleStepTests SM83 suite (../shared/conformance/sm83-v1.tar.zst), extracted into the
// build dir, run through the JIT-compiled flat64k kernel. Skips, saying so, when absent.
#include <doctest/doctest.h>

#include <filesystem>

#include "gbx/measure/verify/conformance.h"
#include "skip.h"
#include "test_util.h"

using namespace gbx;
namespace fs = std::filesystem;

namespace {
void run_suite(Dispatch dispatch) {
  const fs::path archive = GBX_TEST_CONFORMANCE_ARCHIVE;
  if (!fs::exists(archive)) {
    GBX_SKIP("SM83 suite not found at " + archive.string() +
             " (configure with -DGBX_CONFORMANCE_ARCHIVE)");
  }
  const fs::path dir = fs::path(GBX_TEST_BUILD_DIR) / "conformance" / "sm83";
  if (!fs::exists(dir / ".extracted")) {
    fs::create_directories(dir);
    const auto r =
        test::run_command("tar --zstd -xf '" + archive.string() + "' -C '" + dir.string() + "'");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    test::run_command("touch '" + (dir / ".extracted").string() + "'");
  }
  ConformanceOptions opts;
  opts.dir = dir;
  opts.dispatch = dispatch;
  auto report = run_sm83_conformance(opts);
  REQUIRE_MESSAGE(report.ok(), (report.ok() ? "" : report.error().message));
  for (const auto& f : report->files)
    CHECK_MESSAGE(f.failed_cases == 0, f.name << ": " << f.first_diff);
  CHECK(report->files.size() == 500);
  CHECK(report->failed() == 0);
  MESSAGE(report->passed() << " passed, " << report->failed() << " failed");
}
}  // namespace

TEST_CASE("SM83 SingleStepTests: every opcode file passes") { run_suite(Dispatch::Switch); }

// The uniform dispatch (sm83/uniform.h) runs 420 of the 512 opcodes through one path whose
// operands come from the generator's table: the suite holds it to every opcode's registers,
// memory and M-cycle count, as it holds the switch.
TEST_CASE("SM83 SingleStepTests: every opcode file passes under dispatch=uniform") {
  run_suite(Dispatch::Uniform);
}
