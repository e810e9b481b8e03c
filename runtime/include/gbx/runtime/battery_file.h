#pragma once
// Battery save files (.sav): the cartridge RAM bytes, then for MBC3 clock carts the 48-byte
// RTC trailer VBA-M, mGBA and BGB write: five 32-bit little-endian counting registers
// (S M H DL DH), the five latched ones, and a 64-bit UNIX time of the save. GBX reads and
// writes that format but never advances the clock by host time (runs stay deterministic):
// the timestamp it writes is the host time, for other emulators; the one it reads is ignored.
#include <string>

#include "gbx/engine/result.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/rom.h"

namespace gbx {

// Checks that a cartridge can have a save file and that `path` can be used: an existing file
// must be readable with a size this cartridge's saves have (RAM, or RAM + 48 / + 44 with a
// clock); a missing file is fine (a blank save, created at exit) if its folder exists.
// Returns the save to load: the file's contents, or nullopt-like empty `ram` for a new file.
Result<BatterySave> read_sav_file(const std::string& path, const CartHeader& cart, bool* exists);
Status write_sav_file(const std::string& path, const BatterySave& save, const CartHeader& cart);

}  // namespace gbx
