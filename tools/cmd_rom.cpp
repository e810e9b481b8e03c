// gbx-run rom build: write the built-in micro-ROMs.
#include <chrono>
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/ppu_roms.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "tool_common.h"

namespace {

using namespace gbx;

struct RomBuildOptions {
  std::string out = "artifacts/roms";
};

int cmd_rom_build(const RomBuildOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec)
    return tool::fail(make_error(ErrorKind::Input, "cannot create " + o.out + ": " + ec.message()));
  for (const auto& r : builtin_roms()) {
    const auto bytes = r.build();
    const auto path = std::filesystem::path(o.out) / (r.name + ".gb");
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
    if (!f) return tool::fail(make_error(ErrorKind::Input, "cannot write " + path.string()));
    std::printf("%-14s %7zu bytes  %s  %s\n", r.name.c_str(), bytes.size(), path.string().c_str(),
                r.description.c_str());
  }
  // The renderer's scenes (tests/test_pixels.cpp): their goldens are tests/data/<name>.png,
  // so `gbx-run testrom --expect-png tests/data OUT/ppu_*.gb` checks them all.
  for (const std::string& name : ppu_rom_names()) {
    // builtin:PPU_BENCH is above; the LCD-off scene has no golden (it ends blank).
    if (name == "ppu_bench" || name == "ppu_lcd_off") continue;
    auto bytes = build_ppu_rom(name);
    if (!bytes) return tool::fail(bytes.error());
    const auto path = std::filesystem::path(o.out) / (name + ".gb");
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes->data()), (std::streamsize)bytes->size());
    if (!f) return tool::fail(make_error(ErrorKind::Input, "cannot write " + path.string()));
    std::printf("%-16s %7zu bytes  %s  PPU scene (image test with tests/data/%s.png)\n",
                name.c_str(), bytes->size(), path.string().c_str(), name.c_str());
  }
  return 0;
}

}  // namespace

namespace gbx::tool {

void register_rom(CLI::App& app, Commands& cmds) {
  static RomBuildOptions rb;
  auto* rom = app.add_subcommand("rom", "micro-ROMs");
  rom->require_subcommand(1);
  auto* rbuild = rom->add_subcommand("build", "write the built-in ROMs as .gb files");
  rbuild->add_option("--out", rb.out, "output directory")->capture_default_str();
  cmds.emplace_back(rbuild, [] { return cmd_rom_build(rb); });
}

}  // namespace gbx::tool
