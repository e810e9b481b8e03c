// Block discovery for ROM-specialized kernels: decoding with the opcode table, the rules for
// where a block ends, leaders from static control flow and from a profile, and the hot set.
#include "gbx/engine/specialize.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "gbx/engine/cache.h"

namespace gbx {
namespace {

using Json = nlohmann::json;

// How an instruction shapes a block: its family's role, as the templates declare it
// (templates/sm83/families.tsv, checked when they load).
using Role = FlowRole;

Role role_of(const OpcodeEntry& e) {
  // LD B,B: the test-ROM end marker (debug option ldbb_trap) stays with the interpreter.
  if (!e.cb && e.code == 0x40) return Role::Excluded;
  return e.role;
}

// A constant-address write to the MBC registers (0000-7FFF) ends a block of the switchable
// window (4000-7FFF): it is there to switch banks, and the next instruction comes from the
// bank it selects. A block in bank 0 goes on: its own code stays mapped, so the home-bank
// trampolines of banked code (Pokemon Red's Bankswitch: save the bank, write it, call
// through HL, write the old one back) are one block, not three. What the write changes is
// checked as for any slow access (kernel/spec_bus.h spec_left): the 0000-3FFF window (MBC1's
// mode) ends the block; the 4000-7FFF window ends only blocks that run from it.
// Every other access, whatever it reaches (VRAM, cartridge RAM, OAM, I/O, IE), keeps the
// block going: one beyond ROM, WRAM and HRAM runs the interpreter's own slow path
// (kernel/spec_bus.h), and the block leaves after it only when it changed what the dispatch
// admitted the block on (the next event, the OAM DMA, the ROM window it runs from, an
// interrupt it would take, the run state), as non-constant addresses always did. Ending at
// every I/O access split polling loops (Tobu Tobu Girl's STAT wait before each VRAM byte:
// LDH A,(41); AND 2; JR NZ) into blocks of one or two instructions, too short for the
// wait-loop skip, and cut joypad and sound code after each register.
bool mbc_register(uint32_t a) { return a < 0x8000u; }

// Whether the block goes on after the instruction's constant-address access (if it has one).
bool constant_access_quiet(const SpecInstr& in) {
  if (in.addr < 0x4000u) return true;  // bank 0 code: see above
  const std::string& f = in.op->family;
  const uint32_t a8 = 0xFF00u | in.bytes[1];
  const uint32_t a16 = (uint32_t)in.bytes[1] | ((uint32_t)in.bytes[2] << 8);
  if (f == "ldh_da8_a") return !mbc_register(a8);
  if (f == "ld_da16_a") return !mbc_register(a16);
  if (f == "ld_da16_sp") return !mbc_register(a16) && !mbc_register((a16 + 1) & 0xFFFFu);
  return true;
}

uint64_t rom_offset(uint32_t bank, uint16_t addr) {
  return (uint64_t)bank * 0x4000u + (addr & 0x3FFFu);
}

struct Table {
  const OpcodeEntry* base[256] = {};
  const OpcodeEntry* cb[256] = {};
  explicit Table(const std::vector<OpcodeEntry>& t) {
    for (const auto& e : t) (e.cb ? cb : base)[e.code & 0xFF] = &e;
  }
};

// Decodes one instruction at (bank, addr); false if it does not fit in the region or ROM.
bool decode_at(const Table& t, const std::vector<uint8_t>& rom, uint32_t bank, uint16_t addr,
               SpecInstr& in) {
  const uint64_t off = rom_offset(bank, addr);
  if (off >= rom.size()) return false;
  in = SpecInstr{};
  in.addr = addr;
  in.op = t.base[rom[off]];
  if (!in.op) return false;
  // The table gives the CB prefix 1 byte (its second byte is fetched by the CB dispatch);
  // as a block instruction it is 2 bytes, the second selecting the operation.
  const bool prefix = in.op->family == "prefix_cb";
  in.length = prefix ? 2 : in.op->length;
  in.cycles = in.op->cycles;
  const uint32_t region_end = addr < 0x4000u ? 0x4000u : 0x8000u;
  if ((uint32_t)addr + in.length > region_end || off + in.length > rom.size()) return false;
  for (int i = 0; i < in.length; ++i) in.bytes[i] = rom[off + i];
  if (prefix) {
    in.cb = t.cb[in.bytes[1]];
    if (!in.cb) return false;
    in.cycles = in.cb->cycles;
  }
  return true;
}

// Static targets of a transfer, as ROM offsets in the bank the code runs from (a target in
// the switchable region seen from bank 0 is known only for 32 KiB ROMs).
void static_targets(const SpecInstr& in, uint32_t bank, size_t rom_size,
                    std::vector<uint64_t>& out) {
  const std::string& f = in.op->family;
  uint32_t target = 0x10000u;
  if (f == "jr" || f == "jr_cc")
    target = (uint32_t)(in.addr + in.length + (int8_t)in.bytes[1]) & 0xFFFFu;
  if (f == "jp" || f == "jp_cc" || f == "call" || f == "call_cc")
    target = (uint32_t)in.bytes[1] | ((uint32_t)in.bytes[2] << 8);
  if (f == "rst") target = in.bytes[0] & 0x38u;
  if (target >= 0x8000u) return;
  if (target < 0x4000u) {
    out.push_back(target);
  } else if (bank >= 1) {
    out.push_back(rom_offset(bank, (uint16_t)target));
  } else if (rom_size <= 0x8000u) {
    out.push_back(target);
  }
}

void bank_addr_of(uint64_t off, uint32_t& bank, uint16_t& addr) {
  bank = (uint32_t)(off >> 14);
  addr = (uint16_t)(bank == 0 ? off : 0x4000u + (off & 0x3FFFu));
}

std::string hex(uint32_t v, int digits) {
  char b[16];
  std::snprintf(b, sizeof b, "%0*X", digits, v);
  return b;
}

}  // namespace

std::vector<SpecInstr> spec_decode_block(const std::vector<OpcodeEntry>& table,
                                         const std::vector<uint8_t>& rom, uint32_t bank,
                                         uint16_t addr, int max_instructions,
                                         const std::vector<uint8_t>& stop_at) {
  const Table t(table);
  std::vector<SpecInstr> out;
  uint32_t a = addr;
  const uint32_t region_end = addr < 0x4000u ? 0x4000u : 0x8000u;  // a block stays in its bank
  while ((int)out.size() < max_instructions && a < region_end) {
    const uint64_t off = rom_offset(bank, (uint16_t)a);
    if (!out.empty() && off < stop_at.size() && stop_at[off]) break;
    SpecInstr in;
    if (!decode_at(t, rom, bank, (uint16_t)a, in)) break;
    const Role r = role_of(*in.op);
    if (r == Role::Excluded) break;
    out.push_back(in);
    if (r != Role::Plain || !constant_access_quiet(in)) break;
    a += (uint32_t)in.length;
  }
  return out;
}

SpecProfile spec_profile_from_counts(const std::vector<OpcodeEntry>& table,
                                     const std::vector<uint8_t>& rom,
                                     const std::vector<uint32_t>& counts, int64_t frames,
                                     const SpecLimits& limits) {
  const Table t(table);
  const size_t n = std::min(rom.size(), counts.size());
  SpecProfile prof;
  prof.rom_sha256 = sha256_hex(std::string_view((const char*)rom.data(), rom.size()));
  prof.frames = frames;
  std::vector<uint8_t> leader(rom.size(), 0);
  auto mark = [&](uint64_t off) {
    if (off < leader.size()) leader[off] = 1;
  };

  // Static control flow: recursive descent from the entry point and the RST / interrupt
  // vectors through bank 0 (and bank 1 of a 32 KiB ROM, which has no banking).
  {
    std::vector<uint64_t> work = {0x100};
    for (uint32_t v = 0; v <= 0x60; v += 8) work.push_back(v);
    std::vector<uint8_t> seen(std::min<size_t>(rom.size(), 0x8000), 0);
    while (!work.empty()) {
      uint64_t off = work.back();
      work.pop_back();
      mark(off);
      while (off < seen.size() && !seen[off]) {
        seen[off] = 1;
        uint32_t bank;
        uint16_t addr;
        bank_addr_of(off, bank, addr);
        SpecInstr in;
        if (!decode_at(t, rom, bank, addr, in)) break;
        std::vector<uint64_t> targets;
        static_targets(in, bank, rom.size(), targets);
        for (uint64_t x : targets) work.push_back(x);
        const Role r = role_of(*in.op);
        if (r == Role::Jump || r == Role::Excluded) break;
        off += (uint64_t)in.length;
        if (r != Role::Plain) mark(off);
      }
    }
  }

  // The profile: executed instructions' static targets, the instruction after anything that
  // ends a block, and any instruction executed more often than the one falling into it
  // (entered from elsewhere: a return address, a computed jump).
  for (size_t off = 0; off < n; ++off) {
    if (!counts[off]) continue;
    prof.total_instructions += counts[off];
    uint32_t bank;
    uint16_t addr;
    bank_addr_of(off, bank, addr);
    SpecInstr in;
    if (!decode_at(t, rom, bank, addr, in)) continue;
    std::vector<uint64_t> targets;
    static_targets(in, bank, rom.size(), targets);
    for (uint64_t x : targets) mark(x);
    const uint64_t next = off + (uint64_t)in.length;
    const Role r = role_of(*in.op);
    if (r != Role::Plain || !constant_access_quiet(in))
      mark(next);
    else if (next < n && counts[next] > counts[off])
      mark(next);
  }

  // Blocks: a linear sweep over executed code, each block running to its end rule or the
  // next leader or the first instruction never executed.
  for (size_t off = 0; off < n;) {
    if (!counts[off]) {
      ++off;
      continue;
    }
    uint32_t bank;
    uint16_t addr;
    bank_addr_of(off, bank, addr);
    auto instrs = spec_decode_block(table, rom, bank, addr, limits.max_instructions, leader);
    size_t used = 0;
    SpecBlock b;
    b.bank = bank;
    b.addr = addr;
    b.count = counts[off];
    for (const auto& in : instrs) {
      const uint64_t o = rom_offset(bank, in.addr);
      if (used > 0 && (o >= n || counts[o] == 0)) break;
      b.weight += counts[o];
      b.length += (uint32_t)in.length;
      ++used;
    }
    b.instructions = (uint32_t)used;
    if (used == 0) {
      ++off;
      continue;
    }
    prof.blocks.push_back(b);
    off += b.length;
  }
  std::stable_sort(prof.blocks.begin(), prof.blocks.end(),
                   [](const SpecBlock& x, const SpecBlock& y) { return x.weight > y.weight; });
  return prof;
}

std::string spec_profile_to_json(const SpecProfile& p) {
  Json j;
  j["schema"] = 1;
  j["rom_sha256"] = p.rom_sha256;
  j["frames"] = p.frames;
  j["total_instructions"] = p.total_instructions;
  Json blocks = Json::array();
  for (const auto& b : p.blocks)
    blocks.push_back({{"bank", b.bank},
                      {"address", b.addr},
                      {"count", b.count},
                      {"weight", b.weight},
                      {"length", b.length},
                      {"instructions", b.instructions}});
  j["blocks"] = std::move(blocks);
  return j.dump(1) + "\n";
}

Result<SpecProfile> spec_profile_from_json(const std::string& text) {
  const Json j = Json::parse(text, nullptr, false);
  auto bad = [](const std::string& m) { return make_error(ErrorKind::Input, "profile: " + m); };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (j.value("schema", 0) != 1) return bad("unknown schema (expected 1)");
  SpecProfile p;
  try {
    p.rom_sha256 = j.at("rom_sha256").get<std::string>();
    p.frames = j.value("frames", (int64_t)0);
    p.total_instructions = j.value("total_instructions", (uint64_t)0);
    for (const auto& b : j.at("blocks")) {
      SpecBlock s;
      s.bank = b.at("bank").get<uint32_t>();
      const uint32_t addr = b.at("address").get<uint32_t>();
      if (addr >= 0x8000u || (addr < 0x4000u) != (s.bank == 0))
        return bad("block at bank " + std::to_string(s.bank) + " address " + std::to_string(addr) +
                   " is not in that bank's ROM window");
      s.addr = (uint16_t)addr;
      s.count = b.value("count", (uint64_t)0);
      s.weight = b.value("weight", s.count);
      s.length = b.value("length", 0u);
      s.instructions = b.value("instructions", 0u);
      p.blocks.push_back(s);
    }
  } catch (const std::exception& e) {
    return bad(e.what());
  }
  return p;
}

Result<std::shared_ptr<const SpecPlan>> make_spec_plan(const std::vector<OpcodeEntry>& table,
                                                       std::vector<uint8_t> rom,
                                                       const SpecProfile& profile,
                                                       const SpecLimits& limits) {
  auto plan = std::make_shared<SpecPlan>();
  plan->rom_sha256 = sha256_hex(std::string_view((const char*)rom.data(), rom.size()));
  if (plan->rom_sha256 != profile.rom_sha256)
    return make_error(ErrorKind::Input, "profile was made for ROM sha256 " +
                                            profile.rom_sha256.substr(0, 16) + ", this ROM is " +
                                            plan->rom_sha256.substr(0, 16));
  std::vector<SpecBlock> sorted = profile.blocks;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const SpecBlock& x, const SpecBlock& y) { return x.weight > y.weight; });
  uint64_t total = 0;
  for (const auto& b : sorted) total += b.weight;
  const double want = limits.coverage * (double)total;
  uint64_t covered = 0;
  size_t total_instrs = 0;
  std::vector<uint8_t> taken(rom.size(), 0);
  for (const auto& b : sorted) {
    if (plan->blocks.size() >= limits.max_blocks || (double)covered >= want) break;
    const uint64_t off = rom_offset(b.bank, b.addr);
    if (off >= rom.size() || taken[off]) continue;
    // The block is decoded again from the ROM: the profile only says where blocks start and
    // how far they went when profiled.
    auto instrs = spec_decode_block(table, rom, b.bank, b.addr, limits.max_instructions);
    if (b.instructions > 0 && instrs.size() > b.instructions) instrs.resize(b.instructions);
    if (instrs.empty()) continue;
    if (total_instrs + instrs.size() > limits.max_total_instructions) break;
    total_instrs += instrs.size();
    SpecBlock s = b;
    s.instructions = (uint32_t)instrs.size();
    s.length = 0;
    for (const auto& in : instrs) s.length += (uint32_t)in.length;
    taken[off] = 1;
    covered += b.weight;
    plan->blocks.push_back(s);
  }
  std::sort(plan->blocks.begin(), plan->blocks.end(), [](const SpecBlock& x, const SpecBlock& y) {
    return x.addr != y.addr ? x.addr < y.addr : x.bank < y.bank;
  });
  std::string ids;
  for (const auto& b : plan->blocks)
    ids += std::to_string(b.bank) + ":" + std::to_string(b.addr) + ":" +
           std::to_string(b.instructions) + ";";
  plan->profile_hash = sha256_hex(ids);
  plan->rom = std::move(rom);
  return std::shared_ptr<const SpecPlan>(std::move(plan));
}

std::string spec_block_end(const std::vector<OpcodeEntry>& table, const std::vector<uint8_t>& rom,
                           const SpecBlock& b, const SpecLimits& limits,
                           const std::vector<uint8_t>& starts) {
  auto instrs = spec_decode_block(table, rom, b.bank, b.addr, limits.max_instructions);
  if (b.instructions > 0 && instrs.size() > b.instructions) instrs.resize(b.instructions);
  if (instrs.empty()) return "halt_stop";
  const SpecInstr& last = instrs.back();
  switch (role_of(*last.op)) {
    case Role::Jump:
      return "jump";
    case Role::Branch:
      return "branch";
    case Role::EndAfter:
      return "ei_di";
    default:
      break;
  }
  if (!constant_access_quiet(last)) return "mbc_write";
  if ((int)instrs.size() >= limits.max_instructions) return "size_limit";
  const uint32_t next = (uint32_t)last.addr + (uint32_t)last.length;
  if (next >= (b.addr < 0x4000u ? 0x4000u : 0x8000u)) return "bank_end";
  const Table t(table);
  SpecInstr in;
  if (!decode_at(t, rom, b.bank, (uint16_t)next, in) || role_of(*in.op) == Role::Excluded)
    return "halt_stop";
  const uint64_t off = rom_offset(b.bank, (uint16_t)next);
  if (off < starts.size() && starts[off]) return "block_starts";
  return "cold";
}

std::string spec_disassemble(const SpecInstr& in) {
  std::string m = in.cb ? in.cb->mnemonic : in.op->mnemonic;
  const uint32_t b1 = in.bytes[1], w = in.bytes[1] | ((uint32_t)in.bytes[2] << 8);
  auto sub = [&](const std::string& from, const std::string& to) {
    const auto p = m.find(from);
    if (p != std::string::npos) m.replace(p, from.size(), to);
  };
  if (!in.cb) {
    if (in.op->family == "jr" || in.op->family == "jr_cc")
      sub("e8", "$" + hex((in.addr + in.length + (int8_t)in.bytes[1]) & 0xFFFFu, 4));
    else if (m.find("SP+e8") != std::string::npos || m.find("SP,e8") != std::string::npos)
      sub("e8", std::to_string((int)(int8_t)in.bytes[1]));
    sub("d16", "$" + hex(w, 4));
    sub("a16", "$" + hex(w, 4));
    sub("d8", "$" + hex(b1, 2));
    sub("a8", "$" + hex(b1, 2));
  }
  return m;
}

}  // namespace gbx
