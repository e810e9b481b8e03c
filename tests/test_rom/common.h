#pragma once
// test_rom's helpers: a scratch directory, slices, assembling, expected input errors, header
// images (test_rom.cpp and the cases in this folder).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx_abi.h"

namespace fs = std::filesystem;
using gbx::Asm;
using Bytes = std::vector<uint8_t>;

namespace rom_test {

// A private scratch directory, removed at the end of the test case.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("gbx_test_rom_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  fs::path write(const std::string& name, const Bytes& bytes) const {
    fs::path p = path / name;
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return p;
  }
};

inline Bytes slice(const Bytes& b, size_t at, size_t n) {
  return Bytes(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
}

inline Bytes assemble(const Asm& a) {
  auto r = a.assemble_flat();
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return r.value();
}

// Asserts `r` failed with ErrorKind::Input and a message containing `needle`.
template <typename T>
inline void expect_input_error(const gbx::Result<T>& r, const std::string& needle) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == gbx::ErrorKind::Input);
  CHECK_MESSAGE(r.error().message.find(needle) != std::string::npos,
                "message: " << r.error().message << "\nexpected to contain: " << needle);
  CHECK(r.error().message.find('\n') == std::string::npos);
}

inline Bytes image(const gbx::RomSpec& spec) {
  auto r = gbx::try_build_rom(spec);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return r.value();
}

inline void fix_header_checksum(Bytes& rom) { rom[0x14D] = gbx::compute_header_checksum(rom); }

}  // namespace rom_test

using namespace rom_test;
