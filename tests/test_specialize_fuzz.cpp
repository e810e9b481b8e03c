// The specializer's exactness rule on programs nobody wrote by hand: random ROMs (random
// instructions and operands, loops, calls, RST and interrupt handlers, banked code, code
// copied to WRAM/HRAM and rewritten, random writes to I/O and MBC registers, HALT/STOP/EI/DI;
// "wild" ROMs also run random control flow and whatever the stack returns to) are profiled,
// specialized and stepped beside the interpreter with random actions: every env's save state
// must be byte-identical.
//
// GBX_FUZZ_SEEDS picks the seeds ("1-200", "7", "3,9"); the default is six, so CI stays short. A
// failure names the seed: GBX_FUZZ_SEEDS=N reruns it, GBX_FUZZ_DUMP=DIR writes its ROM there.
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "spec_share.h"

using namespace gbx;

namespace {

constexpr std::array<uint8_t, 11> kIllegal = {0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB,
                                              0xEC, 0xED, 0xF4, 0xFC, 0xFD};

bool is_illegal(uint8_t op) {
  for (uint8_t x : kIllegal)
    if (x == op) return true;
  return false;
}

// Opcodes that move control or SP, or stop the CPU: a "tame" program places them itself so
// that calls return and the stack stays where it was put.
bool is_control_or_sp(uint8_t op) {
  static constexpr uint8_t ops[] = {0x18, 0x20, 0x28, 0x30, 0x38,                    // JR
                                    0xC2, 0xC3, 0xCA, 0xD2, 0xDA, 0xE9,              // JP
                                    0xC4, 0xCC, 0xCD, 0xD4, 0xDC,                    // CALL
                                    0xC0, 0xC8, 0xC9, 0xD0, 0xD8, 0xD9,              // RET, RETI
                                    0xC7, 0xCF, 0xD7, 0xDF, 0xE7, 0xEF, 0xF7, 0xFF,  // RST
                                    0x31, 0xF9, 0xE8, 0x33, 0x3B,                    // SP
                                    0xC1, 0xD1, 0xE1, 0xF1, 0xC5, 0xD5, 0xE5, 0xF5,  // POP, PUSH
                                    0x10, 0x76, 0xF3, 0xFB};  // STOP HALT DI EI
  for (uint8_t x : ops)
    if (x == op) return true;
  return false;
}

struct Mbc {
  uint8_t cart_type;
  uint8_t ram_size_code;
  const char* name;
};
constexpr std::array<Mbc, 5> kMbcs = {{{0x00, 0x00, "none"},
                                       {0x03, 0x02, "MBC1+RAM+BATTERY"},
                                       {0x06, 0x00, "MBC2+BATTERY"},
                                       {0x13, 0x03, "MBC3+RAM+BATTERY"},
                                       {0x1B, 0x03, "MBC5+RAM+BATTERY"}}};

// What the generator needs of each opcode: its length, and which of B, C, D, E it writes (bit
// 0-3), so that a counted loop's body leaves its counter alone.
struct OpInfo {
  std::array<int, 256> length{};
  std::array<uint8_t, 256> writes{};
  std::array<uint8_t, 256> cb_writes{};
};

uint8_t counter_regs_written(const std::string& mnemonic) {
  const auto space = mnemonic.find(' ');
  if (space == std::string::npos) return 0;
  const std::string op = mnemonic.substr(0, space), args = mnemonic.substr(space + 1);
  static const std::set<std::string> writers = {"LD", "INC", "DEC", "POP", "RLC",  "RRC", "RL",
                                                "RR", "SLA", "SRA", "SRL", "SWAP", "RES", "SET"};
  if (!writers.count(op)) return 0;
  std::string dest = args.substr(0, args.find(','));
  if (op == "RES" || op == "SET") dest = args.substr(args.find(',') + 1);
  uint8_t m = 0;
  if (dest == "B" || dest == "BC") m |= 1;
  if (dest == "C" || dest == "BC") m |= 2;
  if (dest == "D" || dest == "DE") m |= 4;
  if (dest == "E" || dest == "DE") m |= 8;
  return m;
}

// Writes code into one 16 KiB bank image; addresses are CPU addresses (0x0000 or 0x4000 based).
class Emitter {
 public:
  Emitter(std::vector<uint8_t>& image, uint32_t image_base, uint16_t cpu_base, const OpInfo& ops,
          std::mt19937_64& rng)
      : img_(image), image_base_(image_base), cpu_base_(cpu_base), ops_(ops), rng_(rng) {}

  uint16_t pc() const { return pc_; }
  void at(uint16_t cpu_addr) { pc_ = cpu_addr; }
  bool room(int bytes) const { return pc_ + bytes < cpu_base_ + 0x4000 - 8; }

  void byte(uint8_t b) {
    img_[image_base_ + (pc_ - cpu_base_)] = b;
    ++pc_;
  }
  void op(uint8_t o) { byte(o); }
  void op8(uint8_t o, uint8_t v) { byte(o), byte(v); }
  void op16(uint8_t o, uint16_t v) { byte(o), byte((uint8_t)v), byte((uint8_t)(v >> 8)); }
  void set(int at, uint8_t v) { img_[image_base_ + (uint32_t)(at - cpu_base_)] = v; }
  void patch16(int at, uint16_t v) { set(at, (uint8_t)v), set(at + 1, (uint8_t)(v >> 8)); }

  uint32_t r(uint32_t n) { return (uint32_t)(rng_() % n); }
  bool chance(int percent) { return (int)r(100) < percent; }

  // One random instruction with random operands; `tame`: none that moves control or SP;
  // none that writes the registers in `keep` (bit 0-3: B C D E).
  void random_instruction(bool tame, uint8_t keep = 0) {
    for (;;) {
      const uint8_t o = (uint8_t)r(256);
      if (is_illegal(o) || (tame && is_control_or_sp(o)) || (ops_.writes[o] & keep)) continue;
      if (o == 0xCB) {
        const uint8_t c = (uint8_t)r(256);
        if (ops_.cb_writes[c] & keep) continue;
        return op8(0xCB, c);
      }
      if (o == 0x10) return op8(0x10, 0x00);
      byte(o);
      for (int i = 1; i < ops_.length[o]; ++i) byte(immediate_byte(o, i));
      return;
    }
  }

  // Writes through a constant address aim at something that matters more often than chance
  // would: WRAM, HRAM, I/O registers, MBC registers, cartridge RAM.
  uint8_t immediate_byte(uint8_t o, int i) {
    const bool a16_store = o == 0xEA || o == 0x08;
    if (a16_store) {
      const uint16_t a = interesting_address();
      return i == 1 ? (uint8_t)a : (uint8_t)(a >> 8);
    }
    if (o == 0xE0 || o == 0xF0) return interesting_io();
    return (uint8_t)r(256);
  }

  uint16_t interesting_address() {
    switch (r(8)) {
      case 0:
        return (uint16_t)(0x0000 + r(0x2000));  // RAM enable
      case 1:
        return (uint16_t)(0x2000 + r(0x2000));  // ROM bank
      case 2:
        return (uint16_t)(0x4000 + r(0x4000));  // RAM bank / mode / RTC latch
      case 3:
        return (uint16_t)(0xA000 + r(0x2000));  // cartridge RAM
      case 4:
        return (uint16_t)(0xFF00 | interesting_io());
      case 5:
        return (uint16_t)(0xFF80 + r(0x60));  // HRAM below the routines
      default:
        return (uint16_t)(0xC000 + r(0x1000));  // WRAM below the stack
    }
  }
  uint8_t interesting_io() {
    static constexpr uint8_t regs[] = {0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x07, 0x0F,
                                       0x10, 0x12, 0x26, 0x40, 0x41, 0x42, 0x43, 0x44,
                                       0x45, 0x46, 0x47, 0x4A, 0x4B, 0xFF, 0x80, 0x90};
    return regs[r(sizeof regs)];
  }

  void jr_back(uint8_t opcode, uint16_t target) {
    const int d = (int)target - (int)(pc_ + 2);
    REQUIRE(d >= -128);
    op8(opcode, (uint8_t)(int8_t)d);
  }

 private:
  std::vector<uint8_t>& img_;
  uint32_t image_base_;
  uint16_t cpu_base_;
  uint16_t pc_ = 0;
  const OpInfo& ops_;
  std::mt19937_64& rng_;
};

struct FuzzRom {
  std::vector<uint8_t> bytes;
  std::string what;
};

// A random program: `wild` lets random control flow loose after the structured start.
FuzzRom random_rom(uint64_t seed, bool wild, const OpInfo& ops) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  const Mbc mbc = kMbcs[rng() % kMbcs.size()];
  const int size_code = mbc.cart_type == 0x00 ? 0 : 1 + (int)(rng() % 3);  // 32-256 KiB
  const int banks = 2 << size_code;
  std::vector<uint8_t> image((size_t)banks * 0x4000, 0);
  std::array<std::vector<uint16_t>, 64> subs;  // per bank: entry points of subroutines

  auto bank_write = [&](Emitter& e, int bank) {  // selects `bank` at 0x4000 (via A)
    e.op8(0x3E, (uint8_t)bank);
    if (mbc.cart_type == 0x06) return e.op16(0xEA, 0x2100);
    e.op16(0xEA, 0x2000);
    if (mbc.cart_type == 0x1B) e.op8(0x3E, 0), e.op16(0xEA, 0x3000);
  };

  // A straight run of `n` random instructions, or a short structure around one.
  std::function<void(Emitter&, int, int)> snippet = [&](Emitter& e, int bank, int depth) {
    const int kind = (int)e.r(100);
    if (kind < 40 || depth > 2) {
      for (int i = 0, n = 1 + (int)e.r(6); i < n; ++i) e.random_instruction(true);
    } else if (kind < 52) {                                      // counted loop
      static constexpr uint8_t ld[] = {0x06, 0x0E, 0x16, 0x1E};  // LD B/C/D/E,d8
      static constexpr uint8_t dec[] = {0x05, 0x0D, 0x15, 0x1D};
      const int reg = (int)e.r(4);
      e.op8(ld[reg], (uint8_t)(1 + e.r(40)));
      const uint16_t top = e.pc();
      for (int i = 0, n = 1 + (int)e.r(4); i < n; ++i) e.random_instruction(true, 1 << reg);
      e.op(dec[reg]);
      e.jr_back(0x20, top);
    } else if (kind < 60) {  // skip the next run on a random condition
      static constexpr uint8_t jr[] = {0x20, 0x28, 0x30, 0x38};
      const uint16_t at = e.pc();
      e.op8(jr[e.r(4)], 0);
      snippet(e, bank, depth + 1);
      const int d = e.pc() - (at + 2);
      e.set(at + 1, (uint8_t)(d < 128 ? d : 0));
    } else if (kind < 70 && !subs[bank].empty()) {  // call a subroutine of this bank or 0
      const auto& s = subs[bank];
      e.op16(e.chance(20) ? 0xC4 + 8 * (uint8_t)e.r(2) : 0xCD, s[e.r((uint32_t)s.size())]);
    } else if (kind < 74 && !subs[0].empty()) {
      e.op16(0xCD, subs[0][e.r((uint32_t)subs[0].size())]);
    } else if (kind < 78) {  // RST
      e.op((uint8_t)(0xC7 + 8 * e.r(8)));
    } else if (kind < 82 && depth == 0 && banks > 2) {  // banked call, from main only
      const int b = 1 + (int)e.r((uint32_t)banks - 1);
      bank_write(e, b);
      if (!subs[b].empty()) e.op16(0xCD, subs[b][e.r((uint32_t)subs[b].size())]);
    } else if (kind < 86) {  // balanced push/pop around a run
      e.op((uint8_t)(0xC5 + 0x10 * e.r(4)));
      for (int i = 0, n = 1 + (int)e.r(3); i < n; ++i) e.random_instruction(true);
      e.op((uint8_t)(0xC1 + 0x10 * e.r(4)));
    } else if (kind < 90) {  // an indirect call: push the return address, JP HL
      const auto& s = subs[bank].empty() ? subs[0] : subs[bank];
      if (s.empty()) return;
      const uint16_t at = e.pc();
      e.op16(0x21, 0);  // LD HL,after (patched)
      e.op(0xE5);
      e.op16(0x21, s[e.r((uint32_t)s.size())]);
      e.op(0xE9);
      e.patch16((uint16_t)(at + 1), e.pc());
    } else if (kind < 94) {  // I/O or MBC register poke through LDH / LD (a16)
      e.op8(0x3E, (uint8_t)e.r(256));
      if (e.chance(60))
        e.op8(0xE0, e.interesting_io());
      else
        e.op16(0xEA, e.interesting_address());
    } else if (kind < 97) {  // interrupts on/off, HALT, STOP
      static constexpr uint8_t ops[] = {0xFB, 0xF3, 0x76, 0xFB, 0x76, 0x10};
      const uint8_t o = ops[e.r(sizeof ops)];
      if (o == 0x10)
        e.op8(0x10, 0x00);
      else
        e.op(o);
    } else {  // write a routine to RAM (rewriting its immediate on the way) and call it
      const uint16_t dst =
          e.chance(50) ? (uint16_t)(0xC800 + 16 * e.r(64)) : (uint16_t)(0xFFA0 + 16 * e.r(3));
      e.op16(0x21, dst);  // LD HL,dst
      std::vector<uint8_t> body;
      for (int i = 0, n = 1 + (int)e.r(4); i < n; ++i) {
        uint8_t o;
        do o = (uint8_t)e.r(256);
        while (is_illegal(o) || is_control_or_sp(o) || o == 0xCB || ops.length[o] != 1 ||
               o == 0x22 || o == 0x32 || o == 0x2A || o == 0x3A || (o >= 0x70 && o <= 0x77));
        body.push_back(o);
      }
      body.push_back(0x3E), body.push_back((uint8_t)e.r(256));  // LD A,d8: rewritten below
      body.push_back(0xC9);
      for (uint8_t b : body) e.op8(0x3E, b), e.op(0x22);  // LD A,b; LD (HL+),A
      e.op16(0xCD, dst);
      e.op8(0x3E, (uint8_t)e.r(256));
      e.op16(0xEA, (uint16_t)(dst + body.size() - 2));
      e.op16(0xCD, dst);
    }
  };

  // Subroutines first (so calls have targets), bank by bank; each ends in RET.
  auto emit_subs = [&](int bank, uint16_t from, int count) {
    const uint32_t base = bank == 0 ? 0 : (uint32_t)bank * 0x4000;
    const uint16_t cpu = bank == 0 ? 0x0000 : 0x4000;
    Emitter e(image, base, cpu, ops, rng);
    e.at(from);
    for (int i = 0; i < count && e.room(200); ++i) {
      const uint16_t entry = e.pc();  // listed after its body: calls go to earlier ones only
      for (int k = 0, n = 1 + (int)e.r(5); k < n && e.room(120); ++k) snippet(e, bank, 2);
      if (e.chance(20)) e.op((uint8_t)(0xC0 + 8 * e.r(4)));  // RET cc on the way
      for (int k = 0, n = (int)e.r(3); k < n; ++k) e.random_instruction(true);
      e.op(0xC9);
      subs[bank].push_back(entry);
    }
    return e.pc();
  };
  uint16_t next0 = emit_subs(0, 0x2000, 24);
  for (int b = 1; b < banks; ++b) emit_subs(b, (uint16_t)(0x4000 + 0x100 * (int)(rng() % 8)), 12);
  // Banked subroutines may call each other and bank 0: a second pass adds callers.
  for (int b = 1; b < banks; ++b) emit_subs(b, 0x6000, 8);

  // RST and interrupt vectors jump to handlers; interrupt handlers keep AF and end in RETI.
  Emitter v(image, 0, 0, ops, rng);
  v.at(next0);
  std::vector<uint16_t> handlers;
  for (int i = 0; i < 13; ++i) {
    handlers.push_back(v.pc());
    const bool irq = i >= 8;
    if (irq) v.op(0xF5);
    for (int k = 0, n = 1 + (int)v.r(6); k < n; ++k) v.random_instruction(true);
    if (irq && v.chance(30)) v.op8(0x3E, (uint8_t)v.r(256)), v.op8(0xE0, v.interesting_io());
    if (irq) v.op(0xF1);
    v.op(irq ? 0xD9 : 0xC9);
  }
  for (int i = 0; i < 13; ++i) {
    v.at((uint16_t)(i < 8 ? 8 * i : 0x40 + 8 * (i - 8)));
    v.op16(0xC3, handlers[i]);
  }

  // Main: stack, a timer, some interrupts, then the loop of snippets.
  Emitter m(image, 0, 0, ops, rng);
  m.at(0x0150);
  m.op16(0x31, 0xDFF0);
  m.op8(0x3E, (uint8_t)(4 | m.r(4)));
  m.op8(0xE0, 0x07);
  m.op8(0x3E, (uint8_t)(0x04 | m.r(32)));  // IE: the timer (HALT wakes), more at random
  m.op8(0xE0, 0xFF);
  m.op(0xFB);
  const uint16_t loop = m.pc();
  for (int i = 0, n = 20 + (int)m.r(60); i < n && m.pc() < 0x1F00; ++i) snippet(m, 0, 0);
  if (wild) {
    // Random control flow: jumps and calls anywhere, SP moves, whatever RET finds.
    for (int i = 0, n = 20 + (int)m.r(200); i < n && m.pc() < 0x1F00; ++i)
      m.random_instruction(false);
  }
  m.op16(0xC3, loop);

  RomSpec spec;
  spec.title = "FUZZ";
  spec.cart_type = mbc.cart_type;
  spec.rom_size_code = (uint8_t)size_code;
  spec.ram_size_code = mbc.ram_size_code;
  spec.program.assign(image.begin() + 0x150, image.begin() + 0x4000);
  spec.patches.emplace_back(0, std::vector<uint8_t>(image.begin(), image.begin() + 0x100));
  for (int b = 1; b < banks; ++b)
    spec.patches.emplace_back(
        (uint32_t)b * 0x4000,
        std::vector<uint8_t>(image.begin() + b * 0x4000, image.begin() + (b + 1) * 0x4000));
  auto built = try_build_rom(spec);
  REQUIRE_MESSAGE(built.ok(), (built.ok() ? "" : built.error().message));
  std::ostringstream what;
  what << "seed " << seed << (wild ? " wild" : " tame") << ", " << mbc.name << ", "
       << (32 << size_code) << " KiB";
  return {std::move(built.value()), what.str()};
}

std::vector<uint64_t> seeds_from_env(std::vector<uint64_t> fallback) {
  const char* s = std::getenv("GBX_FUZZ_SEEDS");
  if (!s || !*s) return fallback;
  std::vector<uint64_t> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto dash = part.find('-');
    const uint64_t lo = std::stoull(part.substr(0, dash));
    const uint64_t hi = dash == std::string::npos ? lo : std::stoull(part.substr(dash + 1));
    for (uint64_t x = lo; x <= hi; ++x) out.push_back(x);
  }
  return out;
}

std::unique_ptr<Backend> make_cpu(const Rom& rom, std::shared_ptr<const SpecPlan> plan,
                                  PpuModel ppu) {
  BackendConfig cfg;
  cfg.ppu = ppu;
  cfg.num_envs = 3;
  cfg.stage = Stage::FullStep;
  cfg.render = true;
  cfg.threads = 1;
  cfg.specialize = std::move(plan);
  auto be = make_backend("cpu", rom, cfg);
  REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message));
  return std::move(be.value());
}

// Steps the interpreter and `plan`'s kernel (both with pixel model `ppu`) side by side with the
// seed's random actions; the envs whose end states or screens differ.
// With `carried`, also how much of the run the specialized blocks carried.
std::vector<int> differing_envs(const Rom& rom, std::shared_ptr<const SpecPlan> plan, uint64_t seed,
                                PpuModel ppu, test::SpecShare* carried = nullptr,
                                std::vector<std::vector<uint8_t>>* ref_screens = nullptr) {
  auto ref = make_cpu(rom, nullptr, ppu);
  auto dut = make_cpu(rom, std::move(plan), ppu);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> actions(3);
  for (int f = 0; f < 60; ++f) {
    for (auto& x : actions) x = (int32_t)(rng() % 3 == 0 ? rng() & 0xFF : 0);
    REQUIRE(ref->step(actions).ok());
    REQUIRE(dut->step(actions).ok());
  }
  std::vector<int> out;
  for (int env = 0; env < 3; ++env) {
    auto a = ref->save_state(env);
    auto b = dut->save_state(env);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    auto sa = ref->read_screen(env);
    auto sb = dut->read_screen(env);
    REQUIRE(sa.ok());
    REQUIRE(sb.ok());
    if (a.value() != b.value() || sa.value() != sb.value()) out.push_back(env);
    if (ref_screens) ref_screens->push_back(sa.value());
  }
  if (carried) *carried = test::spec_share(*dut, 3);
  return out;
}

// The smallest half-by-half subset of the plan's blocks that still differs, disassembled: what
// a failing seed's report needs to point at the block whose code is wrong.
std::string culprit_blocks(const Rom& rom, const SpecProfile& profile,
                           const std::vector<OpcodeEntry>& table, uint64_t seed, PpuModel ppu,
                           std::vector<SpecBlock> blocks) {
  auto plan_of = [&](const std::vector<SpecBlock>& bs) {
    SpecProfile sub = profile;
    sub.blocks = bs;
    SpecLimits all;
    all.coverage = 1.0;
    auto plan = make_spec_plan(table, rom.bytes, sub, all);
    REQUIRE(plan.ok());
    return plan.value();
  };
  // Delta debugging (ddmin): drop chunks of blocks while the rest still differs.
  size_t chunks = 2;
  while (blocks.size() > 1) {
    bool dropped = false;
    const size_t size = blocks.size();
    for (size_t c = 0; c < chunks && !dropped; ++c) {
      const size_t lo = size * c / chunks, hi = size * (c + 1) / chunks;
      std::vector<SpecBlock> rest(blocks.begin(), blocks.begin() + (std::ptrdiff_t)lo);
      rest.insert(rest.end(), blocks.begin() + (std::ptrdiff_t)hi, blocks.end());
      if (!rest.empty() && !differing_envs(rom, plan_of(rest), seed, ppu).empty()) {
        blocks = std::move(rest);
        chunks = std::max<size_t>(chunks - 1, 2);
        dropped = true;
      }
    }
    if (dropped) continue;
    if (chunks >= size) break;
    chunks = std::min(chunks * 2, size);
  }
  std::ostringstream out;
  const auto plan = plan_of(blocks);
  for (const SpecBlock& b : plan->blocks) {
    out << "\n  block " << b.bank << ":" << std::hex << b.addr << std::dec << ":";
    for (const SpecInstr& in :
         spec_decode_block(table, rom.bytes, b.bank, b.addr, (int)b.instructions))
      out << "\n    " << std::hex << in.addr << std::dec << "  " << spec_disassemble(in);
  }
  return out.str();
}

}  // namespace

TEST_CASE("random ROMs: specialized and interpreter kernels end identically") {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  OpInfo ops;
  for (const auto& o : bundle.value().opcodes()) {
    if (o.cb) {
      ops.cb_writes[(size_t)o.code] = counter_regs_written(o.mnemonic);
    } else {
      ops.length[(size_t)o.code] = o.length;
      ops.writes[(size_t)o.code] = counter_regs_written(o.mnemonic);
    }
  }
  for (int i = 0; i < 256; ++i)
    if (!is_illegal((uint8_t)i)) REQUIRE(ops.length[(size_t)i] >= 1);
  CHECK(ops.writes[0x05] == 1);     // DEC B
  CHECK(ops.writes[0xD1] == 12);    // POP DE
  CHECK(ops.cb_writes[0xC9] == 2);  // SET 1,C
  CHECK(ops.cb_writes[0x40] == 0);  // BIT 0,B

  // Odd seeds tame, even ones wild. The default set covers MBC1, 2, 5 and none; seeds 4 and 11
  // failed before the fix of blocks entered right after EI with an interrupt pending.
  int blocks_total = 0, seeds_fifo_drew_differently = 0;
  int64_t in_blocks = 0, retired = 0;
  for (uint64_t seed : seeds_from_env({1, 2, 3, 4, 6, 11})) {
    const FuzzRom fr = random_rom(seed, seed % 2 == 0, ops);
    CAPTURE(fr.what);
    if (const char* dir = std::getenv("GBX_FUZZ_DUMP")) {
      std::ofstream(std::filesystem::path(dir) / ("fuzz-" + std::to_string(seed) + ".gb"),
                    std::ios::binary)
          .write((const char*)fr.bytes.data(), (std::streamsize)fr.bytes.size());
    }
    auto rom = rom_from_bytes("FUZZ" + std::to_string(seed), fr.bytes);
    REQUIRE_MESSAGE(rom.ok(), (rom.ok() ? "" : rom.error().message));
    ProfileRunOptions po;
    po.frames = 30;
    po.seed = seed;
    auto prof = profile_rom(rom.value(), po);
    REQUIRE_MESSAGE(prof.ok(), (prof.ok() ? "" : prof.error().message));
    SpecLimits limits;
    limits.max_total_instructions = 1200;  // compile time: about 1 ms per instruction
    auto plan = spec_plan_for(rom.value(), prof.value(), limits);
    REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
    blocks_total += (int)plan.value()->blocks.size();
    // Both pixel models: the random programs write LCDC, STAT, SCY, SCX and LY/LYC at random
    // times, mode 3 included, where the fifo renderer's pipeline runs dot by dot.
    std::vector<std::vector<uint8_t>> screens[2];
    for (PpuModel ppu : {PpuModel::Line, PpuModel::Fifo}) {
      CAPTURE(to_string(ppu));
      test::SpecShare carried;
      const std::vector<int> bad = differing_envs(rom.value(), plan.value(), seed, ppu, &carried,
                                                  &screens[ppu == PpuModel::Fifo]);
      in_blocks += carried.in_blocks;
      retired += carried.retired;
      if (!bad.empty()) {
        FAIL_CHECK(fr.what << " (ppu=" << to_string(ppu) << "): " << bad.size()
                           << " of 3 envs differ; blocks that differ alone:"
                           << culprit_blocks(rom.value(), prof.value(), bundle.value().opcodes(),
                                             seed, ppu, plan.value()->blocks));
      }
      MESSAGE(fr.what << " (ppu=" << to_string(ppu) << "): " << plan.value()->blocks.size()
                      << " blocks specialized, " << 100 * carried.share() << "% of "
                      << carried.retired << " instructions retired in them (the plan covers "
                      << 100 * test::plan_coverage(prof.value(), *plan.value())
                      << "% of the profile)");
    }
    if (screens[0] != screens[1]) ++seeds_fifo_drew_differently;
  }
  // The programs must give the specializer something to do, and the blocks must run, or the
  // check proves nothing.
  CHECK(blocks_total > 0);
  const test::SpecShare all{in_blocks, retired};
  MESSAGE("all seeds: " << 100 * all.share() << "% of " << retired
                        << " instructions retired in specialized blocks");
  CHECK(all.share() >= 0.25);
  // The fifo runs must reach the pipeline (registers written during mode 3), or they would
  // only repeat the line runs: on some seed the two models' screens differ.
  MESSAGE(seeds_fifo_drew_differently << " seeds drew a screen differently with fifo than line");
  CHECK(seeds_fifo_drew_differently > 0);
}
