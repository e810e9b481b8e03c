// The tools' dispatch (tools/commands.h): an exception out of a subcommand is one stderr line
// and exit 1; an allocation beyond a memory limit is one too, not an abort (exit 134).
#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>
#include <new>
#include <stdexcept>

#include "../tools/commands.h"
#include "test_util.h"

namespace {

// dispatch() of a subcommand `boom` whose action is `action`: its exit code and its stderr.
std::pair<int, std::string> dispatch_boom(std::function<int()> action) {
  CLI::App app{"t"};
  gbx::tool::Commands cmds;
  cmds.emplace_back(app.add_subcommand("boom", "throws"), std::move(action));
  gbx::test::TempDir d;
  const std::string file = (d.path / "stderr.txt").string();
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f);
  dup2(fileno(f), 2);
  const char* argv[] = {"t", "boom"};
  const int rc = gbx::tool::dispatch(app, cmds, 2, const_cast<char**>(argv));
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(f);
  std::ifstream in(file);
  return {rc, std::string((std::istreambuf_iterator<char>(in)), {})};
}

}  // namespace

TEST_CASE("an exception out of a subcommand is one line and exit 1, never an abort") {
  const auto [rc, err] = dispatch_boom([]() -> int { throw std::bad_alloc(); });
  CAPTURE(err);
  CHECK(rc == 1);
  CHECK(gbx::test::count_lines(err) == 1);
  CHECK(err.rfind("error: boom: out of memory (an allocation failed: std::bad_alloc)", 0) == 0);
  const auto [rc2, err2] = dispatch_boom([]() -> int { throw std::runtime_error("disk on fire"); });
  CHECK(rc2 == 1);
  CHECK(err2 == "error: boom: disk on fire\n");
  CHECK(dispatch_boom([] { return 0; }).first == 0);
}
