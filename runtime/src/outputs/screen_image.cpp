#include "gbx/runtime/outputs/screen_image.h"

#include <png.h>

#include <algorithm>
#include <cstring>

namespace gbx {

GreyImage screen_image(const std::vector<uint8_t>& shades) {
  GreyImage img;
  img.width = 160;
  img.height = 144;
  img.pixels.resize(shades.size());
  for (size_t i = 0; i < shades.size(); ++i) img.pixels[i] = kShadeGrey[shades[i] & 3];
  return img;
}

GreyImage screen_grid(const std::vector<std::vector<uint8_t>>& screens, int columns) {
  const int gap = 2, n = (int)screens.size();
  columns = std::max(1, std::min(columns, n));
  const int rows = (n + columns - 1) / columns;
  GreyImage img;
  img.width = columns * 160 + (columns - 1) * gap;
  img.height = rows * 144 + (rows - 1) * gap;
  img.pixels.assign((size_t)img.width * img.height, 0x80);
  for (int k = 0; k < n; ++k) {
    const GreyImage one = screen_image(screens[k]);
    const int x0 = (k % columns) * (160 + gap), y0 = (k / columns) * (144 + gap);
    for (int y = 0; y < 144; ++y)
      std::memcpy(&img.pixels[(size_t)(y0 + y) * img.width + x0], &one.pixels[(size_t)y * 160],
                  160);
  }
  return img;
}

Status write_png(const std::string& path, const GreyImage& img) {
  png_image pi;
  std::memset(&pi, 0, sizeof pi);
  pi.version = PNG_IMAGE_VERSION;
  pi.width = (png_uint_32)img.width;
  pi.height = (png_uint_32)img.height;
  pi.format = PNG_FORMAT_GRAY;
  if (!png_image_write_to_file(&pi, path.c_str(), 0, img.pixels.data(), img.width, nullptr)) {
    const std::string why = pi.message;
    png_image_free(&pi);
    return make_error(ErrorKind::Input, "cannot write PNG " + path + ": " + why);
  }
  return ok_status();
}

Result<GreyImage> read_png(const std::string& path) {
  png_image pi;
  std::memset(&pi, 0, sizeof pi);
  pi.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&pi, path.c_str()))
    return make_error(ErrorKind::Input, "cannot read PNG " + path + ": " + pi.message);
  pi.format = PNG_FORMAT_GRAY;
  GreyImage img;
  img.width = (int)pi.width;
  img.height = (int)pi.height;
  img.pixels.resize(PNG_IMAGE_SIZE(pi));
  if (!png_image_finish_read(&pi, nullptr, img.pixels.data(), 0, nullptr)) {
    const std::string why = pi.message;
    png_image_free(&pi);
    return make_error(ErrorKind::Input, "cannot read PNG " + path + ": " + why);
  }
  return img;
}

}  // namespace gbx
