#include "gbx/runtime/reference/mgba_backend.h"

#if !GBX_WITH_MGBA
namespace gbx {
bool mgba_built_in() { return false; }

Result<std::unique_ptr<Backend>> make_mgba_backend(const Rom&, const BackendConfig&) {
  return make_error(ErrorKind::Usage,
                    "the mgba device is not built in: install the Debian package libmgba-dev "
                    "and rebuild (pip install . again)");
}
}  // namespace gbx
#else

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>

#include "gbx/engine/cache.h"
#include "gbx/runtime/backends/worker_pool.h"
#include "gbx/runtime/states/env_state.h"
#include "gbx/runtime/states/save_state.h"
#include "mgba_env.h"

namespace gbx {

constexpr size_t kMgbaCoreBytes = 190u * 1024u;

using mgba_detail::deadline_reached;
using mgba_detail::frame_ended;
using mgba_detail::install_logger;
using mgba_detail::kObsDim;
using mgba_detail::kUnitsPerCycle;
using mgba_detail::kVideoStride;
using mgba_detail::MgbaEnv;
using mgba_detail::tap_deinit;
using mgba_detail::tap_init;
using mgba_detail::tap_write_sb;
using mgba_detail::tap_write_sc;

// One env's state as read from an mgba blob, checked against the core it will go into.
struct MgbaSnapshot {
  int64_t units = 0, frame_units = 0, frames = 0, instr = 0, lag = 0;
  int32_t action = 0;
  uint8_t trap_kind = GBX_TRAP_NONE, trap_opcode = 0, last_kind = 0;
  uint16_t trap_pc = 0;
  std::vector<uint8_t> serial, sram, core;
  // The serial transfer in progress, which mGBA 0.10's serializer leaves out.
  int32_t sio_bits = 0, sio_period = 0, sio_next = 0, sio_until = 0;
  uint8_t sio_pending_sb = 0, sio_scheduled = 0;
};

struct MgbaBackend::Impl {
  BackendConfig cfg;
  std::vector<uint8_t> rom;  // shared by every core: mGBA maps a const-memory VFile in place
  Rom rom_id;                // name and SHA-256 only: what save states are checked against
  // Validated blobs reset() loads: none = mGBA's skip-BIOS reset, one = shared, or one per env.
  std::vector<MgbaSnapshot> reset_states;
  std::vector<std::unique_ptr<MgbaEnv>> envs;
  std::unique_ptr<WorkerPool> pool;
  std::vector<float> obs;
  std::vector<float> reward;

  Status check_env(int env) const {
    if (env < 0 || env >= static_cast<int>(envs.size()))
      return make_error(ErrorKind::Usage, "env " + std::to_string(env) + " is out of range (" +
                                              std::to_string(envs.size()) + " envs)");
    return ok_status();
  }

  std::vector<uint8_t> battery;  // cartridge RAM put into every env at each reset
  bool has_battery = false;

  Status apply_battery(MgbaEnv& e) {
    if (!has_battery) return ok_status();
    if (!e.core->savedataRestore(e.core, battery.data(), battery.size(), true))
      return make_error(ErrorKind::Runtime, "mGBA refused the cartridge RAM");
    return ok_status();
  }

  Status reset_env(MgbaEnv& e) {
    e.core->reset(e.core);
    std::fill(e.screen.begin(), e.screen.end(), 0);  // as the kernels' framebuffer at reset
    e.screen_blank = false;
    if (e.gb->model != GB_MODEL_DMG)
      return make_error(
          ErrorKind::Runtime,
          "mGBA reset into model " + std::string(GBModelToName(e.gb->model)) + " instead of DMG");
    if (e.gb->sio.driver != &e.tap.driver) GBSIOSetDriver(&e.gb->sio, &e.tap.driver);
    // mGBA hides Up+Down and Left+Right pressed together from P1 unless told otherwise (a
    // frontend's choice); a DMG's joypad matrix reports both, as the kernels do, and random
    // actions press both often.
    e.gb->allowOpposingDirections = true;
    e.flush_events();
    e.set_keys(0);
    e.clear_counters();
    return apply_battery(e);
  }

  Result<std::vector<uint8_t>> save_env(MgbaEnv& e) const {
    // core->saveState would tick a CPU that is between M-cycles up to the next fetch, and
    // ticking a halted SM83 may never return (see run_unit).
    if (e.cpu->executionState != SM83_CORE_FETCH)
      return make_error(ErrorKind::Runtime,
                        "mgba cannot save this env now: its CPU is halted between M-cycles "
                        "(mGBA serializes only at an instruction boundary); step it first");
    std::vector<uint8_t> core(e.core->stateSize(e.core));
    if (!e.core->saveState(e.core, core.data()))
      return make_error(ErrorKind::Runtime, "mGBA could not serialize the core");
    const auto* serial = reinterpret_cast<const uint8_t*>(e.serial.data());
    std::vector<SaveStateRecord> r = {
        scalar_record("units", e.units),
        scalar_record("frame_units", e.frame_units),
        scalar_record("frames", e.frames),
        scalar_record("instr", e.instr),
        // Time mGBA has run past the last accounting point (a halted CPU's jump to its event).
        scalar_record("unaccounted", e.mgba_time() - e.mgba_mark),
        scalar_record("action", e.action),
        scalar_record("trap_kind", e.trap_kind),
        scalar_record("trap_pc", e.trap_pc),
        scalar_record("trap_opcode", e.trap_opcode),
        scalar_record("last_kind", static_cast<uint8_t>(e.last_kind)),
        {"serial", std::vector<uint8_t>(serial, serial + e.serial.size())},
        // Cartridge RAM is not part of mGBA's serialized core (mGBA keeps it as save data).
        {"sram", e.gb->sramSize
                     ? std::vector<uint8_t>(e.gb->memory.sram, e.gb->memory.sram + e.gb->sramSize)
                     : std::vector<uint8_t>{}},
        {"mgba_core", std::move(core)},
        // mGBA 0.10 does not serialize the link port: a state saved mid-transfer would load
        // with SC bit 7 set and no transfer running, and a program waiting on it would hang.
        scalar_record("sio_bits", e.gb->sio.remainingBits),
        scalar_record("sio_pending_sb", e.gb->sio.pendingSB),
        scalar_record("sio_period", e.gb->sio.period),
        scalar_record("sio_next", e.gb->sio.nextEvent),
        scalar_record("sio_scheduled",
                      static_cast<uint8_t>(mTimingIsScheduled(&e.gb->timing, &e.gb->sio.event))),
        scalar_record("sio_until", mTimingUntil(&e.gb->timing, &e.gb->sio.event)),
    };
    return write_save_state(rom_id, MemoryModel::Dmg, SaveStateKind::Mgba, r);
  }

  // Every record present with the size this build's cores need; nothing is applied yet.
  Result<MgbaSnapshot> parse_snapshot(const std::vector<uint8_t>& blob) const {
    auto parsed = read_save_state(blob, rom_id, MemoryModel::Dmg, SaveStateKind::Mgba);
    if (!parsed) return parsed.take_error();
    const SaveStateBlob& b = *parsed;
    MgbaSnapshot s;
    Error err;
    bool ok = true;
    auto get = [&](auto& out, const char* name) {
      if (!ok) return;
      auto v = scalar_from<std::decay_t<decltype(out)>>(b, name);
      if (v)
        out = *v;
      else
        ok = false, err = v.take_error();
    };
    get(s.units, "units");
    get(s.frame_units, "frame_units");
    get(s.frames, "frames");
    get(s.instr, "instr");
    get(s.lag, "unaccounted");
    get(s.action, "action");
    get(s.trap_kind, "trap_kind");
    get(s.trap_pc, "trap_pc");
    get(s.trap_opcode, "trap_opcode");
    get(s.last_kind, "last_kind");
    get(s.sio_bits, "sio_bits");
    get(s.sio_pending_sb, "sio_pending_sb");
    get(s.sio_period, "sio_period");
    get(s.sio_next, "sio_next");
    get(s.sio_scheduled, "sio_scheduled");
    get(s.sio_until, "sio_until");
    if (!ok) return err;
    const MgbaEnv& e = *envs.front();
    auto bytes = [&](std::vector<uint8_t>& out, const char* name, size_t max,
                     bool exact) -> Status {
      const SaveStateRecord* r = find_record(b, name);
      if (!r)
        return make_error(ErrorKind::Input, std::string("save state has no '") + name + "' record");
      if (exact ? r->bytes.size() != max : r->bytes.size() > max)
        return make_error(ErrorKind::Input,
                          std::string("save state record '") + name + "' is " +
                              std::to_string(r->bytes.size()) + " bytes, this core " +
                              (exact ? "needs " : "takes at most ") + std::to_string(max));
      out = r->bytes;
      return ok_status();
    };
    if (Status st = bytes(s.serial, "serial", GBX_SERIAL_CAPACITY, false); !st)
      return st.take_error();
    if (Status st = bytes(s.sram, "sram", e.gb->sramSize, true); !st) return st.take_error();
    if (Status st = bytes(s.core, "mgba_core", e.core->stateSize(e.core), true); !st)
      return st.take_error();
    return s;
  }

  Status load_env(MgbaEnv& e, const MgbaSnapshot& s) {
    // GBDeserialize checks the state before it changes anything, so a refusal leaves the env.
    if (!e.core->loadState(e.core, s.core.data()))
      return make_error(ErrorKind::Input, "mGBA refused the core state inside the save state");
    if (!s.sram.empty()) std::memcpy(e.gb->memory.sram, s.sram.data(), s.sram.size());
    if (e.gb->sio.driver != &e.tap.driver) GBSIOSetDriver(&e.gb->sio, &e.tap.driver);
    struct GBSIO& sio = e.gb->sio;
    sio.remainingBits = s.sio_bits;
    sio.pendingSB = s.sio_pending_sb;
    sio.period = s.sio_period;
    sio.nextEvent = s.sio_next;
    if (s.sio_scheduled) {
      // GBDeserialize leaves its event list in timing.reroot; put it back the same way.
      mTimingSchedule(&e.gb->timing, &sio.event, s.sio_until);
      e.gb->timing.reroot = e.gb->timing.root;
      e.gb->timing.root = nullptr;
    }
    e.set_keys(s.action);
    e.units = s.units;
    e.frame_units = s.frame_units;
    e.frames = s.frames;
    e.instr = s.instr;
    e.mgba_mark = e.mgba_time() - s.lag;
    e.serial.assign(s.serial.begin(), s.serial.end());
    e.trap_kind = s.trap_kind;
    e.trap_pc = s.trap_pc;
    e.trap_opcode = s.trap_opcode;
    e.last_kind = static_cast<MgbaStepKind>(s.last_kind);
    return ok_status();
  }

  void clear_outputs(int i) {
    std::fill_n(obs.begin() + static_cast<ptrdiff_t>(i) * kObsDim, kObsDim, 0.0f);
    reward[i] = 0.0f;
  }

  Result<std::unique_ptr<MgbaEnv>> make_env() {
    auto e = std::make_unique<MgbaEnv>();
    e->core = GBCoreCreate();
    if (!e->core) return make_error(ErrorKind::Runtime, "mGBA could not create a GB core");
    if (!e->core->init(e->core)) {
      std::free(e->core);  // init failed before anything else was allocated
      e->core = nullptr;
      return make_error(ErrorKind::Runtime, "mGBA could not initialize a GB core");
    }
    // No port name: nothing is read from the user's mGBA config, so no BIOS file is found
    // and reset takes mGBA's skip-BIOS path. mGBA picks a model per cartridge kind from its
    // configuration (gb/core.c, _GBCoreReset: "gb.model" for a plain cartridge, "sgb.model"
    // for an SGB flag at 0x146, "cgb.model" for CGB-only, "cgb.hybridModel" for 0x143 = 0x80,
    // "cgb.sgbModel" for both flags); a DMG runs every one of them as a DMG game, and so do
    // GBX's kernels. CGB-only cartridges never get here (rom.cpp refuses them).
    mCoreInitConfig(e->core, nullptr);
    for (const char* key :
         {"gb.model", "sgb.model", "cgb.model", "cgb.hybridModel", "cgb.sgbModel"})
      mCoreConfigSetValue(&e->core->config, key, "DMG");
    e->gb = static_cast<struct GB*>(e->core->board);
    e->cpu = static_cast<struct SM83Core*>(e->core->cpu);
    // GBIsROM wants the logo bytes, so mCoreLoadFile would refuse our micro-ROMs;
    // loadROM itself does not check them.
    struct VFile* vf = VFileFromConstMemory(rom.data(), rom.size());
    if (!vf || !e->core->loadROM(e->core, vf)) {
      if (vf) vf->close(vf);
      return make_error(ErrorKind::Input, "mGBA refused the ROM image");
    }
    e->tap.driver.init = tap_init;
    e->tap.driver.deinit = tap_deinit;
    e->tap.driver.writeSB = tap_write_sb;
    e->tap.driver.writeSC = tap_write_sc;
    e->tap.env = e.get();
    if (cfg.render) {
      // Before the reset: mGBA attaches its software renderer only to a core with a buffer.
      e->video.assign(kVideoStride * 224, 0);
      e->screen.assign((size_t)GBX_SCREEN_W * GBX_SCREEN_H, 0);
      e->core->setVideoBuffer(e->core, e->video.data(), kVideoStride);
      e->frame_callbacks.context = e.get();
      e->frame_callbacks.videoFrameEnded = frame_ended;
      e->core->addCoreCallbacks(e->core, &e->frame_callbacks);
    }
    e->deadline.context = e->gb;
    e->deadline.callback = deadline_reached;
    e->deadline.name = "GBX frame deadline";
    e->deadline.priority = 0xFF;  // after mGBA's own events due at the same time
    if (Status st = reset_env(*e); !st) return st.take_error();
    return e;
  }

  void run_epilog(int i) {
    MgbaEnv& e = *envs[i];
    const SM83Core* c = e.cpu;
    uint8_t m[16];
    for (int k = 0; k < 16; ++k) m[k] = e.peek(static_cast<uint16_t>(0xC000 + k));
    auto u8 = [](int v) { return static_cast<float>(v & 0xFF) / 255.0f; };
    if (stage_writes_obs(cfg.stage)) {
      float* o = &obs[static_cast<size_t>(i) * kObsDim];
      o[0] = static_cast<float>(c->pc) / 65535.0f;
      o[1] = static_cast<float>(c->sp) / 65535.0f;
      const uint8_t regs[8] = {c->a, c->f.packed, c->b, c->c, c->d, c->e, c->h, c->l};
      for (int k = 0; k < 8; ++k) o[2 + k] = u8(regs[k]);
      for (int k = 0; k < 16; ++k) o[10 + k] = u8(m[k]);
      o[26] = u8(m[0] ^ m[1]);
      o[27] = u8(m[2] + 5 * m[3]);
      o[28] = u8(m[4] ^ c->a);
      o[29] = u8(m[5] + c->b);
      o[30] = u8(m[6] ^ c->c);
      o[31] = u8(m[7] + c->d);
    }
    if (stage_writes_reward(cfg.stage)) reward[i] = u8(c->a ^ ((m[0] + 3 * m[1]) & 0xFF));
  }
};

MgbaBackend::MgbaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MgbaBackend::~MgbaBackend() = default;

Result<std::unique_ptr<MgbaBackend>> MgbaBackend::create(const Rom& rom, const BackendConfig& cfg) {
  if (cfg.num_envs < 1)
    return make_error(ErrorKind::Usage,
                      "mgba backend needs at least 1 env, got " + std::to_string(cfg.num_envs));
  if (cfg.frames_per_step < 1)
    return make_error(ErrorKind::Usage, "mgba backend needs frames_per_step >= 1, got " +
                                            std::to_string(cfg.frames_per_step));
  if (cfg.threads < 0)
    return make_error(ErrorKind::Usage, "thread count must be >= 0 (0 = all cores), got " +
                                            std::to_string(cfg.threads));
  if (std::strncmp(projectVersion, "0.10.", 5) != 0)
    return make_error(ErrorKind::Runtime, std::string("mgba backend is written against libmgba "
                                                      "0.10.x, found ") +
                                              projectVersion);
  if (rom.bytes.size() < 0x150)
    return make_error(ErrorKind::Input,
                      "ROM '" + rom.name + "' is too small for a cartridge header");
  // One mGBA core per env costs ~185 KiB (measured with libmgba 0.10.1): refuse counts that
  // cannot fit before creating any, rather than grinding through millions of cores.
  if (auto st =
          check_env_count(cfg.num_envs, MemoryModel::Dmg, rom.header.ram_size, kMgbaCoreBytes);
      !st)
    return st.take_error();
  install_logger(cfg.verbose);

  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->rom = rom.bytes;
  impl->rom_id.name = rom.name;
  impl->rom_id.sha256 =
      rom.sha256.size() == 64
          ? rom.sha256
          : sha256_hex(std::string_view(reinterpret_cast<const char*>(rom.bytes.data()),
                                        rom.bytes.size()));
  impl->envs.reserve(static_cast<size_t>(cfg.num_envs));
  for (int i = 0; i < cfg.num_envs; ++i) {
    auto env = impl->make_env();
    if (!env) return env.take_error();
    impl->envs.push_back(std::move(env.value()));
  }
  int threads = cfg.threads > 0
                    ? cfg.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, cfg.num_envs);
  impl->pool = std::make_unique<WorkerPool>(threads);
  impl->obs.assign(static_cast<size_t>(cfg.num_envs) * kObsDim, 0.0f);
  impl->reward.assign(static_cast<size_t>(cfg.num_envs), 0.0f);
  return std::unique_ptr<MgbaBackend>(new MgbaBackend(std::move(impl)));
}

int MgbaBackend::num_envs() const { return static_cast<int>(impl_->envs.size()); }

Status MgbaBackend::reset(uint64_t seed) {
  (void)seed;  // reserved for randomized starts; mGBA's reset is deterministic
  return reset(std::vector<uint8_t>(impl_->envs.size(), 1));
}

Status MgbaBackend::reset(const std::vector<uint8_t>& mask) {
  const int n = num_envs();
  if (static_cast<int>(mask.size()) != n)
    return make_error(ErrorKind::Usage, "reset mask has " + std::to_string(mask.size()) +
                                            " entries for " + std::to_string(n) + " envs");
  const auto& states = impl_->reset_states;
  for (int i = 0; i < n; ++i) {
    if (!mask[i]) continue;
    MgbaEnv& e = *impl_->envs[i];
    Status st = states.empty() ? impl_->reset_env(e)
                               : impl_->load_env(e, states[states.size() == 1 ? 0 : i]);
    if (!st) return st;
    impl_->clear_outputs(i);
  }
  return ok_status();
}

Status MgbaBackend::set_reset_state(const std::vector<std::vector<uint8_t>>& blobs) {
  const int n = num_envs();
  if (!blobs.empty() && blobs.size() != 1 && static_cast<int>(blobs.size()) != n)
    return make_error(ErrorKind::Usage, "set_reset_state takes 0, 1 or " + std::to_string(n) +
                                            " blobs, got " + std::to_string(blobs.size()));
  std::vector<MgbaSnapshot> states;
  for (size_t i = 0; i < blobs.size(); ++i) {
    auto s = impl_->parse_snapshot(blobs[i]);
    if (!s) {
      if (blobs.size() == 1) return s.take_error();
      return make_error(ErrorKind::Input,
                        "reset state " + std::to_string(i) + ": " + s.error().message);
    }
    states.push_back(std::move(*s));
  }
  impl_->reset_states = std::move(states);
  return ok_status();
}

Result<std::vector<uint8_t>> MgbaBackend::save_state(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->save_env(*impl_->envs[env]);
}

Status MgbaBackend::load_state(int env, const std::vector<uint8_t>& blob) {
  if (Status st = impl_->check_env(env); !st) return st;
  auto s = impl_->parse_snapshot(blob);
  if (!s) return s.take_error();
  if (Status st = impl_->load_env(*impl_->envs[env], *s); !st) return st;
  impl_->clear_outputs(env);
  return ok_status();
}

Status MgbaBackend::step(const std::vector<int32_t>& actions) {
  const int n = num_envs();
  if (!actions.empty() && static_cast<int>(actions.size()) != n)
    return make_error(ErrorKind::Usage, "step got " + std::to_string(actions.size()) +
                                            " actions for " + std::to_string(n) + " envs");
  return run_frames(actions, nullptr);
}

Status MgbaBackend::step_frames(const std::vector<int32_t>& actions,
                                const std::vector<int32_t>& frames) {
  if (Status st = check_step_frames(num_envs(), actions, frames); !st) return st;
  return run_frames(actions, &frames);
}

Status MgbaBackend::run_frames(const std::vector<int32_t>& actions,
                               const std::vector<int32_t>* env_frames) {
  const int n = num_envs();
  const bool epilog = impl_->cfg.stage != Stage::EmulateOnly;
  auto step_env = [&](int i) {
    const int frames = env_frames ? (*env_frames)[i] : impl_->cfg.frames_per_step;
    if (frames < 0) return;  // step_frames: this env is not touched
    MgbaEnv& e = *impl_->envs[i];
    const int32_t action = actions.empty() ? 0 : actions[i];
    const int release = impl_->cfg.release_after_frames;
    e.set_keys(release == 0 ? 0 : action);
    for (int f = 0; f < frames; ++f) {
      if (f > 0 && f == release) e.set_keys(0);  // release_after_frames, as the kernel does
      e.run_frame();
    }
    if (epilog) impl_->run_epilog(i);
  };
  // Chunks of one env: cores differ in cost (halted ones are cheap).
  impl_->pool->run(
      n,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) step_env((int)i);
      },
      1);
  return ok_status();
}

Result<CpuState> MgbaBackend::get_cpu_state(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  const MgbaEnv& e = *impl_->envs[env];
  const SM83Core* c = e.cpu;
  CpuState s;
  s.pc = c->pc;
  s.sp = c->sp;
  s.a = c->a;
  s.f = c->f.packed;
  s.b = c->b;
  s.c = c->c;
  s.d = c->d;
  s.e = c->e;
  s.h = c->h;
  s.l = c->l;
  s.ime = e.gb->memory.ime ? 1 : 0;
  // mGBA has no stopped state on DMG: STOP runs as a 2-byte no-op there.
  s.run_state = c->halted ? GBX_RUN_HALTED : GBX_RUN_ACTIVE;
  s.cycle_count = e.units / kUnitsPerCycle;
  s.instr_count = e.instr;
  s.trap_kind = e.trap_kind;
  s.trap_pc = e.trap_pc;
  s.trap_opcode = e.trap_opcode;
  return s;
}

Result<std::vector<uint8_t>> MgbaBackend::read_screen(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  if (!impl_->cfg.render)
    return make_error(ErrorKind::Usage,
                      "the mgba backend draws only when created with render (BackendConfig)");
  return impl_->envs[env]->screen;
}

Result<std::vector<uint8_t>> MgbaBackend::read_memory(int env, uint32_t lo, uint32_t hi) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  if (lo > hi || hi > 0x10000)
    return make_error(ErrorKind::Usage, "memory range [" + std::to_string(lo) + ", " +
                                            std::to_string(hi) + ") is not inside the 64 KiB bus");
  MgbaEnv& e = *impl_->envs[env];
  std::vector<uint8_t> out;
  out.reserve(hi - lo);
  for (uint32_t a = lo; a < hi; ++a) out.push_back(e.peek(static_cast<uint16_t>(a)));
  return out;
}

Status MgbaBackend::load_battery(const BatterySave& save) {
  if (save.has_rtc)
    return make_error(ErrorKind::Usage,
                      "the mgba backend cannot load an MBC3 clock (mGBA's follows the host "
                      "clock); use --backend cpu");
  impl_->battery = save.ram;
  impl_->has_battery = true;
  for (auto& e : impl_->envs)
    if (Status st = impl_->apply_battery(*e); !st) return st;
  return ok_status();
}

Result<BatterySave> MgbaBackend::read_battery(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  MgbaEnv& e = *impl_->envs[env];
  void* data = nullptr;
  const size_t n = e.core->savedataClone(e.core, &data);
  BatterySave save;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  save.ram.assign(p, p + std::min(n, impl_->battery.size()));
  std::free(data);
  if (save.ram.size() != impl_->battery.size())
    return make_error(ErrorKind::Runtime, "mGBA returned " + std::to_string(n) +
                                              " bytes of cartridge RAM, expected " +
                                              std::to_string(impl_->battery.size()));
  return save;
}

Result<std::vector<float>> MgbaBackend::read_obs(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  const auto first = impl_->obs.begin() + static_cast<ptrdiff_t>(env) * kObsDim;
  return std::vector<float>(first, first + kObsDim);
}

Result<float> MgbaBackend::read_reward(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->reward[env];
}

Result<std::string> MgbaBackend::serial_output(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->serial;
}

Status MgbaBackend::step_instruction(int env) {
  if (Status st = impl_->check_env(env); !st) return st;
  impl_->envs[env]->step_instruction();
  return ok_status();
}

Result<MgbaStepKind> MgbaBackend::last_step_kind(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->last_kind;
}

Status MgbaBackend::set_action(int env, int32_t action) {
  if (Status st = impl_->check_env(env); !st) return st;
  impl_->envs[env]->set_keys(action);
  return ok_status();
}

Result<int64_t> MgbaBackend::cycles(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->units / kUnitsPerCycle;
}

Result<int> MgbaBackend::cycle_in_frame(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return static_cast<int>(impl_->envs[env]->frame_units / kUnitsPerCycle);
}

Result<int64_t> MgbaBackend::frames(int env) {
  if (Status st = impl_->check_env(env); !st) return st.take_error();
  return impl_->envs[env]->frames;
}

bool mgba_built_in() { return true; }

Result<std::unique_ptr<Backend>> make_mgba_backend(const Rom& rom, const BackendConfig& cfg) {
  auto b = MgbaBackend::create(rom, cfg);
  if (!b) return b.take_error();
  return std::unique_ptr<Backend>(std::move(b.value()));
}

}  // namespace gbx

#endif  // GBX_WITH_MGBA
