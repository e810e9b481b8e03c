// One trajectory however a step is cut: every game in ../shared/games and game_loop, random
// buttons per env and step, 2,400 frames, on 1, 2 and 3 threads with env counts that give
// whole steps (more than 16 envs a thread) and steps in parts, in steps of 24 frames and of 1
// frame (fed the same buttons frame by frame), and on the CUDA driver double: every env's
// whole save state (CPU, memory, timers, PPU, both framebuffers, an OAM DMA in flight) and its
// screen agree at every common step boundary. And the OAM DMA + HALT ROM against mGBA.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/measure/verify/verify.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx/runtime/states/save_state.h"
#include "gbx_abi.h"
#include "skip.h"
#include "test_util.h"

using namespace gbx;
namespace fs = std::filesystem;

namespace {

constexpr int kFrames = 2400;
constexpr int kStepFrames = 24;
constexpr int kHold = 8;  // buttons of a 24-frame step are released after this many frames

// The buttons of env `env` for the step that starts at frame `frame`: a pure function of both,
// so every configuration (any env count) feeds env i the same sequence.
int32_t buttons(int env, int frame) {
  uint64_t x = (uint64_t)env * 0x9E3779B97F4A7C15ull + (uint64_t)(frame / kStepFrames) + 1;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (int32_t)(x & 0xFF);
}

struct Run {
  std::string backend = "cpu";
  int threads = 1;
  int envs = 3;
  int frames_per_step = kStepFrames;
  // A hook at an address no game runs: a hook-counting kernel, whose interpreter runs every
  // wait loop iteration by iteration (kernel/step.tmpl wait_loop_skip is off there).
  bool every_iteration = false;
  // A ROM-specialized kernel for the plan of a 240-frame profile (its blocks pass over the wait
  // loops they are: kernel/step.tmpl, after spec_run).
  bool specialized = false;
  // The uniform dispatch (dispatch=uniform, sm83/uniform.h) instead of the opcode switch.
  bool uniform = false;
  // cuda: warp-level scheduling (warp_majority, kernel/step.tmpl warp_turn), 0 = SIMT.
  int warp_majority = 0;
  int frames = kFrames;  // from power-on
  std::string label() const {
    return backend + " threads=" + std::to_string(threads) + " envs=" + std::to_string(envs) +
           " frames/step=" + std::to_string(frames_per_step) +
           (every_iteration ? " wait loops run iteration by iteration" : "") +
           (specialized ? " specialized" : "") + (uniform ? " dispatch=uniform" : "") +
           (warp_majority ? " warp_majority=" + std::to_string(warp_majority) : "") +
           " frames=" + std::to_string(frames);
  }
};

// Each env's save state and screen at every 24-frame boundary: [boundary][env].
struct Trace {
  std::vector<std::vector<std::vector<uint8_t>>> states, screens;
  int parts = 0;  // the most parts a step was cut into
};

Trace run(const Rom& rom, const Run& r) {
  BackendConfig cfg;
  cfg.num_envs = r.envs;
  cfg.threads = r.backend == "cpu" ? r.threads : 0;
  cfg.frames_per_step = r.frames_per_step;
  // A 24-frame step holds its buttons for 8 frames; 1-frame steps are fed them frame by frame.
  cfg.release_after_frames = r.frames_per_step == kStepFrames ? kHold : -1;
  cfg.stage = Stage::FullStep;
  cfg.obs = ObsKind::Pixels;
  if (r.every_iteration) cfg.hooks = {HookAddr{-1, 0x3FFF}};
  if (r.uniform) cfg.dispatch = Dispatch::Uniform;
  cfg.warp_majority = r.warp_majority;
  if (r.specialized) {
    ProfileRunOptions po;
    po.frames = 240;
    auto prof = profile_rom(rom, po);
    REQUIRE_MESSAGE(prof.ok(), (prof ? "" : prof.error().message));
    auto plan = spec_plan_for(rom, prof.value());
    REQUIRE_MESSAGE(plan.ok(), (plan ? "" : plan.error().message));
    cfg.specialize = plan.value();
  }
  auto made = make_backend(r.backend, rom, cfg);
  REQUIRE_MESSAGE(made.ok(), (made ? "" : made.error().message));
  Backend& b = *made.value();
  Trace t;
  std::vector<int32_t> actions((size_t)r.envs);
  for (int frame = 0; frame < r.frames; frame += r.frames_per_step) {
    const bool held = frame % kStepFrames < kHold;
    for (int i = 0; i < r.envs; ++i) actions[(size_t)i] = held ? buttons(i, frame) : 0;
    REQUIRE(b.step(actions).ok());
    if (const auto* cpu = dynamic_cast<const CpuBackend*>(&b))
      t.parts = std::max(t.parts, cpu->last_step_parts());
    if ((frame + r.frames_per_step) % kStepFrames) continue;
    REQUIRE(b.sync().ok());
    t.states.emplace_back();
    t.screens.emplace_back();
    for (int i = 0; i < r.envs; ++i) {
      auto st = b.save_state(i);
      auto sc = b.read_screen(i);
      REQUIRE_MESSAGE(st.ok(), (st ? "" : st.error().message));
      REQUIRE_MESSAGE(sc.ok(), (sc ? "" : sc.error().message));
      t.states.back().push_back(std::move(st.value()));
      t.screens.back().push_back(std::move(sc.value()));
    }
  }
  return t;
}

// The envs both traces hold agree at every boundary; the first difference is reported.
// The names of the save-state records (state fields, "mem") that differ, or "screen".
std::string differing_records(const Rom& rom, const std::vector<uint8_t>& a,
                              const std::vector<uint8_t>& b) {
  auto ra = read_save_state(a, rom, MemoryModel::Dmg, SaveStateKind::Kernel);
  auto rb = read_save_state(b, rom, MemoryModel::Dmg, SaveStateKind::Kernel);
  if (!ra.ok() || !rb.ok()) return "a state that does not parse";
  std::string out;
  for (size_t k = 0; k < ra->records.size() && k < rb->records.size(); ++k)
    if (ra->records[k].bytes != rb->records[k].bytes) out += ra->records[k].name + " ";
  return out.empty() ? "screen" : out;
}

void check_same(const Rom& rom, const Trace& want, const Trace& got, const std::string& what) {
  INFO(what);
  REQUIRE(want.states.size() == got.states.size());
  for (size_t s = 0; s < want.states.size(); ++s) {
    const size_t envs = std::min(want.states[s].size(), got.states[s].size());
    for (size_t i = 0; i < envs; ++i) {
      if (want.states[s][i] == got.states[s][i] && want.screens[s][i] == got.screens[s][i])
        continue;
      FAIL_CHECK("env ", i, " differs at frame ", (s + 1) * kStepFrames, ": ",
                 differing_records(rom, want.states[s][i], got.states[s][i]));
      return;
    }
  }
}

// Every game in ../shared/games (GBX_TEST_GAMES_DIR overrides) and game_loop.gb; none after
// skipping the calling case, saying why, when the games are absent.
std::vector<fs::path> game_roms() {
  std::vector<fs::path> roms;
  const char* env = std::getenv("GBX_TEST_GAMES_DIR");
  const fs::path dir =
      env && *env ? fs::path(env)
                  : fs::path(GBX_TEST_SOURCE_DIR).parent_path().parent_path() / "shared" / "games";
  if (!fs::is_directory(dir)) {
    test::skip_case(dir.string() + " is absent");
    return roms;
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".gb") roms.push_back(e.path());
  std::sort(roms.begin(), roms.end());
  const fs::path game_loop = fs::path(GBX_TEST_ROM_DIR) / "game_loop.gb";
  if (fs::exists(game_loop)) roms.push_back(game_loop);
  return roms;
}

Rom load(const fs::path& path) {
  auto rom = load_rom(path.string());
  REQUIRE_MESSAGE(rom.ok(), (rom ? "" : rom.error().message));
  return std::move(rom.value());
}

}  // namespace

TEST_CASE("cpu: whole steps, parts and single frames on 1, 2 and 3 threads are one trajectory") {
  const auto roms = game_roms();
  if (roms.empty()) return;
  for (const fs::path& path : roms) {
    CAPTURE(path.filename().string());
    const Rom rom = load(path);
    // The reference: one thread, whole steps.
    const Trace want = run(rom, {"cpu", 1, 51, kStepFrames});
    CHECK(want.parts == 1);
    for (const Run& r : std::vector<Run>{{"cpu", 2, 3, kStepFrames},
                                         {"cpu", 3, 3, kStepFrames},
                                         {"cpu", 2, 34, kStepFrames},
                                         {"cpu", 3, 51, kStepFrames},
                                         {"cpu", 1, 3, 1},
                                         {"cpu", 3, 3, 1},
                                         {"cpu", 1, 51, kStepFrames, true}}) {
      const Trace got = run(rom, r);
      // 3+ frames a step and at most 16 envs a thread: parts; else whole steps.
      CHECK(got.parts ==
            (r.frames_per_step >= 3 && r.envs <= 16 * r.threads && r.threads > 1 ? 3 : 1));
      check_same(rom, want, got, path.filename().string() + ": " + r.label());
    }
  }
}

TEST_CASE("cuda: the same trajectory on the device as on the cpu") {
  auto drv = CudaDriver::get();
  if (!drv.ok()) {
    if (std::getenv("GBX_TEST_CUDA_DOUBLE_DIR"))
      FAIL("the CUDA double did not load: ", drv.error().message);
    GBX_SKIP(drv.error().message);
  }
  const auto roms = game_roms();
  if (roms.empty()) return;
  for (const fs::path& path : roms) {
    CAPTURE(path.filename().string());
    const Rom rom = load(path);
    const Trace want = run(rom, {"cpu", 1, 2, kStepFrames});
    check_same(rom, want, run(rom, {"cuda", 0, 2, kStepFrames}),
               path.filename().string() + ": cuda");
    check_same(rom, want, run(rom, {"cuda", 0, 2, 1}),
               path.filename().string() + ": cuda, 1 frame");
    // dispatch=uniform on the device (where the meter prices it), on two games as the double
    // runs every env on one thread: tobutobugirl's banked code with CB tests and game_loop's
    // timer interrupts. The cpu case below takes every game.
    const std::string name = path.filename().string();
    if (name == "tobutobugirl.gb" || name == "game_loop.gb") {
      Run uniform{"cuda", 0, 2, kStepFrames};
      uniform.uniform = true;
      check_same(rom, want, run(rom, uniform), name + ": " + uniform.label());
    }
    // Warp-level scheduling (warp_majority) in the double's warp mode: a warp of 8 envs on
    // their own buttons, lanes waiting their turn, the cpu's trajectory. 240 frames, as warp
    // mode meets the lanes at every loop iteration: 2048's input-driven code, game_loop's
    // timer interrupts; a short bound (4) so lanes are also served by having waited.
    if (name == "2048.gb" || name == "game_loop.gb") {
      Run warp{"cuda", 0, 8, kStepFrames};
      warp.frames = 240;
      warp.warp_majority = 4;
      Run ref{"cpu", 1, 8, kStepFrames};
      ref.frames = warp.frames;
      check_same(rom, run(rom, ref), run(rom, warp), name + ": " + warp.label());
    }
  }
}

// The uniform dispatch is the switch's trajectory on the cpu, every game: random buttons,
// 2,400 frames, whole states and screens (the cuda case above runs it on the double).
TEST_CASE("dispatch=uniform: the switch's trajectory on the cpu") {
  for (const fs::path& path : game_roms()) {
    CAPTURE(path.filename().string());
    const Rom rom = load(path);
    Run uniform{"cpu", 1, 2, kStepFrames};
    uniform.uniform = true;
    check_same(rom, run(rom, {"cpu", 1, 2, kStepFrames}), run(rom, uniform),
               path.filename().string() + ": " + uniform.label());
  }
}

namespace {

std::vector<uint8_t> rom_of(const Asm& a, const char* title) {
  RomSpec spec;
  spec.title = title;
  REQUIRE(a.place(spec).ok());
  return build_rom(spec);
}

// `bytes` written to `path`, loaded.
Rom written(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
  return load(path);
}

// Writes FF46 in VBlank and executes HALT right after, from HRAM, with only the joypad
// interrupt enabled (IME 0 throughout): the CPU sleeps through the DMA's start and wakes at the
// next button press, moving the 40 objects of its shadow OAM each time. The PPU draws them from OAM
// meanwhile, so the bytes must land when the DMA starts, not when the CPU next touches the bus.
std::vector<uint8_t> dma_halt_rom() {
  Asm a;
  a.op("LD SP,d16", 0xFFFE);
  a.op("LD HL,d16", "hram_code").op("LD DE,d16", 0xFF80).op("LD B,d8", 6);
  a.label("copy").op("LD A,(HL+)").op("LD (DE),A").op("INC DE").op("DEC B").op("JR NZ,r8", "copy");
  // 40 objects along a diagonal, 3 pixels apart, tile 0, palette OBP0.
  a.op("LD HL,d16", 0xC000).op("LD B,d8", 40).op("LD C,d8", 16);
  a.label("objs").op("LD A,C").op("LD (HL+),A").op("LD (HL+),A").op("XOR A").op("LD (HL+),A");
  a.op("LD (HL+),A").op("LD A,C").op("ADD A,d8", 3).op("LD C,A").op("DEC B").op("JR NZ,r8", "objs");
  // To VBlank's start (IME is 0 throughout: HALT ends without a dispatch), LCD off, tile 0
  // solid, the background white (BGP 00) and the objects black (OBP0 FF), LCD back on.
  a.op("LD A,d8", 0x01).op("LDH (a8),A", io::kIE).op("XOR A").op("LDH (a8),A", io::kIF);
  a.op("HALT").op("NOP").op("XOR A").op("LDH (a8),A", io::kLCDC);
  a.op("LD HL,d16", 0x8000).op("LD B,d8", 16).op("LD A,d8", 0xFF);
  a.label("tile").op("LD (HL+),A").op("DEC B").op("JR NZ,r8", "tile");
  a.op("XOR A").op("LDH (a8),A", 0x47).op("LD A,d8", 0xFF).op("LDH (a8),A", 0x48);
  a.op("LD A,d8", 0x93).op("LDH (a8),A", io::kLCDC);  // LCD, background and objects on
  a.op("XOR A").op("LDH (a8),A", 0x00);               // both button rows selected
  a.label("main");
  // Every object one pixel right and down.
  a.op("LD HL,d16", 0xC000).op("LD B,d8", 80);
  a.label("move").op("INC (HL)").op("INC HL").op("DEC B").op("JR NZ,r8", "move");
  // Sleep to VBlank's start (IME is 0: HALT ends without a dispatch), so that the frame
  // drawn next is all old or all new objects; then the joypad alone wakes the CPU.
  a.op("LD A,d8", 0x01).op("LDH (a8),A", io::kIE).op("XOR A").op("LDH (a8),A", io::kIF);
  a.op("HALT").op("NOP");
  a.op("LD A,d8", 0x10).op("LDH (a8),A", io::kIE).op("XOR A").op("LDH (a8),A", io::kIF);
  a.op("CALL a16", 0xFF80).op("JR r8", "main");
  // At FF80: LD A,C0; LDH (46),A; HALT; RET.
  a.label("hram_code").db({0x3E, 0xC0, 0xE0, 0x46, 0x76, 0xC9});
  return rom_of(a, "DMAHALT");
}

}  // namespace

TEST_CASE("OAM DMA then HALT: whole steps, parts and mGBA draw the same objects") {
  test::TempDir d;
  const fs::path rom_path = d.path / "dma_halt.gb";
  const Rom rom = written(rom_path, dma_halt_rom());
  // Whole steps (1 thread) and parts (2 threads), 16 envs, 24 frames a step.
  Trace whole, parts;
  {
    const Run w{"cpu", 1, 16, kStepFrames}, p{"cpu", 2, 16, kStepFrames};
    whole = run(rom, w);
    parts = run(rom, p);
    CHECK(parts.parts == 3);
    check_same(rom, whole, parts, "dma_halt: whole vs parts");
  }
  // mGBA's screens after every step, buttons as verify gives them.
  VerifyOptions o;
  o.ref = "mgba";
  o.dut = "cpu";
  o.rom = rom_path.string();
  o.steps = 100;
  o.options["frames_per_step"] = int64_t{kStepFrames};
  o.screen = true;
  o.actions = ActionSchedule(ActionGen::SeededRandom);
  o.seed = 7;
  o.options["stage"] = std::string("emulate_only");
  o.out_dir = d.path / "verify";
  auto rep = run_verify(o);
  REQUIRE_MESSAGE(rep.ok(), (rep ? "" : rep.error().message));
  CHECK_MESSAGE(rep->match, rep->verdict());
}

namespace {

// The wait loops the interpreter passes over between events (kernel/step.tmpl
// wait_loop_skip), one of each shape, each waiting for a flag an interrupt handler sets: the
// VBlank handler sets four, the timer's (every 4096 T-cycles, so its requests land at every
// phase of the loops and return into their tests and jumps) the fifth; then six polls of STAT
// and LY, with SCX moved each round and an LYC interrupt landing in them. After each wait the main
// loop records DIV, LY and TIMA in a ring in WRAM, so one T-cycle off shows in memory.
// (mGBA parts from GBX on this ROM with or without the skip, at step 1: the timer's phase
// after the boot ROM, which is [Q]'s ground, not the loops'.)
std::vector<uint8_t> wait_loops_rom() {
  Asm a;
  a.op("LD SP,d16", 0xFFFE).op("LD DE,d16", 0xC100);
  a.op("XOR A").op("LDH (a8),A", io::kTMA).op("LDH (a8),A", io::kIF);
  a.op("LD A,d8", 0x05).op("LDH (a8),A", io::kTAC);  // timer on, 16 T a tick
  a.op("LD A,d8", 0x30).op("LDH (a8),A", 0x45);      // LYC 48
  a.op("LD A,d8", 0x40).op("LDH (a8),A", 0x41);      // its STAT interrupt
  a.op("LD A,d8", 0x07).op("LDH (a8),A", io::kIE);   // VBlank, STAT and timer
  a.op("EI");
  a.label("main");
  // LD A,(a16) / CP d8 / JR NZ
  a.op("XOR A").op("LD (a16),A", 0xC0AA);
  a.label("w1").op("LD A,(a16)", 0xC0AA).op("CP d8", 1).op("JR NZ,r8", "w1");
  a.op("CALL a16", "record");
  // LDH A,(a8) / AND A / JR Z
  a.op("XOR A").op("LDH (a8),A", 0x90);
  a.label("w2").op("LDH A,(a8)", 0x90).op("AND A").op("JR Z,r8", "w2");
  a.op("CALL a16", "record");
  // LD A,(HL) / OR A / JR Z
  a.op("LD HL,d16", 0xC0AB).op("XOR A").op("LD (HL),A");
  a.label("w3").op("LD A,(HL)").op("OR A").op("JR Z,r8", "w3");
  a.op("CALL a16", "record");
  // LD A,(a16) / AND d8 / JR Z, on the timer's flag
  a.op("XOR A").op("LD (a16),A", 0xC0AC);
  a.label("w4").op("LD A,(a16)", 0xC0AC).op("AND d8", 0x80).op("JR Z,r8", "w4");
  a.op("CALL a16", "record");
  // LDH A,(a8) / BIT 0,A / JR Z
  a.op("XOR A").op("LDH (a8),A", 0x91);
  a.label("w5").op("LDH A,(a8)", 0x91).op("BIT 0,A").op("JR Z,r8", "w5");
  a.op("CALL a16", "record");
  // Polls of the PPU (computed, not run: wait_loop_skip's STAT/LY kind), the fine scroll moved
  // each round so the end of mode 3 moves, and the LYC interrupt's handler landing in them.
  a.op("LDH A,(a8)", io::kDIV).op("AND d8", 7).op("LDH (a8),A", 0x43);
  // LDH A,(a8) / CP d8 / JR C: LY >= 144
  a.label("w6").op("LDH A,(a8)", 0x44).op("CP d8", 0x90).op("JR C,r8", "w6");
  a.op("CALL a16", "record");
  // LD A,(a16) / CP d8 / JR NZ: LY = 16
  a.label("w7").op("LD A,(a16)", 0xFF44).op("CP d8", 0x10).op("JR NZ,r8", "w7");
  a.op("CALL a16", "record");
  // LDH A,(a8) / AND d8 / JR NZ: mode 0 (HBlank)
  a.label("w8").op("LDH A,(a8)", 0x41).op("AND d8", 0x03).op("JR NZ,r8", "w8");
  a.op("CALL a16", "record");
  // LDH A,(C) / BIT 1,A / JR Z: mode 2 or 3
  a.op("LD C,d8", 0x41);
  a.label("w9").op("LDH A,(C)").op("BIT 1,A").op("JR Z,r8", "w9");
  a.op("CALL a16", "record");
  // LD A,(HL) / AND A / JR NZ: LY = 0
  a.op("LD HL,d16", 0xFF44);
  a.label("w10").op("LD A,(HL)").op("AND A").op("JR NZ,r8", "w10");
  a.op("CALL a16", "record");
  // LDH A,(a8) / AND d8 / JR Z: STAT's LY=LYC flag
  a.label("w11").op("LDH A,(a8)", 0x41).op("AND d8", 0x04).op("JR Z,r8", "w11");
  a.op("CALL a16", "record");
  a.op("JP a16", "main");
  a.label("record");
  a.op("LDH A,(a8)", io::kDIV).op("LD (DE),A").op("INC E");
  a.op("LDH A,(a8)", 0x44).op("LD (DE),A").op("INC E");
  a.op("LDH A,(a8)", io::kTIMA).op("LD (DE),A").op("INC E").op("RET");
  a.label("vblank").op("PUSH AF").op("LD A,d8", 1).op("LD (a16),A", 0xC0AA);
  a.op("LDH (a8),A", 0x90).op("LD (a16),A", 0xC0AB).op("LDH (a8),A", 0x91);
  a.op("POP AF").op("RETI");
  a.label("timer").op("PUSH AF").op("LD A,d8", 0x80).op("LD (a16),A", 0xC0AC);
  a.op("POP AF").op("RETI");
  a.label("lyc").op("PUSH AF").op("LDH A,(a8)", 0x92).op("INC A").op("LDH (a8),A", 0x92);
  a.op("POP AF").op("RETI");
  a.org(0x0040).op("JP a16", "vblank");
  a.org(0x0048).op("JP a16", "lyc");
  a.org(0x0050).op("JP a16", "timer");
  return rom_of(a, "WAITLOOP");
}

}  // namespace

TEST_CASE("wait loops: whole steps, parts, single frames, the double and every iteration agree") {
  test::TempDir d;
  const Rom rom = written(d.path / "wait_loops.gb", wait_loops_rom());
  const Trace want = run(rom, {"cpu", 1, 4, kStepFrames});
  check_same(rom, want, run(rom, {"cpu", 2, 4, kStepFrames}), "wait_loops: parts");
  check_same(rom, want, run(rom, {"cpu", 1, 4, 1}), "wait_loops: 1 frame");
  if (CudaDriver::get().ok())
    check_same(rom, want, run(rom, {"cuda", 0, 4, kStepFrames}), "wait_loops: cuda");
  // The interpreter running every iteration: the same states, DIV/LY/TIMA records included.
  check_same(rom, want, run(rom, {"cpu", 1, 4, kStepFrames, true}),
             "wait_loops: iteration by iteration");
  // Blocks that are whole loops, passed over after the block ran.
  check_same(rom, want, run(rom, {"cpu", 1, 4, kStepFrames, false, true}),
             "wait_loops: specialized");
  if (CudaDriver::get().ok())
    check_same(rom, want, run(rom, {"cuda", 0, 4, kStepFrames, false, true}),
               "wait_loops: cuda specialized");
  // The records show the loops ran: every wait ended on its interrupt's flag.
  auto st = read_save_state(want.states.back()[0], rom, MemoryModel::Dmg, SaveStateKind::Kernel);
  REQUIRE(st.ok());
  const auto mem = std::find_if(st->records.begin(), st->records.end(),
                                [](const SaveStateRecord& r) { return r.name == "mem"; });
  REQUIRE(mem != st->records.end());
  int written = 0;
  for (uint32_t i = 0; i < 0x100; ++i) written += mem->bytes[GBX_MEM_WRAM + 0x100 + i] != 0;
  CHECK(written > 200);  // the ring of DIV/LY/TIMA records went round
}
