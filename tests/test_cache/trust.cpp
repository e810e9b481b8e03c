// Who the kernel cache trusts (engine/src/cache_trust.h): entries signed with the cache's key,
// directories and files of this user only, roots another user owns or others can write
// refused; the perf map never followed through a planted link.
#include <fcntl.h>

#include <cstdio>

#include "gbx/engine/orc_compiler.h"
#include "skip.h"
#include "test_cache/common.h"

namespace {

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

void set_meta_file(const fs::path& entry, const std::string& name, const std::string& bytes) {
  json meta = json::parse(read_bytes(entry / "meta.json"));
  meta["files"][name] = {{"size", bytes.size()}, {"sha256", gbx::sha256_hex(bytes)}};
  write_bytes(entry / "meta.json", meta.dump(2) + "\n");
}

// The single warning of a lookup that must miss, and that the entry is gone afterwards.
std::string rejected_line(KernelCache& cache, const std::string& key) {
  std::vector<std::string> w;
  CHECK_FALSE(cache.lookup(key, &w).has_value());
  REQUIRE(w.size() == 1);
  CHECK(starts_with(w[0], "cache: entry " + key.substr(0, 12) + " rejected ("));
  CHECK(ends_with(w[0], "); recompiling"));
  CHECK(w[0].find('\n') == std::string::npos);
  CHECK_FALSE(fs::exists(cache.entry_dir(key)));
  return w[0];
}

const char* kNobodyNeedsRoot = "chown to another user needs root (CI runs as root)";

}  // namespace

TEST_CASE("a module swapped in from another entry is rejected with one line, then recompiled") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string a = gbx::sha256_hex("entry-a"), b = gbx::sha256_hex("entry-b");
  const auto files_a = sample_files("a"), files_b = sample_files("bb", 5000);
  std::vector<std::string> w;
  const CacheEntry ea = cache.publish(a, files_a, json::object(), &w);
  const CacheEntry eb = cache.publish(b, files_b, json::object(), &w);
  REQUIRE(w.empty());
  REQUIRE_FALSE(ea.in_memory());

  std::string why;
  SUBCASE("module.o of b, meta.json's size and sha256 updated to match") {
    fs::copy_file(eb.dir / "module.o", ea.dir / "module.o", fs::copy_options::overwrite_existing);
    set_meta_file(ea.dir, "module.o", files_b.at("module.o"));
    why = "signature does not match this cache's key";
  }
  SUBCASE("b's meta.json and meta.sig, the key changed to a's") {
    for (const char* f : {"module.o", "source.cpp", "module.ll", "compile.log", "meta.sig"})
      fs::copy_file(eb.dir / f, ea.dir / f, fs::copy_options::overwrite_existing);
    json meta = json::parse(read_bytes(eb.dir / "meta.json"));
    meta["key"] = a;
    write_bytes(ea.dir / "meta.json", meta.dump(2) + "\n");
    why = "signature does not match this cache's key";
  }
  SUBCASE("meta.sig removed") {
    fs::remove(ea.dir / "meta.sig");
    why = "meta.sig: No such file";
  }
  SUBCASE("module.o of another user") {
    if (::geteuid() != 0) GBX_SKIP(kNobodyNeedsRoot);
    REQUIRE(::chown((ea.dir / "module.o").c_str(), 65534, 65534) == 0);
    why = "module.o: owned by uid 65534, not this user";
  }
  SUBCASE("module.o a link to b's") {
    fs::remove(ea.dir / "module.o");
    fs::create_symlink(eb.dir / "module.o", ea.dir / "module.o");
    why = "module.o: a symbolic link";
  }
  SUBCASE("entry directory writable by others") {
    fs::permissions(ea.dir, fs::perms(0777));
    why = "entry directory is writable by group or others (mode 0777)";
  }
  SUBCASE("a cache-key of another secret") {
    write_bytes(t.path / "cache-key", std::string(64, 'a') + "\n");
    why = "signature does not match this cache's key";
  }
  CAPTURE(why);
  CHECK(rejected_line(cache, a).find(why) != std::string::npos);

  // The recompile publishes a's own files again, and that entry is a hit.
  w.clear();
  REQUIRE_FALSE(cache.publish(a, files_a, json::object(), &w).in_memory());
  auto hit = cache.lookup(a, &w);
  REQUIRE(hit.has_value());
  CHECK(w.empty());
  check_entry_matches(*hit, files_a);
}

TEST_CASE("an entry's file changed after lookup is refused by read, not handed out") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = gbx::sha256_hex("toctou");
  std::vector<std::string> w;
  cache.publish(key, sample_files("t"), json::object(), &w);
  auto hit = cache.lookup(key, &w);
  REQUIRE(hit.has_value());
  write_bytes(hit->dir / "module.o", "other bytes");
  auto r = hit->read("module.o");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("module.o changed since the entry was checked") !=
        std::string::npos);
}

TEST_CASE("a new cache is private: root and directories 0700, files and cache-key 0600") {
  TempDir t;
  const fs::path root = t.path / "new" / "cache";
  KernelCache cache(root);
  const std::string key = gbx::sha256_hex("private");
  std::vector<std::string> w;
  const CacheEntry e = cache.publish(key, sample_files("p"), json::object(), &w);
  REQUIRE(w.empty());
  REQUIRE_FALSE(e.in_memory());
  for (const fs::path& d : {t.path / "new", root, root / "kernels", root / "kernels" / "v1",
                            e.dir.parent_path(), e.dir}) {
    CAPTURE(d);
    CHECK(mode_of(d) == 0700);
  }
  CHECK(mode_of(root / "cache-key") == 0600);
  CHECK(read_bytes(root / "cache-key").size() == 65);
  for (const auto& f : fs::directory_iterator(e.dir)) {
    CAPTURE(f.path());
    CHECK(mode_of(f.path()) == 0600);
  }
  CHECK(fs::exists(e.dir / "meta.sig"));
  CHECK_FALSE(json::parse(read_bytes(e.dir / "meta.json"))["files"].contains("meta.sig"));
  auto lock = cache.lock_compile(key);
  CHECK(lock.held());
  CHECK(mode_of(root / "kernels" / "v1" / "locks") == 0700);
}

TEST_CASE("a cache root of another user, or writable by group or others, is refused") {
  TempDir t;
  const fs::path root = t.path / "cache";
  const std::string key = gbx::sha256_hex("refused");
  const auto files = sample_files("r");
  std::vector<std::string> w;
  {
    KernelCache own(root);
    REQUIRE_FALSE(own.publish(key, files, json::object(), &w).in_memory());
    REQUIRE(own.lookup(key, &w).has_value());
    REQUIRE(w.empty());
  }
  std::string why;
  std::optional<EnvGuard> env;
  std::optional<fs::path> as_given;  // the root as the user names it (default: root)
  SUBCASE("owned by uid 65534") {
    if (::geteuid() != 0) GBX_SKIP(kNobodyNeedsRoot);
    REQUIRE(::chown(root.c_str(), 65534, 65534) == 0);
    why = "owned by uid 65534, not this user (uid 0)";
  }
  SUBCASE("group-writable") {
    fs::permissions(root, fs::perms(0770));
    why = "writable by group or others (mode 0770)";
  }
  SUBCASE("world-writable and sticky, named by GBX_CACHE_DIR") {
    fs::permissions(root, fs::perms(01777));
    env.emplace(std::vector<std::string>{"GBX_CACHE_DIR"});
    ::setenv("GBX_CACHE_DIR", root.c_str(), 1);
    why = "writable by group or others (mode 1777)";
  }
  SUBCASE("the XDG location, made in advance by uid 65534") {
    if (::geteuid() != 0) GBX_SKIP(kNobodyNeedsRoot);
    env.emplace(std::vector<std::string>{"GBX_CACHE_DIR", "XDG_CACHE_HOME"});
    ::unsetenv("GBX_CACHE_DIR");
    ::setenv("XDG_CACHE_HOME", t.path.c_str(), 1);
    fs::rename(root, t.path / "gbx");
    REQUIRE(::chown((t.path / "gbx").c_str(), 65534, 65534) == 0);
    why = "owned by uid 65534, not this user (uid 0)";
  }
  SUBCASE("a link another user planted where the root goes") {
    if (::geteuid() != 0) GBX_SKIP(kNobodyNeedsRoot);
    fs::create_directory_symlink(root, t.path / "link");
    REQUIRE(::lchown((t.path / "link").c_str(), 65534, 65534) == 0);
    as_given = t.path / "link";
    why = "a symbolic link owned by uid 65534, not this user (uid 0)";
  }
  SUBCASE("a cache-key readable by others") {
    fs::permissions(root / "cache-key", fs::perms(0644));
    why = (root / "cache-key").string() +
          " is readable or writable by group or others (mode 0644); remove it to start a new key";
  }
  KernelCache cache = env ? KernelCache() : KernelCache(as_given.value_or(root));
  CAPTURE(why);
  const std::string line =
      "cache: refusing " + cache.root().string() + ": " + why + "; compiling in memory";
  w.clear();
  CHECK_FALSE(cache.lookup(key, &w).has_value());  // the entry is there, but not trusted
  CacheEntry e = cache.publish(key, files, json::object(), &w);
  CHECK(e.in_memory());
  REQUIRE(w.size() == 1);  // once per KernelCache, not once per call
  CHECK(w[0] == line);
  CHECK(cache.refusal() == why);
  CHECK(cache.list().empty());
  CHECK_FALSE(cache.find_prefix(key.substr(0, 8)).ok());
  CHECK_FALSE(cache.clear().ok());
  CHECK_FALSE(cache.lock_compile(key).held());
}

TEST_CASE("a cache carried with its cache-key loads; without it every entry is rejected") {
  TempDir t;
  const fs::path here = t.path / "here", there = t.path / "there";
  const std::string key = gbx::sha256_hex("carried");
  const auto files = sample_files("k");
  std::vector<std::string> w;
  REQUIRE_FALSE(KernelCache(here).publish(key, files, json::object(), &w).in_memory());
  // cp -a: modes kept (the files are this user's on the other side too).
  fs::copy(here, there, fs::copy_options::recursive);
  REQUIRE(w.empty());
  SUBCASE("with the key") {
    KernelCache cache(there);
    auto hit = cache.lookup(key, &w);
    REQUIRE(hit.has_value());
    CHECK(w.empty());
    check_entry_matches(*hit, files);
    CHECK(cache.list().size() == 1);
  }
  SUBCASE("without it") {
    fs::remove(there / "cache-key");
    KernelCache cache(there);
    CHECK(cache.list().empty());
    CHECK(rejected_line(cache, key).find("no cache-key in the cache root") != std::string::npos);
  }
}

TEST_CASE("cache warnings also reach the process-wide queue, each pending line once") {
  gbx::take_cache_warnings();
  TempDir t;
  fs::permissions(t.path, fs::perms(0777));
  std::vector<std::string> w;
  KernelCache(t.path).publish(gbx::sha256_hex("q"), sample_files("q"), json::object(), &w);
  KernelCache(t.path).publish(gbx::sha256_hex("q"), sample_files("q"), json::object(), &w);
  CHECK(w.size() == 2);
  const auto queued = gbx::take_cache_warnings();
  REQUIRE(queued.size() == 1);
  CHECK(queued[0] == w[0]);
  CHECK(gbx::take_cache_warnings().empty());
}

TEST_CASE("the perf map is never opened through a link planted at /tmp/perf-PID.map") {
  TempDir t;
  const fs::path victim = t.path / "victim";
  write_bytes(victim, "keep me\n");
  // The path of this process's map, as the JIT names it; a child so the pid is fresh.
  const int code = run_in_child([&]() -> int {
    const std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
    std::remove(path.c_str());
    std::string why;
    if (::symlink(victim.c_str(), path.c_str()) != 0) return 1;
    std::FILE* f = gbx::open_jit_perf_map(path, &why);
    std::remove(path.c_str());
    if (f || why != "is a symbolic link") return 2;
    // A stale map of this user's (a reused pid) is emptied and reused.
    write_bytes(path, "stale\n");
    f = gbx::open_jit_perf_map(path, &why);
    if (!f) return 3;
    std::fputs("1 2 f\n", f);
    std::fclose(f);
    const bool reused = read_bytes(path) == "1 2 f\n";
    std::remove(path.c_str());
    if (!reused) return 4;
    // A hard link to a file of this user's is refused too.
    if (::link(victim.c_str(), path.c_str()) != 0) return 5;
    f = gbx::open_jit_perf_map(path, &why);
    std::remove(path.c_str());
    if (f || why != "has other hard links") return 6;
    // A new map is private to this user.
    f = gbx::open_jit_perf_map(path, &why);
    if (!f) return 7;
    std::fclose(f);
    const bool private_map = mode_of(path) == 0600;
    std::remove(path.c_str());
    return private_map ? 0 : 8;
  });
  INFO("child exit code (1: symlink failed, 2..8: failed step)");
  CHECK(code == 0);
  CHECK(read_bytes(victim) == "keep me\n");
}

TEST_CASE("gbx-run run prints a refused cache's warning and runs (compiling in memory)") {
  TempDir t;
  fs::permissions(t.path, fs::perms(0777));
  const fs::path err = t.path / "stderr.txt";
  const std::string tool = std::string(GBX_TEST_TOOLS_DIR) + "/gbx-run";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("GBX_CACHE_DIR", t.path.c_str(), 1);
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen(err.c_str(), "w", stderr))
      ::_exit(126);
    ::execl(tool.c_str(), "gbx-run", "run", "--rom", "builtin:ALU_LOOP", "--frames", "1",
            (char*)nullptr);
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  const std::string text = read_bytes(err);
  CAPTURE(text);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string line = "warning: cache: refusing " + t.path.string() +
                           ": writable by group or others (mode 0777); compiling in memory\n";
  const size_t at = text.find(line);
  CHECK(at != std::string::npos);
  CHECK(text.find(line, at + 1) == std::string::npos);  // said once
  CHECK_FALSE(fs::exists(t.path / "kernels"));          // nothing written into it
}
