// The per-env memory layout (synthesis parameter layout, gbx_abi.h GBX_MEM_PITCH): env_major
// and interleaved must be the same machine. Every built-in ROM runs in both layouts on the
// cpu backend with per-env input, and everything a user can observe is compared: save-state
// blobs (every state field, the env's memory, both framebuffers), bus views, outputs. Then
// the host paths that address memory (save / load state, reset(mask), battery RAM, the
// EnvState accessors) in the interleaved layout. The same comparison on the cuda backend runs
// in test_cuda_backend (on the driver double in CI).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx/runtime/states/env_state.h"
#include "gbx_abi.h"

using namespace gbx;

namespace {

using Bytes = std::vector<uint8_t>;

// An env count that is not a multiple of the 32-env pitch, so padding is exercised.
constexpr int kEnvs = 5;

std::unique_ptr<Backend> make(const Rom& rom, MemLayout layout, int envs = kEnvs) {
  BackendConfig cfg;
  cfg.num_envs = envs;
  cfg.frames_per_step = 3;
  cfg.render = true;  // the framebuffers are part of the compared state
  cfg.layout = layout;
  cfg.gather_addrs = {0xC000, 0xC001, 0xFF44, 0xFF80, 0xFFFF};
  auto b = make_backend("cpu", rom, cfg);
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message + "\n" + b.error().detail));
  return std::move(b.value());
}

// Different buttons per env and step (some envs idle), the same for every backend.
std::vector<int32_t> actions_for(int step, int envs) {
  std::vector<int32_t> a(envs);
  uint32_t x = 0x9E3779B9u * (uint32_t)(step + 1);
  for (int i = 0; i < envs; ++i) {
    x = x * 1664525u + 1013904223u;
    a[i] = (int32_t)((x >> 24) & (i % 3 == 0 ? 0x00 : 0xFF));
  }
  return a;
}

void run(Backend& b, int steps, int first_step = 0) {
  for (int s = 0; s < steps; ++s) REQUIRE(b.step(actions_for(first_step + s, b.num_envs())).ok());
  REQUIRE(b.sync().ok());
}

void check_same(Backend& ref, Backend& dut) {
  REQUIRE(ref.num_envs() == dut.num_envs());
  for (int env = 0; env < ref.num_envs(); ++env) {
    CAPTURE(env);
    CHECK(dut.save_state(env).value() == ref.save_state(env).value());
    CHECK(dut.read_memory(env, 0, 0x10000).value() == ref.read_memory(env, 0, 0x10000).value());
    CHECK(dut.read_memory_raw(env, 0xA000, 0xC000).value() ==
          ref.read_memory_raw(env, 0xA000, 0xC000).value());
    CHECK(dut.read_screen(env).value() == ref.read_screen(env).value());
    CHECK(dut.serial_output(env).value() == ref.serial_output(env).value());
  }
  const OutputBlock r = ref.outputs().value(), d = dut.outputs().value();
  REQUIRE(r.bytes == d.bytes);
  CHECK(std::memcmp(r.data, d.data, r.bytes) == 0);
}

}  // namespace

TEST_CASE("layout interleaved and env_major give identical states on every built-in ROM") {
  int roms = 0;
  for (const BuiltinRom& br : builtin_roms()) {
    CAPTURE(br.name);
    auto rom = load_rom("builtin:" + br.name);
    REQUIRE(rom.ok());
    auto ref = make(rom.value(), MemLayout::EnvMajor);
    auto dut = make(rom.value(), MemLayout::Interleaved);
    CHECK(ref->kernel_key() != dut->kernel_key());  // the layout is in the stage hash
    run(*ref, 12);
    run(*dut, 12);
    check_same(*ref, *dut);
    ++roms;
  }
  CHECK(roms == (int)builtin_roms().size());
}

TEST_CASE("interleaved: save / load state, reset(mask) and battery RAM round trip") {
  auto rom = load_rom("builtin:MBC1_BANKS");
  if (!rom.ok()) rom = load_rom("builtin:" + builtin_roms().front().name);
  REQUIRE(rom.ok());
  auto ref = make(rom.value(), MemLayout::EnvMajor);
  auto dut = make(rom.value(), MemLayout::Interleaved);
  run(*ref, 6);
  run(*dut, 6);

  // A blob saved in one layout loads into the other (blobs hold memory env-major), into a
  // different env, and both machines then run on identically.
  const Bytes from_dut = dut->save_state(2).value();
  const Bytes from_ref = ref->save_state(1).value();
  CHECK(from_dut == ref->save_state(2).value());
  REQUIRE(ref->load_state(0, from_dut).ok());
  REQUIRE(dut->load_state(0, from_dut).ok());
  REQUIRE(ref->load_state(4, from_ref).ok());
  REQUIRE(dut->load_state(4, from_ref).ok());
  CHECK(dut->save_state(0).value() == from_dut);
  CHECK(dut->save_state(4).value() == from_ref);
  // Neighbours in the interleaved rows are untouched by a load.
  CHECK(dut->save_state(3).value() == ref->save_state(3).value());
  run(*ref, 4, 100);
  run(*dut, 4, 100);
  check_same(*ref, *dut);

  // reset(mask): masked envs go back to power-on, the others keep their state.
  const Bytes kept = dut->save_state(1).value();
  const std::vector<uint8_t> mask = {1, 0, 1, 0, 1};
  REQUIRE(ref->reset(mask).ok());
  REQUIRE(dut->reset(mask).ok());
  CHECK(dut->save_state(1).value() == kept);
  auto fresh = make(rom.value(), MemLayout::Interleaved);
  CHECK(dut->save_state(2).value() == fresh->save_state(2).value());
  check_same(*ref, *dut);
  run(*ref, 3, 200);
  run(*dut, 3, 200);
  check_same(*ref, *dut);

  // Battery RAM goes into every env's cartridge RAM and comes back from one env.
  if (rom->header.ram_size > 0) {
    BatterySave save;
    save.ram.assign(rom->header.ram_size, 0);
    for (size_t i = 0; i < save.ram.size(); ++i) save.ram[i] = (uint8_t)(i * 7 + 1);
    REQUIRE(dut->load_battery(save).ok());
    REQUIRE(ref->load_battery(save).ok());
    CHECK(dut->read_battery(3).value().ram == save.ram);
    check_same(*ref, *dut);
  }
}

TEST_CASE("EnvState addresses memory through the layout in both directions") {
  auto rom = load_rom("builtin:" + builtin_roms().front().name);
  REQUIRE(rom.ok());
  EnvState em(kEnvs, MemoryModel::Dmg, &rom.value(), MemLayout::EnvMajor);
  EnvState il(kEnvs, MemoryModel::Dmg, &rom.value(), MemLayout::Interleaved);
  CHECK(il.layout().mem_pitch == 32);
  CHECK(il.layout().mem_bytes == (size_t)il.layout().mem_stride * 32);
  CHECK(il.layout().mem_offset(3, 10) == 10u * 32u + 3u);
  CHECK(em.layout().mem_offset(3, 10) == 3u * em.layout().mem_stride + 10u);
  em.reset_dmg();
  il.reset_dmg();
  for (int env = 0; env < kEnvs; ++env) CHECK(il.env_mem(env) == em.env_mem(env));
  // One byte written through the accessor is where the kernel's mem_at() reads it.
  il.mem_at(4, GBX_MEM_WRAM + 0x123) = 0x5A;
  CHECK(il.mem()[(size_t)(GBX_MEM_WRAM + 0x123) * 32 + 4] == 0x5A);
  CHECK(il.peek(4, 0xC123) == 0x5A);
  CHECK(il.peek(3, 0xC123) == 0x00);
  const Bytes wram = {1, 2, 3, 4, 5, 6};
  il.write_env_mem(1, GBX_MEM_WRAM + 0x10, wram.data(), wram.size());
  Bytes back(wram.size());
  il.read_env_mem(1, GBX_MEM_WRAM + 0x10, back.data(), back.size());
  CHECK(back == wram);
  Bytes bus(6);
  REQUIRE(il.read_memory(1, 0xC010, 0xC016, false, bus.data()).ok());
  CHECK(bus == wram);
  // copy_env across layouts.
  em.copy_env(0, il, 1);
  CHECK(em.env_mem(0) == il.env_mem(1));
}
