#include "gbx/runtime/roms/rom_builder.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "gbx/runtime/roms/rom.h"

namespace gbx {
namespace {

constexpr uint32_t kHeaderStart = 0x0100;
constexpr uint32_t kHeaderEnd = 0x0150;  // exclusive
constexpr uint32_t kProgramStart = 0x0150;
constexpr size_t kMaxTitle = 15;  // 0x134..0x142; 0x143 stays 0x00 (DMG cartridge)

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04X", v);
  return buf;
}

struct Range {
  uint32_t begin, end;  // [begin, end)
  std::string what;
};

}  // namespace

Result<std::vector<uint8_t>> try_build_rom(const RomSpec& spec) {
  if ((uint64_t{0x8000} << std::min<int>(spec.rom_size_code, 16)) > kMaxRomSize)
    return make_error(ErrorKind::Usage, "ROM size code " + hex(spec.rom_size_code) +
                                            " is above the 8 MiB limit (codes 0x00-0x08)");
  const uint32_t size = 0x8000u << spec.rom_size_code;

  if (spec.title.size() > kMaxTitle)
    return make_error(ErrorKind::Usage, "ROM title '" + spec.title + "' is longer than " +
                                            std::to_string(kMaxTitle) + " characters");
  std::string title;
  for (char c : spec.title) {
    if (c < 0x20 || c > 0x7E)
      return make_error(ErrorKind::Usage,
                        "ROM title '" + spec.title + "' has a character outside printable ASCII");
    title += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }

  std::vector<Range> used = {{kHeaderStart, kHeaderEnd, "the header (0x0100-0x014F)"}};
  auto claim = [&](uint32_t begin, size_t len, const std::string& what) -> Status {
    const uint64_t end = uint64_t{begin} + len;
    if (end > size)
      return make_error(ErrorKind::Usage, what + " ends at " + hex(static_cast<uint32_t>(end)) +
                                              ", past the " + std::to_string(size) + "-byte image");
    for (const Range& r : used)
      if (len > 0 && begin < r.end && end > r.begin)
        return make_error(ErrorKind::Usage, what + " overlaps " + r.what);
    if (len > 0) used.push_back(Range{begin, static_cast<uint32_t>(end), what});
    return ok_status();
  };
  if (auto st = claim(kProgramStart, spec.program.size(), "program"); !st) return st.take_error();
  for (const auto& [offset, bytes] : spec.patches) {
    const std::string what = "patch at " + hex(offset);
    if (auto st = claim(offset, bytes.size(), what); !st) return st.take_error();
  }

  std::vector<uint8_t> rom(size, 0x00);
  // Entry point: NOP; JP 0x0150.
  const uint8_t entry[] = {0x00, 0xC3, 0x50, 0x01};
  std::copy(std::begin(entry), std::end(entry), rom.begin() + 0x100);
  std::copy(title.begin(), title.end(), rom.begin() + 0x134);
  rom[0x147] = spec.cart_type;
  rom[0x148] = spec.rom_size_code;
  rom[0x149] = spec.ram_size_code;
  rom[0x14A] = 0x01;  // destination: overseas
  std::copy(spec.program.begin(), spec.program.end(), rom.begin() + kProgramStart);
  for (const auto& [offset, bytes] : spec.patches)
    std::copy(bytes.begin(), bytes.end(), rom.begin() + offset);
  rom[0x14D] = compute_header_checksum(rom);
  const uint16_t global = compute_global_checksum(rom);
  rom[0x14E] = static_cast<uint8_t>(global >> 8);
  rom[0x14F] = static_cast<uint8_t>(global);
  return rom;
}

std::vector<uint8_t> build_rom(const RomSpec& spec) {
  auto rom = try_build_rom(spec);
  if (!rom) {
    std::fprintf(stderr, "gbx: internal error: build_rom(%s): %s\n", spec.title.c_str(),
                 rom.error().message.c_str());
    std::abort();
  }
  return std::move(rom).value();
}

}  // namespace gbx
