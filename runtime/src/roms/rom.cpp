#include "gbx/runtime/roms/rom.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "gbx/engine/cache.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx_abi.h"

namespace gbx {
namespace {

constexpr size_t kMinRomSize = 0x8000;

std::string hex8(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v & 0xFFu);
  return buf;
}

std::string kib(size_t bytes) {
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

// Pan Docs "The Cartridge Header", 0147 - Cartridge Type.
struct CartType {
  uint8_t code;
  const char* name;
};
constexpr CartType kCartTypes[] = {
    {0x00, "ROM ONLY"},
    {0x01, "MBC1"},
    {0x02, "MBC1+RAM"},
    {0x03, "MBC1+RAM+BATTERY"},
    {0x05, "MBC2"},
    {0x06, "MBC2+BATTERY"},
    {0x08, "ROM+RAM"},
    {0x09, "ROM+RAM+BATTERY"},
    {0x0B, "MMM01"},
    {0x0C, "MMM01+RAM"},
    {0x0D, "MMM01+RAM+BATTERY"},
    {0x0F, "MBC3+TIMER+BATTERY"},
    {0x10, "MBC3+TIMER+RAM+BATTERY"},
    {0x11, "MBC3"},
    {0x12, "MBC3+RAM"},
    {0x13, "MBC3+RAM+BATTERY"},
    {0x19, "MBC5"},
    {0x1A, "MBC5+RAM"},
    {0x1B, "MBC5+RAM+BATTERY"},
    {0x1C, "MBC5+RUMBLE"},
    {0x1D, "MBC5+RUMBLE+RAM"},
    {0x1E, "MBC5+RUMBLE+RAM+BATTERY"},
    {0x20, "MBC6"},
    {0x22, "MBC7+SENSOR+RUMBLE+RAM+BATTERY"},
    {0xFC, "POCKET CAMERA"},
    {0xFD, "BANDAI TAMA5"},
    {0xFE, "HuC3"},
    {0xFF, "HuC1+RAM+BATTERY"},
};

// The controllers GBX emulates.
struct Support {
  int mbc;
  bool ram, battery, rtc;
  uint32_t max_ram;  // bytes the controller can address
};
bool supported(uint8_t type, Support* out) {
  constexpr uint32_t k8 = 8 * 1024, k32 = 32 * 1024, k64 = 64 * 1024, k128 = 128 * 1024;
  switch (type) {
    case 0x00:
      *out = {GBX_MBC_NONE, false, false, false, 0};
      return true;
    case 0x01:
      *out = {GBX_MBC_1, false, false, false, 0};
      return true;
    case 0x02:
      *out = {GBX_MBC_1, true, false, false, k32};
      return true;
    case 0x03:
      *out = {GBX_MBC_1, true, true, false, k32};
      return true;
    // MBC2's RAM is inside the controller (512 x 4 bits); the header's RAM code is 0.
    case 0x05:
      *out = {GBX_MBC_2, true, false, false, 512};
      return true;
    case 0x06:
      *out = {GBX_MBC_2, true, true, false, 512};
      return true;
    // No controller: RAM is the plain A000-BFFF window, so at most 8 KiB.
    case 0x08:
      *out = {GBX_MBC_NONE, true, false, false, k8};
      return true;
    case 0x09:
      *out = {GBX_MBC_NONE, true, true, false, k8};
      return true;
    // MBC3: 4 RAM banks (the 8-bank MBC30 of Pokemon Crystal JP also fits in 64 KiB).
    case 0x0F:
      *out = {GBX_MBC_3_RTC, false, true, true, 0};
      return true;
    case 0x10:
      *out = {GBX_MBC_3_RTC, true, true, true, k64};
      return true;
    case 0x11:
      *out = {GBX_MBC_3, false, false, false, 0};
      return true;
    case 0x12:
      *out = {GBX_MBC_3, true, false, false, k64};
      return true;
    case 0x13:
      *out = {GBX_MBC_3, true, true, false, k64};
      return true;
    case 0x19:
      *out = {GBX_MBC_5, false, false, false, 0};
      return true;
    case 0x1A:
      *out = {GBX_MBC_5, true, false, false, k128};
      return true;
    case 0x1B:
      *out = {GBX_MBC_5, true, true, false, k128};
      return true;
    case 0x1C:
      *out = {GBX_MBC_5_RUMBLE, false, false, false, 0};
      return true;
    case 0x1D:
      *out = {GBX_MBC_5_RUMBLE, true, false, false, k128};
      return true;
    case 0x1E:
      *out = {GBX_MBC_5_RUMBLE, true, true, false, k128};
      return true;
    default:
      return false;
  }
}

// ROM bytes the header's size code announces (Pan Docs "0148 - ROM Size"), 0 if invalid.
// 0x52-0x54 are the 72/80/96-bank sizes Pan Docs lists as unofficial.
uint32_t declared_rom_size(uint8_t code) {
  if (code <= 0x08) return 0x8000u << code;
  if (code == 0x52) return 72u << 14;
  if (code == 0x53) return 80u << 14;
  if (code == 0x54) return 96u << 14;
  return 0;
}

bool is_pow2(size_t v) { return v != 0 && (v & (v - 1)) == 0; }
size_t next_pow2(size_t v) {
  size_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// The 48-byte logo every licensed cartridge carries at 0x104 (Pan Docs "0104-0133").
constexpr uint8_t kLogo[48] = {
    0xCE, 0xED, 0x66, 0x66, 0xCC, 0x0D, 0x00, 0x0B, 0x03, 0x73, 0x00, 0x83, 0x00, 0x0C, 0x00, 0x0D,
    0x00, 0x08, 0x11, 0x1F, 0x88, 0x89, 0x00, 0x0E, 0xDC, 0xCC, 0x6E, 0xE6, 0xDD, 0xDD, 0xD9, 0x99,
    0xBB, 0xBB, 0x67, 0x63, 0x6E, 0x0E, 0xEC, 0xCC, 0xDD, 0xDC, 0x99, 0x9F, 0xBB, 0xB9, 0x33, 0x3E};

// MBC1M multicarts (Pan Docs "MBC1", multi-game compilation carts) are 1 MiB MBC1 carts
// wired with BANK1 bit 4 unconnected; each 256 KiB game has its own header, so the logo
// appears again at the start of bank 0x10.
bool looks_like_mbc1m(const std::vector<uint8_t>& bytes) {
  const size_t at = (size_t)0x10 * 0x4000 + 0x104;
  if (bytes.size() != (1u << 20)) return false;
  return std::memcmp(bytes.data() + at, kLogo, sizeof kLogo) == 0;
}

Error input(std::string message) { return make_error(ErrorKind::Input, std::move(message)); }

}  // namespace

const char* cart_type_name(uint8_t cart_type) {
  for (const CartType& t : kCartTypes)
    if (t.code == cart_type) return t.name;
  return nullptr;
}

uint8_t compute_header_checksum(const std::vector<uint8_t>& bytes) {
  uint8_t x = 0;
  for (size_t i = 0x134; i <= 0x14C && i < bytes.size(); ++i)
    x = static_cast<uint8_t>(x - bytes[i] - 1);
  return x;
}

uint16_t compute_global_checksum(const std::vector<uint8_t>& bytes) {
  uint16_t sum = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (i != 0x14E && i != 0x14F) sum = static_cast<uint16_t>(sum + bytes[i]);
  return sum;
}

Result<CartHeader> parse_header(const std::vector<uint8_t>& bytes) {
  const size_t size = bytes.size();
  if (size == 0) return input("ROM is empty (0 bytes)");
  if (size < kMinRomSize)
    return input("ROM truncated: " + std::to_string(size) + " bytes, a cartridge is at least " +
                 std::to_string(kMinRomSize));
  if (size > kMaxRomSize)
    return input("ROM too large: " + std::to_string(size) + " bytes, the limit is " +
                 std::to_string(kMaxRomSize) + " (8 MiB, MBC5's maximum)");

  CartHeader h;
  h.cart_type = bytes[0x147];
  h.rom_size_code = bytes[0x148];
  h.ram_size_code = bytes[0x149];
  h.header_checksum = bytes[0x14D];
  h.global_checksum = static_cast<uint16_t>((bytes[0x14E] << 8) | bytes[0x14F]);
  h.file_size = (uint32_t)size;
  // Printable characters up to the first other byte: old carts use all 16 bytes, newer
  // ones end the title with the manufacturer code or the CGB flag at 0x143.
  for (size_t i = 0x134; i <= 0x143 && bytes[i] >= 0x20 && bytes[i] <= 0x7E; ++i)
    h.title += static_cast<char>(bytes[i]);
  while (!h.title.empty() && h.title.back() == ' ') h.title.pop_back();

  // Pan Docs "0143 - CGB flag": 0xC0 means the game needs a Game Boy Color; 0x80 (works on
  // both) runs as on a DMG.
  if (bytes[0x143] == 0xC0)
    return input("CGB-only cartridge (0x143 = 0xC0): GBX emulates the DMG only");

  const uint32_t declared = declared_rom_size(h.rom_size_code);
  if (declared == 0) return input("invalid ROM size code " + hex8(h.rom_size_code) + " at 0x148");
  if (size < declared)
    return input("ROM truncated: header ROM size code " + hex8(h.rom_size_code) + " says " +
                 kib(declared) + " but the file is " + std::to_string(size) + " bytes (" +
                 kib(size) + ")");
  if (is_pow2(size)) {
    if (size != declared)
      return input("header ROM size code " + hex8(h.rom_size_code) + " says " + kib(declared) +
                   " but the file is " + std::to_string(size) + " bytes (" + kib(size) + ")");
    h.rom_size = (uint32_t)size;
  } else {
    // A dump that holds every bank the header names but is not a power of two (e.g. the
    // 96-bank 1.5 MiB size): the cartridge's unused address space reads as open bus, 0xFF.
    h.rom_size = (uint32_t)next_pow2(size);
    if (h.rom_size > kMaxRomSize)
      return input("ROM size " + std::to_string(size) + " bytes rounds up past the " +
                   std::to_string(kMaxRomSize) + "-byte limit");
  }

  Support sup{};
  if (!supported(h.cart_type, &sup)) {
    const char* name = cart_type_name(h.cart_type);
    if (!name) return input("unknown cartridge type " + hex8(h.cart_type) + " at 0x147");
    return input("unsupported cartridge type " + hex8(h.cart_type) + " (" + name +
                 "); GBX supports ROM ONLY, ROM+RAM, MBC1, MBC2, MBC3 and MBC5");
  }
  h.mbc = sup.mbc;
  h.has_ram = sup.ram;
  h.has_battery = sup.battery;
  h.has_rtc = sup.rtc;
  if (h.mbc == GBX_MBC_NONE && h.rom_size != kMinRomSize)
    return input("cartridge type " + hex8(h.cart_type) + " (" + cart_type_name(h.cart_type) +
                 ") has no bank controller, so the ROM must be 32768 bytes, not " +
                 std::to_string(size));

  uint32_t ram = 0;
  switch (h.ram_size_code) {
    case 0x00:
      ram = 0;
      break;
    case 0x01:
      ram = 2 * 1024;
      break;  // "unused" in Pan Docs; some carts mean 2 KiB
    case 0x02:
      ram = 8 * 1024;
      break;
    case 0x03:
      ram = 32 * 1024;
      break;
    case 0x04:
      ram = 128 * 1024;
      break;
    case 0x05:
      ram = 64 * 1024;
      break;
    default:
      return input("invalid RAM size code " + hex8(h.ram_size_code) + " at 0x149");
  }
  if (h.mbc == GBX_MBC_2) {
    h.ram_size = 512;
  } else if (h.has_ram) {
    if (ram > sup.max_ram)
      return input(std::string(cart_type_name(h.cart_type)) + " supports at most " +
                   kib(sup.max_ram) + " of cartridge RAM, but RAM size code " +
                   hex8(h.ram_size_code) + " says " + kib(ram));
    h.ram_size = ram;
  }
  if (h.mbc == GBX_MBC_1 && looks_like_mbc1m(bytes)) h.mbc = GBX_MBC_1M;
  return h;
}

Result<Rom> rom_from_bytes(std::string name, std::vector<uint8_t> bytes) {
  auto header = parse_header(bytes);
  if (!header) return header.take_error();
  Rom rom;
  rom.name = std::move(name);
  // The hash names the file as given; padding is how GBX maps it, not part of its identity.
  rom.sha256 =
      sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  // A DMG's boot ROM locks up on a wrong header checksum (Pan Docs "014D - Header
  // Checksum"); GBX starts at the post-boot state, so the cartridge runs, with a warning.
  if (const uint8_t computed = compute_header_checksum(bytes); computed != header->header_checksum)
    rom.warnings.push_back("header checksum mismatch: 0x14D holds " +
                           hex8(header->header_checksum) + ", the header bytes 0x134-0x14C give " +
                           hex8(computed) + " (a DMG's boot ROM would lock up; GBX runs it)");
  if (bytes.size() != header->rom_size) {
    rom.warnings.push_back("ROM is " + std::to_string(bytes.size()) +
                           " bytes, not a power of two: padded with 0xFF to " +
                           kib(header->rom_size));
    bytes.resize(header->rom_size, 0xFF);
  }
  rom.bytes = std::move(bytes);
  rom.header = std::move(header).value();
  return rom;
}

Result<Rom> load_rom(const std::string& spec) {
  static const std::string kBuiltin = "builtin:";
  if (spec.rfind(kBuiltin, 0) == 0) {
    const std::string name = spec.substr(kBuiltin.size());
    const BuiltinRom* b = find_builtin_rom(name);
    if (!b) {
      std::string names;
      for (const BuiltinRom& r : builtin_roms()) names += (names.empty() ? "" : ", ") + r.name;
      return input("unknown builtin ROM '" + name + "' (available: " + names + ")");
    }
    auto rom = rom_from_bytes(b->name, b->build());
    if (!rom) return input("builtin ROM " + b->name + ": " + rom.error().message);
    return rom;
  }

  namespace fs = std::filesystem;
  const fs::path path(spec);
  const std::string where = "ROM '" + spec + "': ";
  if (spec.empty()) return input("ROM path is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    if (!ec || ec == std::errc::no_such_file_or_directory) return input(where + "no such file");
    return input(where + "cannot access: " + ec.message());
  }
  if (fs::is_directory(st)) return input(where + "is a directory, not a ROM file");
  if (!fs::is_regular_file(st)) return input(where + "is not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return input(where + "cannot read its size: " + ec.message());
  // Size checks before reading, so a huge file is never loaded into memory.
  if (size > kMaxRomSize)
    return input(where + "too large: " + std::to_string(size) + " bytes, the limit is " +
                 std::to_string(kMaxRomSize) + " (8 MiB, MBC5's maximum)");

  std::ifstream in(path, std::ios::binary);
  if (!in) return input(where + "cannot open: " + std::strerror(errno));
  // Read at most one byte past the limit: the file may have grown since the size check.
  std::vector<uint8_t> bytes(static_cast<size_t>(size) + 1);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (in.bad()) return input(where + "read failed: " + std::strerror(errno));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (bytes.size() > kMaxRomSize)
    return input(where + "too large: more than " + std::to_string(kMaxRomSize) + " bytes");

  auto rom = rom_from_bytes(path.stem().string(), std::move(bytes));
  if (!rom) return input(where + rom.error().message);
  return rom;
}

}  // namespace gbx
