// gbx-run run: run a ROM on a backend and print the final state.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "commands.h"
#include "gbx/engine/cache.h"
#include "gbx/runtime/actions/action_policy.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/outputs/mem_region.h"
#include "gbx/runtime/outputs/screen_image.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx/runtime/states/battery_file.h"
#include "gbx/runtime/states/save_state.h"
#include "tool_common.h"
#include "tool_options.h"

namespace {

using namespace gbx;

struct RunOptions {
  // The declared options (gbx/runtime/backends/options.h): --envs, --backend, --stage, --ppu, ...
  OptionValues opts;
  int64_t num(const char* name) const { return option_int(opts, name); }
  const std::string& text(const char* name) const { return option_text(opts, name); }

  std::string rom = "builtin:ALU_LOOP";
  long long frames = 60;
  int action = 0;
  int env = 0;
  bool print_state = false;
  bool serial = false;
  bool verbose = false;
  std::string sav;              // battery RAM file: loaded into every env, env K's written at exit
  std::string read_mem;         // LO:HI, memory view
  std::string read_mem_raw;     // LO:HI, cartridge RAM as held even when disabled
  std::string screenshot;       // PNG of env `env`'s last frame
  std::string screenshot_grid;  // PNG tiling the first grid_envs envs' last frames
  int grid_envs = 0;            // 0: min(envs, 64)
  std::string load_state;       // every env starts from this save state
  std::string actions;          // "" = --action; else random | none | FILE (action_policy.h)
  unsigned long long action_seed = 1;
  std::string save_state;  // env `env`'s state at the end goes here
};

Status write_screenshots(Backend& be, const RunOptions& o) {
  if (!o.screenshot.empty()) {
    auto screen = be.read_screen(o.env);
    if (!screen) return screen.take_error();
    if (auto st = write_png(o.screenshot, screen_image(screen.value())); !st) return st;
    std::printf("screenshot: env %d -> %s\n", o.env, o.screenshot.c_str());
  }
  if (!o.screenshot_grid.empty()) {
    const int n =
        o.grid_envs > 0 ? std::min(o.grid_envs, be.num_envs()) : std::min(be.num_envs(), 64);
    std::vector<std::vector<uint8_t>> screens;
    for (int i = 0; i < n; ++i) {
      auto screen = be.read_screen(i);
      if (!screen) return screen.take_error();
      screens.push_back(std::move(screen.value()));
    }
    int columns = 1;
    while (columns * columns < n) ++columns;
    if (auto st = write_png(o.screenshot_grid, screen_grid(screens, columns)); !st) return st;
    std::printf("screenshot grid: envs 0..%d -> %s\n", n - 1, o.screenshot_grid.c_str());
  }
  return ok_status();
}

// Serial text as one line: C escapes for quotes, backslashes and non-printable bytes.
std::string escape(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch == '\n')
      out += "\\n";
    else if (ch == '"' || ch == '\\')
      out += std::string("\\") + (char)ch;
    else if (ch >= 0x20 && ch < 0x7F)
      out += (char)ch;
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", ch);
      out += buf;
    }
  }
  return out;
}

void print_state(int env, const CpuState& s) {
  std::printf(
      "env %d: PC=%04X SP=%04X A=%02X F=%02X B=%02X C=%02X D=%02X E=%02X H=%02X L=%02X "
      "IME=%d flags=%c%c%c%c cycles=%lld instrs=%lld%s\n",
      env, s.pc, s.sp, s.a, s.f, s.b, s.c, s.d, s.e, s.h, s.l, s.ime, (s.f & 0x80) ? 'Z' : '-',
      (s.f & 0x40) ? 'N' : '-', (s.f & 0x20) ? 'H' : '-', (s.f & 0x10) ? 'C' : '-',
      (long long)s.cycle_count, (long long)s.instr_count,
      s.trap_kind ? " TRAPPED"
                  : (s.run_state == 1   ? " HALTED"
                     : s.run_state == 2 ? " STOPPED"
                                        : ""));
  if (s.trap_kind)
    std::printf("env %d: trapped: illegal opcode %02X at %04X\n", env, s.trap_opcode, s.trap_pc);
}

// Hex lines of 16 bytes, each headed by its address; the first and last may be partial.
void print_memory(const MemRegion& r, const std::vector<uint8_t>& bytes, const char* what) {
  std::printf("env memory %s (%s):\n", r.label().c_str(), what);
  for (uint32_t a = r.lo; a < r.hi;) {
    const uint32_t end = std::min(r.hi, (a & ~0xFu) + 16);
    std::printf("%04X:", a);
    for (uint32_t i = a; i < end; ++i) std::printf(" %02X", bytes[i - r.lo]);
    std::printf("\n");
    a = end;
  }
}

// Everything between the options and a runnable kernel, in ms: the plan (reading the profile
// and choosing the hot set; --specialize profile:FILE only) and the backend's kernel load
// (templates, source generation, key, cache lookup, and a compile on a miss, JIT link).
void print_kernel_load(const CpuBackend& cpu, double plan_ms, double plan_cpu_ms) {
  const KernelBuild& b = cpu.kernel_build();
  const std::string compile =
      b.cached ? "" : "compile " + std::to_string((int)(b.compile_ms + 0.5)) + ", ";
  std::printf(
      "kernel load: %.1f ms (%s; CPU %.1f ms): plan %.1f, templates %.1f, generate %.1f, key "
      "%.1f, cache lookup %.1f, %sJIT link %.1f\n",
      plan_ms + cpu.kernel_load_ms(), b.cached ? "cached" : "compiled",
      plan_cpu_ms + cpu.kernel_load_cpu_ms(), plan_ms, cpu.template_load_ms(), b.generate_ms,
      b.key_ms, b.lookup_ms, compile.c_str(), b.jit_ms);
}

// Tiered start on cuda: which kernel ran the steps, and when the optimized one took over.
void print_start_tier(const CudaBackend& cuda) {
  if (!cuda.started_fast()) {
    std::printf("kernel start: optimized kernel %s in %.0f ms\n",
                cuda.kernel().build.build.cached ? "from the cache" : "compiled",
                cuda.first_kernel_ms());
    return;
  }
  std::printf("kernel start: quick compile (--Ofast-compile=max) in %.0f ms; ",
              cuda.first_kernel_ms());
  if (cuda.optimized_step() >= 0)
    std::printf("optimized kernel swapped in after step %lld of %lld (%.1f s after start)\n",
                (long long)cuda.optimized_step(), (long long)cuda.steps(),
                cuda.optimized_after_s());
  else
    std::printf(
        "%s: every step ran the quick kernel; the optimized compile finishes before "
        "exit and is cached for the next run\n",
        cuda.start_tier().c_str());
}

// --specialize auto: which steps ran on the specialized kernel (a run never waits for it).
void print_specialize(const Backend& be, const std::string& option, long long first_step,
                      long long steps) {
  const std::string status = be.specialize_status();
  std::printf("specialize %s: ", option.c_str());
  if (first_step > 0 && first_step <= steps)
    std::printf("specialized kernel from step %lld of %lld\n", first_step, steps);
  else if (status == "profiling")
    std::printf(
        "still profiling when the run ended (%lld steps): no step ran on the "
        "specialized kernel\n",
        steps);
  else if (status == "specialized")
    std::printf("specialized kernel ready after the last step: no step ran on it\n");
  else if (status == "compiling")
    std::printf(
        "compiling when the run ended: no step ran on the specialized kernel (the "
        "compile finishes before exit and is cached for the next run)\n");
  else
    std::printf("%s; the run stayed on the interpreter\n", status.c_str());
}

// Kernel cache warnings (a refused cache directory, a rejected or corrupt entry) come from
// builds inside the backend, so they are taken from the engine's queue (gbx/engine/cache.h):
// once the backend exists, and at the end for a background compile's (tier-up).
struct PrintCacheWarningsAtExit {
  ~PrintCacheWarningsAtExit() { tool::print_warnings(take_cache_warnings()); }
};

int cmd_run(const RunOptions& o) {
  const PrintCacheWarningsAtExit cache_warnings_at_exit;
  const long long envs = o.num("num_envs");
  const int frames_per_step = (int)o.num("frames_per_step");
  const std::string& specialize = o.text("specialize");
  if (envs < 1 || envs > 0x7fffffff)
    return tool::fail(make_error(ErrorKind::Usage, "--envs must be between 1 and 2147483647"));
  if (o.frames < 1) return tool::fail(make_error(ErrorKind::Usage, "--frames must be at least 1"));
  if (frames_per_step < 1)
    return tool::fail(make_error(ErrorKind::Usage, "--frames-per-step must be at least 1"));
  if (auto st = tool::check_whole_steps(o.frames, frames_per_step); !st)
    return tool::fail(st.error());
  std::optional<MemRegion> view, raw;
  if (!o.read_mem.empty()) {
    auto r = parse_mem_region(o.read_mem, "--read-mem");
    if (!r) return tool::fail(r.error());
    view = r.value();
  }
  if (!o.read_mem_raw.empty()) {
    auto r = parse_mem_region(o.read_mem_raw, "--read-mem-raw");
    if (!r) return tool::fail(r.error());
    raw = r.value();
  }
  if (o.grid_envs < 0) return tool::fail(make_error(ErrorKind::Usage, "--grid-envs must be >= 0"));
  auto rom = load_rom(o.rom);
  if (!rom) return tool::fail(rom.error());
  tool::print_warnings(rom->warnings);
  BatterySave save;
  if (!o.sav.empty()) {
    bool exists = false;
    auto s = read_sav_file(o.sav, rom->header, &exists);
    if (!s) return tool::fail(s.error());
    save = std::move(s).value();
  }
  std::vector<uint8_t> start_state;
  if (!o.load_state.empty()) {
    auto bytes = read_save_state_file(o.load_state);
    if (!bytes) return tool::fail(bytes.error());
    start_state = std::move(bytes.value());
  }
  if (!o.save_state.empty()) {
    // Refuse before running, not after: the frames may take long.
    const auto dir = std::filesystem::absolute(o.save_state).parent_path();
    if (!std::filesystem::is_directory(dir))
      return tool::fail(make_error(
          ErrorKind::Usage, "--save-state: directory '" + dir.string() + "' does not exist"));
  }
  BackendConfig cfg;
  // A screenshot asks for a kernel that renders, whatever the stage.
  cfg.render = !o.screenshot.empty() || !o.screenshot_grid.empty();
  cfg.verbose = o.verbose;
  // The declared options into cfg; --specialize (applied last) plans the ROM-specialized
  // kernel, whose time is the plan's.
  const auto plan_t0 = std::chrono::steady_clock::now();
  timespec plan_c0{}, plan_c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &plan_c0);
  if (auto st = apply_options(o.opts, kRun, rom.value(), cfg); !st) return tool::fail(st.error());
  const double plan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - plan_t0).count();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &plan_c1);
  const double plan_cpu_ms = (double)(plan_c1.tv_sec - plan_c0.tv_sec) * 1e3 +
                             (double)(plan_c1.tv_nsec - plan_c0.tv_nsec) * 1e-6;
  auto backend = make_backend(o.text("backend"), rom.value(), cfg);
  tool::print_warnings(take_cache_warnings());
  if (!backend) return tool::fail(backend.error());
  Backend& be = *backend.value();
  if (o.env < 0 || o.env >= be.num_envs())
    return tool::fail(
        make_error(ErrorKind::Usage, "--env " + std::to_string(o.env) + " out of range"));
  if (!o.load_state.empty()) {
    if (auto st = be.set_reset_state({start_state}); !st) return tool::fail(st.error());
    if (auto st = be.reset(std::vector<uint8_t>((size_t)be.num_envs(), 1)); !st)
      return tool::fail(st.error());
  }
  // After --load-state: the battery file is what the cartridge RAM holds at reset.
  if (!o.sav.empty())
    if (auto st = be.load_battery(save); !st) return tool::fail(st.error());
  const long long steps = o.frames / frames_per_step;  // whole steps: checked above
  const auto t0 = std::chrono::steady_clock::now();
  if (o.action < 0 || o.action > 0xFF)
    return tool::fail(make_error(ErrorKind::Usage, "--action must be a button mask 0..255"));
  std::vector<int32_t> actions(o.action ? (size_t)be.num_envs() : 0, o.action);
  std::optional<ActionPolicy> policy;
  if (!o.actions.empty()) {
    auto parsed = ActionPolicy::parse(o.actions, o.action_seed);
    if (!parsed) return tool::fail(parsed.error());
    policy = std::move(parsed.value());
  }
  const bool tiering = cfg.specialize_auto_frames > 0;
  // Instructions retired before the loop, for the specialized kernel's share at the end.
  long long instr_before = 0;
  if (specialize != "off")
    for (int i = 0; i < be.num_envs(); ++i)
      if (auto s = be.get_cpu_state(i)) instr_before += (long long)s.value().instr_count;
  long long specialized_from = 0;  // auto: the first step (1-based) on the specialized kernel
  for (long long i = 0; i < steps; ++i) {
    if (policy) policy->fill(i, be.num_envs(), actions);
    if (auto st = be.step(actions); !st) return tool::fail(st.error());
    if (tiering && specialized_from == 0 && be.specialize_status() == "specialized")
      specialized_from = i + 2;  // swapped in after this step
  }
  if (auto st = be.sync(); !st) return tool::fail(st.error());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double frames = (double)steps * frames_per_step * (double)envs;
  std::printf("rom %s (%s, %zu bytes)  backend %s  envs %lld  frames %lld  stage %s\n",
              rom->name.c_str(), rom->sha256.substr(0, 12).c_str(), rom->bytes.size(),
              be.name().c_str(), envs, steps * frames_per_step, o.text("stage").c_str());
  std::printf("ran %.0f env-frames in %.3f s: %.0f frames/s\n", frames, secs, frames / secs);
  if (!be.kernel_key().empty()) std::printf("kernel %s\n", be.kernel_key().c_str());
  if (const auto* cpu = dynamic_cast<const CpuBackend*>(&be))
    print_kernel_load(*cpu, plan_ms, plan_cpu_ms);
  if (const auto* cuda = dynamic_cast<const CudaBackend*>(&be)) print_start_tier(*cuda);
  if (tiering) print_specialize(be, specialize, specialized_from, steps);
  if (specialize != "off") {
    // The specialized blocks' share of the instructions this run retired (all envs).
    long long instr = -instr_before, spec = 0;
    for (int i = 0; i < be.num_envs(); ++i)
      if (auto s = be.get_cpu_state(i)) instr += (long long)s.value().instr_count;
    if (auto counts = be.specialized_instr_counts())
      for (const int64_t n : counts.value()) spec += n;
    std::printf("specialized blocks retired %lld of %lld instructions (%.1f%%)\n", spec, instr,
                instr > 0 ? 100.0 * (double)spec / (double)instr : 0.0);
    if (tiering && be.specialize_retiers() > 0)
      std::printf(
          "re-profiled %d time(s): a profile window left the interpreter more of its "
          "instructions than the blocks had\n",
          be.specialize_retiers());
  }
  if (o.print_state || !o.serial) {
    auto s = be.get_cpu_state(o.env);
    if (!s) return tool::fail(s.error());
    print_state(o.env, s.value());
  }
  if (view) {
    auto bytes = be.read_memory(o.env, view->lo, view->hi);
    if (!bytes) return tool::fail(bytes.error());
    print_memory(*view, bytes.value(), "memory view");
  }
  if (raw) {
    auto bytes = be.read_memory_raw(o.env, raw->lo, raw->hi);
    if (!bytes) return tool::fail(bytes.error());
    print_memory(*raw, bytes.value(), "raw: cartridge RAM as held");
  }
  if (!o.sav.empty()) {
    auto b = be.read_battery(o.env);
    if (!b) return tool::fail(b.error());
    if (auto st = write_sav_file(o.sav, b.value(), rom->header); !st) return tool::fail(st.error());
    std::printf("saved env %d's battery RAM to %s\n", o.env, o.sav.c_str());
  }
  if (auto st = write_screenshots(be, o); !st) return tool::fail(st.error());
  if (!o.save_state.empty()) {
    auto blob = be.save_state(o.env);
    if (!blob) return tool::fail(blob.error());
    if (auto st = write_save_state_file(o.save_state, blob.value()); !st)
      return tool::fail(st.error());
    std::printf("saved env %d to %s (%zu bytes)\n", o.env, o.save_state.c_str(), blob->size());
  }
  if (o.serial) {
    for (int i = 0; i < be.num_envs(); ++i) {
      auto text = be.serial_output(i);
      if (!text) return tool::fail(text.error());
      std::printf("serial[%d]: \"%s\"\n", i, escape(text.value()).c_str());
    }
  }
  return 0;
}

}  // namespace

namespace gbx::tool {

void register_run(CLI::App& app, Commands& cmds) {
  static RunOptions run;
  auto* r = app.add_subcommand("run", "run a ROM for some frames and print the final state");
  r->add_option("--rom", run.rom, "ROM path or builtin:NAME")->capture_default_str();
  add_declared(r, kRun, "backend", run.opts);
  add_declared(r, kRun, "stage", run.opts);
  add_declared(r, kRun, "num_envs", run.opts);
  r->add_option("--frames", run.frames,
                "frames to run each env (a multiple of --frames-per-step: whole steps)")
      ->capture_default_str();
  add_declared(r, kRun, "frames_per_step", run.opts);
  r->add_option("--action", run.action,
                "buttons every env holds each step (bit 0 A, 1 B, 2 Select, 3 Start, 4 Right, "
                "5 Left, 6 Up, 7 Down)")
      ->capture_default_str();
  r->add_option("--actions", run.actions,
                "per-step actions instead of --action: random (a seeded byte per env per step) "
                "| none | FILE (raw bytes, one per env per step, step-major: with one env, byte "
                "N is step N's action; an input schedule)");
  r->add_option("--seed", run.action_seed, "seed of --actions random")->capture_default_str();
  add_declared(r, kRun, "release_after_frames", run.opts);
  add_declared(r, kRun, "threads", run.opts);
  add_declared(r, kRun, "device_index", run.opts);
  add_declared(r, kRun, "block_size", run.opts);
  r->add_option("--env", run.env, "env whose state is printed (and saved by --save-state)")
      ->capture_default_str();
  r->add_flag("--print-state", run.print_state, "print env registers");
  r->add_flag("--serial", run.serial, "print each env's serial output");
  r->add_flag("--verbose", run.verbose, "backend logs");
  add_declared(r, kRun, "rtc_lock", run.opts);
  add_declared(r, kRun, "ppu", run.opts);
  add_declared(r, kRun, "dispatch", run.opts);
  add_declared(r, kRun, "warp_majority", run.opts);
  add_declared(r, kRun, "max_registers", run.opts);
  add_declared(r, kRun, "layout", run.opts);
  r->add_option("--sav", run.sav,
                "battery RAM file: loaded into every env at reset (a missing file starts "
                "blank), env --env's RAM (and MBC3 clock) written there at exit");
  r->add_option(
      "--read-mem", run.read_mem,
      "print env --env's bytes LO:HI (hex, HI exclusive): the memory view (VRAM, OAM as held)");
  r->add_option("--read-mem-raw", run.read_mem_raw,
                "like --read-mem, but cartridge RAM as held even while disabled");
  add_declared(r, kRun, "obs_kind", run.opts);
  add_declared(r, kRun, "obs_format", run.opts);
  r->add_option("--screenshot", run.screenshot, "write env --env's last frame to this PNG");
  r->add_option("--screenshot-grid", run.screenshot_grid,
                "write the first --grid-envs envs' last frames, tiled, to this PNG");
  r->add_option("--grid-envs", run.grid_envs, "envs in --screenshot-grid (0: min(envs, 64))")
      ->capture_default_str();
  r->add_option("--load-state", run.load_state, "save state every env starts from");
  r->add_option("--save-state", run.save_state, "write env --env's state here at the end");
  add_declared(r, kRun, "specialize", run.opts);
  add_declared(r, kRun, "tiered_start", run.opts);
  cmds.emplace_back(r, [] { return cmd_run(run); });
}

}  // namespace gbx::tool
