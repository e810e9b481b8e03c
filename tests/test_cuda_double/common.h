#pragma once
// test_cuda_double's helpers (test_cuda_double.cpp and the cases in this folder): the double's
// context, and a forked child for what must abort.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "gbx/engine/cuda_driver.h"
#include "test_util.h"

namespace cuda_double_test {

using namespace gbx;

inline std::string double_dir() {
  const char* d = std::getenv("GBX_TEST_CUDA_DOUBLE_DIR");
  return d ? d : "";
}

inline CudaContext& context() {
  static CudaContext* ctx = [] {
    auto c = CudaContext::open(0);
    REQUIRE_MESSAGE(c.ok(), "the CUDA double did not load: ", (c.ok() ? "" : c.error().message),
                    " (GBX_TEST_CUDA_DOUBLE_DIR=", double_dir(), ")");
    return c->release();
  }();
  return *ctx;
}

struct Child {
  bool signaled = false;
  int signal = 0;
  int exit_code = -1;
  std::string err;  // the child's stderr
};

// Runs `body` in a forked child (its stderr captured), for what must crash or abort.
inline Child in_child(const std::function<void()>& body) {
  test::TempDir dir;
  const std::string err_path = (dir.path / "stderr").string();
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!std::freopen(err_path.c_str(), "w", stderr)) _exit(90);
    std::signal(SIGABRT, SIG_DFL);
    std::signal(SIGSEGV, SIG_DFL);
    body();
    std::fflush(nullptr);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  Child c;
  c.signaled = WIFSIGNALED(status);
  c.signal = c.signaled ? WTERMSIG(status) : 0;
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  c.err = ss.str();
  return c;
}

inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace cuda_double_test
