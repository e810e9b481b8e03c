// GBX_JIT_PROFILE=1: the ORC JIT writes /tmp/perf-<pid>.map naming every function of each
// linked module, and the entry points the engine returns lie inside their named ranges.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gbx/engine/kernel_builder.h"
#include "gbx/engine/orc_compiler.h"
#include "skip.h"

using namespace gbx;

namespace {

struct MapLine {
  uint64_t start = 0, size = 0;
  std::string name;
};

// Parses perf's format strictly: "START SIZE name", lowercase hex without 0x.
bool parse(const std::string& line, MapLine& out) {
  auto hex = [](const std::string& s, uint64_t& v) {
    if (s.empty() || s.size() > 16 || s.rfind("0x", 0) == 0) return false;
    for (char c : s)
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    v = std::stoull(s, nullptr, 16);
    return true;
  };
  const size_t a = line.find(' ');
  if (a == std::string::npos) return false;
  const size_t b = line.find(' ', a + 1);
  if (b == std::string::npos || b + 1 >= line.size()) return false;
  out.name = line.substr(b + 1);
  return hex(line.substr(0, a), out.start) && hex(line.substr(a + 1, b - a - 1), out.size) &&
         out.size > 0;
}

const MapLine* containing(const std::vector<MapLine>& map, const void* p) {
  const auto a = reinterpret_cast<uint64_t>(p);
  for (const auto& l : map)
    if (a >= l.start && a < l.start + l.size) return &l;
  return nullptr;
}

const std::string kGbxRun = std::string(GBX_TEST_TOOLS_DIR) + "/gbx-run";

// Runs `gbx-run run --rom builtin:ALU_LOOP --frames 1` with GBX_JIT_PROFILE set to `profile`
// (nullptr: unset) and returns whether it left /tmp/perf-<its pid>.map (removed afterwards)
// and whether that map names gbx_step.
std::pair<bool, bool> run_and_find_map(const char* profile) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  const std::string path = "/tmp/perf-" + std::to_string(pid) + ".map";
  if (pid == 0) {
    std::remove(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());  // a stale one
    if (profile)
      setenv("GBX_JIT_PROFILE", profile, 1);
    else
      unsetenv("GBX_JIT_PROFILE");
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    execl(kGbxRun.c_str(), "gbx-run", "run", "--rom", "builtin:ALU_LOOP", "--frames", "1",
          (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(path);
  const bool exists = in.good();
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return {exists, text.str().find(" gbx_step [gbx-") != std::string::npos};
}

}  // namespace

TEST_CASE("a process writes a perf map only under GBX_JIT_PROFILE") {
  CHECK(run_and_find_map(nullptr) == std::make_pair(false, false));
  CHECK(run_and_find_map("0") == std::make_pair(false, false));
  CHECK(run_and_find_map("1") == std::make_pair(true, true));
}

TEST_CASE("gdb breaks in a JIT kernel and prints template lines (GDB JIT interface)") {
  if (std::system("gdb --version >/dev/null 2>&1") != 0) GBX_SKIP("no gdb");
  const std::string cmd =
      "GBX_JIT_PROFILE=1 gdb -nx -batch -ex 'set breakpoint pending on' "
      "-ex 'break gbx_step' -ex run -ex bt --args " +
      kGbxRun + " run --rom builtin:ALU_LOOP --frames 1 2>&1";
  std::FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  pclose(f);
  if (out.find("ptrace") != std::string::npos &&
      out.find("Breakpoint 1, gbx_step") == std::string::npos)
    GBX_SKIP("gdb cannot trace here");
  INFO(out);
  CHECK(out.find("Breakpoint 1, gbx_step") != std::string::npos);
  CHECK(out.find("#0  gbx_step") != std::string::npos);
  CHECK(out.find("templates/kernel/step.tmpl:") != std::string::npos);
}

TEST_CASE("GBX_JIT_PROFILE=1 writes a perf map naming every function of each kernel") {
  // Before anything reads the flag (it is read once per process).
  setenv("GBX_JIT_PROFILE", "1", 1);
  REQUIRE(jit_profile_enabled());
  const std::string path = jit_perf_map_path();
  CHECK(path == "/tmp/perf-" + std::to_string(getpid()) + ".map");
  // Profiling kernels carry debug info: a different command line, so a different cache key.
  const auto args = cpu_compile_args({});
  CHECK(std::find(args.begin(), args.end(), "-g") != args.end());

  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  KernelCache cache;
  std::vector<CpuKernel> kernels;
  for (Stage st : {Stage::EmulateOnly, Stage::FullStep}) {
    SynthParams p;
    p.stage = st;
    auto k = build_cpu_kernel(bundle.value(), p, cache);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
    kernels.push_back(std::move(k.value()));
  }

  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<MapLine> map;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    MapLine l;
    INFO("line ", line_no, ": ", line);
    REQUIRE(parse(line, l));
    map.push_back(l);
  }
  REQUIRE(!map.empty());

  // No two ranges overlap.
  auto sorted = map;
  std::sort(sorted.begin(), sorted.end(),
            [](const MapLine& a, const MapLine& b) { return a.start < b.start; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    INFO(sorted[i - 1].name, " and ", sorted[i].name);
    CHECK(sorted[i - 1].start + sorted[i - 1].size <= sorted[i].start);
  }

  // Each kernel's entry points are named (with their module) and their ranges contain the
  // addresses the engine returned; its module's internal functions are there too.
  for (const auto& k : kernels) {
    const std::string module = "[gbx-" + k.build.key.substr(0, 12) + "]";
    const MapLine* step = containing(map, reinterpret_cast<const void*>(k.step));
    REQUIRE(step != nullptr);
    CHECK(step->start == reinterpret_cast<uint64_t>(k.step));
    CHECK(step->name == k.build.source.entry_point + " " + module);
    for (const auto& [role, symbol] : k.build.source.extra_entry_points) {
      const MapLine* e = containing(map, k.entry(role));
      REQUIRE_MESSAGE(e != nullptr, role);
      CHECK(e->name == symbol + " " + module);
    }
    const auto in_module = std::count_if(map.begin(), map.end(), [&](const MapLine& l) {
      return l.name.size() > module.size() &&
             l.name.compare(l.name.size() - module.size(), module.size(), module) == 0;
    });
    INFO("module ", module);
    CHECK(in_module > 1 + static_cast<long>(k.build.source.extra_entry_points.size()));
  }
  std::remove(path.c_str());  // perf would read it after exit; a test leaves none behind
}
