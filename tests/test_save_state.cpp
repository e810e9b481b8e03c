// Save states and masked resets: a round trip reproduces the run bit for bit (cpu, mgba), the
// blob describes itself with the state-field table, bad blobs are refused in one line and
// leave the env alone, reset(mask) touches only the masked envs; gbx-run --load-state /
// --save-state end to end.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/reference/mgba_backend.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx/runtime/states/save_state.h"
#include "gbx/runtime/states/state_fields.h"
#include "gbx_abi.h"
#include "test_util.h"

using namespace gbx;
using Bytes = std::vector<uint8_t>;

namespace {

// A ROM that keeps every part of the machine busy: an LFSR stirs WRAM and the cartridge RAM
// (MBC1, 8 KiB), LY is sampled into HRAM, the timer interrupt (TMA reload) counts in HRAM,
// and the VBlank interrupt counts too and sends its count over the serial port.
Rom busy_rom(const std::string& title = "BUSY") {
  Asm a;
  a.op("DI").op("LD SP,d16", 0xFFFE);
  a.op("LD A,d8", 0x0A).op("LD (a16),A", 0x0000);  // cartridge RAM on
  a.op("LD A,d8", 0x80).op("LDH (a8),A", io::kTMA);
  a.op("LD A,d8", 0x05).op("LDH (a8),A", io::kTAC);  // 262144 Hz
  a.op("XOR A").op("LDH (a8),A", io::kIF);
  a.op("LD A,d8", 0x05).op("LDH (a8),A", io::kIE);  // VBlank + timer
  a.op("EI");
  a.op("LD HL,d16", 0xC000).op("LD DE,d16", 0xA000).op("LD B,d8", 1);
  a.label("loop");
  a.op("LD A,B").op("ADD A,A").op("JR NC,r8", "no_tap").op("XOR d8", 0x1D).label("no_tap");
  // Read-modify-write, so every byte written depends on what the memory held before.
  a.op("LD B,A").op("XOR (HL)").op("LD (HL+),A");
  a.op("LD A,H").op("CP d8", 0xE0).op("JR NZ,r8", "wram_ok").op("LD H,d8", 0xC0);
  a.label("wram_ok");
  a.op("LD A,(DE)").op("ADD A,B").op("LD (DE),A").op("INC DE");
  a.op("LD A,D").op("CP d8", 0xC0).op("JR NZ,r8", "sram_ok").op("LD D,d8", 0xA0);
  a.label("sram_ok");
  a.op("LDH A,(a8)", 0x44).op("LDH (a8),A", 0x82);
  a.op("JR r8", "loop");
  a.org(0x0040).op("JP a16", "vblank");
  a.org(0x0050).op("JP a16", "timer");
  a.org(0x0200).label("vblank");
  a.op("PUSH AF").op("LDH A,(a8)", 0x81).op("INC A").op("LDH (a8),A", 0x81);
  a.op("LDH (a8),A", io::kSB).op("LD A,d8", 0x81).op("LDH (a8),A", io::kSC);
  a.op("POP AF").op("RETI");
  a.label("timer");
  a.op("PUSH AF").op("LDH A,(a8)", 0x80).op("INC A").op("LDH (a8),A", 0x80);
  a.op("POP AF").op("RETI");
  RomSpec spec;
  spec.title = title;
  spec.cart_type = 0x03;  // MBC1+RAM+BATTERY
  spec.ram_size_code = 0x02;
  REQUIRE(a.place(spec).ok());
  auto rom = rom_from_bytes(title, build_rom(spec));
  REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
  return rom.value();
}

template <typename B>
std::unique_ptr<B> make(const Rom& rom, int envs = 1) {
  BackendConfig cfg;
  cfg.num_envs = envs;
  cfg.threads = 1;
  auto b = B::create(rom, cfg);
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  return std::move(b.value());
}

void run(Backend& b, int frames) {
  for (int i = 0; i < frames; ++i) {
    auto st = b.step({});
    REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message));
  }
}

Bytes save(Backend& b, int env) {
  auto s = b.save_state(env);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
  return s.value();
}

void load(Backend& b, int env, const Bytes& blob) {
  auto st = b.load_state(env, blob);
  REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message));
}

// Everything a backend shows of one env: registers, counters, the whole bus, serial.
struct Observed {
  CpuState cpu;
  Bytes bus;
  std::string serial;
};

Observed observe(Backend& b, int env) {
  Observed o;
  auto s = b.get_cpu_state(env);
  REQUIRE(s.ok());
  o.cpu = s.value();
  auto m = b.read_memory(env, 0, 0x10000);
  REQUIRE(m.ok());
  o.bus = m.value();
  auto t = b.serial_output(env);
  REQUIRE(t.ok());
  o.serial = t.value();
  return o;
}

void check_same(const Observed& x, const Observed& y) {
  for (const auto& reg : cpu_register_names())
    CHECK_MESSAGE(get_cpu_register(x.cpu, reg) == get_cpu_register(y.cpu, reg), reg);
  CHECK(x.cpu.ime == y.cpu.ime);
  CHECK(x.cpu.run_state == y.cpu.run_state);
  CHECK(x.cpu.cycle_count == y.cpu.cycle_count);
  CHECK(x.cpu.instr_count == y.cpu.instr_count);
  CHECK(x.cpu.trap_kind == y.cpu.trap_kind);
  CHECK(x.bus == y.bus);
  CHECK(x.serial == y.serial);
}

// The error of `st` as text ("" when it succeeded).
template <typename R>
std::string error_of(const R& r) {
  return r.ok() ? "" : r.error().message;
}

Bytes with_u32(Bytes b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = (uint8_t)(v >> (8 * i));
  return b;
}

struct FieldInfo {
  std::string name;
  size_t size;
};

std::vector<FieldInfo> state_fields() {
  return {
#define GBX_TEST_FIELD(name, size) {#name, (size_t)(size)},
      GBX_STATE_FIELDS(GBX_TEST_FIELD)
#undef GBX_TEST_FIELD
  };
}

}  // namespace

TEST_CASE("cpu: save, run M frames, load, run M frames: the same machine, bit for bit") {
  const Rom rom = busy_rom();
  auto a = make<CpuBackend>(rom, 3);
  run(*a, 37);
  const Bytes blob = save(*a, 1);
  run(*a, 23);
  const Observed x = observe(*a, 1);
  const Bytes x_blob = save(*a, 1);
  CHECK(x.cpu.cycle_count > 60 * 70224 - 100);
  CHECK(x.bus[0xFF80] != 0);  // the timer interrupt ran
  CHECK(!x.serial.empty());   // and the VBlank one

  // Into another env of a fresh backend that has run something else meanwhile.
  auto b = make<CpuBackend>(rom, 2);
  run(*b, 5);
  load(*b, 1, blob);
  run(*b, 23);
  check_same(x, observe(*b, 1));
  // Every state field and every byte of per-env memory (cart RAM included) is in the blob.
  CHECK(save(*b, 1) == x_blob);
  // Env 0 went its own way: 28 frames from power-on, as if env 1 had never been loaded.
  auto c = make<CpuBackend>(rom);
  run(*c, 28);
  CHECK(save(*b, 0) == save(*c, 0));
}

TEST_CASE("cpu: every built-in ROM round-trips mid-run") {
  for (const BuiltinRom& br : builtin_roms()) {
    CAPTURE(br.name);
    auto rom = load_rom("builtin:" + br.name);
    REQUIRE(rom.ok());
    const int n = br.frames_to_finish ? std::max(1, br.frames_to_finish / 2) : 9;
    auto a = make<CpuBackend>(rom.value());
    run(*a, n);
    const Bytes blob = save(*a, 0);
    run(*a, n + 3);
    const Bytes want = save(*a, 0);
    auto b = make<CpuBackend>(rom.value());
    load(*b, 0, blob);
    run(*b, n + 3);
    CHECK(save(*b, 0) == want);
    check_same(observe(*a, 0), observe(*b, 0));
  }
}

TEST_CASE("cpu: the blob's header and record table follow GBX_STATE_FIELDS") {
  const Rom rom = busy_rom();
  auto a = make<CpuBackend>(rom);
  run(*a, 3);
  const Bytes blob = save(*a, 0);
  REQUIRE(blob.size() > kSaveStateHeaderBytes);
  CHECK(std::memcmp(blob.data(), "GBXS", 4) == 0);
  CHECK(blob[4] == kSaveStateVersion);
  CHECK(blob[8] == GBX_ABI_VERSION);
  CHECK(blob[44] == 0);  // memory model dmg
  CHECK(blob[45] == 0);  // kernel payload
  uint64_t payload = 0;
  for (int i = 0; i < 8; ++i) payload |= (uint64_t)blob[48 + i] << (8 * i);
  CHECK(payload == blob.size() - kSaveStateHeaderBytes);

  auto parsed = read_save_state(blob, rom, MemoryModel::Dmg, SaveStateKind::Kernel);
  REQUIRE_MESSAGE(parsed.ok(), error_of(parsed));
  const auto fields = state_fields();
  REQUIRE(parsed->records.size() == fields.size() + 1);
  for (size_t i = 0; i < fields.size(); ++i) {
    CHECK(parsed->records[i].name == fields[i].name);
    CHECK(parsed->records[i].bytes.size() == fields[i].size);
  }
  CHECK(parsed->records.back().name == "mem");
  CHECK(parsed->records.back().bytes.size() == a->state().layout().mem_stride);
  // The fields hold the env's values: PC is the first field, little-endian.
  const auto s = a->get_cpu_state(0).value();
  CHECK(parsed->records[0].name == "pc");
  CHECK((parsed->records[0].bytes[0] | parsed->records[0].bytes[1] << 8) == s.pc);
  // Cartridge RAM sits in the memory record, where the kernel keeps it.
  const Bytes& mem = parsed->records.back().bytes;
  CHECK(std::memcmp(mem.data() + GBX_MEM_CART_RAM, a->state().env_mem(0).data() + GBX_MEM_CART_RAM,
                    rom.header.ram_size) == 0);
}

TEST_CASE("cpu: bad blobs are refused in one line and leave the env untouched") {
  const Rom rom = busy_rom();
  auto a = make<CpuBackend>(rom, 2);
  run(*a, 4);
  const Bytes good = save(*a, 0);
  run(*a, 2);
  const Bytes before = save(*a, 1);

  auto refused = [&](const Bytes& blob, const std::string& needle) {
    const auto st = a->load_state(1, blob);
    const std::string msg = error_of(st);
    CAPTURE(msg);
    CHECK(!st.ok());
    CHECK(msg.find(needle) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(save(*a, 1) == before);
  };
  for (size_t n :
       {size_t(0), size_t(3), size_t(30), kSaveStateHeaderBytes - 1, kSaveStateHeaderBytes,
        kSaveStateHeaderBytes + 3, good.size() / 2, good.size() - 1})
    refused(Bytes(good.begin(), good.begin() + (long)n), "truncated");
  Bytes magic = good;
  magic[0] = 'X';
  refused(magic, "not a GBX save state");
  refused(with_u32(good, 4, kSaveStateVersion + 1), "format version");
  refused(with_u32(good, 8, GBX_ABI_VERSION + 1), "state ABI");
  Bytes longer = good;
  longer.push_back(0);
  refused(longer, "unexpected bytes");

  // Another ROM's blob.
  const Rom other_rom = busy_rom("OTHER");
  auto o = make<CpuBackend>(other_rom);
  refused(save(*o, 0), "another ROM");

  // A build whose state has other fields (same ABI number): renamed, resized, missing.
  auto parsed = read_save_state(good, rom, MemoryModel::Dmg, SaveStateKind::Kernel);
  REQUIRE(parsed.ok());
  auto rewrite = [&](auto edit) {
    auto recs = parsed->records;
    edit(recs);
    return write_save_state(rom, MemoryModel::Dmg, SaveStateKind::Kernel, recs);
  };
  refused(rewrite([](auto& r) { r[3].name = "zz"; }), "field 3");
  refused(rewrite([](auto& r) { r[5].bytes.push_back(0); }), "field 5");
  refused(rewrite([](auto& r) { r.erase(r.begin() + 2); }), "records");
  refused(rewrite([](auto& r) { r.back().bytes.resize(r.back().bytes.size() + 64); }), "memory");
  // Memory model and payload kind.
  refused(write_save_state(rom, MemoryModel::Flat64k, SaveStateKind::Kernel, parsed->records),
          "memory model flat64k");
  refused(write_save_state(rom, MemoryModel::Dmg, SaveStateKind::Mgba, parsed->records), "mgba");
  // Still loads after all that.
  CHECK(a->load_state(1, good).ok());
  CHECK(save(*a, 1) == good);
}

TEST_CASE("cpu: a state of ABI v12 (no OAM DMA set-up fields) loads with no DMA in set-up") {
  const Rom rom = busy_rom();
  auto a = make<CpuBackend>(rom, 2);
  run(*a, 4);
  const Bytes now = save(*a, 0);
  auto parsed = read_save_state(now, rom, MemoryModel::Dmg, SaveStateKind::Kernel);
  REQUIRE(parsed.ok());
  // v13 appended dma_pending and dma_overlap; a v12 writer had every other record.
  auto recs = parsed->records;
  const size_t fields = state_fields().size();
  REQUIRE(recs[fields - 2].name == "dma_pending");
  REQUIRE(recs[fields - 1].name == "dma_overlap");
  recs[fields - 2].bytes = {0x47, 0};  // what the v13 load must not see
  const Bytes v13_like = write_save_state(rom, MemoryModel::Dmg, SaveStateKind::Kernel, recs);
  recs.erase(recs.begin() + (long)fields - 2, recs.begin() + (long)fields);
  const Bytes v12 =
      with_u32(write_save_state(rom, MemoryModel::Dmg, SaveStateKind::Kernel, recs), 8, 12);
  REQUIRE_MESSAGE(a->load_state(1, v12).ok(), error_of(a->load_state(1, v12)));
  CHECK(save(*a, 1) == now);  // the same machine, its DMA fields zero as the writer left them
  // The same records under ABI v13 are one short; v13's records under v12 one too many.
  CHECK(!a->load_state(1, with_u32(v12, 8, GBX_ABI_VERSION)).ok());
  CHECK(!a->load_state(1, with_u32(v13_like, 8, 12)).ok());
}

TEST_CASE("cpu: reset(mask) restores masked envs and leaves the others bit-identical") {
  const Rom rom = busy_rom();
  auto fresh = make<CpuBackend>(rom);
  const Bytes power_on = save(*fresh, 0);

  auto a = make<CpuBackend>(rom, 4);
  CHECK(save(*a, 2) == power_on);
  run(*a, 6);
  // Make the envs differ: env k runs k extra frames from its own loaded state.
  std::vector<Bytes> states;
  for (int k = 0; k < 4; ++k) {
    auto one = make<CpuBackend>(rom);
    run(*one, 6 + 3 * k);
    states.push_back(save(*one, 0));
    load(*a, k, states[k]);
  }
  std::vector<Bytes> before;
  for (int k = 0; k < 4; ++k) before.push_back(save(*a, k));

  // Power-on.
  REQUIRE(a->reset(Bytes{1, 0, 0, 1}).ok());
  CHECK(save(*a, 0) == power_on);
  CHECK(save(*a, 1) == before[1]);
  CHECK(save(*a, 2) == before[2]);
  CHECK(save(*a, 3) == power_on);

  // One shared blob.
  REQUIRE(a->set_reset_state({states[3]}).ok());
  CHECK(save(*a, 1) == before[1]);  // choosing a reset state changes no env
  REQUIRE(a->reset(Bytes{0, 1, 0, 0}).ok());
  CHECK(save(*a, 0) == power_on);
  CHECK(save(*a, 1) == states[3]);
  CHECK(save(*a, 2) == before[2]);
  CHECK(save(*a, 3) == power_on);
  // The shared state is copied, not aliased: running the env leaves the next reset exact.
  run(*a, 2);
  REQUIRE(a->reset(Bytes{1, 1, 0, 0}).ok());
  CHECK(save(*a, 0) == states[3]);
  CHECK(save(*a, 1) == states[3]);
  // reset(seed) uses the reset state too.
  REQUIRE(a->reset(uint64_t{0}).ok());
  for (int k = 0; k < 4; ++k) CHECK(save(*a, k) == states[3]);

  // One blob per env.
  REQUIRE(a->set_reset_state(states).ok());
  run(*a, 3);
  const Bytes env2 = save(*a, 2);
  REQUIRE(a->reset(Bytes{1, 1, 0, 1}).ok());
  CHECK(save(*a, 0) == states[0]);
  CHECK(save(*a, 1) == states[1]);
  CHECK(save(*a, 2) == env2);
  CHECK(save(*a, 3) == states[3]);

  // Bad input changes nothing: mask size, blob count, one bad blob among good ones.
  CHECK(error_of(a->reset(Bytes{1, 1})).find("mask has 2 entries for 4 envs") != std::string::npos);
  CHECK(!a->set_reset_state({states[0], states[1]}).ok());
  Bytes broken = states[2];
  broken.resize(40);
  const auto st = a->set_reset_state({states[0], states[1], broken, states[3]});
  CHECK(error_of(st).find("reset state 2: save state is truncated") != std::string::npos);
  REQUIRE(a->reset(Bytes{0, 0, 1, 0}).ok());
  CHECK(save(*a, 2) == states[2]);  // the per-env states are still the ones kept

  // Back to power-on.
  REQUIRE(a->set_reset_state({}).ok());
  REQUIRE(a->reset(Bytes{0, 1, 0, 0}).ok());
  CHECK(save(*a, 1) == power_on);
  CHECK(save(*a, 0) == states[0]);
}

TEST_CASE("mgba: save, run M frames, load, run M frames: the same machine") {
  const Rom rom = busy_rom();
  auto a = make<MgbaBackend>(rom, 2);
  run(*a, 37);
  const Bytes blob = save(*a, 1);
  CHECK(blob[45] == (uint8_t)SaveStateKind::Mgba);
  run(*a, 23);
  const Observed x = observe(*a, 1);
  CHECK(x.bus[0xFF80] != 0);
  CHECK(!x.serial.empty());
  // Cartridge RAM is enabled and written.
  CHECK(std::count(x.bus.begin() + 0xA000, x.bus.begin() + 0xC000, 0xFF) < 0x1000);

  auto b = make<MgbaBackend>(rom, 2);
  run(*b, 5);
  load(*b, 0, blob);
  // Right after loading, the env is where env 1 of `a` was at frame 37.
  CHECK(b->frames(0).value() == 37);
  run(*b, 23);
  check_same(x, observe(*b, 0));
  CHECK(b->frames(0).value() == a->frames(1).value());
  CHECK(b->cycle_in_frame(0).value() == a->cycle_in_frame(1).value());

  // Masked reset: power-on, then the loaded blob.
  auto fresh = make<MgbaBackend>(rom);
  const Observed power_on = observe(*fresh, 0);
  const Observed env1 = observe(*b, 1);
  REQUIRE(b->reset(Bytes{1, 0}).ok());
  check_same(power_on, observe(*b, 0));
  check_same(env1, observe(*b, 1));
  REQUIRE(b->set_reset_state({blob}).ok());
  REQUIRE(b->reset(Bytes{1, 0}).ok());
  run(*b, 23);
  check_same(x, observe(*b, 0));
}

TEST_CASE("mgba: every built-in ROM round-trips mid-run") {
  for (const BuiltinRom& br : builtin_roms()) {
    CAPTURE(br.name);
    auto rom = load_rom("builtin:" + br.name);
    REQUIRE(rom.ok());
    const int n = br.frames_to_finish ? std::max(1, br.frames_to_finish / 2) : 9;
    auto a = make<MgbaBackend>(rom.value());
    run(*a, n);
    const Bytes blob = save(*a, 0);
    run(*a, n + 3);
    auto b = make<MgbaBackend>(rom.value());
    load(*b, 0, blob);
    run(*b, n + 3);
    check_same(observe(*a, 0), observe(*b, 0));
    CHECK(a->cycle_in_frame(0).value() == b->cycle_in_frame(0).value());
  }
}

TEST_CASE("mgba and the kernels refuse each other's blobs in one line") {
  const Rom rom = busy_rom();
  auto m = make<MgbaBackend>(rom);
  auto c = make<CpuBackend>(rom);
  run(*m, 2);
  run(*c, 2);
  const Bytes mgba_blob = save(*m, 0);
  const Bytes cpu_blob = save(*c, 0);
  const std::string e1 = error_of(m->load_state(0, cpu_blob));
  CHECK(e1.find("written by the kernel (cpu/cuda) backend") != std::string::npos);
  const std::string e2 = error_of(c->load_state(0, mgba_blob));
  CHECK(e2.find("written by the mgba backend") != std::string::npos);
  Bytes cut(mgba_blob.begin(), mgba_blob.end() - 100);
  CHECK(error_of(m->load_state(0, cut)).find("truncated") != std::string::npos);
  auto other = make<MgbaBackend>(busy_rom("OTHER"));
  CHECK(error_of(other->load_state(0, mgba_blob)).find("another ROM") != std::string::npos);
}

namespace {

Bytes read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), (std::streamsize)b.size());
}

// The "env K: PC=..." line of gbx-run's output.
std::string state_line(const std::string& out) {
  const auto at = out.find("env 0: PC=");
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

}  // namespace

TEST_CASE("gbx-run run --save-state / --load-state round trip and bad states") {
  test::TempDir d;
  const auto rom_path = d.path / "busy.gb";
  write_bytes(rom_path, busy_rom().bytes);
  const std::string run = test::tool("gbx-run") + " run --rom '" + rom_path.string() + "' ";
  const auto p = [&](const char* name) { return (d.path / name).string(); };

  auto r1 = test::run_command(run + "--frames 30 --envs 2 --env 1 --save-state " + p("a.gbxs"));
  REQUIRE_MESSAGE(r1.exit_code == 0, r1.output);
  CHECK(r1.output.find("saved env 1") != std::string::npos);
  auto r2 = test::run_command(run + "--frames 20 --envs 3 --load-state " + p("a.gbxs") +
                              " --save-state " + p("b.gbxs"));
  REQUIRE_MESSAGE(r2.exit_code == 0, r2.output);
  auto r3 = test::run_command(run + "--frames 50 --save-state " + p("c.gbxs"));
  REQUIRE_MESSAGE(r3.exit_code == 0, r3.output);
  CHECK(read_bytes(p("b.gbxs")) == read_bytes(p("c.gbxs")));
  CHECK(!state_line(r2.output).empty());
  CHECK(state_line(r2.output) == state_line(r3.output));
  // The same through the reference backend.
  auto m1 = test::run_command(run + "--backend mgba --frames 30 --save-state " + p("m.gbxs"));
  REQUIRE_MESSAGE(m1.exit_code == 0, m1.output);
  auto m2 = test::run_command(run + "--backend mgba --frames 20 --load-state " + p("m.gbxs"));
  REQUIRE_MESSAGE(m2.exit_code == 0, m2.output);
  auto m3 = test::run_command(run + "--backend mgba --frames 50");
  REQUIRE_MESSAGE(m3.exit_code == 0, m3.output);
  CHECK(!state_line(m2.output).empty());
  CHECK(state_line(m2.output) == state_line(m3.output));

  auto refused = [&](const std::string& cmd, const std::string& needle) {
    const auto out = p("out.gbxs");
    const auto r = test::run_command(cmd + " --save-state " + out);
    CAPTURE(r.output);
    CHECK(r.exit_code == 1);
    CHECK(test::count_lines(r.output) == 1);
    CHECK(r.output.rfind("error: ", 0) == 0);
    CHECK(r.output.find(needle) != std::string::npos);
    CHECK(!std::filesystem::exists(out));
    for (const auto& e : std::filesystem::directory_iterator(d.path))
      CHECK_MESSAGE(e.path().string().find(".tmp") == std::string::npos, e.path().string());
  };
  const Bytes good = read_bytes(p("a.gbxs"));
  write_bytes(p("trunc.gbxs"), Bytes(good.begin(), good.begin() + (long)good.size() / 2));
  refused(run + "--load-state " + p("trunc.gbxs"), "truncated");
  refused(test::tool("gbx-run") + " run --rom builtin:ALU_LOOP --load-state " + p("a.gbxs"),
          "another ROM");
  refused(run + "--load-state " + p("missing.gbxs"), "missing.gbxs");
  refused(run + "--load-state " + rom_path.string(), "not a GBX save state");
  refused(run + "--backend mgba --load-state " + p("a.gbxs"), "kernel");
  // An unwritable destination: one line, nothing left behind, before running anything.
  const auto r = test::run_command(run + "--save-state " + p("no/such/dir/x.gbxs"));
  CHECK(r.exit_code == 2);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.find("does not exist") != std::string::npos);
}
