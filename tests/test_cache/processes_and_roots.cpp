// test_cache, part 2: processes publishing at once, unwritable roots and write errors (the
// in-memory fallback), list / find_prefix / clear, and cache root resolution (helpers: common.h).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common.h"

TEST_CASE("two processes publishing the same keys at once both succeed") {
  TempDir t;
  const int kKeys = 40;
  auto key_of = [](int k) { return gbx::sha256_hex("race-" + std::to_string(k)); };
  auto files_of = [](int k) { return sample_files("race-" + std::to_string(k), 65536); };

  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  std::vector<pid_t> kids;
  for (int writer = 0; writer < 2; ++writer) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        ::close(gate[1]);
        char c;
        // Both children block here until the parent closes the write end.
        while (::read(gate[0], &c, 1) < 0) {
        }
        KernelCache cache(t.path);
        for (int k = 0; k < kKeys && code == 0; ++k) {
          std::vector<std::string> warnings;
          const auto files = files_of(k);
          CacheEntry e = cache.publish(key_of(k), files, json{{"writer", writer}}, &warnings);
          if (e.in_memory())
            code = 10;
          else if (!warnings.empty())
            code = 11;
          else if (e.dir != cache.entry_dir(key_of(k)))
            code = 12;
          else if (e.read("module.o").value() != files.at("module.o"))
            code = 13;
          else if (!cache.lookup(key_of(k), &warnings) || !warnings.empty())
            code = 14;
        }
      } catch (...) {
        code = 99;
      }
      ::_exit(code);
    }
    kids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // releases both writers at the same moment
  for (pid_t pid : kids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  KernelCache cache(t.path);
  for (int k = 0; k < kKeys; ++k) {
    CAPTURE(k);
    std::vector<std::string> warnings;
    auto hit = cache.lookup(key_of(k), &warnings);
    REQUIRE(hit.has_value());
    CHECK(warnings.empty());
    check_entry_matches(*hit, files_of(k));
  }
  CHECK(cache.list().size() == static_cast<size_t>(kKeys));
  CHECK(no_leftovers(tmp_root(cache)));
}

TEST_CASE("an unwritable cache degrades to an in-memory entry with a warning") {
  TempDir t;
  const std::string key = gbx::sha256_hex("read-only");
  const auto files = sample_files("ro");

  auto check_in_memory = [&](KernelCache& cache) {
    std::vector<std::string> warnings;
    CacheEntry e = cache.publish(key, files, json{{"device", "cpu"}}, &warnings);
    CHECK(e.in_memory());
    CHECK(e.key == key);
    REQUIRE(warnings.size() == 1);
    CAPTURE(warnings[0]);
    CHECK(starts_with(warnings[0], "cache: " + cache.root().string() + " not writable ("));
    CHECK(ends_with(warnings[0], "); compiling in memory"));
    check_entry_matches(e, files);
    CHECK(e.meta["key"] == key);
    CHECK(e.meta["device"] == "cpu");
    CHECK(json::parse(e.read("meta.json").value()) == e.meta);
    CHECK_FALSE(e.read("module.s").ok());
  };

  SUBCASE("root is a regular file") {
    const fs::path file = t.path / "not-a-dir";
    write_bytes(file, "x");
    KernelCache cache(file);
    check_in_memory(cache);
    CHECK(read_bytes(file) == "x");
  }
  SUBCASE("root under /proc") {
    REQUIRE(fs::is_directory("/proc/self"));
    KernelCache cache(fs::path("/proc/gbx-cache-test") / std::to_string(::getpid()));
    check_in_memory(cache);
  }
  SUBCASE("root is chmod 0555 (as an unprivileged user when run as root)") {
    // Root ignores mode bits, so a root test run drops to nobody in a child process.
    KernelCache cache(t.path);
    std::vector<std::string> warnings;
    const std::string old_key = gbx::sha256_hex("already-there");
    const std::string bad_key = gbx::sha256_hex("corrupt-and-stuck");
    REQUIRE_FALSE(cache.publish(old_key, files, json::object(), &warnings).in_memory());
    REQUIRE_FALSE(cache.publish(bad_key, files, json::object(), &warnings).in_memory());
    fs::resize_file(cache.entry_dir(bad_key) / "module.o", 7);
    REQUIRE(warnings.empty());
    // Every directory read-only, so neither the root nor tmp/ nor a shard accepts a write;
    // files readable whatever the umask was, so that only writing is denied.
    // The cache must be the child's own to be trusted at all (test_cache/trust.cpp), so the
    // tree goes to uid 65534 first; the cache-key stays private to its owner.
    for (auto& d : fs::recursive_directory_iterator(t.path)) {
      if (::geteuid() == 0) REQUIRE(::lchown(d.path().c_str(), 65534, 65534) == 0);
      fs::permissions(d.path(), fs::perms(d.is_directory()                     ? 0555
                                          : d.path().filename() == "cache-key" ? 0400
                                                                               : 0444));
    }
    if (::geteuid() == 0) REQUIRE(::chown(t.path.c_str(), 65534, 65534) == 0);
    fs::permissions(t.path, fs::perms(0555));

    int code = run_in_child([&]() -> int {
      if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 1;
      KernelCache ro(t.path);
      std::vector<std::string> w;
      CacheEntry e = ro.publish(key, files, json::object(), &w);
      if (!e.in_memory()) return 2;
      if (w.size() != 1 || w[0].find("not writable") == std::string::npos) return 3;
      if (e.read("module.o").value() != files.at("module.o")) return 4;
      // Readers need no write access: an existing entry is still a hit.
      w.clear();
      auto hit = ro.lookup(old_key, &w);
      if (!hit || !w.empty() || hit->read("module.o").value() != files.at("module.o")) return 5;
      // A corrupt entry that cannot be removed stays a miss, with a warning each time.
      w.clear();
      if (ro.lookup(bad_key, &w) || w.size() != 1) return 6;
      if (!fs::exists(ro.entry_dir(bad_key))) return 7;
      return 0;
    });
    INFO("child exit code (1: could not drop to uid 65534, 2..7: failed step)");
    CHECK(code == 0);
  }
}

TEST_CASE("a write error mid-entry (file size limit) degrades to memory and leaves nothing") {
  TempDir t;
  const std::string key = gbx::sha256_hex("fsize");
  const auto files = sample_files("big", 1 << 20);
  int code = run_in_child([&]() -> int {
    // Stands in for a full disk: writes past the limit fail with EFBIG instead of a signal.
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim {
      64 * 1024, 64 * 1024
    };
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 1;
    KernelCache cache(t.path);
    std::vector<std::string> w;
    CacheEntry e = cache.publish(key, files, json::object(), &w);
    if (!e.in_memory()) return 2;
    if (w.size() != 1 || w[0].find("write module.o") == std::string::npos) return 3;
    if (e.read("module.o").value() != files.at("module.o")) return 4;
    return 0;
  });
  INFO("child exit code (1: setrlimit failed, 2..4: failed step)");
  CHECK(code == 0);
  KernelCache cache(t.path);
  CHECK_FALSE(fs::exists(cache.entry_dir(key)));
  CHECK(no_leftovers(tmp_root(cache)));
}

TEST_CASE("list, find_prefix and clear") {
  TempDir t;
  KernelCache cache(t.path);
  CHECK(cache.list().empty());  // the root does not exist yet

  const std::string k1 = "abc1" + std::string(60, '0');
  const std::string k2 = "abc2" + std::string(60, '0');
  const std::string k3 = "f0" + std::string(62, '1');
  std::vector<std::string> warnings;
  for (const auto& k : {k3, k1, k2})
    REQUIRE_FALSE(cache.publish(k, sample_files(k), json::object(), &warnings).in_memory());
  REQUIRE(warnings.empty());
  // Not listed: unparseable meta.json, and a stray directory in a shard.
  const std::string k4 = "ab" + std::string(62, '4');
  fs::create_directories(cache.entry_dir(k4));
  write_bytes(cache.entry_dir(k4) / "meta.json", "not json");
  fs::create_directories(cache.root() / "kernels" / "v1" / "ab" / "zz");

  auto all = cache.list();
  REQUIRE(all.size() == 3);
  CHECK(all[0].key == k1);
  CHECK(all[1].key == k2);
  CHECK(all[2].key == k3);
  CHECK(all[0].dir == cache.entry_dir(k1));
  CHECK(all[2].meta["key"] == k3);

  auto one = cache.find_prefix("abc1");
  REQUIRE(one.ok());
  CHECK(one->key == k1);
  auto full = cache.find_prefix(k3);
  REQUIRE(full.ok());
  CHECK(full->key == k3);
  CHECK(full->read("source.cpp").value() == sample_files(k3).at("source.cpp"));

  auto ambiguous = cache.find_prefix("abc");
  REQUIRE_FALSE(ambiguous.ok());
  CHECK(ambiguous.error().message == "'abc' matches 2 entries");
  auto none = cache.find_prefix("9");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message == "no cache entry matches '9'");
  CHECK_FALSE(cache.find_prefix("").ok());

  REQUIRE(cache.clear().ok());
  CHECK(fs::is_directory(t.path));
  CHECK_FALSE(fs::exists(t.path / "kernels"));
  CHECK(cache.list().empty());
  CHECK_FALSE(cache.find_prefix("abc1").ok());
  CHECK(cache.clear().ok());  // clearing an empty cache is fine
  CHECK_FALSE(cache.publish(k1, sample_files(k1), json::object(), &warnings).in_memory());
  CHECK(cache.list().size() == 1);
}

TEST_CASE("cache root: argument, then GBX_CACHE_DIR, then XDG_CACHE_HOME, then HOME") {
  const char* before = std::getenv("GBX_CACHE_DIR");
  const std::optional<std::string> gbx_before =
      before ? std::optional<std::string>(before) : std::nullopt;
  {
    EnvGuard guard({"GBX_CACHE_DIR", "XDG_CACHE_HOME", "HOME"});
    ::setenv("GBX_CACHE_DIR", "/tmp/gbx-env-a", 1);
    ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    ::setenv("HOME", "/tmp/home", 1);
    CHECK(KernelCache::default_root() == fs::path("/tmp/gbx-env-a"));
    CHECK(KernelCache().root() == fs::path("/tmp/gbx-env-a"));
    TempDir t;
    CHECK(KernelCache(t.path).root() == t.path);
    CHECK(KernelCache(fs::path("rel/dir")).root() == fs::current_path() / "rel" / "dir");

    ::setenv("GBX_CACHE_DIR", "", 1);  // empty counts as unset
    CHECK(KernelCache::default_root() == fs::path("/tmp/xdg/gbx"));
    ::unsetenv("GBX_CACHE_DIR");
    CHECK(KernelCache::default_root() == fs::path("/tmp/xdg/gbx"));

    ::setenv("XDG_CACHE_HOME", "relative/xdg", 1);  // the XDG spec says: ignore it
    CHECK(KernelCache::default_root() == fs::path("/tmp/home/.cache/gbx"));
    ::unsetenv("XDG_CACHE_HOME");
    CHECK(KernelCache::default_root() == fs::path("/tmp/home/.cache/gbx"));
    CHECK(KernelCache().root() == fs::path("/tmp/home/.cache/gbx"));

    ::unsetenv("HOME");  // falls back to the password database, still absolute
    CHECK(KernelCache::default_root().is_absolute());
  }
  const char* after = std::getenv("GBX_CACHE_DIR");
  CHECK((after ? std::optional<std::string>(after) : std::nullopt) == gbx_before);
}

TEST_CASE("lock_compile: a second compile of the same key waits for the first, others do not") {
  // What keeps two processes (pytest-xdist workers, Ray workers) from compiling one kernel
  // twice: build_cpu_kernel and build_cuda_kernel take it after a miss and look again.
  // flock conflicts between two opens of the file, so threads show it as processes would.
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = "ab" + std::string(62, '7');
  const std::string other = "cd" + std::string(62, '7');
  std::optional<gbx::CompileLock> first(cache.lock_compile(key));
  REQUIRE(first->held());
  CHECK(cache.lock_compile(other).held());  // another key: taken at once
  CHECK_FALSE(cache.lock_compile("not-a-key").held());
  std::atomic<bool> released{false}, taken{false};
  bool taken_after_release = false;
  std::thread second([&] {
    const gbx::CompileLock l = cache.lock_compile(key);
    taken_after_release = l.held() && released.load();
    taken = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(taken.load());  // still waiting
  released = true;
  first.reset();
  second.join();
  CHECK(taken_after_release);
  CHECK(cache.list().empty());  // the locks folder is no entry
}
