#include "gbx/runtime/states/battery_file.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

namespace gbx {
namespace {

constexpr size_t kRtcTrailer = 48;     // 64-bit timestamp
constexpr size_t kRtcTrailerOld = 44;  // 32-bit timestamp (older VBA)

Error input(std::string m) { return make_error(ErrorKind::Input, std::move(m)); }

uint32_t le32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

}  // namespace

Result<BatterySave> read_sav_file(const std::string& path, const CartHeader& cart, bool* exists) {
  namespace fs = std::filesystem;
  const std::string where = "save file '" + path + "': ";
  *exists = false;
  if (!cart.has_battery)
    return make_error(ErrorKind::Usage, "--sav: cartridge type " +
                                            std::string(cart_type_name(cart.cart_type)) +
                                            " has no battery, so nothing is saved");
  BatterySave save;
  save.has_rtc = cart.has_rtc;
  save.ram.assign(cart.ram_size, 0);
  std::error_code ec;
  const fs::path p(path);
  const fs::file_status st = fs::status(p, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return input(where + "cannot access: " + ec.message());
  if (!fs::exists(st)) {
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    if (!fs::is_directory(dir, ec))
      return input(where + "does not exist and its folder '" + dir.string() + "' is not a folder");
    return save;  // a first run: blank RAM, written at exit
  }
  if (!fs::is_regular_file(st)) return input(where + "is not a regular file");
  std::ifstream in(p, std::ios::binary);
  if (!in) return input(where + "cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) return input(where + "read failed: " + std::strerror(errno));
  const size_t ram = cart.ram_size;
  const bool plain = bytes.size() == ram;
  const bool trailer =
      cart.has_rtc && (bytes.size() == ram + kRtcTrailer || bytes.size() == ram + kRtcTrailerOld);
  if (!plain && !trailer)
    return input(where + std::to_string(bytes.size()) + " bytes, but this cartridge's saves are " +
                 std::to_string(ram) + " bytes" +
                 (cart.has_rtc ? " (+" + std::to_string(kRtcTrailer) + " with the clock)" : ""));
  std::copy(bytes.begin(), bytes.begin() + (long)ram, save.ram.begin());
  if (trailer) {
    const uint8_t* t = bytes.data() + ram;
    for (int i = 0; i < 5; ++i) {
      save.rtc_live[i] = (uint8_t)le32(t + 4 * i);
      save.rtc_latched[i] = (uint8_t)le32(t + 20 + 4 * i);
    }
  }
  *exists = true;
  return save;
}

Status write_sav_file(const std::string& path, const BatterySave& save, const CartHeader& cart) {
  std::vector<uint8_t> bytes = save.ram;
  if (cart.has_rtc) {
    auto put = [&](uint64_t v, int n) {
      for (int i = 0; i < n; ++i) bytes.push_back((uint8_t)(v >> (8 * i)));
    };
    for (int i = 0; i < 5; ++i) put(save.rtc_live[i], 4);
    for (int i = 0; i < 5; ++i) put(save.rtc_latched[i], 4);
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    put((uint64_t)std::chrono::duration_cast<std::chrono::seconds>(now).count(), 8);
  }
  // Written beside the target and renamed, so an interrupted run never leaves half a save.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return input("save file '" + path + "': cannot write: " + std::strerror(errno));
    out.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
    if (!out) return input("save file '" + path + "': write failed: " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return input("save file '" + path + "': cannot replace: " + ec.message());
  }
  return ok_status();
}

}  // namespace gbx
