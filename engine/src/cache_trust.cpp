// The kernel cache's ownership, permission and signature checks (cache_trust.h), and the
// process-wide queue of cache warnings (cache.h: cache_warning, take_cache_warnings).
#include "cache_trust.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <system_error>
#include <vector>

#include "gbx/engine/cache.h"

namespace gbx {
namespace fs = std::filesystem;

namespace {

std::mutex& queue_mutex() {
  static std::mutex mu;
  return mu;
}
std::deque<std::string>& queue() {
  static std::deque<std::string> q;
  return q;
}
std::atomic<bool> queue_nonempty{false};
constexpr size_t kQueueMax = 64;

}  // namespace

void cache_warning(std::vector<std::string>* warnings, std::string text) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex());
    auto& q = queue();
    if (std::find(q.begin(), q.end(), text) == q.end()) {
      if (q.size() == kQueueMax) q.pop_front();
      q.push_back(text);
      queue_nonempty.store(true, std::memory_order_release);
    }
  }
  if (warnings) warnings->push_back(std::move(text));
}

std::vector<std::string> take_cache_warnings() {
  if (!queue_nonempty.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(queue_mutex());
  std::vector<std::string> out(queue().begin(), queue().end());
  queue().clear();
  queue_nonempty.store(false, std::memory_order_release);
  return out;
}

namespace cache_trust {
namespace {

constexpr size_t kSecretBytes = 32;

std::string hex(const unsigned char* p, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 0xF];
  }
  return out;
}

std::string mode_text(mode_t m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// The ownership and mode rule shared by directories and files; "" when it holds.
std::string owner_problem(const struct stat& st) {
  if (st.st_uid != ::geteuid())
    return "owned by uid " + std::to_string(st.st_uid) + ", not this user (uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & 022) return "writable by group or others (mode " + mode_text(st.st_mode) + ")";
  return "";
}

void put_field(std::string& buf, std::string_view bytes) {
  uint64_t n = bytes.size();
  for (int i = 0; i < 8; ++i) buf += static_cast<char>((n >> (8 * i)) & 0xFF);
  buf.append(bytes.data(), bytes.size());
}

bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string dir_problem(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return errno_text(errno);
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  return owner_problem(st);
}

RootCheck check_root(const fs::path& root, bool create) {
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0) {
    if (errno != ENOENT) return {RootState::NotWritable, errno_text(errno)};
    if (!create) return {RootState::Absent, ""};
    // Parents outside the cache are created as private as the root itself.
    std::vector<fs::path> missing;
    for (fs::path p = root; ::lstat(p.c_str(), &st) != 0 && errno == ENOENT; p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it)
      if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST)
        return {RootState::NotWritable, "mkdir " + it->string() + ": " + errno_text(errno)};
    if (::lstat(root.c_str(), &st) != 0) return {RootState::NotWritable, errno_text(errno)};
  }
  if (S_ISLNK(st.st_mode)) {
    // A root reached through a link (~/.cache -> /data/cache) is fine when this user made
    // the link; one planted by another user (in /tmp) is not.
    if (st.st_uid != ::geteuid())
      return {RootState::Refused, "a symbolic link owned by uid " + std::to_string(st.st_uid) +
                                      ", not this user (uid " + std::to_string(::geteuid()) + ")"};
    if (::stat(root.c_str(), &st) != 0) return {RootState::NotWritable, errno_text(errno)};
  }
  if (!S_ISDIR(st.st_mode)) return {RootState::NotWritable, "not a directory"};
  if (std::string why = owner_problem(st); !why.empty()) return {RootState::Refused, why};
  return {};
}

std::string make_private_dirs(const fs::path& root, const fs::path& dir) {
  const fs::path rel = dir.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..") return dir.string() + " is outside " + root.string();
  fs::path p = root;
  for (const fs::path& part : rel) {
    p /= part;
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
      return "mkdir " + p.string() + ": " + errno_text(errno);
    if (std::string why = dir_problem(p); !why.empty()) return p.string() + " is " + why;
  }
  return "";
}

int open_checked(const fs::path& path, std::string* why) {
  // O_NONBLOCK: a FIFO planted in an entry must not block the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *why = errno == ELOOP ? "a symbolic link" : errno_text(errno);
    return -1;
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0)
    problem = errno_text(errno);
  else if (!S_ISREG(st.st_mode))
    problem = "not a regular file";
  else
    problem = owner_problem(st);
  if (!problem.empty()) {
    ::close(fd);
    *why = problem;
    return -1;
  }
  return fd;
}

std::optional<std::string> load_key(const fs::path& root, std::string* why) {
  why->clear();
  const fs::path path = root / kKeyName;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT)
      *why = path.string() + ": " + (errno == ELOOP ? "a symbolic link" : errno_text(errno));
    return std::nullopt;
  }
  struct stat st {};
  std::string problem;
  char buf[2 * kSecretBytes + 2] = {};
  ssize_t n = -1;
  if (::fstat(fd, &st) != 0)
    problem = errno_text(errno);
  else if (!S_ISREG(st.st_mode))
    problem = "not a regular file";
  else if (st.st_uid != ::geteuid())
    problem = owner_problem(st);
  else if (st.st_mode & 077)
    problem = "readable or writable by group or others (mode " + mode_text(st.st_mode) + ")";
  else
    while ((n = ::read(fd, buf, sizeof buf)) < 0 && errno == EINTR) {
    }
  ::close(fd);
  if (problem.empty()) {
    std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.size() == 2 * kSecretBytes && is_hex(text)) return text;
    problem = "not " + std::to_string(2 * kSecretBytes) + " hex digits";
  }
  *why = path.string() + " is " + problem + "; remove it to start a new key";
  return std::nullopt;
}

std::optional<std::string> load_or_create_key(const fs::path& root, std::string* why) {
  if (auto k = load_key(root, why)) return k;
  if (!why->empty()) return std::nullopt;
  unsigned char raw[kSecretBytes];
  if (RAND_bytes(raw, sizeof raw) != 1) {
    *why = "no random bytes for a new " + std::string(kKeyName);
    return std::nullopt;
  }
  const std::string text = hex(raw, sizeof raw) + "\n";
  // Written under a private name, then linked into place: a reader never sees half a key,
  // and of two processes making one at once, the second finds the first's (EEXIST).
  const fs::path tmp =
      root / (std::string(kKeyName) + ".tmp." + std::to_string(::getpid()) + "." + hex(raw, 4));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = "cannot write " + tmp.string() + ": " + errno_text(errno);
    return std::nullopt;
  }
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = ::close(fd) == 0;
  int err = 0;
  if (!written || !closed)
    err = errno ? errno : EIO;
  else if (::link(tmp.c_str(), (root / kKeyName).c_str()) != 0 && errno != EEXIST)
    err = errno;
  ::unlink(tmp.c_str());
  if (err) {
    *why = "cannot write " + (root / kKeyName).string() + ": " + errno_text(err);
    return std::nullopt;
  }
  if (auto k = load_key(root, why)) return k;
  if (why->empty()) *why = (root / kKeyName).string() + " vanished as it was made";
  return std::nullopt;
}

bool valid_key(const std::string& key) {
  return key.size() >= 2 && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool untrusted(const std::string& why) {
  for (const char* p : {"a symbolic link", "owned by", "writable by", "not a regular file"})
    if (why.rfind(p, 0) == 0) return true;
  return false;
}

Result<std::string> read_checked(const fs::path& path) {
  std::string why;
  const int fd = open_checked(path, &why);
  if (fd < 0) return make_error(ErrorKind::Cache, why);
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      if (err) return make_error(ErrorKind::Cache, errno_text(err));
      return out;
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string signature_problem(const fs::path& dir, const std::string& key,
                              const std::string& meta_text, const std::string& secret) {
  auto sig = read_checked(dir / kSigName);
  if (!sig) return std::string(kSigName) + ": " + sig.error().message;
  std::string mac = sig.value();
  if (!mac.empty() && mac.back() == '\n') mac.pop_back();
  if (!mac_equal(mac, entry_mac(secret, key, meta_text)))
    return "signature does not match this cache's key: not written by this user here";
  return "";
}

std::string entry_mac(const std::string& secret, const std::string& key, std::string_view meta) {
  std::string msg;
  put_field(msg, "gbx-cache-mac/v1");
  put_field(msg, key);
  put_field(msg, meta);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len)) {
    // Only an allocation failure gets here; an empty MAC never equals a stored one.
    return "";
  }
  return hex(out, len);
}

bool mac_equal(std::string_view a, std::string_view b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace cache_trust
}  // namespace gbx
