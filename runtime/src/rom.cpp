#include "gbx/runtime/rom.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "gbx/engine/cache.h"
#include "gbx/runtime/rom_builder.h"
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
  bool ram, battery;
  uint32_t max_ram;  // bytes the controller can address
};
bool supported(uint8_t type, Support* out) {
  switch (type) {
    case 0x00:
      *out = {GBX_MBC_NONE, false, false, 0};
      return true;
    case 0x01:
      *out = {GBX_MBC_1, false, false, 0};
      return true;
    case 0x02:
      *out = {GBX_MBC_1, true, false, 32 * 1024};
      return true;
    case 0x03:
      *out = {GBX_MBC_1, true, true, 32 * 1024};
      return true;
    // No controller: RAM is the plain A000-BFFF window, so at most 8 KiB.
    case 0x08:
      *out = {GBX_MBC_NONE, true, false, 8 * 1024};
      return true;
    case 0x09:
      *out = {GBX_MBC_NONE, true, true, 8 * 1024};
      return true;
    default:
      return false;
  }
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
                 std::to_string(kMaxRomSize) + " (2 MiB, MBC1's maximum)");
  if (size % kMinRomSize != 0 || ((size / kMinRomSize) & (size / kMinRomSize - 1)) != 0)
    return input("ROM size " + std::to_string(size) +
                 " bytes is not a power-of-two multiple of 32768");

  CartHeader h;
  h.cart_type = bytes[0x147];
  h.rom_size_code = bytes[0x148];
  h.ram_size_code = bytes[0x149];
  h.header_checksum = bytes[0x14D];
  h.global_checksum = static_cast<uint16_t>((bytes[0x14E] << 8) | bytes[0x14F]);
  // Printable characters up to the first other byte: old carts use all 16 bytes, newer
  // ones end the title with the manufacturer code or the CGB flag at 0x143.
  for (size_t i = 0x134; i <= 0x143 && bytes[i] >= 0x20 && bytes[i] <= 0x7E; ++i)
    h.title += static_cast<char>(bytes[i]);
  while (!h.title.empty() && h.title.back() == ' ') h.title.pop_back();

  // Checked first: a wrong checksum means the other header fields cannot be trusted.
  const uint8_t computed = compute_header_checksum(bytes);
  if (computed != h.header_checksum)
    return input("header checksum mismatch: 0x14D holds " + hex8(h.header_checksum) +
                 ", the header bytes 0x134-0x14C sum to " + hex8(computed));

  if (h.rom_size_code > 0x08)
    return input("invalid ROM size code " + hex8(h.rom_size_code) + " at 0x148" +
                 (h.rom_size_code >= 0x52 && h.rom_size_code <= 0x54
                      ? " (1.1-1.5 MiB sizes are not supported)"
                      : ""));
  h.rom_size = 0x8000u << h.rom_size_code;
  if (h.rom_size != size)
    return input("header ROM size code " + hex8(h.rom_size_code) + " says " + kib(h.rom_size) +
                 " but the file is " + std::to_string(size) + " bytes (" + kib(size) + ")");

  Support sup{};
  if (!supported(h.cart_type, &sup)) {
    const char* name = cart_type_name(h.cart_type);
    if (!name) return input("unknown cartridge type " + hex8(h.cart_type) + " at 0x147");
    return input("unsupported cartridge type " + hex8(h.cart_type) + " (" + name +
                 "); GBX supports ROM ONLY, ROM+RAM and MBC1");
  }
  h.mbc = sup.mbc;
  h.has_ram = sup.ram;
  h.has_battery = sup.battery;
  if (h.mbc == GBX_MBC_NONE && size != kMinRomSize)
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
  if (h.has_ram) {
    if (ram > sup.max_ram)
      return input(std::string(cart_type_name(h.cart_type)) + " supports at most " +
                   kib(sup.max_ram) + " of cartridge RAM, but RAM size code " +
                   hex8(h.ram_size_code) + " says " + kib(ram));
    h.ram_size = ram;
  }
  return h;
}

Result<Rom> rom_from_bytes(std::string name, std::vector<uint8_t> bytes) {
  auto header = parse_header(bytes);
  if (!header) return header.take_error();
  Rom rom;
  rom.name = std::move(name);
  rom.sha256 =
      sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
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
                 std::to_string(kMaxRomSize) + " (2 MiB, MBC1's maximum)");

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
