#pragma once
// On-disk kernel cache keyed by the stage hash (SHA-256 of every input of a module).
//
// Layout: <root>/cache-key and
// <root>/kernels/v1/<key[0:2]>/<key>/{source.*, module.*, compile.log, meta.sig, meta.json}.
// meta.json is written last and lists every other file with its size and SHA-256; an entry
// whose files do not match it is corrupt and treated as a miss. Writers build an entry in a
// private temp dir and rename() it into place (a lost race is fine); readers never lock.
// Trust (engine/src/cache_trust.h has the rules): the root and every directory below it are
// this user's and writable by nobody else (the root is created 0700; one owned by another
// user or writable by group/others is refused: lookups miss and compiles stay in memory,
// with a warning); an entry is loaded only when its meta.sig is the HMAC of its meta.json
// under the secret in <root>/cache-key (0600), so only what this user compiled into this
// cache runs. A cache carried to another machine loads there with its cache-key file.
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

// Every cache warning (a corrupt or rejected entry, a refused or read-only root, an entry that
// failed to load) is appended to the caller's list (when given) and to a process-wide queue,
// so that a program that never sees a kernel build's own list (gbx-run run, whose backend
// builds its kernels; the Python binding; a background tier-up compile) can still show it.
// The queue keeps at most 64 lines and drops a line already pending.
void cache_warning(std::vector<std::string>* warnings, std::string text);
// The queued warnings, oldest first; empties the queue.
std::vector<std::string> take_cache_warnings();

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
  // mismatch, unreadable meta.json) or a rejected one (signature not made with this cache's
  // key, a file or directory of another user or writable by others) is a miss: a warning is
  // appended and the entry removed so the caller's recompile can replace it.
  std::optional<CacheEntry> lookup(const std::string& key, std::vector<std::string>* warnings);

  // Publishes files + meta atomically. meta gets "files": {name: {size, sha256}} and
  // "created"; meta.sig signs it. If the cache dir is read-only, full or refused the entry
  // stays in memory and a warning is appended (never an error: compilation results are still
  // usable). Makes the root (0700) and its cache-key when absent.
  CacheEntry publish(const std::string& key, const std::map<std::string, std::string>& files,
                     nlohmann::json meta, std::vector<std::string>* warnings);

  // Taken after a miss, before compiling: a process or thread that missed on the same key
  // waits here while another compiles it, then looks again and finds the entry, instead of
  // compiling it a second time (pytest-xdist workers, ctest -j, Ray workers that start
  // together). flock on kernels/v1/locks/<key>.lock, so a holder that dies releases it. Not
  // held (compiles may repeat, as without it) where the cache is not writable.
  CompileLock lock_compile(const std::string& key) const;

  // Entries signed with this cache's key (meta.json parsed, files not hashed), by key.
  std::vector<CacheEntry> list() const;
  // Entries whose key starts with prefix; error if none or ambiguous.
  Result<CacheEntry> find_prefix(const std::string& prefix) const;
  Status clear();  // every entry; the cache-key stays

  // Why this root is refused ("" when it is not): another user's, writable by others, or an
  // unusable cache-key.
  std::string refusal() const;

 private:
  void refused(std::vector<std::string>* warnings, const std::string& why);

  std::filesystem::path root_;
  bool refusal_reported_ = false;  // one warning per KernelCache, not one per lookup
};

}  // namespace gbx
