#pragma once
// Shared helpers for the doctest suites.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include "skip.h"

namespace gbx::test {

// A fresh directory under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("gbx-test-" + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// Runs a shell command line, capturing stdout and stderr together.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::string tool(const std::string& name) {
  return std::string(GBX_TEST_TOOLS_DIR) + "/" + name;
}

// The mismatch bundle directory named on gbx-run verify's verdict line ("...; bundle: PATH").
inline std::filesystem::path bundle_of(const std::string& output) {
  const auto at = output.find("bundle: ");
  if (at == std::string::npos) return {};
  std::string path = output.substr(at + 8);
  return path.substr(0, path.find('\n'));
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// A ROM built from C at build time (roms/, sdcc): its path, or nothing after skipping the
// calling case, saying why (no sdcc at configure time, or the file is missing).
inline std::optional<std::filesystem::path> c_rom(const std::string& file) {
  const std::filesystem::path rom = std::filesystem::path(GBX_TEST_ROM_DIR) / file;
  if (GBX_TEST_HAVE_SDCC && std::filesystem::exists(rom)) return rom;
  skip_case(GBX_TEST_HAVE_SDCC ? rom.string() + " is missing (build target gbx_c_roms)"
                               : "sdcc was not found at configure time (apt install sdcc): the C "
                                 "ROMs are not built");
  return std::nullopt;
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old)
      setenv(name.c_str(), old->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

}  // namespace gbx::test
