// The gambatte reference backend (gambatte_backend.h): a libretro core driven one Gambatte
// frame at a time, its state read back from retro_serialize after every frame.
#include "gbx/runtime/reference/gambatte_backend.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "gbx/runtime/reference/libretro_api.h"
#include "gbx/runtime/states/env_state.h"
#include "gbx_abi.h"

namespace gbx {
namespace {

constexpr const char* kDebianCorePath = "/usr/lib/x86_64-linux-gnu/libretro/gambatte_libretro.so";
constexpr const char* kHowToGet = "apt-get install libretro-gambatte";
constexpr int64_t kFrameCycles = 70224;
constexpr int64_t kLinesToVblank = 144 * 456;  // LCD on (line 0, dot 0) to VBlank start
// Gambatte's saveState rebases its cycle counter into [kCcBase, 2 * kCcBase).
constexpr int64_t kCcBase = 0x8000;
// libretro-gambatte resamples 2 MHz audio (one sample per 2 T-cycles) by 64.
constexpr int64_t kCyclesPerAudioFrame = 128;

// ---- the core: dlopen()ed once per path, kept for the process ----------------------------

struct Core {
  void* handle = nullptr;
  retro::CoreApi api{};
};

Result<const Core*> load_core(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, Core> cores;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cores.find(path); it != cores.end()) return &it->second;
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return make_error(ErrorKind::Usage,
                      "the gambatte reference needs the libretro Gambatte core, "
                      "not found at " +
                          path + ": " + kHowToGet);
  Core core;
  core.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!core.handle) {
    const char* why = dlerror();
    return make_error(ErrorKind::Usage, "cannot load the gambatte core " + path + " (" +
                                            (why ? why : "dlopen failed") + "): " + kHowToGet);
  }
  bool missing = false;
  std::string first_missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(core.handle, name));
    if (!fn && !missing) missing = true, first_missing = name;
  };
  retro::CoreApi& a = core.api;
  sym(a.api_version, "retro_api_version");
  sym(a.set_environment, "retro_set_environment");
  sym(a.set_video_refresh, "retro_set_video_refresh");
  sym(a.set_audio_sample, "retro_set_audio_sample");
  sym(a.set_audio_sample_batch, "retro_set_audio_sample_batch");
  sym(a.set_input_poll, "retro_set_input_poll");
  sym(a.set_input_state, "retro_set_input_state");
  sym(a.init, "retro_init");
  sym(a.deinit, "retro_deinit");
  sym(a.load_game, "retro_load_game");
  sym(a.unload_game, "retro_unload_game");
  sym(a.run, "retro_run");
  sym(a.serialize_size, "retro_serialize_size");
  sym(a.serialize, "retro_serialize");
  sym(a.unserialize, "retro_unserialize");
  sym(a.get_memory_data, "retro_get_memory_data");
  sym(a.get_memory_size, "retro_get_memory_size");
  if (missing) {
    dlclose(core.handle);
    return make_error(ErrorKind::Usage,
                      path + " is not a libretro core (no " + first_missing + "): " + kHowToGet);
  }
  if (a.api_version() != retro::kApiVersion) {
    dlclose(core.handle);
    return make_error(ErrorKind::Usage, path + " speaks libretro API " +
                                            std::to_string(a.api_version()) + ", not " +
                                            std::to_string(retro::kApiVersion));
  }
  return &cores.emplace(path, core).first->second;
}

// ---- Gambatte's serialized state ---------------------------------------------------------
// Gambatte 0.5's format (libgambatte statesaver.cpp): two version bytes, a snapshot (24-bit
// big-endian size, then its bytes), then fields in label order, each a NUL-terminated label,
// a 24-bit big-endian size and the value (integers big-endian).

struct StateView {
  std::map<std::string, std::pair<size_t, size_t>> fields;  // label -> (offset, size)
};

Result<StateView> index_state(const std::vector<uint8_t>& s) {
  auto bad = [](const std::string& why) -> Error {
    return make_error(ErrorKind::Runtime,
                      "the gambatte core's saved state is not Gambatte 0.5's format (" + why + ")");
  };
  auto u24 = [&](size_t p) { return (size_t)s[p] << 16 | (size_t)s[p + 1] << 8 | s[p + 2]; };
  if (s.size() < 5 || s[0] != 0 || s[1] != 1) return bad("version bytes");
  size_t p = 5 + u24(2);
  StateView v;
  while (p < s.size()) {
    const auto* nul = static_cast<const uint8_t*>(std::memchr(&s[p], 0, s.size() - p));
    if (!nul) return bad("unterminated label");
    std::string label(reinterpret_cast<const char*>(&s[p]), (size_t)(nul - &s[p]));
    p += label.size() + 1;
    if (p + 3 > s.size()) return bad("truncated size of " + label);
    const size_t n = u24(p);
    p += 3;
    if (p + n > s.size()) return bad("truncated field " + label);
    v.fields[label] = {p, n};
    p += n;
  }
  for (const char* need :
       {"cc", "wram", "vram", "hram", "sram", "sramon", "rambank", "rombank", "a",   "b",
        "c",  "d",    "e",    "f",    "h",    "l",      "pc",      "sp",      "ime", "halt"})
    if (!v.fields.count(need)) return bad(std::string("no field '") + need + "'");
  if (v.fields["wram"].second < 0x2000 || v.fields["vram"].second < 0x2000 ||
      v.fields["hram"].second != 0x200)
    return bad("memory field sizes");
  return v;
}

// One Gambatte frame end: when, its screen and its whole state.
struct Frame {
  int64_t end = 0;  // emulated T-cycles since reset when retro_run returned
  std::vector<uint8_t> state;
  StateView view;
  std::vector<uint8_t> screen;  // 160x144 shades 0-3

  uint32_t num(const char* label) const {
    const auto& [off, n] = view.fields.at(label);
    uint32_t v = 0;
    for (size_t i = 0; i < n && i < 4; ++i) v = v << 8 | state[off + i];
    return v;
  }
  uint8_t io(uint16_t addr) const {  // a byte of FE00-FFFF as the state holds it
    return state[view.fields.at("hram").first + (addr - 0xFE00u)];
  }
  uint8_t* mutable_bytes(const char* label, size_t* size) {
    const auto& [off, n] = view.fields.at(label);
    *size = n;
    return state.data() + off;
  }
  const uint8_t* bytes(const char* label, size_t* size) const {
    const auto& [off, n] = view.fields.at(label);
    *size = n;
    return state.data() + off;
  }
};

// Shade (0-3) of one pixel: the core draws DMG shades in its grayscale palette.
uint8_t shade_of(unsigned r, unsigned g, unsigned b) {
  const unsigned grey = (r + g + b) / 3;
  return grey >= 0xD5 ? 0 : grey >= 0x80 ? 1 : grey >= 0x2B ? 2 : 3;
}
uint8_t shade_of_xrgb8888(uint32_t px) {
  return shade_of(px & 0xFF, (px >> 8) & 0xFF, (px >> 16) & 0xFF);
}
uint8_t shade_of_rgb565(uint16_t px) {  // Debian's core is built with VIDEO_RGB565
  return shade_of((px >> 11 & 0x1F) * 255 / 31, (px >> 5 & 0x3F) * 255 / 63,
                  (px & 0x1F) * 255 / 31);
}

// Points stdout at /dev/null for one scope (stdout carries verify's verdict line).
class StdoutSilenced {
 public:
  StdoutSilenced() {
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (saved_ >= 0 && null >= 0) dup2(null, STDOUT_FILENO);
    if (null >= 0) close(null);
  }
  ~StdoutSilenced() {
    std::fflush(stdout);
    if (saved_ >= 0) dup2(saved_, STDOUT_FILENO), close(saved_);
  }
  StdoutSilenced(const StdoutSilenced&) = delete;
  StdoutSilenced& operator=(const StdoutSilenced&) = delete;

 private:
  int saved_ = -1;
};

class GambatteBackend;
GambatteBackend* g_active = nullptr;  // the one live instance the C callbacks talk to
std::mutex g_active_mu;

class GambatteBackend final : public Backend {
 public:
  GambatteBackend(const Core* core, const Rom& rom, const BackendConfig& cfg)
      : core_(core), cfg_(cfg), rom_(rom.bytes) {}

  ~GambatteBackend() override {
    if (loaded_) core_->api.unload_game();
    if (inited_) core_->api.deinit();
    std::lock_guard<std::mutex> lock(g_active_mu);
    if (g_active == this) g_active = nullptr;
  }

  Status open() {
    {
      std::lock_guard<std::mutex> lock(g_active_mu);
      if (g_active)
        return make_error(ErrorKind::Usage,
                          "the gambatte backend runs one env per process (a libretro core is one "
                          "global emulator) and one is already open");
      g_active = this;
    }
    const retro::CoreApi& a = core_->api;
    a.set_environment(&GambatteBackend::on_environment);
    a.init();
    inited_ = true;
    a.set_video_refresh(&GambatteBackend::on_video);
    a.set_audio_sample(&GambatteBackend::on_audio_sample);
    a.set_audio_sample_batch(&GambatteBackend::on_audio_batch);
    a.set_input_poll(&GambatteBackend::on_input_poll);
    a.set_input_state(&GambatteBackend::on_input_state);
    retro::GameInfo game{nullptr, rom_.data(), rom_.size(), nullptr};
    bool loaded = false;
    {
      StdoutSilenced quiet;  // the core printf()s the cartridge type on stdout
      loaded = a.load_game(&game);
    }
    if (!loaded)
      return make_error(ErrorKind::Input, "the gambatte core refused the ROM" +
                                              (refusal_.empty() ? "" : " (" + refusal_ + ")"));
    loaded_ = true;
    if (!hwmode_asked_)
      return make_error(ErrorKind::Runtime,
                        "the gambatte core never asked for gambatte_gb_hwmode, so it cannot be "
                        "told to run as a DMG");
    auto first = serialize();
    if (!first) return first.take_error();
    // Power-on RAM: Gambatte fills WRAM, OAM and HRAM with patterns (hardware's contents are
    // random); GBX and mGBA start them from zeros, and so does this reference.
    size_t n = 0;
    uint8_t* wram = first->mutable_bytes("wram", &n);
    std::fill(wram, wram + n, 0);
    uint8_t* ioamhram = first->mutable_bytes("hram", &n);
    std::fill(ioamhram, ioamhram + 0xA0, 0);           // OAM FE00-FE9F
    std::fill(ioamhram + 0x180, ioamhram + 0x1FF, 0);  // HRAM FF80-FFFE
    // Gambatte draws its own copy of the Nintendo logo; the boot ROM copies the cartridge's
    // (Pan Docs "Power Up Sequence"), as GBX and mGBA do. The same for a licensed cartridge;
    // GBX's micro-ROMs carry no logo (hardware would lock up on them, GBX skips the check).
    uint8_t image[kBootVramEnd] = {};
    boot_vram_image(rom_, image);
    uint8_t* vram = first->mutable_bytes("vram", &n);
    std::copy(image + 0x0010, image + 0x01A0, vram + 0x0010);
    std::copy(image + 0x1904, image + kBootVramEnd, vram + 0x1904);
    initial_ = std::move(*first);
    return reset(0);
  }

  std::string name() const override { return "gambatte"; }
  int num_envs() const override { return 1; }

  Status reset(uint64_t) override {
    if (!core_->api.unserialize(initial_.state.data(), initial_.state.size()))
      return make_error(ErrorKind::Runtime, "the gambatte core refused its own saved state");
    current_ = initial_;
    current_.end = 0;
    current_.screen.assign((size_t)GBX_SCREEN_W * GBX_SCREEN_H, 0);  // as GBX's at reset
    pending_.reset();
    target_ = 0;
    return ok_status();
  }

  Status step(const std::vector<int32_t>& actions) override {
    if (actions.size() > 1)
      return make_error(ErrorKind::Usage, "the gambatte backend has 1 env, step got " +
                                              std::to_string(actions.size()) + " actions");
    const int32_t action = actions.empty() ? 0 : actions[0];
    const int64_t step_start = target_;
    target_ += cfg_.frames_per_step * kFrameCycles;
    for (;;) {
      if (!pending_) {
        // The next Gambatte frame starts at current_.end, inside this step.
        const int64_t frame = (current_.end - step_start) / kFrameCycles;
        const int release = cfg_.release_after_frames;
        buttons_ = release >= 0 && frame >= release ? 0 : action;
        auto f = run_frame();
        if (!f) return f.take_error();
        pending_ = std::move(*f);
      }
      if (pending_->end > target_) break;
      current_ = std::move(*pending_);
      pending_.reset();
    }
    return ok_status();
  }

  Status sync() override { return ok_status(); }

  Result<CpuState> get_cpu_state(int env) override {
    if (Status st = check_env(env); !st) return st.take_error();
    const Frame& f = current_;
    CpuState s;
    s.pc = (uint16_t)f.num("pc");
    s.sp = (uint16_t)f.num("sp");
    s.a = (uint8_t)f.num("a");
    s.f = (uint8_t)f.num("f");
    s.b = (uint8_t)f.num("b");
    s.c = (uint8_t)f.num("c");
    s.d = (uint8_t)f.num("d");
    s.e = (uint8_t)f.num("e");
    s.h = (uint8_t)f.num("h");
    s.l = (uint8_t)f.num("l");
    s.ime = f.num("ime") ? 1 : 0;
    s.run_state = f.num("halt") ? GBX_RUN_HALTED : GBX_RUN_ACTIVE;
    s.cycle_count = f.end;  // the instant these registers are from
    return s;
  }

  Result<std::vector<uint8_t>> read_memory(int env, uint32_t lo, uint32_t hi) override {
    if (Status st = check_env(env); !st) return st.take_error();
    if (lo > hi || hi > 0x10000)
      return make_error(ErrorKind::Usage, "memory range is not inside the 64 KiB bus");
    std::vector<uint8_t> out;
    out.reserve(hi - lo);
    for (uint32_t a = lo; a < hi; ++a) {
      std::string why;
      const auto b = peek(a, &why);
      if (!b)
        return make_error(ErrorKind::Usage,
                          "the gambatte reference cannot show " + hex4(a) + " (" + why +
                              "); it shows 0000-7FFF, 8000-FDFF, FE00-FE9F and FF80-FFFF");
      out.push_back(*b);
    }
    return out;
  }

  Result<std::vector<uint8_t>> read_screen(int env) override {
    if (Status st = check_env(env); !st) return st.take_error();
    // GBX's front buffer goes blank the moment the LCD goes off (Pan Docs "LCDC.7"); Gambatte
    // shows that only with its next frame, so the pending frame says whether and since when
    // the LCD was off at target_. One that ends with the LCD still off ends 70224 cycles after
    // it went off (measured: 2048.gb turns it off at cycle ~68076 and Gambatte's blank frame
    // ends at 138300). One that is longer or shorter than a frame had the LCD switched off
    // and on inside it and ends at the first VBlank after the switch-on, 144 lines later; the
    // LCD was off at least until then.
    if (pending_) {
      const bool off_at_end = !(pending_->io(0xFF40) & 0x80);
      const int64_t length = pending_->end - current_.end;
      const bool toggled = length < kFrameCycles - 64 || length > kFrameCycles + 64;
      const int64_t off_since = off_at_end ? pending_->end - kFrameCycles
                                : toggled  ? pending_->end - kLinesToVblank
                                           : INT64_MAX;
      if (target_ >= off_since) return std::vector<uint8_t>((size_t)GBX_SCREEN_W * GBX_SCREEN_H, 0);
    }
    return current_.screen;
  }

 private:
  static std::string hex4(uint32_t a) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04X", a);
    return buf;
  }

  // The bus byte at `a` as of current_'s frame end, or nullopt and why not.
  std::optional<uint8_t> peek(uint32_t a, std::string* why) const {
    const Frame& f = current_;
    size_t n = 0;
    if (a < 0x4000) return rom_byte(a);
    if (a < 0x8000) return rom_byte((size_t)f.num("rombank") * 0x4000 + (a - 0x4000));
    if (a < 0xA000) return f.bytes("vram", &n)[a - 0x8000];
    if (a < 0xC000) {
      const uint8_t* sram = f.bytes("sram", &n);
      if (!f.num("sramon") || n == 0) return 0xFF;
      return sram[((size_t)f.num("rambank") * 0x2000 + (a - 0xA000)) % n];
    }
    if (a < 0xFE00) return f.bytes("wram", &n)[(a - 0xC000) & 0x1FFF];
    const uint8_t* ioamhram = f.bytes("hram", &n);
    if (a < 0xFEA0 || a >= 0xFF80) return ioamhram[a - 0xFE00];
    *why = a < 0xFF00 ? "the unusable area" : "I/O registers: its state holds stale bytes there";
    return std::nullopt;
  }

  uint8_t rom_byte(size_t off) const { return rom_.empty() ? 0xFF : rom_[off % rom_.size()]; }

  Status check_env(int env) const {
    if (env != 0)
      return make_error(ErrorKind::Usage,
                        "env " + std::to_string(env) + " is out of range (1 env)");
    return ok_status();
  }

  Result<Frame> serialize() {
    const retro::CoreApi& a = core_->api;
    Frame f;
    f.state.resize(a.serialize_size());
    if (f.state.empty() || !a.serialize(f.state.data(), f.state.size()))
      return make_error(ErrorKind::Runtime, "the gambatte core could not save its state");
    auto v = index_state(f.state);
    if (!v) return v.take_error();
    f.view = std::move(*v);
    return f;
  }

  // Runs retro_run until it emulates a frame (a repeated frame runs nothing), then reads
  // the state and places the frame end in time.
  Result<Frame> run_frame() {
    const int64_t start_cc = last_cc();
    const int64_t start_audio = audio_frames_;
    got_frame_ = false;
    for (int tries = 0; !got_frame_; ++tries) {
      if (tries == 8)
        return make_error(ErrorKind::Runtime, "the gambatte core repeated 8 frames in a row");
      core_->api.run();
    }
    auto f = serialize();
    if (!f) return f.take_error();
    const int64_t cc = f->num("cc");
    // The counter went from start_cc to start_cc + elapsed and was then rebased by a
    // multiple of kCcBase: elapsed = residue + k * kCcBase, k from the audio estimate.
    const int64_t estimate = (audio_frames_ - start_audio) * kCyclesPerAudioFrame;
    int64_t elapsed = ((cc - start_cc) % kCcBase + kCcBase) % kCcBase;
    while (elapsed + kCcBase / 2 < estimate) elapsed += kCcBase;
    // A frame lasts at most about two (one with the LCD switched off and on inside it).
    if (elapsed <= 0 || elapsed > 3 * kFrameCycles)
      return make_error(ErrorKind::Runtime, "cannot place the gambatte core's frame in time (" +
                                                std::to_string(elapsed) +
                                                " cycles by its counter, ~" +
                                                std::to_string(estimate) + " by its audio)");
    f->end = current_end_of_run() + elapsed;
    f->screen = std::move(screen_);
    screen_.assign((size_t)GBX_SCREEN_W * GBX_SCREEN_H, 0);
    return std::move(*f);
  }

  // The frame the core last stopped at: pending_ when it exists, else current_.
  const Frame& last_run() const { return pending_ ? *pending_ : current_; }
  int64_t last_cc() const { return last_run().num("cc"); }
  int64_t current_end_of_run() const { return last_run().end; }

  // ---- libretro callbacks (C function pointers: they reach the instance via g_active) ----

  static bool on_environment(unsigned cmd, void* data) {
    GambatteBackend* self = g_active;
    switch (cmd & ~retro::kEnvExperimental) {
      case retro::kEnvGetCanDupe:
        // libretro-gambatte refuses to load unless repeated frames may be sent as NULL.
        *static_cast<bool*>(data) = true;
        return true;
      case retro::kEnvSetPixelFormat: {
        const int format = *static_cast<const int*>(data);
        if (format != retro::kPixelFormatXrgb8888 && format != retro::kPixelFormatRgb565) {
          if (self) self->refusal_ = "it asked for a pixel format other than XRGB8888 or RGB565";
          return false;
        }
        if (self) self->rgb565_ = format == retro::kPixelFormatRgb565;
        return true;
      }
      case retro::kEnvGetVariable: {
        auto* v = static_cast<retro::Variable*>(data);
        v->value = nullptr;
        if (!v->key) return false;
        if (!std::strcmp(v->key, "gambatte_gb_hwmode")) {
          if (self) self->hwmode_asked_ = true;
          v->value = "GB";  // FORCE_DMG
        } else if (!std::strcmp(v->key, "gambatte_gb_colorization")) {
          v->value = "disabled";  // the grayscale DMG palette
        } else if (!std::strcmp(v->key, "gambatte_gbc_color_correction")) {
          v->value = "disabled";
        }
        return v->value != nullptr;
      }
      case retro::kEnvGetVariableUpdate:
        *static_cast<bool*>(data) = false;
        return true;
      default:
        return false;  // logging, directories, memory maps, descriptors: not needed
    }
  }

  static void on_video(const void* data, unsigned width, unsigned height, size_t pitch) {
    GambatteBackend* self = g_active;
    if (!self || !data) return;  // NULL: a repeated frame, nothing was emulated
    self->got_frame_ = true;
    self->screen_.assign((size_t)GBX_SCREEN_W * GBX_SCREEN_H, 0);
    const auto* rows = static_cast<const uint8_t*>(data);
    for (unsigned y = 0; y < height && y < (unsigned)GBX_SCREEN_H; ++y) {
      const uint8_t* row = rows + y * pitch;
      uint8_t* out = &self->screen_[(size_t)y * GBX_SCREEN_W];
      for (unsigned x = 0; x < width && x < (unsigned)GBX_SCREEN_W; ++x) {
        if (self->rgb565_) {
          uint16_t px;
          std::memcpy(&px, row + 2 * x, 2);
          out[x] = shade_of_rgb565(px);
        } else {
          uint32_t px;
          std::memcpy(&px, row + 4 * x, 4);
          out[x] = shade_of_xrgb8888(px);
        }
      }
    }
  }

  static void on_audio_sample(int16_t, int16_t) {
    if (g_active) ++g_active->audio_frames_;
  }
  static size_t on_audio_batch(const int16_t*, size_t frames) {
    if (g_active) g_active->audio_frames_ += (int64_t)frames;
    return frames;
  }
  static void on_input_poll() {}
  static int16_t on_input_state(unsigned port, unsigned device, unsigned, unsigned id) {
    GambatteBackend* self = g_active;
    if (!self || port != 0 || device != retro::kDeviceJoypad) return 0;
    // GBX action bits: A B SELECT START RIGHT LEFT UP DOWN (bit 0 .. bit 7).
    static constexpr unsigned kIds[8] = {
        retro::kJoypadA,     retro::kJoypadB,    retro::kJoypadSelect, retro::kJoypadStart,
        retro::kJoypadRight, retro::kJoypadLeft, retro::kJoypadUp,     retro::kJoypadDown};
    for (int bit = 0; bit < 8; ++bit)
      if (kIds[bit] == id) return (self->buttons_ >> bit) & 1;
    return 0;
  }

  const Core* core_;
  BackendConfig cfg_;
  std::vector<uint8_t> rom_;
  bool inited_ = false, loaded_ = false, hwmode_asked_ = false, got_frame_ = false;
  bool rgb565_ = false;  // the pixel format the core chose
  std::string refusal_;
  Frame initial_;                 // the state after loading, WRAM zeroed: what reset restores
  Frame current_;                 // the last frame end at or before target_
  std::optional<Frame> pending_;  // the frame run after it (ends after target_)
  int64_t target_ = 0;            // the GBX time the last step ended at
  int32_t buttons_ = 0;           // the action of the frame being run
  int64_t audio_frames_ = 0;
  std::vector<uint8_t> screen_;  // the frame the core just drew
};

}  // namespace

std::string default_gambatte_core_path() {
  const char* env = std::getenv("GBX_GAMBATTE_CORE");
  return env && *env ? env : kDebianCorePath;
}

Result<std::unique_ptr<Backend>> make_gambatte_backend(const Rom& rom, const BackendConfig& cfg,
                                                       const std::string& core_path) {
  if (cfg.num_envs != 1)
    return make_error(ErrorKind::Usage, "the gambatte backend runs exactly 1 env, got " +
                                            std::to_string(cfg.num_envs));
  if (cfg.frames_per_step < 1)
    return make_error(ErrorKind::Usage, "the gambatte backend needs frames_per_step >= 1");
  if (rom.bytes.size() < 0x150)
    return make_error(ErrorKind::Input,
                      "ROM '" + rom.name + "' is too small for a cartridge header");
  auto core = load_core(core_path.empty() ? default_gambatte_core_path() : core_path);
  if (!core) return core.take_error();
  auto b = std::make_unique<GambatteBackend>(core.value(), rom, cfg);
  if (Status st = b->open(); !st) return st.take_error();
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace gbx
