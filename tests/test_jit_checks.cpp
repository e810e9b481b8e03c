// GBX_JIT_CHECKS (engine/include/gbx/engine/orc_compiler.h): kernels compiled with checks stop
// the process at an out-of-bounds access instead of reading or writing past it. The crafted-
// state fuzz (test_state_fuzz, test_state_fuzz_on_double) relies on that, so this proves the
// checks fire in JIT-compiled code: each probe runs in a forked child, in bounds (it returns)
// and one past the end (the child dies: SIGILL from a bounds trap, or ASan's abort with its
// report). CTest sets GBX_JIT_CHECKS for this suite: "bounds", and "bounds,address" in the
// sanitizer build (scripts/build-asan.sh).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>

#include "gbx/engine/orc_compiler.h"

namespace {

bool has_flag(const std::vector<std::string>& flags, const std::string& f) {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

const char* kProbes = R"(
struct Rec { unsigned char a[8]; int after; };
extern "C" int probe_local(int i) {
  int t[4] = {1, 2, 3, 4};
  return t[i];
}
extern "C" int probe_member(Rec* r, int i) { return r->a[i]; }
extern "C" int probe_pointer(const unsigned char* p, int i) { return p[i]; }
)";

struct Rec {
  unsigned char a[8];
  int after;
};

// A child that got past the probe exits with this.
constexpr int kRanOn = 42;
bool ran_on(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == kRanOn; }

// Runs fn in a child; returns its wait status (the out-of-bounds probes never run here).
template <class F>
int in_child(F fn) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // doctest's crash handlers would report the child's signal as a failed test: default
    // dispositions, so the signal ends the child and the parent reads it from the status.
    for (int sig : {SIGILL, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGTRAP}) std::signal(sig, SIG_DFL);
    // ASan's report would fill the log: the statuses say what happened.
    std::freopen("/dev/null", "w", stderr);
    volatile int sink = fn();
    (void)sink;
    std::_Exit(kRanOn);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

template <class Fn>
Fn load(const std::string& object, const char* name) {
  auto sym = gbx::jit_load_object("test-jit-checks", object, name);
  REQUIRE_MESSAGE(sym.ok(), (sym.ok() ? "" : sym.error().message));
  return reinterpret_cast<Fn>(sym.value());
}

}  // namespace

TEST_CASE("kernels compiled with GBX_JIT_CHECKS stop at an out-of-bounds access") {
  auto flags = gbx::jit_check_flags();
  REQUIRE_MESSAGE(flags.ok(), (flags.ok() ? "" : flags.error().message));
  const char* env = std::getenv("GBX_JIT_CHECKS");
  REQUIRE_MESSAGE(env, "CTest sets GBX_JIT_CHECKS for this suite");
  const bool address = std::string(env).find("address") != std::string::npos;
  CHECK(has_flag(*flags, "-fsanitize-trap=array-bounds,local-bounds"));
  CHECK(has_flag(*flags, "-fsanitize=address") == address);
  // The checks are on the command line, so they are part of every kernel's cache key.
  const auto args = gbx::cpu_compile_args({});
  CHECK(has_flag(args, "-fsanitize=array-bounds,local-bounds"));

  auto out = gbx::compile_cpu(kProbes, "jit_checks_probe.cpp", {});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message + "\n" + out.error().detail));
  auto local = load<int (*)(int)>(out->object, "probe_local");
  auto member = load<int (*)(Rec*, int)>(out->object, "probe_member");
  auto pointer = load<int (*)(const unsigned char*, int)>(out->object, "probe_pointer");

  // In bounds: the values, in the child and here.
  CHECK(local(3) == 4);
  Rec rec{{1, 2, 3, 4, 5, 6, 7, 8}, 9};
  CHECK(member(&rec, 7) == 8);
  auto* heap = static_cast<unsigned char*>(std::malloc(16));
  for (int i = 0; i < 16; ++i) heap[i] = (unsigned char)i;
  CHECK(pointer(heap, 15) == 15);
  CHECK(ran_on(in_child([&] { return local(2); })));

  // One past the end: the bounds trap (SIGILL) for arrays of known size.
  const int s_local = in_child([&] { return local(4); });
  CHECK_MESSAGE((WIFSIGNALED(s_local) && WTERMSIG(s_local) == SIGILL), "status ", s_local);
  const int s_member = in_child([&] { return member(&rec, 8); });
  CHECK_MESSAGE((WIFSIGNALED(s_member) && WTERMSIG(s_member) == SIGILL), "status ", s_member);

  // Through a pointer the size is the allocation's: only AddressSanitizer sees it.
  const int s_pointer = in_child([&] { return pointer(heap, 16); });
  if (address) CHECK_MESSAGE(!ran_on(s_pointer), "status ", s_pointer);
  const std::string mode = address ? "address checks on" : "bounds checks only";
  MESSAGE("wait statuses: local[4] ", s_local, ", member a[8] ", s_member, ", heap[16] ", s_pointer,
          " (", mode, ")");
  std::free(heap);
}
