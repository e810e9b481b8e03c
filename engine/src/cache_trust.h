#pragma once
// Who the kernel cache trusts, and how an entry proves it (private to engine/src; cache.cpp
// uses it). The rules (docs/internals/synthesis.md, "Kernel cache"):
//   - every directory of the cache (the root, kernels/, kernels/v1/, a shard, an entry, tmp/,
//     locks/) is owned by this process's effective user and writable by nobody else; the root
//     is created 0700 and may be a symbolic link only when this user owns the link;
//   - every file of an entry is a regular file (never followed through a link) with the same
//     owner and no group/other write bit;
//   - <root>/cache-key holds this cache's secret (32 random bytes, hex), 0600, this user's;
//   - an entry's meta.sig is HMAC-SHA256(secret, "gbx-cache-mac/v1", entry key, meta.json
//     bytes). meta.json lists each file's size and SHA-256 and CacheEntry::read checks the
//     bytes it returns against that list, so a module is loaded only when the key holder wrote
//     its entry: a hash in meta.json alone proves nothing, since whoever can write the entry
//     can rewrite meta.json too, but not forge the HMAC without the secret.
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "gbx/engine/result.h"

namespace gbx::cache_trust {

inline constexpr const char* kKeyName = "cache-key";
inline constexpr const char* kSigName = "meta.sig";

std::string errno_text(int err);

// "" when a directory below the root (reached without following a link) is owned by this user
// and not writable by group or others; else why not.
std::string dir_problem(const std::filesystem::path& dir);

enum class RootState { Ok, Absent, NotWritable, Refused };
struct RootCheck {
  RootState state = RootState::Ok;
  std::string why;  // for NotWritable and Refused
};
// Checks the cache root; with create, makes it (and missing parents) 0700 first.
RootCheck check_root(const std::filesystem::path& root, bool create);

// mkdir -p of `dir` (which lies under the checked root) with mode 0700, every existing level
// checked with dir_problem. "" or why it failed.
std::string make_private_dirs(const std::filesystem::path& root, const std::filesystem::path& dir);

// Opens a file of an entry for reading: no link followed, a regular file, this user's, not
// writable by group/others. fd, or -1 and *why. A missing file says "No such file...".
int open_checked(const std::filesystem::path& path, std::string* why);

// The cache's secret: nullopt when there is none yet (*why empty) or when it cannot be used
// (*why says why: a key of another user, readable by others, of the wrong size).
std::optional<std::string> load_key(const std::filesystem::path& root, std::string* why);
// The secret, made (0600, atomically: another process may make it at the same time) when
// absent. nullopt and *why when it cannot be read or written.
std::optional<std::string> load_or_create_key(const std::filesystem::path& root, std::string* why);

// Keys become path components, so only lowercase hex is accepted: nothing can escape the
// cache root through a key.
bool valid_key(const std::string& key);

// Whether open_checked's or dir_problem's reason is about trust (a link, another owner, a
// group/other write bit, not a regular file) rather than a missing or unreadable file.
bool untrusted(const std::string& why);

// The whole file, opened with open_checked.
Result<std::string> read_checked(const std::filesystem::path& path);

// Whether this user wrote the entry in `dir`: its meta.sig is the HMAC of meta_text (its
// meta.json) under `secret`. "" or why not.
std::string signature_problem(const std::filesystem::path& dir, const std::string& key,
                              const std::string& meta_text, const std::string& secret);

// hex HMAC-SHA256 of an entry (the recipe above).
std::string entry_mac(const std::string& secret, const std::string& key, std::string_view meta);
// Constant-time comparison of two MACs.
bool mac_equal(std::string_view a, std::string_view b);

}  // namespace gbx::cache_trust
