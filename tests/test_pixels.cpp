// Scanline renderer: one hand-assembled ROM per PPU feature (runtime/src/roms/ppu_roms.cpp), each
// screenshot compared with a golden PNG in tests/data. The goldens are drawn here by small
// models of what each scene must show per Pan Docs (solid tiles, the arrow tile, object
// priority rules spelled out case by case), not by the renderer; the test also checks that the
// checked-in PNG equals the model. GBX_UPDATE_GOLDENS=1 rewrites the PNGs from the models.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/outputs/screen_image.h"
#include "gbx/runtime/roms/ppu_roms.h"
#include "gbx/runtime/roms/rom.h"
#include "test_util.h"

using namespace gbx;

namespace {

const std::filesystem::path kData = std::filesystem::path(GBX_TEST_SOURCE_DIR) / "data";

using Screen = std::vector<uint8_t>;  // 160x144 shades

Screen draw(const std::function<int(int x, int y)>& shade) {
  Screen s(160 * 144);
  for (int y = 0; y < 144; ++y)
    for (int x = 0; x < 160; ++x) s[y * 160 + x] = (uint8_t)shade(x, y);
  return s;
}

// The arrow tile (ppu_roms.cpp tile 4): top row 3, left column 2, diagonal 1, else clear.
int arrow(int r, int c) { return r == 0 ? 3 : c == 0 ? 2 : r == c ? 1 : 0; }

Screen model_bg_scroll() {
  // SCX 3, SCY 5, map (tx + ty) % 4 of solid tiles; from line 72 map 0x9C00 and signed tile
  // data at 0x9000 whose tiles 0-3 hold colours 3-0.
  return draw([](int x, int y) {
    const int c = (((x + 3) & 255) / 8 + ((y + 5) & 255) / 8) % 4;
    return y < 72 ? c : 3 - c;
  });
}

Screen model_window() {
  // WX 39 (x >= 32), WY 16; window off on lines 40-59, so its line counter reads 24 at line 60.
  return draw([](int x, int y) {
    if (x < 32 || y < 16 || (y >= 40 && y < 60)) return 0;
    const int wline = y < 40 ? y - 16 : y - 60 + 24;
    return 1 + (wline / 8) % 3;
  });
}

Screen model_sprites() {
  Screen s = draw([](int x, int y) { return x >= 16 && x < 48 && y >= 80 && y < 112 ? 1 : 0; });
  auto put = [&](int x, int y, int v) {
    if (x >= 0 && x < 160 && y >= 0 && y < 144) s[y * 160 + x] = (uint8_t)v;
  };
  auto arrow_at = [&](int x0, int y0, bool xf, bool yf, const int pal[4], bool behind) {
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) {
        const int v = arrow(yf ? 7 - r : r, xf ? 7 - c : c);
        const bool bg_opaque = s[(y0 + r) * 160 + x0 + c] != 0;  // BG colour 1-3 here
        if (v && !(behind && bg_opaque)) put(x0 + c, y0 + r, pal[v]);
      }
  };
  auto block = [&](int x0, int y0, int w, int v) {
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < w; ++c) put(x0 + c, y0 + r, v);
  };
  const int obp0[4] = {0, 1, 2, 3}, obp1[4] = {0, 3, 2, 1};  // 0xE4, 0x6C
  arrow_at(8, 8, false, false, obp0, false);
  arrow_at(24, 8, true, false, obp0, false);
  arrow_at(40, 8, false, true, obp0, false);
  arrow_at(56, 8, true, true, obp0, false);
  arrow_at(72, 8, false, false, obp1, false);
  // X priority: the object at x 80 (colour 3, later in OAM) covers the one at 84 (colour 1)
  // where they overlap; at equal X (100) the earlier OAM entry (colour 1) wins.
  block(80, 30, 8, 3);
  block(88, 30, 4, 1);
  block(100, 30, 8, 1);
  // Line limit: the first ten objects in OAM order on lines 60-67 (x 16-95); the 11th and
  // 12th (x 0 and 112) are not drawn.
  block(16, 60, 80, 2);
  // OBJ-to-BG priority: behind BG colours 1-3 (x 20 and x 44-47), over colour 0 (x 48-51).
  arrow_at(44, 84, false, false, obp0, true);
  arrow_at(28, 84, false, false, obp0, false);
  // The first object by X (x 30, colour 3, behind BG) hides the second (x 34, colour 2, in
  // front) where they overlap, even though it does not show itself: BG shows at 30-37.
  block(38, 100, 4, 2);
  return s;
}

Screen model_sprites_8x16() {
  Screen s(160 * 144, 0);
  auto put = [&](int x, int y, int v) { s[y * 160 + x] = (uint8_t)v; };
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      put(8 + c, 8 + r, r < 8 ? 1 : 3);   // tile 7 -> pair 6 (colour 1) over 7 (colour 3)
      put(24 + c, 8 + r, r < 8 ? 3 : 1);  // pair 6/7, Y-flipped as a whole
      // Pair 4 (arrow) / 5 (clear), Y-flipped: the clear tile on top, the arrow upside down.
      if (r >= 8 && arrow(15 - r, c)) put(40 + c, 8 + r, arrow(15 - r, c));
      // Tile 5 -> pair 4/5 (bit 0 ignored), X-flipped: the arrow mirrored on top.
      if (r < 8 && arrow(r, 7 - c)) put(56 + c, 8 + r, arrow(r, 7 - c));
    }
  return s;
}

Screen model_raster_scx() {
  // Map columns tx % 4, SCX = LY on every line (written in the previous line's HBlank).
  return draw([](int x, int y) { return ((x + y) / 8) % 4; });
}

std::unique_ptr<Backend> make(const std::string& rom_name, const BackendConfig& cfg) {
  Result<Rom> rom = make_error(ErrorKind::Usage, "");
  if (rom_name.rfind("builtin:", 0) == 0) {
    rom = load_rom(rom_name);
  } else {
    auto bytes = build_ppu_rom(rom_name);
    REQUIRE_MESSAGE(bytes.ok(), (bytes.ok() ? "" : bytes.error().message));
    rom = rom_from_bytes(rom_name, bytes.value());
  }
  REQUIRE(rom.ok());
  auto be = make_backend("cpu", rom.value(), cfg);
  REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
  return std::move(be.value());
}

Screen screen_after(const std::string& rom_name, int frames, BackendConfig cfg = {}) {
  cfg.render = true;
  cfg.stage = Stage::EmulateOnly;
  cfg.frames_per_step = frames;
  auto be = make(rom_name, cfg);
  REQUIRE(be->step({}).ok());
  auto s = be->read_screen(0);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
  return s.value();
}

int first_difference(const Screen& a, const Screen& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) return (int)i;
  return a.size() == b.size() ? -1 : (int)std::min(a.size(), b.size());
}

void check_golden(const std::string& name, const Screen& model) {
  const auto png = kData / (name + ".png");
  if (std::getenv("GBX_UPDATE_GOLDENS")) REQUIRE(write_png(png.string(), screen_image(model)).ok());
  auto golden = read_png(png.string());
  REQUIRE_MESSAGE(golden.ok(), (golden.ok() ? "" : golden.error().message));
  REQUIRE(golden->width == 160);
  REQUIRE(golden->height == 144);
  CHECK_MESSAGE(golden->pixels == screen_image(model).pixels,
                (name + ".png differs from its model"));
  // Both pixel models: these scenes change registers only outside mode 3, where the FIFO
  // (ppu=fifo) must draw what the scanline renderer draws.
  for (PpuModel ppu : {PpuModel::Line, PpuModel::Fifo}) {
    CAPTURE(to_string(ppu));
    BackendConfig cfg;
    cfg.ppu = ppu;
    const Screen got = screen_after(name, 10, cfg);
    const int at = first_difference(screen_image(got).pixels, golden->pixels);
    const std::string where = name + " (ppu=" + std::string(to_string(ppu)) +
                              "): first difference at x=" + std::to_string(at % 160) +
                              " y=" + std::to_string(at / 160) + " got shade " +
                              std::to_string(at >= 0 ? got[at] : 0) + " want " +
                              std::to_string(at >= 0 ? model[at] : 0);
    if (at >= 0) {  // the picture beside the build, for a look
      const auto out = std::filesystem::path(GBX_TEST_BUILD_DIR) /
                       (name + "." + std::string(to_string(ppu)) + ".got.png");
      (void)write_png(out.string(), screen_image(got));
    }
    CHECK_MESSAGE(at < 0, where);
  }
}

}  // namespace

TEST_CASE("pixels: BG with SCX/SCY, tile map and tile data select split by a raster write") {
  check_golden("ppu_bg_scroll", model_bg_scroll());
}

TEST_CASE("pixels: window at WX/WY with its own line counter across a window-off gap") {
  check_golden("ppu_window", model_window());
}

TEST_CASE("pixels: objects: flips, palettes, X-then-OAM priority, 10 a line, OBJ-to-BG") {
  check_golden("ppu_sprites", model_sprites());
}

TEST_CASE("pixels: 8x16 objects, tile bit 0 ignored, Y flip over both tiles") {
  check_golden("ppu_sprites_8x16", model_sprites_8x16());
}

TEST_CASE("pixels: SCX changed on every line from the LYC interrupt in HBlank") {
  check_golden("ppu_raster_scx", model_raster_scx());
}

TEST_CASE("pixels: the LCD off blanks the screen to shade 0") {
  // The ROM shows the BG for 8 frames, then turns the LCD off in VBlank.
  const Screen bg =
      draw([](int x, int y) { return (((x + 3) & 255) / 8 + ((y + 5) & 255) / 8) % 4; });
  CHECK(first_difference(screen_after("ppu_lcd_off", 5), bg) < 0);
  CHECK(screen_after("ppu_lcd_off", 30) == Screen(160 * 144, 0));
}

TEST_CASE("pixels: the first frame after the LCD is switched on is not shown") {
  // Pan Docs "LCDC.7", gbdev wiki "LCDC": "When re-enabling the LCD, the PPU will immediately
  // start drawing again, but the screen will stay blank during the first frame" (SameBoy and
  // Gambatte agree; little-things-gb's firstwhite shows it on DMG hardware). The scene ROM
  // turns the LCD off in VBlank, fills VRAM and switches it on: stepping 16 instructions at a
  // time, the screen stays blank until the second VBlank after the switch-on (70224 + 144 x
  // 456 cycles later), including after the first one, and then shows the scene.
  constexpr int64_t kFirstVblank = 144 * 456, kSecondVblank = 70224 + 144 * 456;
  BackendConfig cfg;
  cfg.render = true;
  cfg.stage = Stage::EmulateOnly;
  cfg.run_mode = RunMode::Instructions;
  cfg.instructions_per_step = 16;
  auto be = make("ppu_bg_scroll", cfg);
  const Screen blank(160 * 144, 0);
  int64_t prev = 0, on_lo = -1, on_hi = -1;  // the switch-on lies in (on_lo, on_hi]
  bool was_off = false, shown = false;
  int blank_after_first = 0;
  for (int i = 0; i < 100000 && !shown; ++i) {
    REQUIRE(be->step({}).ok());
    const bool lcd_on = (be->read_memory(0, 0xFF40, 0xFF41).value()[0] & 0x80) != 0;
    const int64_t t = be->get_cpu_state(0).value().cycle_count;
    if (!lcd_on) was_off = true;
    if (was_off && lcd_on && on_hi < 0) on_lo = prev, on_hi = t;
    prev = t;
    if (on_hi < 0) continue;
    CAPTURE(t - on_hi);
    const Screen s = be->read_screen(0).value();
    if (t < on_lo + kSecondVblank) {
      CHECK(s == blank);
      if (t > on_hi + kFirstVblank) ++blank_after_first;
    } else if (t >= on_hi + kSecondVblank) {
      CHECK(first_difference(s, model_bg_scroll()) < 0);
      shown = true;
    }
  }
  CHECK(shown);
  CHECK(blank_after_first > 100);  // steps whose last complete frame is the first one
  // Run mode frames (which draws only the frames a step end can show) agrees: a step of k
  // frames ending between the two VBlanks shows nothing, one of k + 1 frames the scene.
  const int64_t k = (on_hi + kFirstVblank) / 70224 + 1;
  CAPTURE(k);
  REQUIRE(k * 70224 < on_lo + kSecondVblank);
  CHECK(screen_after("ppu_bg_scroll", (int)k) == blank);
  CHECK(first_difference(screen_after("ppu_bg_scroll", (int)k + 1), model_bg_scroll()) < 0);
}

TEST_CASE("pixels: the framebuffer is the last complete frame whatever the step length") {
  // PPU_BENCH scrolls every frame, so frames differ; PPU frames are not aligned with steps.
  // ppu=fifo keeps a line's pipeline across a step's end (GbxState::lcd_fifo), and draws
  // what the scanline renderer draws (PPU_BENCH writes no register during mode 3).
  std::map<int, Screen> line_screens;
  for (PpuModel ppu : {PpuModel::Line, PpuModel::Fifo})
    for (int total : {48, 49}) {
      CAPTURE(to_string(ppu));
      CAPTURE(total);
      std::vector<Screen> got;
      for (int fps : {1, 7, 24, total}) {
        if (total % fps) continue;
        BackendConfig cfg;
        cfg.num_envs = 2;
        cfg.stage = Stage::ObsOnly;
        cfg.obs = ObsKind::Pixels;
        cfg.frames_per_step = fps;
        cfg.ppu = ppu;
        auto be = make("builtin:PPU_BENCH", cfg);
        for (int i = 0; i < total / fps; ++i) REQUIRE(be->step({}).ok());
        got.push_back(be->read_screen(1).value());
      }
      REQUIRE(got.size() >= 2);
      for (size_t k = 1; k < got.size(); ++k) CHECK(first_difference(got[k], got[0]) < 0);
      CHECK(got[0] != Screen(160 * 144, 0));
      if (ppu == PpuModel::Line)
        line_screens[total] = got[0];
      else
        CHECK(first_difference(got[0], line_screens[total]) < 0);
    }
}

TEST_CASE("pixels: a shorter call after a longer one shows the whole frame it completes") {
  // A 24-frame call draws only the frames that can be last at its end; the frame still in
  // progress when it ends must be drawn up to there too, or a 1-frame call after it (no-op
  // frames after a reset, a state loaded into the play window) shows that frame's top lines
  // from an older frame. PPU_BENCH scrolls every frame: any stale line shows.
  BackendConfig cfg;
  cfg.num_envs = 1;
  cfg.stage = Stage::ObsOnly;
  cfg.obs = ObsKind::Pixels;
  cfg.frames_per_step = 1;
  auto ref = make("builtin:PPU_BENCH", cfg);  // draws every frame
  cfg.frames_per_step = 24;
  auto dut = make("builtin:PPU_BENCH", cfg);
  int ref_frames = 0, dut_frames = 0;
  auto ref_to = [&](int frames) {
    for (; ref_frames < frames; ++ref_frames) REQUIRE(ref->step({}).ok());
    return ref->read_screen(0).value();
  };
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    REQUIRE(dut->step({}).ok());
    dut_frames += 24;
    CHECK(first_difference(dut->read_screen(0).value(), ref_to(dut_frames)) < 0);
    for (int k = 0; k < 2; ++k) {
      CAPTURE(k);
      REQUIRE(dut->step_frames({}, {1}).ok());
      dut_frames += 1;
      CHECK(first_difference(dut->read_screen(0).value(), ref_to(dut_frames)) < 0);
    }
  }
}

TEST_CASE("pixels: obs formats full, half and packed agree with the screen") {
  std::vector<std::vector<uint8_t>> obs;
  Screen screen;
  for (ObsFormat f : {ObsFormat::Full, ObsFormat::Half, ObsFormat::Packed}) {
    BackendConfig cfg;
    cfg.num_envs = 3;
    cfg.stage = Stage::FullStep;
    cfg.obs = ObsKind::Pixels;
    cfg.obs_format = f;
    cfg.frames_per_step = 5;
    cfg.gather_addrs = {0xFF40, 0xFF47, 0xFF4B};
    auto be = make("builtin:PPU_BENCH", cfg);
    REQUIRE(be->step({}).ok());
    screen = be->read_screen(2).value();
    obs.push_back(be->read_pixels(2).value());
    // One block holds every output; the pixels section is what read_pixels returns.
    auto block = be->outputs();
    REQUIRE(block.ok());
    const OutputSection* px = block->find("pixels");
    REQUIRE(px != nullptr);
    CHECK(px->bytes_per_env == (size_t)pixels_obs_bytes(f));
    CHECK(std::equal(obs.back().begin(), obs.back().end(),
                     block->data + px->offset + 2 * px->bytes_per_env));
    const OutputSection* g = block->find("gather");
    REQUIRE(g != nullptr);
    const uint8_t* gv = block->data + g->offset + 2 * g->bytes_per_env;
    CHECK(gv[0] == 0xF3);  // LCDC, BGP and WX as the ROM set them
    CHECK(gv[1] == 0xE4);
    CHECK(gv[2] == 87);
    REQUIRE(block->find("reward") != nullptr);
    CHECK(block->find("obs_v0") == nullptr);
    CHECK(block->bytes >= block->find("done")->offset + 3);
  }
  REQUIRE(obs[0] == screen);
  REQUIRE(obs[1].size() == 72 * 80);
  REQUIRE(obs[2].size() == 144 * 40);
  for (int y = 0; y < 72; ++y)
    for (int x = 0; x < 80; ++x) CHECK_EQ(obs[1][y * 80 + x], screen[2 * y * 160 + 2 * x]);
  for (int y = 0; y < 144; ++y)
    for (int x = 0; x < 160; ++x)
      CHECK_EQ((obs[2][y * 40 + x / 4] >> (6 - 2 * (x % 4))) & 3, screen[y * 160 + x]);
  CHECK(screen != Screen(160 * 144, 0));
}

TEST_CASE("pixels: kernels that do not observe pixels do not draw, nor report a screen") {
  BackendConfig cfg;
  cfg.stage = Stage::FullStep;
  cfg.frames_per_step = 3;
  auto be = make("builtin:PPU_BENCH", cfg);
  REQUIRE(be->step({}).ok());
  CHECK_FALSE(be->read_screen(0).ok());
  CHECK_FALSE(be->read_pixels(0).ok());
  CHECK(be->read_obs(0).value().size() == 32);
}

TEST_CASE("pixels: gbx-run run --screenshot / --screenshot-grid write PNGs of four greys") {
  test::TempDir d;
  const std::string shot = (d.path / "s.png").string(), grid = (d.path / "g.png").string();
  auto r = test::run_command(test::tool("gbx-run") +
                             " run --rom builtin:PPU_BENCH --stage emulate_only --envs 5 "
                             "--frames 12 --frames-per-step 4 --env 3 --screenshot " +
                             shot + " --screenshot-grid " + grid);
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  auto img = read_png(shot);
  REQUIRE(img.ok());
  CHECK(img->width == 160);
  CHECK(img->height == 144);
  for (uint8_t v : img->pixels) CHECK((v == 0xFF || v == 0xAA || v == 0x55 || v == 0x00));
  auto g = read_png(grid);
  REQUIRE(g.ok());
  CHECK(g->width == 3 * 160 + 2 * 2);  // 5 envs: 3 columns, 2 rows, 2-pixel gaps
  CHECK(g->height == 2 * 144 + 2);
  // Env 3 sits at column 0, row 1 of the grid and is the same picture as --env 3's.
  for (int y = 0; y < 144; ++y)
    for (int x = 0; x < 160; ++x)
      CHECK_EQ(g->pixels[(size_t)(146 + y) * g->width + x], img->pixels[(size_t)y * 160 + x]);

  auto bad = test::run_command(
      test::tool("gbx-run") +
      " run --rom builtin:PPU_BENCH --stage emulate_only --frames 1 --screenshot " +
      (d.path / "no" / "such" / "dir.png").string());
  CHECK(bad.exit_code != 0);
  CHECK(test::count_lines(bad.output) >= 1);
  CHECK(bad.output.find("error:") != std::string::npos);
}

TEST_CASE("pixels: save states carry the framebuffer") {
  BackendConfig cfg;
  cfg.num_envs = 2;
  cfg.stage = Stage::ObsOnly;
  cfg.obs = ObsKind::Pixels;
  cfg.frames_per_step = 7;
  auto a = make("builtin:PPU_BENCH", cfg);
  REQUIRE(a->step({}).ok());
  auto blob = a->save_state(0);
  REQUIRE_MESSAGE(blob.ok(), (blob.ok() ? "" : blob.error().message));
  const Screen saved = a->read_screen(0).value();
  REQUIRE(a->step({}).ok());
  const Screen later = a->read_screen(0).value();
  CHECK(later != saved);  // the ROM scrolls every frame

  auto b = make("builtin:PPU_BENCH", cfg);
  REQUIRE(b->load_state(1, blob.value()).ok());
  CHECK(b->read_screen(1).value() == saved);  // loaded, before any step
  REQUIRE(b->step({}).ok());
  CHECK(b->read_screen(1).value() == later);
}

TEST_CASE("pixels: gbx-run testrom --expect-png: the screen at LD B,B against a PNG") {
  // The still scenes end with LD B,B and the mooneye registers after three frames.
  test::TempDir d;
  const std::vector<std::string> scenes = {"ppu_bg_scroll", "ppu_window", "ppu_sprites",
                                           "ppu_sprites_8x16", "ppu_raster_scx"};
  std::string roms;
  for (const auto& name : scenes) {
    auto bytes = build_ppu_rom(name);
    REQUIRE(bytes.ok());
    const auto path = d.path / (name + ".gb");
    std::ofstream(path, std::ios::binary)
        .write((const char*)bytes->data(), (std::streamsize)bytes->size());
    roms += " '" + path.string() + "'";
  }
  const std::string testrom = test::tool("gbx-run") + " testrom --frames 20 ";
  // A folder of goldens: each ROM is paired with <its name>.png there.
  auto all = test::run_command(testrom + "--expect-png '" + kData.string() + "'" + roms);
  CAPTURE(all.output);
  CHECK(all.exit_code == 0);
  for (const auto& name : scenes)
    CHECK(all.output.find("PASS  " + (d.path / (name + ".gb")).string() +
                          "  (image: screen at LD B,B") != std::string::npos);
  CHECK(all.output.find("5 passed, 0 failed") != std::string::npos);
  CHECK(test::count_lines(all.output) == 6);

  // One ROM, one file; the wrong picture fails with the first differing pixel. The window
  // scene's top-left is BG tile 0 (shade 0); ppu_bg_scroll.png starts with SCX 3 / SCY 5 on
  // the diagonal map, tile (0,0) = colour 0 until x = 5, then tile (1,0) = colour 1.
  const std::string window = "'" + (d.path / "ppu_window.gb").string() + "'";
  auto wrong = test::run_command(testrom + window + " --expect-png '" +
                                 (kData / "ppu_bg_scroll.png").string() + "'");
  CAPTURE(wrong.output);
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.output.find("FAIL  ") != std::string::npos);
  CHECK(wrong.output.find("first at x=5 y=0: shade 0, want 1") != std::string::npos);
  CHECK(wrong.output.find("0 passed, 1 failed") != std::string::npos);

  // Not the screen's size, or no PNG at all: that ROM fails with the reason.
  GreyImage small;
  small.width = 80;
  small.height = 72;
  small.pixels.assign(80 * 72, 0xFF);
  const auto small_png = (d.path / "small.png").string();
  REQUIRE(write_png(small_png, small).ok());
  auto sized = test::run_command(testrom + window + " --expect-png " + small_png);
  CHECK(sized.exit_code == 1);
  CHECK(sized.output.find("is 80x72, not the 160x144 screen") != std::string::npos);
  auto none =
      test::run_command(testrom + window + " --expect-png " + (d.path / "none.png").string());
  CHECK(none.exit_code == 1);
  CHECK(none.output.find("none.png") != std::string::npos);
  CHECK(none.output.find("0 passed, 1 failed") != std::string::npos);
  // A file for several ROMs is a usage error.
  auto usage = test::run_command(testrom + roms + " --expect-png " + small_png);
  CHECK(usage.exit_code == 2);
  CHECK(test::count_lines(usage.output) == 1);
  CHECK(usage.output.rfind("error: --expect-png FILE takes one ROM", 0) == 0);
}
