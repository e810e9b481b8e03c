// test_cuda_backend, part 2: save states, reset(mask), battery RAM and memory reads on the
// device, against the cpu backend (the helpers: common.h).
#include <doctest/doctest.h>

#include "common.h"

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
