#pragma once
// On-disk kernel cache keyed by the stage hash (SHA-256 of every input of a module).
//
// Layout: <root>/kernels/v1/<key[0:2]>/<key>/{source.*, module.*, compile.log, meta.json}.
// meta.json is written last and lists every other file with its size and SHA-256; an entry
// whose files do not match it is corrupt and treated as a miss. Writers build an entry in a
// private temp dir and rename() it into place (a lost race is fine); readers never lock.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

std::string sha256_hex(std::string_view bytes);

// Every input of a compiled module. Any new input must be added here (and so to the key).
struct CacheKeyInputs {
  std::string engine_id;             // "gbx-engine/<version>"
  int abi_version = 0;               // GBX_ABI_VERSION
  std::string template_hash;         // TemplateBundle::hash()
  std::string source;                // the full generated source
  std::string device;                // "cpu" | "cuda"
  std::string compiler_identity;     // LLVM version+triple+CPU+features | NVRTC version+arch+output
  std::vector<std::string> options;  // in the order given to the compiler
  std::vector<std::pair<std::string, std::string>> environment;  // variables the compiler reads
};

// SHA-256 (hex) over length-prefixed fields, in the order declared above.
std::string compute_cache_key(const CacheKeyInputs& in);

struct CacheEntry {
  std::string key;
  std::filesystem::path dir;  // empty for an in-memory entry (cache not writable)
  nlohmann::json meta;
  std::map<std::string, std::string> memory_files;  // only for in-memory entries

  Result<std::string> read(const std::string& name) const;
  bool in_memory() const { return dir.empty(); }
};

// An exclusive hold on one key's compile (KernelCache::lock_compile), released when it goes.
class CompileLock {
 public:
  CompileLock() = default;
  explicit CompileLock(int fd) : fd_(fd) {}
  CompileLock(CompileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  CompileLock& operator=(CompileLock&&) = delete;
  CompileLock(const CompileLock&) = delete;
  ~CompileLock();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

class KernelCache {
 public:
  // root: explicit dir, else $GBX_CACHE_DIR, else $XDG_CACHE_HOME/gbx, else ~/.cache/gbx.
  explicit KernelCache(std::optional<std::filesystem::path> root = std::nullopt);

  static std::filesystem::path default_root();
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path entry_dir(const std::string& key) const;

  // A valid entry, or nullopt on a miss. A corrupt entry (missing file, size or hash
  // mismatch, unreadable meta.json) is a miss: a warning is appended and the entry removed
  // so the caller's recompile can replace it.
  std::optional<CacheEntry> lookup(const std::string& key, std::vector<std::string>* warnings);

  // Publishes files + meta atomically. meta gets "files": {name: {size, sha256}} and
  // "created". If the cache dir is read-only or full the entry stays in memory and a
  // warning is appended (never an error: compilation results are still usable).
  CacheEntry publish(const std::string& key, const std::map<std::string, std::string>& files,
                     nlohmann::json meta, std::vector<std::string>* warnings);

  // Taken after a miss, before compiling: a process or thread that missed on the same key
  // waits here while another compiles it, then looks again and finds the entry, instead of
  // compiling it a second time (pytest-xdist workers, ctest -j, Ray workers that start
  // together). flock on kernels/v1/locks/<key>.lock, so a holder that dies releases it. Not
  // held (compiles may repeat, as without it) where the cache is not writable.
  CompileLock lock_compile(const std::string& key) const;

  std::vector<CacheEntry> list() const;  // valid-looking entries (meta.json parsed), by key
  // Entries whose key starts with prefix; error if none or ambiguous.
  Result<CacheEntry> find_prefix(const std::string& prefix) const;
  Status clear();

 private:
  std::filesystem::path root_;
};

}  // namespace gbx
