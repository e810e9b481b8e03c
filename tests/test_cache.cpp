// On-disk kernel cache: key recipe, publish/lookup, corruption, races between processes,
// unwritable roots and root resolution. Every case works in its own temp dir, never in the
// user's cache.
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

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    std::random_device rd;
    path = fs::temp_directory_path() / ("gbx-test-cache-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path);
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

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::map<std::string, std::string> sample_files(const std::string& tag, size_t object_size = 4096) {
  std::string obj(object_size, '\0');
  for (size_t i = 0; i < obj.size(); ++i) obj[i] = static_cast<char>((i * 131 + tag.size()) & 0xFF);
  return {{"source.cpp", "// " + tag + "\nextern \"C\" void gbx_step() {}\n"},
          {"module.ll", "; ModuleID = '" + tag + "'\n"},
          {"module.o", obj},
          {"compile.log", ""}};
}

// A directory is "clean" when it is absent or empty: no temp or trash dirs left behind.
bool no_leftovers(const fs::path& tmp) { return !fs::exists(tmp) || fs::is_empty(tmp); }

fs::path tmp_root(const KernelCache& c) { return c.root() / "kernels" / "v1" / "tmp"; }

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

CacheKeyInputs base_inputs() {
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
std::string reference_key(const CacheKeyInputs& in) {
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

void check_entry_matches(const CacheEntry& e, const std::map<std::string, std::string>& files) {
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

// Runs `body` in a forked child and returns its exit code (or 200 + signal number). The
// child never returns into doctest.
int run_in_child(const std::function<int()>& body) {
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

}  // namespace

TEST_CASE("sha256_hex matches the FIPS 180-2 test vectors") {
  CHECK(gbx::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(gbx::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(gbx::sha256_hex(std::string("a\0b", 3)) != gbx::sha256_hex("a"));
}

TEST_CASE("cache key: deterministic, follows the documented recipe, covers every field") {
  const CacheKeyInputs base = base_inputs();
  const std::string key = gbx::compute_cache_key(base);
  CHECK(key.size() == 64);
  CHECK(gbx::compute_cache_key(base_inputs()) == key);
  CHECK(key == reference_key(base));

  using Mutator = std::function<void(CacheKeyInputs&)>;
  const std::vector<std::pair<const char*, Mutator>> mutators = {
      {"engine_id", [](CacheKeyInputs& in) { in.engine_id += "+"; }},
      {"abi_version", [](CacheKeyInputs& in) { in.abi_version += 1; }},
      {"template_hash", [](CacheKeyInputs& in) { in.template_hash[0] ^= 1; }},
      {"source", [](CacheKeyInputs& in) { in.source += " "; }},
      {"device", [](CacheKeyInputs& in) { in.device = "cuda"; }},
      {"compiler_identity", [](CacheKeyInputs& in) { in.compiler_identity += ";+avx512f"; }},
      {"options: value", [](CacheKeyInputs& in) { in.options[0] = "-O3"; }},
      {"options: order", [](CacheKeyInputs& in) { std::swap(in.options[0], in.options[1]); }},
      {"options: extra", [](CacheKeyInputs& in) { in.options.push_back("-g"); }},
      {"options: extra empty", [](CacheKeyInputs& in) { in.options.push_back(""); }},
      {"options: fewer", [](CacheKeyInputs& in) { in.options.pop_back(); }},
      {"environment: value", [](CacheKeyInputs& in) { in.environment[0].second = "/usr"; }},
      {"environment: name", [](CacheKeyInputs& in) { in.environment[1].first = "LLVM_EN"; }},
      {"environment: order",
       [](CacheKeyInputs& in) { std::swap(in.environment[0], in.environment[1]); }},
      {"environment: extra",
       [](CacheKeyInputs& in) {
         in.environment.push_back({"", ""});
       }},
  };
  std::set<std::string> seen = {key};
  for (const auto& [name, mutate] : mutators) {
    CAPTURE(name);
    CacheKeyInputs in = base_inputs();
    mutate(in);
    const std::string k = gbx::compute_cache_key(in);
    CHECK(k != key);
    CHECK(k == reference_key(in));
    seen.insert(k);
  }
  CHECK(seen.size() == mutators.size() + 1);
}

TEST_CASE("cache key: length and count prefixes keep field boundaries unambiguous") {
  auto key_with = [](const std::function<void(CacheKeyInputs&)>& f) {
    CacheKeyInputs in = base_inputs();
    f(in);
    return gbx::compute_cache_key(in);
  };
  CHECK(key_with([](CacheKeyInputs& in) { in.source = "ab", in.device = "c"; }) !=
        key_with([](CacheKeyInputs& in) { in.source = "a", in.device = "bc"; }));
  CHECK(key_with([](CacheKeyInputs& in) {
          in.options = {"ab", "c"};
        }) != key_with([](CacheKeyInputs& in) {
          in.options = {"a", "bc"};
        }));
  CHECK(key_with([](CacheKeyInputs& in) { in.options = {"abc"}; }) !=
        key_with([](CacheKeyInputs& in) {
          in.options = {"a", "bc"};
        }));
  CHECK(key_with([](CacheKeyInputs& in) { in.options = {}; }) !=
        key_with([](CacheKeyInputs& in) { in.options = {""}; }));
  CHECK(key_with([](CacheKeyInputs& in) {
          in.environment = {{"ab", "c"}};
        }) != key_with([](CacheKeyInputs& in) {
          in.environment = {{"a", "bc"}};
        }));
  // The same string moved from the end of the options to the start of the environment.
  CHECK(key_with([](CacheKeyInputs& in) { in.options = {"X"}, in.environment = {}; }) !=
        key_with([](CacheKeyInputs& in) {
          in.options = {}, in.environment = {{"X", ""}};
        }));
}

TEST_CASE("publish then lookup is a hit with identical bytes and a complete meta.json") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = gbx::sha256_hex("publish-lookup");
  const auto files = sample_files("a");
  std::vector<std::string> warnings;

  CHECK_FALSE(cache.lookup(key, &warnings).has_value());
  CHECK(warnings.empty());

  CacheEntry pub = cache.publish(key, files, json{{"device", "cpu"}}, &warnings);
  CHECK(warnings.empty());
  CHECK_FALSE(pub.in_memory());
  CHECK(pub.dir == t.path / "kernels" / "v1" / key.substr(0, 2) / key);
  CHECK(pub.dir == cache.entry_dir(key));
  check_entry_matches(pub, files);

  auto hit = cache.lookup(key, &warnings);
  REQUIRE(hit.has_value());
  CHECK(warnings.empty());
  CHECK(hit->key == key);
  CHECK_FALSE(hit->in_memory());
  check_entry_matches(*hit, files);
  CHECK(hit->meta["key"] == key);
  CHECK(hit->meta["device"] == "cpu");
  const std::string created = hit->meta["created"].get<std::string>();
  CHECK(created.size() == 20);  // YYYY-MM-DDTHH:MM:SSZ
  CHECK(created[10] == 'T');
  CHECK(created.back() == 'Z');
  CHECK(json::parse(read_bytes(pub.dir / "meta.json")) == hit->meta);
  CHECK(json::parse(hit->read("meta.json").value()) == hit->meta);
  CHECK_FALSE(hit->read("module.s").ok());
  CHECK(no_leftovers(tmp_root(cache)));

  SUBCASE("publishing an existing key keeps the valid entry") {
    CacheEntry again = cache.publish(key, files, json{{"device", "other"}}, &warnings);
    CHECK(warnings.empty());
    CHECK(again.dir == pub.dir);
    CHECK(again.meta["device"] == "cpu");
    CHECK(no_leftovers(tmp_root(cache)));
  }
  SUBCASE("a key that is not lowercase hex never touches the disk") {
    CacheEntry bad = cache.publish("../" + key, files, json::object(), &warnings);
    CHECK(bad.in_memory());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("invalid key") != std::string::npos);
    CHECK_FALSE(cache.lookup("../" + key, &warnings).has_value());
  }
}

TEST_CASE("a corrupt entry is a miss with a warning, is removed, and can be republished") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = gbx::sha256_hex("corrupt");
  const auto files = sample_files("c");
  std::vector<std::string> warnings;
  const CacheEntry pub = cache.publish(key, files, json::object(), &warnings);
  REQUIRE(warnings.empty());
  REQUIRE_FALSE(pub.in_memory());
  const fs::path obj = pub.dir / "module.o";
  std::string expect_in_warning;

  SUBCASE("truncated module.o") {
    fs::resize_file(obj, 100);
    expect_in_warning = "module.o: size 100, expected 4096";
  }
  SUBCASE("flipped byte in module.o") {
    std::string bytes = read_bytes(obj);
    bytes[1234] = static_cast<char>(bytes[1234] ^ 0x40);
    write_bytes(obj, bytes);
    expect_in_warning = "module.o: sha256 mismatch";
  }
  SUBCASE("deleted source.cpp") {
    fs::remove(pub.dir / "source.cpp");
    expect_in_warning = "source.cpp: No such file";
  }
  SUBCASE("garbage meta.json") {
    write_bytes(pub.dir / "meta.json", "{\"key\": \"" + key + "\", garbage");
    expect_in_warning = "meta.json: not valid JSON";
  }
  SUBCASE("meta.json of another key") {
    json meta = json::parse(read_bytes(pub.dir / "meta.json"));
    meta["key"] = gbx::sha256_hex("other");
    write_bytes(pub.dir / "meta.json", meta.dump());
    expect_in_warning = "meta.json: key does not match";
  }
  SUBCASE("missing meta.json") {
    fs::remove(pub.dir / "meta.json");
    expect_in_warning = "meta.json: No such file";
  }

  auto miss = cache.lookup(key, &warnings);
  CHECK_FALSE(miss.has_value());
  REQUIRE(warnings.size() == 1);
  CAPTURE(warnings[0]);
  CHECK(starts_with(warnings[0], "cache: entry " + key.substr(0, 12) + " corrupt ("));
  CHECK(warnings[0].find(expect_in_warning) != std::string::npos);
  CHECK(ends_with(warnings[0], "); recompiling"));
  CHECK_FALSE(fs::exists(pub.dir));
  CHECK(no_leftovers(tmp_root(cache)));

  warnings.clear();
  CHECK_FALSE(cache.lookup(key, &warnings).has_value());  // gone: a plain miss now
  CHECK(warnings.empty());

  CacheEntry again = cache.publish(key, files, json::object(), &warnings);
  CHECK(warnings.empty());
  CHECK_FALSE(again.in_memory());
  auto hit = cache.lookup(key, &warnings);
  REQUIRE(hit.has_value());
  CHECK(warnings.empty());
  check_entry_matches(*hit, files);
}

TEST_CASE("publish over a corrupt entry that nobody looked up replaces it") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = gbx::sha256_hex("replace");
  std::vector<std::string> warnings;
  const auto old_files = sample_files("old");
  CacheEntry pub = cache.publish(key, old_files, json::object(), &warnings);
  REQUIRE_FALSE(pub.in_memory());
  fs::resize_file(pub.dir / "module.o", 1);

  const auto files = sample_files("new", 8192);
  CacheEntry again = cache.publish(key, files, json::object(), &warnings);
  CHECK_FALSE(again.in_memory());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("corrupt (module.o: size 1, expected 4096)") != std::string::npos);
  warnings.clear();
  auto hit = cache.lookup(key, &warnings);
  REQUIRE(hit.has_value());
  CHECK(warnings.empty());
  check_entry_matches(*hit, files);
  CHECK(no_leftovers(tmp_root(cache)));
}

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
    for (auto& d : fs::recursive_directory_iterator(t.path))
      fs::permissions(d.path(), fs::perms(d.is_directory() ? 0555 : 0444));
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

namespace {
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
}  // namespace

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
