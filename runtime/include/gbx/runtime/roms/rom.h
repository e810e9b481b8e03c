#pragma once
// Cartridge ROM images: loading, header validation, built-in micro-ROMs.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

struct CartHeader {
  std::string title;
  uint8_t cart_type = 0;      // 0x147
  uint8_t rom_size_code = 0;  // 0x148
  uint8_t ram_size_code = 0;  // 0x149
  uint8_t header_checksum = 0;
  uint16_t global_checksum = 0;
  int mbc = 0;  // GBX_MBC_*
  bool has_ram = false;
  bool has_battery = false;
  bool has_rtc = false;    // MBC3 real-time clock
  uint32_t rom_size = 0;   // bytes GBX maps: the file, padded to a power of two if needed
  uint32_t file_size = 0;  // bytes in the file
  uint32_t ram_size = 0;   // cartridge RAM bytes (0 if none)
};

struct Rom {
  std::string name;  // file stem or builtin name
  std::vector<uint8_t> bytes;
  CartHeader header;
  std::string sha256;  // of the file's bytes (before any padding)
  // e.g. the padding of a non-power-of-two dump, a wrong header checksum
  std::vector<std::string> warnings;
};

// Largest ROM accepted (MBC5's 8 MiB).
constexpr size_t kMaxRomSize = 8u << 20;

// Parses and validates a header: size, size code vs file size (a file shorter than the
// header says is an error; one that holds the header's banks but is not a power of two is
// mapped padded), supported cartridge type, CGB-only flag. Errors are one line naming the
// problem. A wrong header checksum is not an error: rom_from_bytes adds a warning.
Result<CartHeader> parse_header(const std::vector<uint8_t>& bytes);

// Pan Docs header checksum: x = 0; x = x - rom[i] - 1 for i in 0x134..0x14C.
// Needs at least 0x150 bytes.
uint8_t compute_header_checksum(const std::vector<uint8_t>& bytes);
// Big-endian-stored 16-bit sum of every byte except 0x14E-0x14F (real hardware ignores it).
uint16_t compute_global_checksum(const std::vector<uint8_t>& bytes);
// Pan Docs name of a cartridge type byte ("MBC3+RAM+BATTERY"), or nullptr if unknown.
const char* cart_type_name(uint8_t cart_type);

// "builtin:NAME" or a file path. Files are size-checked before they are read.
Result<Rom> load_rom(const std::string& spec);
Result<Rom> rom_from_bytes(std::string name, std::vector<uint8_t> bytes);

}  // namespace gbx
