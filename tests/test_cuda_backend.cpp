// cuda backend against the cpu backend on a real device: registers, counters, memory slices,
// serial, obs and reward identical after many steps of many envs, for every built-in ROM.
// Device-only: without a device the file prints "[skipped] no CUDA device: <reason>", which
// CTest's SKIP_REGULAR_EXPRESSION turns into a skip of the whole executable, so nothing that
// could run without a device belongs here (see test_cuda_compile for that part).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "failure_counter.h"
#include "gbx/engine/cuda_driver.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/cuda_backend.h"
#include "gbx/runtime/rom_builder.h"

using namespace gbx;

namespace {

using test::g_failed_asserts;

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
  static bool said = false;
  if (!said) {
    said = true;
    if (g_failed_asserts == 0)
      MESSAGE("[skipped] ", drv.error().message);
    else
      MESSAGE("no device (", drv.error().message, ") and earlier cases failed");
  }
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

}  // namespace

TEST_CASE("cuda matches cpu after 30+ frames of 256 envs on every built-in ROM") {
  if (!have_device()) return;
  const int envs = 256;
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
    if (!br.expected_serial.empty())
      CHECK(cuda->serial_output(envs - 1).value() == br.expected_serial);
    ++roms;
  }
  CHECK(roms >= 8);
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
