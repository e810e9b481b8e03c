#include "gbx/runtime/testrom.h"

#include <cstdio>

#include "gbx/runtime/backend.h"
#include "gbx/runtime/screen_image.h"
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
  r.passed = pass;
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
                                    const std::string& png, uint16_t pc) {
  auto got = be.read_screen(0);
  if (!got) return got.take_error();
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

}  // namespace

uint8_t shade_of_grey(uint8_t grey) {
  // Midpoints between the greys 0xFF, 0xAA, 0x55, 0x00.
  return grey >= 0xD5 ? 0 : grey >= 0x80 ? 1 : grey >= 0x2B ? 2 : 3;
}

Result<TestRomResult> run_test_rom(const Rom& rom, const TestRomOptions& o) {
  if (o.max_frames < 1) return make_error(ErrorKind::Usage, "--frames must be at least 1");
  BackendConfig cfg;
  cfg.num_envs = 1;
  cfg.threads = 1;
  cfg.stage = Stage::EmulateOnly;
  cfg.frames_per_step = o.frames_per_check > 0 ? o.frames_per_check : 1;
  std::vector<uint8_t> want;
  if (!o.expect_png.empty()) {
    auto w = expected_screen(o.expect_png);
    if (!w) return w.take_error();
    want = std::move(w.value());
    // A kernel that draws, and a step of one frame so that it draws every frame: the env
    // stops mid-step at LD B,B and the frame before it must be there.
    cfg.render = true;
    cfg.frames_per_step = 1;
  }
  cfg.verbose = o.verbose;
  cfg.debug = {"ldbb_trap"};
  auto made = make_backend(o.backend, rom, cfg);
  if (!made) return made.take_error();
  Backend& be = *made.value();
  const bool has_cart_ram = rom.header.ram_size != 0;
  TestRomResult r;
  for (int64_t frames = 0; frames < o.max_frames;) {
    if (auto st = be.step({}); !st) return st.take_error();
    frames += cfg.frames_per_step;
    auto s = be.get_cpu_state(0);
    if (!s) return s.take_error();
    if (s->trap_kind == GBX_TRAP_LD_B_B) {
      if (!want.empty()) {
        auto img = image_verdict(be, want, o.expect_png, s->trap_pc);
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
      r.frames = frames;
      return r;
    }
    if (!want.empty()) continue;  // an image test ends only at LD B,B
    auto serial = be.serial_output(0);
    if (!serial) return serial.take_error();
    const std::string& text = serial.value();
    const bool serial_pass = text.find("Passed") != std::string::npos;
    if (serial_pass || text.find("Failed") != std::string::npos) {
      r.convention = "blargg-serial";
      r.passed = serial_pass;
      r.detail = "serial: \"" + one_line(text.substr(0, 120)) + "\"";
      r.frames = frames;
      return r;
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
        r.frames = frames;
        return r;
      }
    }
    if (frames >= o.max_frames) break;
  }
  r.frames = o.max_frames;
  r.detail = "no result after " + std::to_string(o.max_frames) + " frames";
  return r;
}

}  // namespace gbx
