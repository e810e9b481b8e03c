// cuda backend against the cpu backend on a real device: registers, counters, memory slices,
// serial, obs and reward identical after many steps of many envs, for every built-in ROM.
// Device-only: without a device every case skips ("[skipped] <case>: no CUDA device: <reason>")
// and the executable reports a skip, so nothing that could run without a device belongs here
// (see test_cuda_compile for that part).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/runtime/asm.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/cuda_backend.h"
#include "gbx/runtime/rom_builder.h"
#include "gbx/runtime/save_state.h"
#include "skip.h"
#include "test_util.h"

using namespace gbx;

namespace {

bool have_device() {
  auto drv = CudaDriver::get();
  if (drv.ok()) {
    static bool said = false;
    if (!said) {
      said = true;
      auto ctx = CudaContext::open(0);
      if (ctx.ok()) MESSAGE("running on ", (*ctx)->name(), " (", (*ctx)->arch(), ")");
    }
    return true;
  }
  // test_cuda_backend_on_double: the double must load; a skip there would hide a failure.
  if (std::getenv("GBX_TEST_CUDA_DOUBLE_DIR"))
    FAIL("the CUDA double did not load: ", drv.error().message);
  test::skip_case(drv.error().message);
  return false;
}

std::unique_ptr<Backend> make(const std::string& name, const Rom& rom, const BackendConfig& cfg) {
  auto b = make_backend(name, rom, cfg);
  REQUIRE_MESSAGE(b.ok(), name, ": ", (b.ok() ? "" : b.error().message + "\n" + b.error().detail));
  return std::move(b.value());
}

// Deterministic joypad input, different per env and step, the same for both backends.
std::vector<int32_t> actions_for(int step, int envs) {
  std::vector<int32_t> a(envs);
  uint32_t x = 0x9E3779B9u * (uint32_t)(step + 1);
  for (int i = 0; i < envs; ++i) {
    x = x * 1664525u + 1013904223u;
    a[i] = (int32_t)((x >> 24) & (i % 3 == 0 ? 0x00 : 0xFF));  // a third of the envs idle
  }
  return a;
}

void check_same_state(Backend& ref, Backend& dut, int env) {
  CAPTURE(env);
  auto r = ref.get_cpu_state(env);
  auto d = dut.get_cpu_state(env);
  REQUIRE(r.ok());
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  CHECK(d->pc == r->pc);
  CHECK(d->sp == r->sp);
  CHECK(d->a == r->a);
  CHECK(d->f == r->f);
  CHECK(d->b == r->b);
  CHECK(d->c == r->c);
  CHECK(d->d == r->d);
  CHECK(d->e == r->e);
  CHECK(d->h == r->h);
  CHECK(d->l == r->l);
  CHECK(d->ime == r->ime);
  CHECK(d->run_state == r->run_state);
  CHECK(d->cycle_count == r->cycle_count);
  CHECK(d->instr_count == r->instr_count);
  CHECK(d->trap_kind == r->trap_kind);
  CHECK(d->trap_pc == r->trap_pc);
  CHECK(d->trap_opcode == r->trap_opcode);
  CHECK(dut.serial_output(env).value() == ref.serial_output(env).value());
  CHECK(dut.read_obs(env).value() == ref.read_obs(env).value());
  CHECK(dut.read_reward(env).value() == ref.read_reward(env).value());
}

// Whole bus views and the slices verify asks for (echo RAM, I/O with lazily computed DIV, LY,
// STAT, cartridge RAM, ROM windows).
void check_same_memory(Backend& ref, Backend& dut, int env) {
  CAPTURE(env);
  const std::pair<uint32_t, uint32_t> ranges[] = {
      {0x0000, 0x10000}, {0xC000, 0xC010}, {0xE000, 0xE010}, {0xDFF0, 0xE010}, {0xFF00, 0x10000},
      {0xFF04, 0xFF05},  {0xFF41, 0xFF42}, {0xFF44, 0xFF45}, {0xFE00, 0xFEA0}, {0x8000, 0x8010},
      {0xA000, 0xA100},  {0x0100, 0x0150}, {0x4000, 0x4010}, {0xFFFF, 0x10000}};
  for (const auto& [lo, hi] : ranges) {
    CAPTURE(lo);
    CAPTURE(hi);
    auto r = ref.read_memory(env, lo, hi);
    auto d = dut.read_memory(env, lo, hi);
    REQUIRE(r.ok());
    REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
    CHECK(d->size() == hi - lo);
    CHECK(*d == *r);
  }
  CHECK(dut.read_memory(env, 0xE000, 0xE010).value() ==
        dut.read_memory(env, 0xC000, 0xC010).value());
}

// The bulk host reads (one copy each on cuda): every output byte of every env, and every
// env's registers, equal to cpu's.
void check_same_bulk(Backend& ref, Backend& dut) {
  auto r = ref.outputs();
  auto d = dut.outputs();
  REQUIRE(r.ok());
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  REQUIRE(d->bytes == r->bytes);
  REQUIRE(d->sections.size() == r->sections.size());
  for (const OutputSection& sec : d->sections) {  // the padding between sections is no output
    CAPTURE(sec.name);
    const OutputSection* rs = r->find(sec.name);
    REQUIRE(rs);
    REQUIRE(rs->offset == sec.offset);
    const size_t n = sec.bytes_per_env * (size_t)dut.num_envs();
    CHECK(std::vector<uint8_t>(d->data + sec.offset, d->data + sec.offset + n) ==
          std::vector<uint8_t>(r->data + sec.offset, r->data + sec.offset + n));
  }
  auto rs = ref.cpu_states();
  auto ds = dut.cpu_states();
  REQUIRE(rs.ok());
  REQUIRE_MESSAGE(ds.ok(), (ds.ok() ? "" : ds.error().message));
  REQUIRE(ds->size() == (size_t)dut.num_envs());
  // (check_same_state compared every env's per-env read with cpu's already.)
  for (int env = 0; env < dut.num_envs(); ++env) {
    CAPTURE(env);
    const CpuState& a = (*ds)[env];
    const CpuState& b = (*rs)[env];
    for (const CpuState* x : {&b}) {
      CHECK(a.pc == x->pc);
      CHECK(a.sp == x->sp);
      CHECK((a.a == x->a && a.f == x->f && a.b == x->b && a.c == x->c && a.d == x->d &&
             a.e == x->e && a.h == x->h && a.l == x->l));
      CHECK((a.ime == x->ime && a.run_state == x->run_state));
      CHECK(a.cycle_count == x->cycle_count);
      CHECK(a.instr_count == x->instr_count);
      CHECK((a.trap_kind == x->trap_kind && a.trap_pc == x->trap_pc &&
             a.trap_opcode == x->trap_opcode));
    }
  }
}

}  // namespace

TEST_CASE("cuda matches cpu after 30+ frames of 256 envs on every built-in ROM") {
  if (!have_device()) return;
  // The driver double runs the kernel one thread after another (~3 min for 256 envs in CI):
  // there 64 envs, still two full blocks of the 32 that the launch shape picks for 256 envs
  // on its 132 SMs, so the same launch, indexing and copies are checked; a GPU runs 256.
  const int envs = std::getenv("GBX_TEST_CUDA_DOUBLE_DIR") ? 64 : 256;
  int roms = 0;
  for (const BuiltinRom& br : builtin_roms()) {
    CAPTURE(br.name);
    auto rom = load_rom("builtin:" + br.name);
    REQUIRE(rom.ok());
    BackendConfig cfg;
    cfg.num_envs = envs;
    cfg.stage = Stage::FullStep;
    auto cpu = make("cpu", *rom, cfg);
    auto cuda = make("cuda", *rom, cfg);
    const int steps = std::max(30, br.frames_to_finish + 4);
    for (int s = 0; s < steps; ++s) {
      const auto actions = actions_for(s, envs);
      REQUIRE(cpu->step(actions).ok());
      REQUIRE(cuda->step(actions).ok());  // asynchronous: no sync between steps
    }
    REQUIRE(cuda->sync().ok());
    for (int env = 0; env < envs; ++env) check_same_state(*cpu, *cuda, env);
    for (int env : {0, 1, 2, envs / 2, envs - 1}) check_same_memory(*cpu, *cuda, env);
    check_same_bulk(*cpu, *cuda);
    if (!br.expected_serial.empty())
      CHECK(cuda->serial_output(envs - 1).value() == br.expected_serial);
    ++roms;
  }
  CHECK(roms >= 8);
}

TEST_CASE("layout interleaved on cuda matches env_major on cpu on every built-in ROM") {
  if (!have_device()) return;
  const int envs = 40;  // not a multiple of the 32-env pitch
  int roms = 0;
  for (const BuiltinRom& br : builtin_roms()) {
    CAPTURE(br.name);
    auto rom = load_rom("builtin:" + br.name);
    REQUIRE(rom.ok());
    BackendConfig cfg;
    cfg.num_envs = envs;
    cfg.stage = Stage::FullStep;
    cfg.render = true;  // framebuffers are in the compared blobs
    auto cpu = make("cpu", *rom, cfg);
    cfg.layout = MemLayout::Interleaved;
    auto cuda = make("cuda", *rom, cfg);
    const int steps = std::max(12, br.frames_to_finish + 4);
    for (int s = 0; s < steps; ++s) {
      const auto actions = actions_for(s, envs);
      REQUIRE(cpu->step(actions).ok());
      REQUIRE(cuda->step(actions).ok());
    }
    REQUIRE(cuda->sync().ok());
    for (int env = 0; env < envs; ++env) {
      CAPTURE(env);
      check_same_state(*cpu, *cuda, env);
      CHECK(cuda->save_state(env).value() == cpu->save_state(env).value());
    }
    for (int env : {0, 1, 31, 32, envs - 1}) check_same_memory(*cpu, *cuda, env);
    // Loads and masked resets scatter into the interleaved rows without touching neighbours.
    const auto blob = cpu->save_state(3).value();
    REQUIRE(cuda->load_state(33, blob).ok());
    REQUIRE(cpu->load_state(33, blob).ok());
    std::vector<uint8_t> mask(envs, 0);
    mask[1] = mask[32] = 1;
    REQUIRE(cuda->reset(mask).ok());
    REQUIRE(cpu->reset(mask).ok());
    for (int env : {0, 1, 2, 32, 33, 34}) {
      CAPTURE(env);
      CHECK(cuda->save_state(env).value() == cpu->save_state(env).value());
    }
    ++roms;
  }
  CHECK(roms == (int)builtin_roms().size());
}

TEST_CASE("stages write only their own outputs on the device") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  // On the driver double every stage costs an NVRTC and a host compile: two stages cover
  // both outcomes there (CI time); a GPU runs them all.
  const std::vector<Stage> stages = std::getenv("GBX_TEST_CUDA_DOUBLE_DIR")
                                        ? std::vector<Stage>{Stage::EmulateOnly, Stage::FullStep}
                                        : all_stages();
  for (Stage st : stages) {
    CAPTURE(to_string(st));
    BackendConfig cfg;
    cfg.num_envs = 64;
    cfg.stage = st;
    cfg.frames_per_step = 2;
    auto cpu = make("cpu", *rom, cfg);
    auto cuda = make("cuda", *rom, cfg);
    for (int s = 0; s < 3; ++s) {
      REQUIRE(cpu->step({}).ok());
      REQUIRE(cuda->step({}).ok());
    }
    for (int env : {0, 63}) {
      check_same_state(*cpu, *cuda, env);
      const auto obs = cuda->read_obs(env).value();
      REQUIRE(obs.size() == 32);
      bool any_obs = false;
      for (float v : obs) any_obs |= v != 0.0f;
      CHECK(any_obs == stage_writes_obs(st));  // obs[0] = PC/65535 is never 0 here
    }
  }
}

TEST_CASE("reset returns every env to the post-boot state") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:MEM_RWB");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 33;  // not a multiple of the block size
  auto cpu = make("cpu", *rom, cfg);
  auto cuda = make("cuda", *rom, cfg);
  for (int s = 0; s < 5; ++s) REQUIRE(cuda->step({}).ok());
  REQUIRE(cuda->reset(0).ok());
  for (int env : {0, 32}) {
    check_same_state(*cpu, *cuda, env);
    check_same_memory(*cpu, *cuda, env);
    CHECK(cuda->get_cpu_state(env)->pc == 0x0100);
  }
  REQUIRE(cpu->step({}).ok());
  REQUIRE(cuda->step({}).ok());
  check_same_state(*cpu, *cuda, 32);
}

TEST_CASE("the per-instruction configuration (flat64k, instruction budget) matches cpu") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 16;
  cfg.memory_model = MemoryModel::Flat64k;
  cfg.run_mode = RunMode::Instructions;
  cfg.instructions_per_step = 1000;
  cfg.stage = Stage::EmulateOnly;
  auto cpu = make("cpu", *rom, cfg);
  auto cuda = make("cuda", *rom, cfg);
  for (int s = 0; s < 3; ++s) {
    REQUIRE(cpu->step({}).ok());
    REQUIRE(cuda->step({}).ok());
  }
  check_same_state(*cpu, *cuda, 0);
  check_same_state(*cpu, *cuda, 15);
  CHECK(cuda->get_cpu_state(15)->instr_count == 3000);
  CHECK(cuda->read_memory(15, 0x0000, 0x10000).value() ==
        cpu->read_memory(15, 0x0000, 0x10000).value());
}

TEST_CASE("kernel, launch shape, warm-up and errors") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 1000;
  auto b = CudaBackend::create(*rom, cfg);
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  CudaBackend& be = **b;
  const CudaContext& ctx = be.context();
  MESSAGE("device ", ctx.name(), " ", ctx.arch(), ": ", be.kernel().image_file, ", block ",
          be.launch_shape().block, ", grid ", be.launch_shape().grid);
  CHECK(be.name() == "cuda");
  CHECK(be.kernel_key().size() == 64);
  CHECK(be.kernel().target.arch.rfind("sm_", 0) == 0);
  CHECK(be.launch_shape().block >= 32);
  CHECK((long long)be.launch_shape().grid * be.launch_shape().block >= 1000);
  if (be.kernel().target.cubin) CHECK(be.kernel().target.arch == ctx.arch());

  // A second backend for the same kernel finds it in the cache.
  auto again = CudaBackend::create(*rom, cfg);
  REQUIRE(again.ok());
  CHECK((*again)->kernel().build.build.cached);
  CHECK((*again)->kernel_key() == be.kernel_key());

  REQUIRE(be.step({}).ok());
  const auto before = be.get_cpu_state(999).value();
  REQUIRE(be.warm_up().ok());  // an empty launch: state untouched
  CHECK(be.get_cpu_state(999)->instr_count == before.instr_count);

  // verify's --inject-fault: one register of one env, nothing else.
  const auto neighbour = be.get_cpu_state(6).value();
  REQUIRE(be.debug_poke_register(5, "A", 0x1234).ok());
  CHECK(be.get_cpu_state(5)->a == 0x34);
  REQUIRE(be.debug_poke_register(5, "PC", 0x4321).ok());
  CHECK(be.get_cpu_state(5)->pc == 0x4321);
  CHECK(be.get_cpu_state(6)->pc == neighbour.pc);
  CHECK(be.get_cpu_state(6)->a == neighbour.a);
  CHECK(be.debug_poke_register(5, "Q", 1).error().kind == ErrorKind::Usage);

  CHECK(be.get_cpu_state(1000).error().kind == ErrorKind::Usage);
  CHECK(be.get_cpu_state(-1).error().kind == ErrorKind::Usage);
  CHECK(be.read_memory(0, 0x100, 0x100).error().kind == ErrorKind::Usage);
  CHECK(be.read_memory(0, 0, 0x10001).error().kind == ErrorKind::Usage);
  CHECK(be.step(std::vector<int32_t>(3, 0)).error().kind == ErrorKind::Usage);
  CHECK(be.read_obs(1000).error().kind == ErrorKind::Usage);

  BackendConfig bad = cfg;
  bad.device_index = ctx.driver().device_count() + 7;
  auto missing = make_backend("cuda", *rom, bad);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == ErrorKind::Usage);
  CHECK(missing.error().message.find("does not exist") != std::string::npos);
}

// [D].6 on the device: the per-env release schedule reaches the kernel (JOYPAD_IRQ counts
// joypad interrupts at 0xFF80: with release_after_frames = 1 every step's press is new).
TEST_CASE("release_after_frames on cuda matches cpu") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:JOYPAD_IRQ");
  REQUIRE(rom.ok());
  for (int release : {-1, 0, 1}) {
    CAPTURE(release);
    BackendConfig cfg;
    cfg.num_envs = 4;
    cfg.frames_per_step = 3;
    cfg.release_after_frames = release;
    auto cpu = make("cpu", *rom, cfg);
    auto cuda = make("cuda", *rom, cfg);
    for (int s = 0; s < 4; ++s) {
      const std::vector<int32_t> a =
          s == 0 ? std::vector<int32_t>(4, 0) : std::vector<int32_t>{0x01, 0x01, 0x02, 0x00};
      REQUIRE(cpu->step(a).ok());
      REQUIRE(cuda->step(a).ok());
    }
    for (int env = 0; env < 4; ++env) {
      check_same_state(*cpu, *cuda, env);
      CHECK(cuda->save_state(env).value() == cpu->save_state(env).value());
    }
    const uint8_t count = cuda->read_memory(0, 0xFF80, 0xFF81).value()[0];
    CHECK(count == (release == 1 ? 3 : release == 0 ? 0 : 1));
  }
}

TEST_CASE("step_frames on cuda matches cpu: per-env frame counts, 0 refreshes, < 0 untouched") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:ARROWS");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 4;
  cfg.frames_per_step = 2;
  cfg.release_after_frames = 1;
  auto cpu = make("cpu", *rom, cfg);
  auto cuda = make("cuda", *rom, cfg);
  for (Backend* b : {cpu.get(), cuda.get()}) {
    REQUIRE(b->step(actions_for(0, 4)).ok());
    // Env 0: 5 frames, env 1: only the epilog, env 2: 1 frame, env 3: not touched. Then the
    // cleared outputs of envs 1-3 after a masked reset are refreshed by 0 frames.
    REQUIRE(b->step_frames({0x10, 0x20, 0x40, 0x80}, {5, 0, 1, -1}).ok());
  }
  for (int env = 0; env < 4; ++env) check_same_state(*cpu, *cuda, env);
  check_same_bulk(*cpu, *cuda);
  // Env 3 kept its state of the first step: 2 frames, where env 0 ran 2 + 5.
  CHECK(cuda->get_cpu_state(3)->cycle_count < cuda->get_cpu_state(0)->cycle_count);
  for (Backend* b : {cpu.get(), cuda.get()}) {
    REQUIRE(b->reset(std::vector<uint8_t>{0, 1, 1, 1}).ok());
    REQUIRE(b->step_frames({}, {-1, 0, 0, 0}).ok());
  }
  check_same_bulk(*cpu, *cuda);
  CHECK(cuda->read_obs(1).value() != std::vector<float>(32, 0.0f));  // not the zeroed block
  CHECK_FALSE(cuda->step_frames({}, {1, 1}).ok());                   // one count per env
}

namespace {

std::vector<uint8_t> blob_of(Backend& b, int env) {
  auto r = b.save_state(env);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return std::move(*r);
}

}  // namespace

// Save states are the kernel ABI on both backends: the same state gives the same bytes, and a
// blob from either loads into the other.
TEST_CASE("save states on cuda: round trip, cpu <-> cuda, bad blobs") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:MEM_RWB");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 8;
  auto cpu = make("cpu", *rom, cfg);
  auto cuda = make("cuda", *rom, cfg);
  for (int s = 0; s < 5; ++s) {
    REQUIRE(cpu->step(actions_for(s, 8)).ok());
    REQUIRE(cuda->step(actions_for(s, 8)).ok());
  }
  for (int env = 0; env < 8; ++env) CHECK(blob_of(*cuda, env) == blob_of(*cpu, env));

  // Round trip on cuda alone: env 2 saved, the envs run on, env 6 loads it and then runs
  // as env 2 did.
  const auto at5 = blob_of(*cuda, 2);
  REQUIRE(cuda->step({}).ok());
  REQUIRE(cuda->step({}).ok());
  const auto env2_at7 = blob_of(*cuda, 2);
  const auto env5_before = blob_of(*cuda, 5), env7_before = blob_of(*cuda, 7);
  REQUIRE(cuda->load_state(6, at5).ok());
  CHECK(blob_of(*cuda, 6) == at5);
  CHECK(cuda->read_reward(6).value() == 0.0f);
  CHECK(blob_of(*cuda, 5) == env5_before);  // neighbours untouched
  CHECK(blob_of(*cuda, 7) == env7_before);
  REQUIRE(cuda->step({}).ok());
  REQUIRE(cuda->step({}).ok());
  CHECK(blob_of(*cuda, 6) == env2_at7);

  // Across backends, both ways: each runs the other's state on and they still agree.
  for (int s = 0; s < 2; ++s) REQUIRE(cpu->step({}).ok());
  const auto from_cpu = blob_of(*cpu, 1), from_cuda = blob_of(*cuda, 3);
  REQUIRE(cuda->load_state(0, from_cpu).ok());
  REQUIRE(cpu->load_state(0, from_cpu).ok());
  REQUIRE(cpu->load_state(4, from_cuda).ok());
  REQUIRE(cuda->load_state(4, from_cuda).ok());
  const auto actions = actions_for(9, 8);
  REQUIRE(cpu->step(actions).ok());
  REQUIRE(cuda->step(actions).ok());
  for (int env : {0, 4}) {
    check_same_state(*cpu, *cuda, env);
    check_same_memory(*cpu, *cuda, env);
    CHECK(blob_of(*cuda, env) == blob_of(*cpu, env));
  }

  // Bad blobs are refused on the host, in one line, and change nothing.
  const auto env0 = blob_of(*cuda, 0);
  auto cut = from_cpu;
  cut.resize(cut.size() - 100);
  auto st = cuda->load_state(0, cut);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("truncated") != std::string::npos);
  auto other = load_rom("builtin:ALU_LOOP");
  REQUIRE(other.ok());
  auto alu = make("cpu", *other, cfg);
  st = cuda->load_state(0, blob_of(*alu, 0));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("another ROM") != std::string::npos);
  CHECK(blob_of(*cuda, 0) == env0);
  CHECK(cuda->load_state(8, from_cpu).error().kind == ErrorKind::Usage);
  CHECK(cuda->save_state(-1).error().kind == ErrorKind::Usage);
}

// reset(mask) on the device: masked envs get the reset image (power-on, one shared blob, or
// one blob per env), the others keep every byte.
TEST_CASE("reset(mask) on cuda: power-on and loaded reset states, others untouched") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:MEM_RWB");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 40;  // not a multiple of the copy kernel's block
  auto cpu = make("cpu", *rom, cfg);
  auto cuda = make("cuda", *rom, cfg);
  const auto power_on = blob_of(*cuda, 0);
  CHECK(power_on == blob_of(*cpu, 0));
  auto run = [&](int steps, int from) {
    for (int s = 0; s < steps; ++s) {
      REQUIRE(cpu->step(actions_for(from + s, 40)).ok());
      REQUIRE(cuda->step(actions_for(from + s, 40)).ok());
    }
  };
  run(4, 0);
  std::vector<uint8_t> mask(40, 0);
  for (int env : {0, 3, 17, 39}) mask[env] = 1;
  std::vector<std::vector<uint8_t>> before;
  for (int env = 0; env < 40; ++env) before.push_back(blob_of(*cuda, env));
  REQUIRE(cuda->reset(mask).ok());
  REQUIRE(cpu->reset(mask).ok());
  for (int env = 0; env < 40; ++env) {
    CAPTURE(env);
    CHECK(blob_of(*cuda, env) == (mask[env] ? power_on : before[env]));
  }
  check_same_state(*cpu, *cuda, 3);  // obs and reward cleared as on cpu
  run(2, 4);
  for (int env : {0, 1, 3, 39}) check_same_state(*cpu, *cuda, env);

  // One loaded state shared by every env.
  const auto saved = blob_of(*cuda, 5);
  REQUIRE(cuda->set_reset_state({saved}).ok());
  REQUIRE(cpu->set_reset_state({saved}).ok());
  before.clear();
  for (int env = 0; env < 40; ++env) before.push_back(blob_of(*cuda, env));
  std::vector<uint8_t> mask2(40, 0);
  for (int env : {1, 2, 20, 38}) mask2[env] = 1;
  REQUIRE(cuda->reset(mask2).ok());
  REQUIRE(cpu->reset(mask2).ok());
  for (int env = 0; env < 40; ++env) {
    CAPTURE(env);
    CHECK(blob_of(*cuda, env) == (mask2[env] ? saved : before[env]));
  }
  run(2, 6);
  for (int env : {1, 2, 5, 20}) check_same_state(*cpu, *cuda, env);

  // One state per env; reset(seed) resets them all.
  std::vector<std::vector<uint8_t>> per_env;
  for (int env = 0; env < 40; ++env) per_env.push_back(blob_of(*cpu, (env * 7) % 40));
  REQUIRE(cuda->set_reset_state(per_env).ok());
  REQUIRE(cuda->reset(0).ok());
  for (int env = 0; env < 40; ++env) CHECK(blob_of(*cuda, env) == per_env[env]);

  // A bad blob among them keeps the previous reset state.
  auto broken = per_env;
  broken[9].resize(10);
  auto st = cuda->set_reset_state(broken);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("reset state 9") != std::string::npos);
  CHECK(cuda->set_reset_state(std::vector<std::vector<uint8_t>>(2, saved)).error().kind ==
        ErrorKind::Usage);
  CHECK(cuda->reset(std::vector<uint8_t>(3, 1)).error().kind == ErrorKind::Usage);
  REQUIRE(cuda->step({}).ok());
  REQUIRE(cuda->reset(0).ok());
  CHECK(blob_of(*cuda, 11) == per_env[11]);
  // Back to power-on.
  REQUIRE(cuda->set_reset_state({}).ok());
  REQUIRE(cuda->reset(0).ok());
  CHECK(blob_of(*cuda, 11) == power_on);
}

TEST_CASE("gbx-run run --backend cuda --save-state / --load-state round trip") {
  if (!have_device()) return;
  test::TempDir d;
  const std::string run = test::tool("gbx-run") + " run --rom builtin:MEM_RWB --print-state ";
  const auto p = [&](const char* name) { return (d.path / name).string(); };
  auto a = test::run_command(run + "--backend cuda --frames 6 --envs 2 --env 1 --save-state " +
                             p("a.gbxs"));
  REQUIRE_MESSAGE(a.exit_code == 0, a.output);
  auto b = test::run_command(run + "--backend cuda --frames 4 --envs 3 --load-state " +
                             p("a.gbxs") + " --save-state " + p("b.gbxs"));
  REQUIRE_MESSAGE(b.exit_code == 0, b.output);
  auto c = test::run_command(run + "--backend cpu --frames 4 --envs 3 --load-state " + p("a.gbxs") +
                             " --save-state " + p("c.gbxs"));
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  auto whole = test::run_command(run + "--backend cpu --frames 10 --save-state " + p("w.gbxs"));
  REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
  const auto bytes = [](const std::string& path) {
    auto r = read_save_state_file(path);
    REQUIRE(r.ok());
    return *r;
  };
  CHECK(bytes(p("b.gbxs")) == bytes(p("c.gbxs")));
  CHECK(bytes(p("b.gbxs")) == bytes(p("w.gbxs")));
  auto bad = test::run_command(run + "--backend cuda --frames 1 --load-state " + p("none.gbxs"));
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("error: ") != std::string::npos);
}

TEST_CASE("battery RAM (--sav) on cuda: loaded into every env and at reset, read back as cpu") {
  if (!have_device()) return;
  // MBC3+TIMER+RAM+BATTERY: enables the RAM, increments A000, disables it, spins.
  Asm a;
  a.op("LD A,d8", 0x0A).op("LD (a16),A", 0x0000);
  a.op("LD HL,d16", 0xA000).op("INC (HL)");
  a.op("LD A,d8", 0x00).op("LD (a16),A", 0x0000);
  a.label("end").op("JR r8", "end");
  RomSpec spec;
  spec.cart_type = 0x10;
  spec.rom_size_code = 0x01;
  spec.ram_size_code = 0x02;  // 8 KiB
  REQUIRE(a.place(spec).ok());
  auto bytes = try_build_rom(spec);
  REQUIRE(bytes.ok());
  auto rom = rom_from_bytes("battery.gb", *bytes);
  REQUIRE(rom.ok());
  BatterySave save;
  save.ram.assign(8192, 0);
  for (size_t i = 0; i < save.ram.size(); ++i) save.ram[i] = (uint8_t)(i * 7);
  save.ram[0] = 41;
  save.has_rtc = true;
  const uint8_t live[5] = {12, 34, 5, 6, 0}, latched[5] = {1, 2, 3, 4, 0};
  std::copy_n(live, 5, save.rtc_live);
  std::copy_n(latched, 5, save.rtc_latched);

  BackendConfig cfg;
  cfg.num_envs = 40;
  auto cpu = make("cpu", *rom, cfg);
  auto cuda = make("cuda", *rom, cfg);
  REQUIRE(cpu->load_battery(save).ok());
  const Status loaded = cuda->load_battery(save);
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  auto same_battery = [&](int env) {
    CAPTURE(env);
    const BatterySave c = cpu->read_battery(env).value();
    const BatterySave g = cuda->read_battery(env).value();
    CHECK(g.ram == c.ram);
    CHECK(g.has_rtc == c.has_rtc);
    CHECK(std::vector<uint8_t>(g.rtc_live, g.rtc_live + 5) ==
          std::vector<uint8_t>(c.rtc_live, c.rtc_live + 5));
    CHECK(std::vector<uint8_t>(g.rtc_latched, g.rtc_latched + 5) ==
          std::vector<uint8_t>(c.rtc_latched, c.rtc_latched + 5));
    return g;
  };
  CHECK(same_battery(39).ram == save.ram);  // loaded into the running envs
  for (int s = 0; s < 2; ++s) {
    REQUIRE(cpu->step({}).ok());
    REQUIRE(cuda->step({}).ok());
  }
  for (int env : {0, 39}) {
    const BatterySave g = same_battery(env);
    CHECK(g.ram[0] == 42);
    CHECK(g.ram[1] == 7);
    CHECK(cuda->read_memory_raw(env, 0xA000, 0xA002).value() == std::vector<uint8_t>{42, 7});
    CHECK(cuda->read_memory(env, 0xA000, 0xA002).value() ==
          std::vector<uint8_t>{0xFF, 0xFF});  // disabled again by the program
  }
  // A reset brings the battery contents back (the reset image took them).
  std::vector<uint8_t> mask(40, 0);
  mask[3] = 1;
  REQUIRE(cpu->reset(mask).ok());
  REQUIRE(cuda->reset(mask).ok());
  CHECK(same_battery(3).ram[0] == 41);
  CHECK(same_battery(4).ram[0] == 42);
  // Battery RAM needs the dmg memory model.
  BackendConfig flat = cfg;
  flat.memory_model = MemoryModel::Flat64k;
  flat.run_mode = RunMode::Instructions;
  flat.stage = Stage::EmulateOnly;
  flat.num_envs = 16;
  auto cuda_flat = make("cuda", *rom, flat);
  CHECK_FALSE(cuda_flat->load_battery(save).ok());
}

TEST_CASE("memory reads run the kernel's gbx_read_memory on the device, out of range refused") {
  if (!have_device()) return;
  auto rom = load_rom("builtin:MEM_RWB");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 5;
  auto cpu = make("cpu", *rom, cfg);
  auto cuda = make("cuda", *rom, cfg);
  for (int s = 0; s < 3; ++s) {
    REQUIRE(cpu->step({}).ok());
    REQUIRE(cuda->step({}).ok());
  }
  for (auto [lo, hi] : {std::pair{0xC000u, 0xC001u}, {0xFF00u, 0x10000u}, {0u, 0x10000u}})
    for (bool raw : {false, true}) {
      CAPTURE(lo);
      CAPTURE(raw);
      auto d = raw ? cuda->read_memory_raw(4, lo, hi) : cuda->read_memory(4, lo, hi);
      auto r = raw ? cpu->read_memory_raw(4, lo, hi) : cpu->read_memory(4, lo, hi);
      REQUIRE(d.ok());
      CHECK(*d == *r);
    }
  CHECK_FALSE(cuda->read_memory(5, 0, 1).ok());
  CHECK_FALSE(cuda->read_memory(0, 0x10, 0x10).ok());
  CHECK_FALSE(cuda->read_memory(0, 0, 0x10001).ok());
}
