#include "gbx/engine/cache.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <random>
#include <system_error>

namespace gbx {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kMetaName = "meta.json";

// Streaming SHA-256 so that entry validation never holds a whole module in memory.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    check(ctx_ != nullptr && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
  }
  void update(const void* data, size_t size) {
    check(EVP_DigestUpdate(ctx_.get(), data, size) == 1);
  }
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    check(EVP_DigestFinal_ex(ctx_.get(), digest, &len) == 1);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    out.reserve(2 * len);
    for (unsigned int i = 0; i < len; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 0xF];
    }
    return out;
  }

 private:
  // SHA-256 in libcrypto fails only when it cannot allocate. Returning some fallback string
  // would let distinct modules share a cache key, which is worse than stopping.
  static void check(bool ok) {
    if (!ok) {
      std::fputs("gbx: OpenSSL SHA-256 failed\n", stderr);
      std::abort();
    }
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

void put_u64le(Sha256& h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  h.update(b, sizeof b);
}

void put_field(Sha256& h, std::string_view bytes) {
  put_u64le(h, bytes.size());
  h.update(bytes);
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

void warn(std::vector<std::string>* warnings, std::string text) {
  if (warnings) warnings->push_back(std::move(text));
}

// Keys become path components, so only lowercase hex is accepted: nothing can escape the
// cache root through a key.
bool valid_key(const std::string& key) {
  return key.size() >= 2 && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// File names in an entry are single path components other than meta.json itself.
bool valid_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name != kMetaName &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

std::string short_key(const std::string& key) { return key.substr(0, 12); }

std::string utc_now_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Non-throwing dump: meta may carry compiler logs with arbitrary bytes.
std::string dump_json(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

// Feeds every byte of fd to sink in 64 KiB chunks (retrying EINTR); the caller closes fd.
template <typename Sink>
Status read_chunks(int fd, Sink&& sink) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(ErrorKind::Cache, errno_text(errno));
    if (n == 0) return ok_status();
    sink(buf, static_cast<size_t>(n));
  }
}

Result<std::string> read_whole_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorKind::Cache, errno_text(errno));
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  Status rd = read_chunks(fd, [&](const char* p, size_t n) { out.append(p, n); });
  ::close(fd);
  if (!rd) return rd.take_error();
  return out;
}

// Writes a new file; "" on success, else the reason. O_EXCL because the temp dir is ours
// alone: an existing file there means something else is writing into it.
std::string write_new_file(const fs::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno_text(errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return errno_text(err);
    }
    done += static_cast<size_t>(n);
  }
  // Some file systems (NFS, quota) report a full disk only at close.
  if (::close(fd) != 0) return errno_text(errno);
  return {};
}

struct FileDigest {
  uint64_t size = 0;
  std::string sha256;
};

Result<FileDigest> digest_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorKind::Cache, errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorKind::Cache, "not a regular file");
  }
  Sha256 h;
  FileDigest d;
  Status rd = read_chunks(fd, [&](const char* p, size_t n) {
    h.update(p, n);
    d.size += n;
  });
  ::close(fd);
  if (!rd) return rd.take_error();
  d.sha256 = h.hex();
  return d;
}

// The meta.json of a valid entry for `key`, or the one-line reason the entry is not valid.
Result<json> validate_entry(const fs::path& dir, const std::string& key) {
  auto bad = [](std::string why) { return make_error(ErrorKind::Cache, std::move(why)); };
  auto text = read_whole_file(dir / kMetaName);
  if (!text) return bad(std::string(kMetaName) + ": " + text.error().message);
  json meta = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded()) return bad(std::string(kMetaName) + ": not valid JSON");
  if (!meta.is_object()) return bad(std::string(kMetaName) + ": not an object");
  auto k = meta.find("key");
  if (k == meta.end() || !k->is_string() || k->get<std::string>() != key)
    return bad(std::string(kMetaName) + ": key does not match");
  auto files = meta.find("files");
  if (files == meta.end() || !files->is_object())
    return bad(std::string(kMetaName) + ": no \"files\" object");
  for (auto it = files->begin(); it != files->end(); ++it) {
    const std::string& name = it.key();
    if (!valid_file_name(name))
      return bad(std::string(kMetaName) + ": bad file name '" + name + "'");
    const json& rec = it.value();
    if (!rec.is_object() || !rec.contains("size") || !rec["size"].is_number_unsigned() ||
        !rec.contains("sha256") || !rec["sha256"].is_string())
      return bad(std::string(kMetaName) + ": bad record for '" + name + "'");
    auto d = digest_file(dir / name);
    if (!d) return bad(name + ": " + d.error().message);
    uint64_t want = rec["size"].get<uint64_t>();
    if (d->size != want)
      return bad(name + ": size " + std::to_string(d->size) + ", expected " + std::to_string(want));
    if (d->sha256 != rec["sha256"].get<std::string>()) return bad(name + ": sha256 mismatch");
  }
  return meta;
}

// A fresh directory under `parent` that no other process or thread can be using.
Result<fs::path> make_private_dir(const fs::path& parent, const std::string& stem) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, ".%ld.%llu.%08x", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(counter.fetch_add(1)), rd());
    fs::path p = parent / (stem + suffix);
    std::error_code ec;
    if (fs::create_directory(p, ec)) return p;
    if (ec) return make_error(ErrorKind::Cache, "mkdir " + p.string() + ": " + ec.message());
  }
  return make_error(ErrorKind::Cache, "mkdir in " + parent.string() + ": no unique name");
}

// Takes a directory out of the cache tree. Renaming it into tmp/ first makes the removal
// atomic for readers: they see the whole entry or none of it, never a half-deleted one.
// A concurrent writer may have just replaced a corrupt entry with a good one that we then
// move away; the cost is one extra recompile, never a wrong result.
void discard_dir(const fs::path& dir, const fs::path& tmp_root, const std::string& key) {
  std::error_code ec;
  fs::create_directories(tmp_root, ec);
  if (!ec) {
    auto trash = make_private_dir(tmp_root, "trash-" + short_key(key));
    if (trash) {
      fs::path target = trash.value() / "entry";
      if (::rename(dir.c_str(), target.c_str()) == 0) {
        fs::remove_all(trash.value(), ec);
        return;
      }
      fs::remove_all(trash.value(), ec);
    }
  }
  fs::remove_all(dir, ec);
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

// Key recipe, version 1 (changing it must change every key, hence the leading tag):
//   field(b)  = u64le(len(b)) || b               (length prefix: "ab","c" != "a","bc")
//   list(xs)  = u64le(count(xs)) || field(x)...  (count prefix: [] != [""])
//   key = hex(SHA-256( field("gbx-cache-key/v1")
//                      || field(engine_id) || field(decimal(abi_version))
//                      || field(template_hash) || field(source) || field(device)
//                      || field(compiler_identity) || list(options)
//                      || u64le(count(environment)) || (field(name) || field(value))... ))
// Fields follow the declaration order of CacheKeyInputs; a new input goes in both places.
std::string compute_cache_key(const CacheKeyInputs& in) {
  Sha256 h;
  put_field(h, "gbx-cache-key/v1");
  put_field(h, in.engine_id);
  put_field(h, std::to_string(in.abi_version));
  put_field(h, in.template_hash);
  put_field(h, in.source);
  put_field(h, in.device);
  put_field(h, in.compiler_identity);
  put_u64le(h, in.options.size());
  for (const auto& o : in.options) put_field(h, o);
  put_u64le(h, in.environment.size());
  for (const auto& [name, value] : in.environment) {
    put_field(h, name);
    put_field(h, value);
  }
  return h.hex();
}

Result<std::string> CacheEntry::read(const std::string& name) const {
  if (in_memory()) {
    auto it = memory_files.find(name);
    if (it != memory_files.end()) return it->second;
    if (name == kMetaName) return dump_json(meta);
    return make_error(ErrorKind::Cache,
                      "cache entry " + short_key(key) + " has no file '" + name + "'");
  }
  if (!valid_file_name(name) && name != kMetaName)
    return make_error(ErrorKind::Cache,
                      "cache entry " + short_key(key) + ": invalid file name '" + name + "'");
  auto r = read_whole_file(dir / name);
  if (!r)
    return make_error(ErrorKind::Cache, "cache entry " + short_key(key) + ": cannot read " + name +
                                            ": " + r.error().message);
  return r;
}

KernelCache::KernelCache(std::optional<fs::path> root) {
  fs::path r = root ? *root : default_root();
  // Absolute so that a later chdir in the process cannot move the cache.
  std::error_code ec;
  fs::path abs = fs::absolute(r, ec);
  root_ = ec ? r : abs.lexically_normal();
}

fs::path KernelCache::default_root() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string d = env("GBX_CACHE_DIR"); !d.empty()) return d;
  // The XDG base-directory spec says a relative value is invalid and must be ignored.
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && x[0] == '/') return fs::path(x) / "gbx";
  std::string home = env("HOME");
  if (home.empty()) {
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (!home.empty()) return fs::path(home) / ".cache" / "gbx";
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  return (ec ? fs::path("/tmp") : tmp) / ("gbx-cache-" + std::to_string(::getuid()));
}

fs::path KernelCache::entry_dir(const std::string& key) const {
  return root_ / "kernels" / "v1" / key.substr(0, 2) / key;
}

std::optional<CacheEntry> KernelCache::lookup(const std::string& key,
                                              std::vector<std::string>* warnings) {
  if (!valid_key(key)) return std::nullopt;
  fs::path dir = entry_dir(key);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  auto meta = validate_entry(dir, key);
  if (!meta) {
    warn(warnings,
         "cache: entry " + short_key(key) + " corrupt (" + meta.error().message + "); recompiling");
    // Best effort: a read-only cache keeps the bad entry, and every lookup stays a miss.
    discard_dir(dir, root_ / "kernels" / "v1" / "tmp", key);
    return std::nullopt;
  }
  CacheEntry e;
  e.key = key;
  e.dir = dir;
  e.meta = std::move(meta.value());
  return e;
}

CacheEntry KernelCache::publish(const std::string& key,
                                const std::map<std::string, std::string>& files, json meta,
                                std::vector<std::string>* warnings) {
  CacheEntry mem;
  mem.key = key;
  auto in_memory = [&]() {
    mem.dir.clear();
    mem.memory_files = files;
    return mem;
  };
  auto not_writable = [&](const std::string& reason) {
    warn(warnings,
         "cache: " + root_.string() + " not writable (" + reason + "); compiling in memory");
    return in_memory();
  };

  fs::path tmp_dir;
  auto drop_tmp = [&]() {
    std::error_code ec;
    if (!tmp_dir.empty()) fs::remove_all(tmp_dir, ec);
  };

  // Anything thrown below (allocation, filesystem) must become a warning, not an escape.
  try {
    // key/created/files need an object; a caller's non-object meta is kept under "meta".
    if (!meta.is_object()) meta = meta.is_null() ? json::object() : json{{"meta", meta}};
    json listing = json::object();
    for (const auto& [name, bytes] : files)
      listing[name] = {{"size", bytes.size()}, {"sha256", sha256_hex(bytes)}};
    meta["key"] = key;
    meta["created"] = utc_now_iso8601();
    meta["files"] = std::move(listing);
    mem.meta = meta;

    if (!valid_key(key)) {
      warn(warnings, "cache: invalid key '" + key + "'; compiling in memory");
      return in_memory();
    }
    for (const auto& kv : files) {
      if (!valid_file_name(kv.first)) {
        warn(warnings, "cache: invalid file name '" + kv.first + "'; compiling in memory");
        return in_memory();
      }
    }

    const fs::path tmp_root = root_ / "kernels" / "v1" / "tmp";
    std::error_code ec;
    fs::create_directories(tmp_root, ec);
    if (ec) return not_writable("mkdir " + tmp_root.string() + ": " + ec.message());
    auto made = make_private_dir(tmp_root, short_key(key));
    if (!made) return not_writable(made.error().message);
    tmp_dir = made.value();

    for (const auto& [name, bytes] : files) {
      if (std::string err = write_new_file(tmp_dir / name, bytes); !err.empty()) {
        drop_tmp();
        return not_writable("write " + name + ": " + err);
      }
    }
    // Last, so that a directory holding a meta.json is a finished entry.
    if (std::string err = write_new_file(tmp_dir / kMetaName, dump_json(meta)); !err.empty()) {
      drop_tmp();
      return not_writable(std::string("write ") + kMetaName + ": " + err);
    }

    const fs::path target = entry_dir(key);
    // Several rounds: a concurrent clear() can remove the parent, and a concurrent writer
    // can fill the slot after we moved a corrupt entry out of it.
    for (int round = 0; round < 4; ++round) {
      fs::create_directories(target.parent_path(), ec);
      if (ec) {
        drop_tmp();
        return not_writable("mkdir " + target.parent_path().string() + ": " + ec.message());
      }
      if (::rename(tmp_dir.c_str(), target.c_str()) == 0) {
        CacheEntry e;
        e.key = key;
        e.dir = target;
        e.meta = std::move(meta);
        return e;
      }
      int err = errno;
      if (err == ENOENT) continue;
      if (err != EEXIST && err != ENOTEMPTY) {
        drop_tmp();
        return not_writable("rename into " + target.string() + ": " + errno_text(err));
      }
      // Another writer got there first. Its entry holds the same key, so it is as good as
      // ours if it validates.
      auto existing = validate_entry(target, key);
      if (existing) {
        drop_tmp();
        CacheEntry e;
        e.key = key;
        e.dir = target;
        e.meta = std::move(existing.value());
        return e;
      }
      warn(warnings, "cache: entry " + short_key(key) + " corrupt (" + existing.error().message +
                         "); replacing it");
      auto trash = make_private_dir(tmp_root, "trash-" + short_key(key));
      if (!trash) {
        drop_tmp();
        return not_writable(trash.error().message);
      }
      fs::path moved = trash.value() / "entry";
      if (::rename(target.c_str(), moved.c_str()) != 0 && errno != ENOENT) {
        int rerr = errno;
        fs::remove_all(trash.value(), ec);
        drop_tmp();
        return not_writable("cannot move corrupt " + target.string() + ": " + errno_text(rerr));
      }
      fs::remove_all(trash.value(), ec);
    }
    drop_tmp();
    return not_writable("could not place " + target.string() + " after repeated races");
  } catch (const std::exception& ex) {
    drop_tmp();
    return not_writable(ex.what());
  }
}

CompileLock::~CompileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

CompileLock KernelCache::lock_compile(const std::string& key) const {
  if (!valid_key(key)) return CompileLock();
  const fs::path dir = root_ / "kernels" / "v1" / "locks";  // list() skips it (not a shard)
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return CompileLock();
  const int fd = ::open((dir / (key + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return CompileLock();
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd);
      return CompileLock();
    }
  }
  return CompileLock(fd);
}

std::vector<CacheEntry> KernelCache::list() const {
  std::vector<CacheEntry> out;
  const fs::path v1 = root_ / "kernels" / "v1";
  std::error_code ec;
  for (fs::directory_iterator shard(v1, ec), end; !ec && shard != end; shard.increment(ec)) {
    std::string sname = shard->path().filename().string();
    if (sname.size() != 2 || !valid_key(sname)) continue;  // skips tmp/
    std::error_code ec2;
    for (fs::directory_iterator it(shard->path(), ec2); !ec2 && it != end; it.increment(ec2)) {
      std::string key = it->path().filename().string();
      if (!valid_key(key) || key.compare(0, 2, sname) != 0) continue;
      auto text = read_whole_file(it->path() / kMetaName);
      if (!text) continue;
      json meta = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
      if (!meta.is_object()) continue;  // also true for a parse failure (discarded)
      auto k = meta.find("key");
      if (k == meta.end() || !k->is_string() || k->get<std::string>() != key) continue;
      CacheEntry e;
      e.key = key;
      e.dir = it->path();
      e.meta = std::move(meta);
      out.push_back(std::move(e));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const CacheEntry& a, const CacheEntry& b) { return a.key < b.key; });
  return out;
}

Result<CacheEntry> KernelCache::find_prefix(const std::string& prefix) const {
  if (prefix.empty()) return make_error(ErrorKind::Usage, "empty cache key prefix");
  std::vector<CacheEntry> matches;
  for (auto& e : list())
    if (e.key.compare(0, prefix.size(), prefix) == 0) matches.push_back(std::move(e));
  if (matches.empty())
    return make_error(ErrorKind::Usage, "no cache entry matches '" + prefix + "'");
  if (matches.size() > 1)
    return make_error(ErrorKind::Usage,
                      "'" + prefix + "' matches " + std::to_string(matches.size()) + " entries");
  return std::move(matches.front());
}

Status KernelCache::clear() {
  const fs::path kernels = root_ / "kernels";
  std::error_code ec;
  fs::remove_all(kernels, ec);
  if (ec)
    return make_error(ErrorKind::Cache, "cannot clear " + kernels.string() + ": " + ec.message());
  return ok_status();
}

}  // namespace gbx
