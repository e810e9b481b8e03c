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

#include "cache_trust.h"

namespace gbx {
namespace fs = std::filesystem;
using json = nlohmann::json;
namespace trust = cache_trust;

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

using trust::errno_text;

void warn(std::vector<std::string>* warnings, std::string text) {
  cache_warning(warnings, std::move(text));
}

// File names in an entry are single path components other than meta.json and meta.sig.
bool valid_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name != kMetaName &&
         name != trust::kSigName && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
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

// Writes a new file; "" on success, else the reason. O_EXCL because the temp dir is ours
// alone: an existing file there means something else is writing into it.
std::string write_new_file(const fs::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
  std::string why;
  int fd = trust::open_checked(path, &why);
  if (fd < 0) return make_error(ErrorKind::Cache, why);
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

// The meta.json of a valid entry for `key`, or the one-line reason the entry is not valid
// (*rejected: the reason is its signature or its owner, not damage).
Result<json> validate_entry(const fs::path& dir, const std::string& key, const std::string& secret,
                            bool* rejected) {
  auto bad = [](std::string why) { return make_error(ErrorKind::Cache, std::move(why)); };
  *rejected = false;
  if (std::string why = trust::dir_problem(dir); !why.empty()) {
    *rejected = true;
    return bad("entry directory is " + why);
  }
  auto text = trust::read_checked(dir / kMetaName);
  if (!text) {
    *rejected = trust::untrusted(text.error().message);
    return bad(std::string(kMetaName) + ": " + text.error().message);
  }
  json meta = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded()) return bad(std::string(kMetaName) + ": not valid JSON");
  if (!meta.is_object()) return bad(std::string(kMetaName) + ": not an object");
  auto k = meta.find("key");
  if (k == meta.end() || !k->is_string() || k->get<std::string>() != key)
    return bad(std::string(kMetaName) + ": key does not match");
  auto files = meta.find("files");
  if (files == meta.end() || !files->is_object())
    return bad(std::string(kMetaName) + ": no \"files\" object");
  if (std::string why = trust::signature_problem(dir, key, text.value(), secret); !why.empty()) {
    *rejected = true;
    return bad(why);
  }
  for (auto it = files->begin(); it != files->end(); ++it) {
    const std::string& name = it.key();
    if (!valid_file_name(name))
      return bad(std::string(kMetaName) + ": bad file name '" + name + "'");
    const json& rec = it.value();
    if (!rec.is_object() || !rec.contains("size") || !rec["size"].is_number_unsigned() ||
        !rec.contains("sha256") || !rec["sha256"].is_string())
      return bad(std::string(kMetaName) + ": bad record for '" + name + "'");
    auto d = digest_file(dir / name);
    if (!d) {
      *rejected = trust::untrusted(d.error().message);
      return bad(name + ": " + d.error().message);
    }
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
    if (::mkdir(p.c_str(), 0700) == 0) return p;
    if (errno != EEXIST)
      return make_error(ErrorKind::Cache, "mkdir " + p.string() + ": " + errno_text(errno));
  }
  return make_error(ErrorKind::Cache, "mkdir in " + parent.string() + ": no unique name");
}

// Takes a directory out of the cache tree. Renaming it into tmp/ first makes the removal
// atomic for readers: they see the whole entry or none of it, never a half-deleted one.
// A concurrent writer may have just replaced a corrupt entry with a good one that we then
// move away; the cost is one extra recompile, never a wrong result.
void discard_dir(const fs::path& dir, const fs::path& root, const std::string& key) {
  std::error_code ec;
  const fs::path tmp_root = root / "kernels" / "v1" / "tmp";
  if (trust::make_private_dirs(root, tmp_root).empty()) {
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
  auto r = trust::read_checked(dir / name);
  if (!r)
    return make_error(ErrorKind::Cache, "cache entry " + short_key(key) + ": cannot read " + name +
                                            ": " + r.error().message);
  // The bytes handed out are the ones meta.json lists (and its signature covers), even if the
  // file changed after lookup() checked it.
  if (auto f = meta.find("files"); f != meta.end() && f->is_object() && f->contains(name)) {
    const json& rec = (*f)[name];
    if (!rec.is_object() || !rec.contains("sha256") || rec["sha256"] != sha256_hex(r.value()))
      return make_error(ErrorKind::Cache, "cache entry " + short_key(key) + ": " + name +
                                              " changed since the entry was checked");
  }
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
  if (!trust::valid_key(key)) return std::nullopt;
  const trust::RootCheck rc = trust::check_root(root_, false);
  if (rc.state == trust::RootState::Refused) refused(warnings, rc.why);
  if (rc.state != trust::RootState::Ok) return std::nullopt;
  fs::path dir = entry_dir(key);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) return std::nullopt;
  std::string why;
  const std::optional<std::string> secret = trust::load_key(root_, &why);
  if (!why.empty()) {
    refused(warnings, why);
    return std::nullopt;
  }
  bool rejected = false;
  Result<json> meta = make_error(ErrorKind::Cache, "");
  for (const fs::path& d : {root_ / "kernels", root_ / "kernels" / "v1", dir.parent_path()})
    if (std::string p = trust::dir_problem(d); !p.empty()) {
      rejected = true;
      meta = make_error(ErrorKind::Cache, d.string() + " is " + p);
      break;
    }
  if (!rejected) {
    if (secret) {
      meta = validate_entry(dir, key, *secret, &rejected);
    } else {
      rejected = true;
      meta = make_error(ErrorKind::Cache, "no " + std::string(trust::kKeyName) +
                                              " in the cache root to check its signature");
    }
  }
  if (!meta) {
    warn(warnings, "cache: entry " + short_key(key) + (rejected ? " rejected (" : " corrupt (") +
                       meta.error().message + "); recompiling");
    // Best effort: a read-only cache keeps the bad entry, and every lookup stays a miss.
    discard_dir(dir, root_, key);
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

    if (!trust::valid_key(key)) {
      warn(warnings, "cache: invalid key '" + key + "'; compiling in memory");
      return in_memory();
    }
    for (const auto& kv : files) {
      if (!valid_file_name(kv.first)) {
        warn(warnings, "cache: invalid file name '" + kv.first + "'; compiling in memory");
        return in_memory();
      }
    }

    const trust::RootCheck rc = trust::check_root(root_, true);
    if (rc.state == trust::RootState::Refused) {
      refused(warnings, rc.why);
      return in_memory();
    }
    if (rc.state != trust::RootState::Ok) return not_writable(rc.why);
    std::string why;
    std::optional<std::string> secret = trust::load_key(root_, &why);
    if (!why.empty()) {
      refused(warnings, why);
      return in_memory();
    }
    if (!secret && !(secret = trust::load_or_create_key(root_, &why))) return not_writable(why);

    const fs::path tmp_root = root_ / "kernels" / "v1" / "tmp";
    std::error_code ec;
    if (std::string err = trust::make_private_dirs(root_, tmp_root); !err.empty())
      return not_writable(err);
    auto made = make_private_dir(tmp_root, short_key(key));
    if (!made) return not_writable(made.error().message);
    tmp_dir = made.value();

    for (const auto& [name, bytes] : files) {
      if (std::string err = write_new_file(tmp_dir / name, bytes); !err.empty()) {
        drop_tmp();
        return not_writable("write " + name + ": " + err);
      }
    }
    const std::string meta_text = dump_json(meta);
    if (std::string err = write_new_file(tmp_dir / trust::kSigName,
                                         trust::entry_mac(*secret, key, meta_text) + "\n");
        !err.empty()) {
      drop_tmp();
      return not_writable(std::string("write ") + trust::kSigName + ": " + err);
    }
    // Last, so that a directory holding a meta.json is a finished entry.
    if (std::string err = write_new_file(tmp_dir / kMetaName, meta_text); !err.empty()) {
      drop_tmp();
      return not_writable(std::string("write ") + kMetaName + ": " + err);
    }

    const fs::path target = entry_dir(key);
    // Several rounds: a concurrent clear() can remove the parent, and a concurrent writer
    // can fill the slot after we moved a corrupt entry out of it.
    for (int round = 0; round < 4; ++round) {
      if (std::string err = trust::make_private_dirs(root_, target.parent_path()); !err.empty()) {
        drop_tmp();
        return not_writable(err);
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
      bool rejected = false;
      auto existing = validate_entry(target, key, *secret, &rejected);
      if (existing) {
        drop_tmp();
        CacheEntry e;
        e.key = key;
        e.dir = target;
        e.meta = std::move(existing.value());
        return e;
      }
      warn(warnings, "cache: entry " + short_key(key) + (rejected ? " rejected (" : " corrupt (") +
                         existing.error().message + "); replacing it");
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

}  // namespace gbx
