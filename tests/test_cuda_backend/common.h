#pragma once
// test_cuda_backend's helpers: the device check, backends, joypad input and the cpu-vs-cuda
// comparisons (test_cuda_backend.cpp and the cases in this folder).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx/runtime/states/save_state.h"
#include "skip.h"
#include "test_util.h"

using namespace gbx;

namespace cuda_backend_test {

inline bool have_device() {
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

inline std::unique_ptr<Backend> make(const std::string& name, const Rom& rom,
                                     const BackendConfig& cfg) {
  auto b = make_backend(name, rom, cfg);
  REQUIRE_MESSAGE(b.ok(), name, ": ", (b.ok() ? "" : b.error().message + "\n" + b.error().detail));
  return std::move(b.value());
}

// Deterministic joypad input, different per env and step, the same for both backends.
inline std::vector<int32_t> actions_for(int step, int envs) {
  std::vector<int32_t> a(envs);
  uint32_t x = 0x9E3779B9u * (uint32_t)(step + 1);
  for (int i = 0; i < envs; ++i) {
    x = x * 1664525u + 1013904223u;
    a[i] = (int32_t)((x >> 24) & (i % 3 == 0 ? 0x00 : 0xFF));  // a third of the envs idle
  }
  return a;
}

inline void check_same_state(Backend& ref, Backend& dut, int env) {
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
inline void check_same_memory(Backend& ref, Backend& dut, int env) {
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
inline void check_same_bulk(Backend& ref, Backend& dut) {
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

}  // namespace cuda_backend_test

using namespace cuda_backend_test;
