#include "gbx/measure/verify/testrom.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/outputs/screen_image.h"
#include "gbx_abi.h"

namespace gbx {
namespace {

std::string hex_regs(const CpuState& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "B=%02X C=%02X D=%02X E=%02X H=%02X L=%02X", s.b, s.c, s.d, s.e,
                s.h, s.l);
  return buf;
}

// The mooneye verdict of an env stopped at LD B,B.
TestRomResult mooneye_verdict(const CpuState& s) {
  TestRomResult r;
  r.convention = "mooneye";
  const uint8_t fib[6] = {3, 5, 8, 13, 21, 34};
  const uint8_t regs[6] = {s.b, s.c, s.d, s.e, s.h, s.l};
  bool pass = true, fail = true;
  for (int i = 0; i < 6; ++i) {
    pass = pass && regs[i] == fib[i];
    fail = fail && regs[i] == 0x42;
  }
  r.passed = pass;  // anything but the pass registers is a failure of the test
  char at[32];
  std::snprintf(at, sizeof at, " at %04X", s.trap_pc);
  r.detail = std::string(pass   ? "LD B,B with 3,5,8,13,21,34"
                         : fail ? "LD B,B with 0x42 (test failed)"
                                : "LD B,B with unexpected registers " + hex_regs(s)) +
             at;
  return r;
}

// Printable text of a zero-terminated string in memory (at most `max` bytes).
std::string text_at(Backend& be, uint32_t addr, uint32_t max) {
  auto bytes = be.read_memory(0, addr, addr + max);
  std::string out;
  if (!bytes) return out;
  for (uint8_t ch : bytes.value()) {
    if (ch == 0) break;
    out += (ch >= 0x20 && ch < 0x7F) || ch == '\n' ? (char)ch : '?';
  }
  return out;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The image verdict: the env's last complete frame against the expected shades.
Result<TestRomResult> image_verdict(Backend& be, const std::vector<uint8_t>& want,
                                    const std::string& png, uint16_t pc,
                                    const std::string& screen_out) {
  auto got = be.read_screen(0);
  if (!got) return got.take_error();
  if (!screen_out.empty())
    if (auto st = write_png(screen_out, screen_image(*got)); !st) return st.take_error();
  TestRomResult r;
  r.convention = "image";
  int first = -1, differ = 0;
  for (size_t i = 0; i < want.size() && i < got->size(); ++i)
    if (want[i] != (*got)[i]) {
      if (first < 0) first = (int)i;
      ++differ;
    }
  r.passed = differ == 0;
  char buf[1024];
  if (r.passed)
    std::snprintf(buf, sizeof buf, "screen at LD B,B (%04X) matches %s", pc, png.c_str());
  else
    std::snprintf(buf, sizeof buf,
                  "screen at LD B,B (%04X) differs from %s in %d pixels, first at x=%d y=%d: "
                  "shade %d, want %d",
                  pc, png.c_str(), differ, first % GBX_SCREEN_W, first / GBX_SCREEN_W,
                  (*got)[first], want[first]);
  r.detail = buf;
  return r;
}

Result<std::vector<uint8_t>> expected_screen(const std::string& png) {
  auto img = read_png(png);
  if (!img) return img.take_error();
  if (img->width != GBX_SCREEN_W || img->height != GBX_SCREEN_H)
    return make_error(ErrorKind::Input, png + " is " + std::to_string(img->width) + "x" +
                                            std::to_string(img->height) +
                                            ", not the 160x144 screen");
  std::vector<uint8_t> shades(img->pixels.size());
  for (size_t i = 0; i < shades.size(); ++i) shades[i] = shade_of_grey(img->pixels[i]);
  return shades;
}

// Suite of a test ROM by one of its path components (lower case).
std::string suite_of_component(const std::string& c) {
  static const char* const kBlargg[] = {"blargg",     "cpu_instrs", "instr_timing",
                                        "mem_timing", "halt_bug",   "oam_bug",
                                        "dmg_sound",  "cgb_sound",  "interrupt_time"};
  if (c.rfind("mooneye", 0) == 0) return "mooneye";
  if (c == "gbmicrotest") return "gbmicrotest";
  if (c.find("acid2") != std::string::npos) return "dmg-acid2";
  if (c.find("mealybug") != std::string::npos) return "mealybug";
  for (const char* b : kBlargg)
    if (c.rfind(b, 0) == 0) return "blargg";
  return "";
}

struct Checks {
  bool ldbb = false;    // LD B,B ends the run (mooneye or image verdict)
  bool blargg = false;  // serial, $A000 and screen text
  bool hram = false;    // gbmicrotest's HRAM verdict
};

Checks checks_of(TestRomRule rule) {
  switch (rule) {
    case TestRomRule::Mooneye:
    case TestRomRule::Image:
      return {true, false, false};
    case TestRomRule::Blargg:
      return {false, true, false};
    case TestRomRule::Gbmicrotest:
      return {false, false, true};
    default:
      return {true, true, false};
  }
}

// The blargg verdicts that do not need LD B,B: serial text, the $A000 signature, the screen.
Result<bool> blargg_verdict(Backend& be, bool has_cart_ram, TestRomResult& r) {
  auto serial = be.serial_output(0);
  if (!serial) return serial.take_error();
  const std::string& text = serial.value();
  const bool serial_pass = text.find("Passed") != std::string::npos;
  if (serial_pass || text.find("Failed") != std::string::npos) {
    r.convention = "blargg-serial";
    r.passed = serial_pass;
    r.detail = "serial: \"" + one_line(text.substr(0, 120)) + "\"";
    return true;
  }
  if (has_cart_ram) {
    auto sig = be.read_memory(0, 0xA000, 0xA004);
    if (!sig) return sig.take_error();
    const auto& m = sig.value();
    if (m[1] == 0xDE && m[2] == 0xB0 && m[3] == 0x61 && m[0] != 0x80 && m[0] != 0x81) {
      r.convention = "blargg-memory";
      r.passed = m[0] == 0;
      char code[32];
      std::snprintf(code, sizeof code, "result code %02X", m[0]);
      r.detail = std::string(code) + ": \"" + one_line(text_at(be, 0xA004, 120)) + "\"";
      return true;
    }
  }
  // The screen: the background map LCDC bit 3 selects (Pan Docs "LCDC.3").
  auto lcdc = be.read_memory(0, 0xFF40, 0xFF41);
  if (!lcdc) return lcdc.take_error();
  const uint32_t map = (lcdc.value()[0] & 0x08) ? 0x9C00 : 0x9800;
  auto tiles = be.read_memory(0, map, map + 0x400);
  if (!tiles) return tiles.take_error();
  const std::string screen = tile_map_text(tiles->data());
  const bool screen_pass = screen.find("Passed") != std::string::npos;
  if (screen_pass || screen.find("Failed") != std::string::npos) {
    r.convention = "blargg-screen";
    r.passed = screen_pass;
    // The title (first line) and the line that says the verdict.
    const size_t at = screen.find(screen_pass ? "Passed" : "Failed");
    const size_t nl = screen.rfind('\n', at);
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    const size_t end = screen.find('\n', from);
    const std::string title = screen.substr(0, screen.find('\n'));
    const std::string verdict =
        screen.substr(from, end == std::string::npos ? std::string::npos : end - from);
    r.detail = "screen: \"" + (from == 0 ? verdict : title + " ... " + verdict) + "\"";
    return true;
  }
  return false;
}

// gbmicrotest's verdict (its macros.inc, test_end2): FF82 = 0x01 pass, 0xFF fail, anything
// else (HRAM is zero at power-on here) not yet; FF80 the value read, FF81 hardware's.
Result<bool> gbmicrotest_verdict(Backend& be, TestRomResult& r) {
  auto hram = be.read_memory(0, 0xFF80, 0xFF83);
  if (!hram) return hram.take_error();
  const auto& m = hram.value();
  if (m[2] != 0x01 && m[2] != 0xFF) return false;
  r.convention = "gbmicrotest";
  r.passed = m[2] == 0x01;
  char buf[64];
  std::snprintf(buf, sizeof buf, "FF82=%02X, read %02X, hardware %02X", m[2], m[0], m[1]);
  r.detail = buf;
  return true;
}

}  // namespace

Result<TestRomRule> parse_test_rom_rule(const std::string& name) {
  for (TestRomRule r : {TestRomRule::Auto, TestRomRule::Mooneye, TestRomRule::Blargg,
                        TestRomRule::Image, TestRomRule::Gbmicrotest, TestRomRule::Any})
    if (name == test_rom_rule_name(r)) return r;
  return make_error(ErrorKind::Usage, "unknown --rule '" + name +
                                          "' (auto, mooneye, blargg, image, gbmicrotest or any)");
}

const char* test_rom_rule_name(TestRomRule rule) {
  switch (rule) {
    case TestRomRule::Auto:
      return "auto";
    case TestRomRule::Mooneye:
      return "mooneye";
    case TestRomRule::Blargg:
      return "blargg";
    case TestRomRule::Image:
      return "image";
    case TestRomRule::Gbmicrotest:
      return "gbmicrotest";
    default:
      return "any";
  }
}

std::string test_rom_suite(const std::string& path) {
  if (path.rfind("builtin:", 0) == 0) return "";
  const std::filesystem::path p(path);
  std::vector<std::string> parts;
  for (const auto& part : p.parent_path()) parts.push_back(part.string());
  parts.push_back(p.stem().string());
  for (const std::string& part : parts) {
    std::string c;
    for (char ch : part) c += (char)std::tolower((unsigned char)ch);
    if (c == "gbmicrotest") return "gbmicrotest";
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    std::string c;
    for (char ch : *it) c += (char)std::tolower((unsigned char)ch);
    if (std::string s = suite_of_component(c); !s.empty()) return s;
  }
  return "";
}

TestRomPlan resolve_test_rom(const std::string& path, TestRomRule rule,
                             const std::string& expect_png) {
  namespace fs = std::filesystem;
  TestRomPlan plan;
  plan.suite = test_rom_suite(path);
  plan.expect_png = expect_png;
  plan.rule = rule;
  if (rule == TestRomRule::Auto) {
    if (!expect_png.empty() || plan.suite == "dmg-acid2" || plan.suite == "mealybug")
      plan.rule = TestRomRule::Image;
    else if (plan.suite == "mooneye")
      plan.rule = TestRomRule::Mooneye;
    else if (plan.suite == "blargg")
      plan.rule = TestRomRule::Blargg;
    else if (plan.suite == "gbmicrotest")
      plan.rule = TestRomRule::Gbmicrotest;
    else
      plan.rule = TestRomRule::Any;
  }
  if (plan.rule != TestRomRule::Image || !plan.expect_png.empty()) return plan;
  const fs::path dir = fs::path(path).parent_path();
  if (plan.suite == "dmg-acid2") {
    plan.expect_png = (dir / "reference-dmg.png").string();
  } else if (plan.suite == "mealybug") {
    const fs::path png = dir / "expected-dmg" / (fs::path(path).stem().string() + ".png");
    if (fs::exists(png))
      plan.expect_png = png.string();
    else
      plan.skip = "no DMG expectation (" + png.string() + " absent)";
  } else {
    plan.skip = "the image rule needs --expect-png";
  }
  return plan;
}

uint8_t shade_of_grey(uint8_t grey) {
  // Midpoints between the greys 0xFF, 0xAA, 0x55, 0x00.
  return grey >= 0xD5 ? 0 : grey >= 0x80 ? 1 : grey >= 0x2B ? 2 : 3;
}

std::string tile_map_text(const uint8_t* map) {
  std::vector<std::string> rows;
  for (int y = 0; y < 32; ++y) {
    std::string row;
    for (int x = 0; x < 32; ++x) {
      const uint8_t t = map[y * 32 + x];
      row += t >= 0x20 && t < 0x7F ? (char)t : ' ';
    }
    while (!row.empty() && row.back() == ' ') row.pop_back();
    rows.push_back(row);
  }
  while (!rows.empty() && rows.back().empty()) rows.pop_back();
  std::string out;
  for (size_t i = 0; i < rows.size(); ++i) out += (i ? "\n" : "") + rows[i];
  return out;
}

Result<TestRomResult> run_test_rom(const Rom& rom, const TestRomOptions& o) {
  if (o.max_frames < 1) return make_error(ErrorKind::Usage, "--frames must be at least 1");
  const Checks checks = checks_of(o.rule);
  if (o.rule == TestRomRule::Image && o.expect_png.empty())
    return make_error(ErrorKind::Usage, "the image rule needs --expect-png");
  BackendConfig cfg;
  if (auto st = apply_options(with_defaults(o.options, kTestrom), kTestrom, rom, cfg); !st)
    return st.take_error();
  cfg.num_envs = 1;
  cfg.threads = 1;
  cfg.stage = Stage::EmulateOnly;
  cfg.frames_per_step = o.frames_per_check > 0 ? o.frames_per_check : 1;
  int64_t max_frames = o.max_frames;
  if (checks.hram) {
    // gbmicrotest: the suite's 60 frames at most, looked at after each frame (most ROMs end
    // within the first one).
    cfg.frames_per_step = 1;
    max_frames = std::min<int64_t>(max_frames, kGbmicrotestFrames);
  }
  std::vector<uint8_t> want;
  if (!o.expect_png.empty() && checks.ldbb) {
    auto w = expected_screen(o.expect_png);
    if (!w) return w.take_error();
    want = std::move(w.value());
    // A kernel that draws, and a step of one frame so that it draws every frame: the env
    // stops mid-step at LD B,B and the frame before it must be there.
    cfg.render = true;
    cfg.frames_per_step = 1;
  }
  cfg.verbose = o.verbose;
  if (checks.ldbb) cfg.debug = {"ldbb_trap"};
  auto made = make_backend(o.backend, rom, cfg);
  if (!made) return made.take_error();
  Backend& be = *made.value();
  const bool has_cart_ram = rom.header.ram_size != 0;
  TestRomResult r;
  for (int64_t frames = 0; frames < max_frames;) {
    if (auto st = be.step({}); !st) return st.take_error();
    frames += cfg.frames_per_step;
    r.frames = frames;
    auto s = be.get_cpu_state(0);
    if (!s) return s.take_error();
    if (s->trap_kind == GBX_TRAP_LD_B_B) {
      if (!want.empty()) {
        auto img = image_verdict(be, want, o.expect_png, s->trap_pc, o.screen_out);
        if (!img) return img.take_error();
        r = img.value();
      } else {
        r = mooneye_verdict(s.value());
      }
      r.frames = frames;
      return r;
    }
    if (s->trap_kind != GBX_TRAP_NONE) {
      char buf[80];
      std::snprintf(buf, sizeof buf, "illegal opcode %02X at %04X", s->trap_opcode, s->trap_pc);
      r.detail = buf;
      return r;
    }
    if (checks.hram) {
      auto found = gbmicrotest_verdict(be, r);
      if (!found) return found.take_error();
      if (found.value()) return r;
      continue;
    }
    if (!want.empty() || !checks.blargg) continue;  // these end only at LD B,B
    auto found = blargg_verdict(be, has_cart_ram, r);
    if (!found) return found.take_error();
    if (found.value()) return r;
  }
  r.frames = max_frames;
  r.detail = "no result after " + std::to_string(max_frames) + " frames";
  return r;
}

}  // namespace gbx
