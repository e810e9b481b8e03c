// Bus ranges from their command line text (gbx/runtime/outputs/mem_region.h).
#include "gbx/runtime/outputs/mem_region.h"

#include <cctype>
#include <cstdio>

namespace gbx {
namespace {

std::string range_text(const MemRegion& r, char sep) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%04X%c%04X", r.lo, sep, r.hi);
  return buf;
}

bool parse_hex(const std::string& s, uint32_t* out) {
  if (s.empty() || s.size() > 5) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (!std::isxdigit((unsigned char)c)) return false;
    v = v * 16 + (uint32_t)(std::isdigit((unsigned char)c)
                                ? c - '0'
                                : std::toupper((unsigned char)c) - 'A' + 10);
  }
  *out = v;
  return true;
}

}  // namespace

std::string MemRegion::label() const { return range_text(*this, ':'); }
std::string MemRegion::file_tag() const { return range_text(*this, '_'); }

Result<MemRegion> parse_mem_region(const std::string& text, const std::string& flag) {
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad " + flag + " '" + text + "': " + why);
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos)
    return bad("expected LO:HI in hex, e.g. C000:C100");
  MemRegion r;
  if (!parse_hex(text.substr(0, colon), &r.lo) || !parse_hex(text.substr(colon + 1), &r.hi))
    return bad("LO and HI must be hex digits only, e.g. C000:C100");
  if (r.hi > 0x10000) return bad("HI must be at most 10000 (the end of the 64 KiB bus)");
  if (r.lo >= r.hi) return bad("LO must be below HI (HI is exclusive)");
  return r;
}

}  // namespace gbx
