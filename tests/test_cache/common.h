#pragma once
// test_cache's helpers: temp dirs, sample entries, the documented key recipe written out
// independently, running a body in a child process (test_cache.cpp and the cases in this folder).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gbx/engine/cache.h"

namespace fs = std::filesystem;
using gbx::CacheEntry;
using gbx::CacheKeyInputs;
using gbx::KernelCache;
using nlohmann::json;

namespace cache_test {

struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    std::random_device rd;
    path = fs::temp_directory_path() / ("gbx-test-cache-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path);
    // Private whatever the umask: a cache root others can write is refused (trust.cpp).
    fs::permissions(path, fs::perms::owner_all);
  }
  ~TempDir() {
    std::error_code ec;
    // Undo any chmod a test left behind so that the whole tree can be removed.
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory(ec))
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

inline std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

inline std::map<std::string, std::string> sample_files(const std::string& tag,
                                                       size_t object_size = 4096) {
  std::string obj(object_size, '\0');
  for (size_t i = 0; i < obj.size(); ++i) obj[i] = static_cast<char>((i * 131 + tag.size()) & 0xFF);
  return {{"source.cpp", "// " + tag + "\nextern \"C\" void gbx_step() {}\n"},
          {"module.ll", "; ModuleID = '" + tag + "'\n"},
          {"module.o", obj},
          {"compile.log", ""}};
}

// A directory is "clean" when it is absent or empty: no temp or trash dirs left behind.
inline bool no_leftovers(const fs::path& tmp) { return !fs::exists(tmp) || fs::is_empty(tmp); }

inline fs::path tmp_root(const KernelCache& c) { return c.root() / "kernels" / "v1" / "tmp"; }

inline bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}
inline bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

inline CacheKeyInputs base_inputs() {
  CacheKeyInputs in;
  in.engine_id = "gbx-engine/0.1.0";
  in.abi_version = 3;
  in.template_hash = gbx::sha256_hex("templates");
  in.source = "extern \"C\" void gbx_step() {}\n";
  in.device = "cpu";
  in.compiler_identity = "llvm-14;x86_64-pc-linux-gnu;znver3;+avx2";
  in.options = {"-O2", "-fno-math-errno"};
  in.environment = {{"CPATH", ""}, {"LLVM_ENV", "x"}};
  return in;
}

// The recipe as documented in cache.cpp, written out independently.
inline std::string reference_key(const CacheKeyInputs& in) {
  std::string buf;
  auto u64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) buf += static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  auto field = [&](const std::string& s) {
    u64(s.size());
    buf += s;
  };
  field("gbx-cache-key/v1");
  field(in.engine_id);
  field(std::to_string(in.abi_version));
  field(in.template_hash);
  field(in.source);
  field(in.device);
  field(in.compiler_identity);
  u64(in.options.size());
  for (const auto& o : in.options) field(o);
  u64(in.environment.size());
  for (const auto& [n, v] : in.environment) {
    field(n);
    field(v);
  }
  return gbx::sha256_hex(buf);
}

inline void check_entry_matches(const CacheEntry& e,
                                const std::map<std::string, std::string>& files) {
  for (const auto& [name, bytes] : files) {
    CAPTURE(name);
    auto r = e.read(name);
    REQUIRE(r.ok());
    CHECK(r.value() == bytes);
    REQUIRE(e.meta["files"].contains(name));
    CHECK(e.meta["files"][name]["size"].get<uint64_t>() == bytes.size());
    CHECK(e.meta["files"][name]["sha256"].get<std::string>() == gbx::sha256_hex(bytes));
  }
  CHECK(e.meta["files"].size() == files.size());
}

// Sets or unsets environment variables for one test and restores them afterwards.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) {
    for (auto& n : names) {
      const char* v = std::getenv(n.c_str());
      saved_.push_back({n, v ? std::optional<std::string>(v) : std::nullopt});
    }
  }
  ~EnvGuard() {
    for (auto& [n, v] : saved_) {
      if (v)
        ::setenv(n.c_str(), v->c_str(), 1);
      else
        ::unsetenv(n.c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Runs `body` in a forked child and returns its exit code (or 200 + signal number). The
// child never returns into doctest.
inline int run_in_child(const std::function<int()>& body) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 98;
    try {
      code = body();
    } catch (...) {
      code = 99;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

}  // namespace cache_test

using namespace cache_test;
