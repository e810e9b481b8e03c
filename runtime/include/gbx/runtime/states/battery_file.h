#pragma once
// Battery save files (.sav): the cartridge RAM bytes, then for MBC3 clock carts the 48-byte
// RTC trailer VBA-M, mGBA and BGB write: five 32-bit little-endian counting registers
// (S M H DL DH), the five latched ones, and a 64-bit UNIX time of the save. GBX reads and
// writes that format but never advances the clock by host time (runs stay deterministic):
// the timestamp it writes is the host time, for other emulators; the one it reads is ignored.
#include <string>

#include "gbx/engine/result.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx {

// The save to load for `cart` from `path`. An existing file must be a regular, readable file
// of this cartridge's save size (its RAM, or RAM + 48 / + 44 with a clock); a missing file
// gives blank RAM (*exists = false; it is created at exit) if its folder exists. A cartridge
// without a battery, or anything else, is an error naming the problem.
Result<BatterySave> read_sav_file(const std::string& path, const CartHeader& cart, bool* exists);
// RAM, then the RTC trailer for clock carts; written to PATH.tmp and renamed over PATH.
Status write_sav_file(const std::string& path, const BatterySave& save, const CartHeader& cart);

}  // namespace gbx
