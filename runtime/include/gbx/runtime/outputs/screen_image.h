#pragma once
// Pictures of env screens: shade indices (0-3) to 8-bit greys, grids of many envs, PNG files
// through libpng (Debian's libpng-dev).
#include <cstdint>
#include <string>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

struct GreyImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // row-major, one byte a pixel
};

// Greys for shades 0..3 (docs/guide/screen.md).
constexpr uint8_t kShadeGrey[4] = {0xFF, 0xAA, 0x55, 0x00};

// A 160x144 screen of shade indices as greys.
GreyImage screen_image(const std::vector<uint8_t>& shades);
// Screens tiled left to right, top to bottom, `columns` a row, 2-pixel gaps of grey 0x80 (not
// one of the four shades, so a gap never reads as screen content).
GreyImage screen_grid(const std::vector<std::vector<uint8_t>>& screens, int columns);

Status write_png(const std::string& path, const GreyImage& img);
Result<GreyImage> read_png(const std::string& path);

}  // namespace gbx
