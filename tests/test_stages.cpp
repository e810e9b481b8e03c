// Stage write semantics, cross-stage emulation identity, and micro-ROM final states checked
// against an independent model of each program.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/states/env_state.h"

using namespace gbx;

namespace {

constexpr int kObs = 32;
constexpr float kSentinel = -7.0f;

struct Run {
  EnvState state;
  std::vector<float> obs;
  std::vector<float> reward;
};

CpuStepFn kernel_for(Stage st) {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  SynthParams p;
  p.stage = st;
  KernelCache cache;
  auto k = build_cpu_kernel(bundle.value(), p, cache);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
  return k->step;
}

Run run_stage(Stage st, const Rom& rom, int envs, int steps, int frames) {
  const CpuStepFn fn = kernel_for(st);
  Run r{EnvState(envs, MemoryModel::Dmg, &rom), std::vector<float>(envs * kObs, kSentinel),
        std::vector<float>(envs, kSentinel)};
  r.state.reset_dmg();
  GbxParams p{};
  p.s = r.state.soa();
  p.rom = rom.bytes.data();
  p.rom_size = (unsigned)rom.bytes.size();
  p.mbc = (unsigned)rom.header.mbc;
  p.mem = r.state.mem();
  p.mem_stride = r.state.layout().kernel_mem_stride();
  p.cart_ram_size = rom.header.ram_size;
  p.num_envs = envs;
  p.frames = frames;
  p.obs = r.obs.data();
  p.reward = r.reward.data();
  p.obs_dim = kObs;
  for (int i = 0; i < steps; ++i) fn(&p, 0, envs);
  return r;
}

Rom builtin(const char* name) {
  auto r = load_rom(std::string("builtin:") + name);
  REQUIRE(r.ok());
  return r.value();
}

// reward_v0's and obs_v0's formulas, written out independently of templates/epilogs/.
float expect_reward(const CpuState& s, const uint8_t* wram) {
  return (float)((s.a ^ ((wram[0] + 3 * wram[1]) & 0xFF)) & 0xFF) / 255.0f;
}
std::vector<float> expect_obs(const CpuState& s, const uint8_t* m) {
  std::vector<float> o = {s.pc / 65535.0f, s.sp / 65535.0f, s.a / 255.0f, s.f / 255.0f,
                          s.b / 255.0f,    s.c / 255.0f,    s.d / 255.0f, s.e / 255.0f,
                          s.h / 255.0f,    s.l / 255.0f};
  for (int i = 0; i < 16; ++i) o.push_back(m[i] / 255.0f);
  o.push_back(((m[0] ^ m[1]) & 0xFF) / 255.0f);
  o.push_back(((m[2] + 5 * m[3]) & 0xFF) / 255.0f);
  o.push_back(((m[4] ^ s.a) & 0xFF) / 255.0f);
  o.push_back(((m[5] + s.b) & 0xFF) / 255.0f);
  o.push_back(((m[6] ^ s.c) & 0xFF) / 255.0f);
  o.push_back(((m[7] + s.d) & 0xFF) / 255.0f);
  return o;
}

}  // namespace

TEST_CASE("stages write only the outputs they own, and emulate identically") {
  const Rom rom = builtin("MEM_RWB");
  const int envs = 3;
  Run runs[4] = {
      run_stage(Stage::EmulateOnly, rom, envs, 2, 1), run_stage(Stage::RewardOnly, rom, envs, 2, 1),
      run_stage(Stage::ObsOnly, rom, envs, 2, 1), run_stage(Stage::FullStep, rom, envs, 2, 1)};
  for (int s = 0; s < 4; ++s) {
    const Stage st = all_stages()[s];
    CAPTURE(to_string(st));
    Run& r = runs[s];
    for (int env = 0; env < envs; ++env) {
      const CpuState cs = r.state.cpu_state(env);
      const CpuState ref = runs[0].state.cpu_state(env);
      CHECK(cs.pc == ref.pc);
      CHECK(cs.a == ref.a);
      CHECK(cs.f == ref.f);
      CHECK(cs.cycle_count == ref.cycle_count);
      const std::vector<uint8_t> mem = r.state.env_mem(env);
      CHECK(mem == runs[0].state.env_mem(env));
      const uint8_t* wram = mem.data() + GBX_MEM_WRAM;
      if (stage_writes_reward(st)) {
        CHECK(r.reward[env] == doctest::Approx(expect_reward(cs, wram)));
      } else {
        CHECK(r.reward[env] == kSentinel);
      }
      const auto eo = expect_obs(cs, wram);
      for (int i = 0; i < kObs; ++i) {
        if (stage_writes_obs(st)) {
          CHECK(r.obs[env * kObs + i] == doctest::Approx(eo[i]));
        } else {
          CHECK(r.obs[env * kObs + i] == kSentinel);
        }
      }
    }
  }
  // MEM_RWB has written C000.. by now, so the obs and reward depend on memory too.
  CHECK(runs[3].state.mem_at(0, GBX_MEM_WRAM + 5) == 5);
}

TEST_CASE("ALU_LOOP final state matches an independent model of the program") {
  // 0100: NOP; JP 0150 | 0150: LD A,0; LD B,0 | loop: INC A; ADD A,B; INC B; JR loop
  for (int frames : {1, 7, 60}) {
    CAPTURE(frames);
    const Rom rom = builtin("ALU_LOOP");
    Run r = run_stage(Stage::EmulateOnly, rom, 2, frames, 1);
    const int64_t target = 70224LL * frames;
    int64_t t = 4 + 16 + 8 + 8;
    uint8_t a = 0, b = 0, f = 0xB0;
    uint16_t pc = 0x154;
    int64_t instrs = 4;
    int stage_in_loop = 0;  // 0 INC A, 1 ADD A,B, 2 INC B, 3 JR
    while (t < target) {
      switch (stage_in_loop) {
        case 0: {
          const uint8_t r8 = a + 1;
          f = (uint8_t)((r8 == 0 ? 0x80 : 0) | ((a & 0xF) == 0xF ? 0x20 : 0) | (f & 0x10));
          a = r8, t += 4, pc = 0x155;
          break;
        }
        case 1: {
          const unsigned sum = a + b;
          f = (uint8_t)(((sum & 0xFF) == 0 ? 0x80 : 0) |
                        (((a & 0xF) + (b & 0xF)) > 0xF ? 0x20 : 0) | (sum > 0xFF ? 0x10 : 0));
          a = (uint8_t)sum, t += 4, pc = 0x156;
          break;
        }
        case 2: {
          const uint8_t r8 = b + 1;
          f = (uint8_t)((r8 == 0 ? 0x80 : 0) | ((b & 0xF) == 0xF ? 0x20 : 0) | (f & 0x10));
          b = r8, t += 4, pc = 0x157;
          break;
        }
        default:
          t += 12, pc = 0x154;
      }
      stage_in_loop = (stage_in_loop + 1) % 4;
      ++instrs;
    }
    for (int env = 0; env < 2; ++env) {
      const CpuState s = r.state.cpu_state(env);
      CHECK(s.a == a);
      CHECK(s.b == b);
      CHECK(s.f == f);
      CHECK(s.pc == pc);
      CHECK(s.cycle_count == t);
      CHECK(s.instr_count == instrs);
      CHECK(r.state.soa().cycle_in_frame[env] == t - target);
    }
  }
}

TEST_CASE("MEM_RWB writes the byte sequence and reads it back (first 4 frames, WRAM only)") {
  // 0150: LD HL,C000; LD A,0 | loop: LD (HL),A; INC A; LD B,(HL); INC HL; JR loop (40 T)
  const Rom rom = builtin("MEM_RWB");
  Run r = run_stage(Stage::EmulateOnly, rom, 1, 4, 1);
  const int64_t target = 70224LL * 4;
  int64_t t = 4 + 16 + 12 + 8;
  int n = 0;  // completed iterations; each ends with a 12 T JR
  const int per_iter[5] = {8, 4, 8, 8, 12};
  int k = 0;
  int64_t instrs = 4;
  while (t < target) {
    t += per_iter[k];
    ++instrs;
    if (++k == 5) k = 0, ++n;
  }
  const CpuState s = r.state.cpu_state(0);
  CHECK(s.cycle_count == t);
  CHECK(s.instr_count == instrs);
  const std::vector<uint8_t> mem = r.state.env_mem(0);
  const uint8_t* wram = mem.data() + GBX_MEM_WRAM;
  for (int i = 0; i < n; ++i) REQUIRE(wram[i] == (uint8_t)i);
  CHECK(wram[n + 1] == 0);
}

TEST_CASE("an illegal opcode traps only its env; the trap keeps PC and opcode") {
  std::vector<uint8_t> bytes = load_rom("builtin:ALU_LOOP")->bytes;
  bytes[0x150] = 0xD3;  // illegal
  auto rom = rom_from_bytes("TRAP", bytes);
  REQUIRE(rom.ok());
  Run r = run_stage(Stage::FullStep, rom.value(), 2, 3, 1);
  const CpuState s = r.state.cpu_state(1);
  CHECK(s.trap_kind == GBX_TRAP_ILLEGAL_OPCODE);
  CHECK(s.trap_pc == 0x150);
  CHECK(s.trap_opcode == 0xD3);
  CHECK(s.pc == 0x150);
  CHECK(s.cycle_count == 4 + 16 + 4);
  CHECK(r.reward[1] != kSentinel);  // the epilog still reports the trapped env
}
