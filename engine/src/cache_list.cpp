// The kernel cache's lock, listing and clearing, and its refusal of a root it does not trust
// (cache.h; the checks themselves are cache_trust.cpp's).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "cache_trust.h"
#include "gbx/engine/cache.h"

namespace gbx {
namespace fs = std::filesystem;
using json = nlohmann::json;
namespace trust = cache_trust;

void KernelCache::refused(std::vector<std::string>* warnings, const std::string& why) {
  if (refusal_reported_) return;
  refusal_reported_ = true;
  cache_warning(warnings,
                "cache: refusing " + root_.string() + ": " + why + "; compiling in memory");
}

std::string KernelCache::refusal() const {
  const trust::RootCheck rc = trust::check_root(root_, false);
  if (rc.state == trust::RootState::Refused) return rc.why;
  std::string why;
  if (rc.state == trust::RootState::Ok) trust::load_key(root_, &why);
  return why;
}

CompileLock::~CompileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

CompileLock KernelCache::lock_compile(const std::string& key) const {
  if (!trust::valid_key(key)) return CompileLock();
  const fs::path dir = root_ / "kernels" / "v1" / "locks";  // list() skips it (not a shard)
  // Nothing is created in a refused root (that includes an unusable cache-key).
  std::string why;
  if (trust::check_root(root_, true).state != trust::RootState::Ok ||
      (trust::load_key(root_, &why), !why.empty()) || !trust::make_private_dirs(root_, dir).empty())
    return CompileLock();
  const int fd = ::open((dir / (key + ".lock")).c_str(),
                        O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
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
  // Only entries this user's key signed: a tool listing them (the CUDA driver double matching
  // images) then reads files whose hashes the signature covers (CacheEntry::read checks them).
  if (trust::check_root(root_, false).state != trust::RootState::Ok) return out;
  std::string why;
  const std::optional<std::string> secret = trust::load_key(root_, &why);
  const fs::path v1 = root_ / "kernels" / "v1";
  if (!secret || !trust::dir_problem(root_ / "kernels").empty() || !trust::dir_problem(v1).empty())
    return out;
  std::error_code ec;
  for (fs::directory_iterator shard(v1, ec), end; !ec && shard != end; shard.increment(ec)) {
    std::string sname = shard->path().filename().string();
    if (sname.size() != 2 || !trust::valid_key(sname)) continue;  // skips tmp/
    if (!trust::dir_problem(shard->path()).empty()) continue;
    std::error_code ec2;
    for (fs::directory_iterator it(shard->path(), ec2); !ec2 && it != end; it.increment(ec2)) {
      std::string key = it->path().filename().string();
      if (!trust::valid_key(key) || key.compare(0, 2, sname) != 0) continue;
      if (!trust::dir_problem(it->path()).empty()) continue;
      auto text = trust::read_checked(it->path() / "meta.json");
      if (!text) continue;
      json meta = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
      if (!meta.is_object()) continue;  // also true for a parse failure (discarded)
      auto k = meta.find("key");
      if (k == meta.end() || !k->is_string() || k->get<std::string>() != key) continue;
      if (!trust::signature_problem(it->path(), key, text.value(), *secret).empty()) continue;
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
  if (std::string why = refusal(); !why.empty())
    return make_error(ErrorKind::Cache, "cache: refusing " + root_.string() + ": " + why);
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
  if (std::string why = refusal(); !why.empty())
    return make_error(ErrorKind::Cache, "cache: refusing " + root_.string() + ": " + why);
  const fs::path kernels = root_ / "kernels";
  std::error_code ec;
  fs::remove_all(kernels, ec);
  if (ec)
    return make_error(ErrorKind::Cache, "cannot clear " + kernels.string() + ": " + ec.message());
  return ok_status();
}

}  // namespace gbx
