// ROM-specialized blocks as C++ source (spec_blocks.h), spliced into the kernel by generator.cpp.
#include "spec_blocks.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace gbx {
namespace {

// The static control flow out of a block's last instruction.
struct BlockExit {
  std::optional<uint32_t> target;  // JR/JP/CALL/RST destination
  bool call = false;               // CALL, CALL cc, RST: the code goes on at `fall` on return
  bool conditional = false;        // JR cc, JP cc, CALL cc, RET cc: may fall through
  bool ends = false;               // JR, JP, RET, RETI, JP HL: never falls through
  uint32_t fall = 0;               // the next instruction's address
};

BlockExit block_exit(const SpecInstr& last) {
  const std::string& f = last.op->family;
  BlockExit e;
  e.fall = (uint32_t)(last.addr + last.length) & 0xFFFFu;
  if (f == "jr" || f == "jr_cc")
    e.target = (uint32_t)(last.addr + last.length + (int8_t)last.bytes[1]) & 0xFFFFu;
  else if (f == "jp" || f == "jp_cc" || f == "call" || f == "call_cc")
    e.target = (uint32_t)last.bytes[1] | ((uint32_t)last.bytes[2] << 8);
  else if (f == "rst")
    e.target = last.bytes[0] & 0x38u;
  e.call = f == "call" || f == "call_cc" || f == "rst";
  e.conditional = f == "jr_cc" || f == "jp_cc" || f == "call_cc" || f == "ret_cc";
  e.ends = f == "jr" || f == "jp" || f == "ret" || f == "reti" || f == "jp_hl";
  return e;
}

// Register guesses for chains out of indirect exits. Every chain tests the PC it goes to (and
// the bank) at run time, so a wrong guess costs a compare, never a wrong result.
std::string operand(const OpcodeEntry& e, const char* name) {
  for (const auto& [n, v] : e.operands)
    if (n == name) return v;
  return "";
}

// Whether an instruction may write a register of the pair `rr` ("BC", "DE", "HL"): a guess
// from its operands (DST, R, RR, QQ) and the families that step HL.
bool writes_pair(const SpecInstr& in, const std::string& rr) {
  const OpcodeEntry& e = in.cb ? *in.cb : *in.op;
  const std::string hi(1, rr[0]), lo(1, rr[1]);
  for (const char* n : {"DST", "R"}) {
    const std::string v = operand(e, n);
    if (v == hi || v == lo) return e.family != "cb_bit";
  }
  for (const char* n : {"RR", "QQ"})
    if (operand(e, n) == rr) return e.family != "push";
  if (rr == "HL")
    return e.family == "ld_a_dhl_step" || e.family == "ld_dhl_a_step" || e.family == "add_hl_rr" ||
           e.family == "ld_hl_sp_e8";
  return false;
}

// The constant in `rr` before instruction `end` of a block: an LD rr,d16 with nothing after it
// that writes the pair.
std::optional<uint32_t> pair_before(const std::vector<SpecInstr>& ins, size_t end,
                                    const std::string& rr) {
  for (size_t i = end; i-- > 0;) {
    const SpecInstr& in = ins[i];
    if (!in.cb && in.op->family == "ld_rr_d16" && operand(*in.op, "RR") == rr)
      return (uint32_t)in.bytes[1] | ((uint32_t)in.bytes[2] << 8);
    if (writes_pair(in, rr)) return std::nullopt;
  }
  return std::nullopt;
}

// A block ending `LD rr,d16 ... PUSH rr; JP HL` calls through HL with rr as the return
// address (Pokemon Red's Bankswitch: LD BC,.Return; PUSH BC; JP HL): that address.
std::optional<uint32_t> pushed_return(const std::vector<SpecInstr>& ins) {
  if (ins.size() < 3 || ins.back().op->family != "jp_hl") return std::nullopt;
  const SpecInstr& push = ins[ins.size() - 2];
  if (push.cb || push.op->family != "push") return std::nullopt;
  const std::string rr = operand(*push.op, "QQ");
  if (rr == "AF") return std::nullopt;
  return pair_before(ins, ins.size() - 2, rr);
}

class SpecEmitter {
 public:
  SpecEmitter(const std::vector<OpcodeEntry>& opcodes, const std::vector<HookAddr>& hooks,
              const std::string& helpers, const SpecBodyFn& body)
      : opcodes_(opcodes), hooks_(hooks), helpers_(helpers), body_(body) {}

  // One instruction of a specialized block: the opcode fetch charged with the next PC as a
  // constant, the family body with its immediate fetch replaced by the constant, a comment
  // with bank:address, bytes and disassembly, and #line back to the family template.
  Result<std::string> spec_instruction(const SpecInstr& in, uint32_t bank) {
    char head[160];
    char bytes[16];
    if (in.length == 1)
      std::snprintf(bytes, sizeof bytes, "%02X", in.bytes[0]);
    else if (in.length == 2)
      std::snprintf(bytes, sizeof bytes, "%02X %02X", in.bytes[0], in.bytes[1]);
    else
      std::snprintf(bytes, sizeof bytes, "%02X %02X %02X", in.bytes[0], in.bytes[1], in.bytes[2]);
    std::snprintf(head, sizeof head, "  // %02X:%04X  %-9s %s\n", bank, in.addr, bytes,
                  spec_disassemble(in).c_str());
    std::string out = head;
    char fetch[64];
    std::snprintf(fetch, sizeof fetch, "    spec_fetch(cpu, bus, 0x%04X);\n",
                  (unsigned)((in.addr + 1u) & 0xFFFFu));
    out += "  {\n";
    // Hooks: counted where the interpreter counts them, before the opcode fetch.
    for (size_t i = 0; i < hooks_.size(); ++i) {
      const HookAddr& h = hooks_[i];
      if (h.addr == in.addr && (h.bank < 0 || (uint32_t)h.bank == bank))
        out += "    ++bus.m.hook_hits[" + std::to_string(i) + "];\n";
    }
    out += fetch;
    const OpcodeEntry& e = in.cb ? *in.cb : *in.op;
    auto body = body_(e);
    if (!body) return body.take_error();
    if (in.cb) {
      char cbf[64];
      std::snprintf(cbf, sizeof cbf, "    spec_imm8(cpu, bus, 0x%02X);\n", in.bytes[1]);
      out += cbf;
    }
    out += line_directive(body.value().body_line, body.value().path);
    int immediates = 0;
    for (std::string line : body.value().lines) {
      for (const char* call : {"fetch8(cpu, bus)", "fetch16(cpu, bus)"}) {
        for (size_t pos = line.find(call); pos != std::string::npos; pos = line.find(call, pos)) {
          if (pos > 0 && (std::isalnum((unsigned char)line[pos - 1]) || line[pos - 1] == '_')) {
            ++pos;
            continue;
          }
          char imm[64];
          if (call[5] == '8')
            std::snprintf(imm, sizeof imm, "spec_imm8(cpu, bus, 0x%02X)", in.bytes[1]);
          else
            std::snprintf(imm, sizeof imm, "spec_imm16(cpu, bus, 0x%04X)",
                          (unsigned)(in.bytes[1] | (in.bytes[2] << 8)));
          line.replace(pos, std::strlen(call), imm);
          pos += std::strlen(imm);
          ++immediates;
        }
      }
      out += line.empty() ? "\n" : "    " + line + "\n";
    }
    const int expected = in.cb ? 0 : in.length - 1 > 0 ? 1 : 0;
    if (immediates != expected)
      return err("templates/" + body.value().path + ": " + e.mnemonic + " fetches " +
                 std::to_string(immediates) + " immediates, its length says " +
                 std::to_string(expected) + " (specialized blocks need one fetch8/fetch16)");
    out += "  }\n";
    return out;
  }

  // A block or tail instruction as its function runs it: counted, and the function left
  // when a slow access changed what it was entered on.
  Result<std::string> counted_instruction(const SpecInstr& in, uint32_t bank) {
    auto ins = spec_instruction(in, bank);
    if (!ins) return ins.take_error();
    return ins.value() +
           "#line 1 \"<specialized>\"\n"
           "  ++n;\n"
           "  if (GBX_UNLIKELY(bus.left)) goto done;\n";
  }

  // What every block and tail function opens and closes with: the registers, the clock and
  // the memory pointers in locals, and written back at `done`. `romx`: the window of the
  // code it is entered in (each block of a function sets it again: chains cross windows).
  static std::string fn_locals(bool romx, const char* n0) {
    return std::string(
               "  Cpu cpu = spec_cpu_in(io);\n"
               "  SpecBus bus = {m, m.mem, m.rom0, m.romx, m.cycles, false, cpu.ime != 0, ") +
           (romx ? "true" : "false") +
           "};\n"
           "  const i64 limit = bus.cycles + room;\n"
           "  u32 n = " +
           n0 + ";\n";
  }
  // A block function's exit into another block function (`callee`: the call up to its
  // first argument): the locals written back as at `done`, then a tail call with the same
  // limit and the instructions run so far.
  static std::string tail_call(const std::string& cond, const std::string& callee) {
    return "  if (" + cond +
           ") {\n"
           "    m.cycles = bus.cycles;\n"
           "    io = cpu;\n"
           "    GBX_TAIL return " +
           callee + ", io, m, limit - bus.cycles, n);\n  }\n";
  }
  static constexpr const char* kFnDone =
      "done:\n  m.cycles = bus.cycles;\n  io = cpu;\n  return n;\n}\n\n";

  // An address-indexed slot table (`table`): 0 = no case at that address.
  static std::string slot_table(const char* table, const std::vector<uint16_t>& slot) {
    std::string out = "GBX_SPEC_TABLE u16 " + std::string(table) + "[0x8000] = {\n";
    for (size_t a = 0; a < 0x8000; a += 32) {
      for (size_t i = a; i < a + 32; ++i) out += std::to_string(slot[i]) + ",";
      out += "\n";
    }
    return out + "};\n\n";
  }
  // The function (`fn`) that switches on a slot to its address's cases. `n0` (spec_run): the
  // instructions already run by the block that tail-calls it, returned when no case takes
  // the PC; without it (spec_tail_run) 0 = nothing ran, the interpreter takes the instruction.
  static std::string dispatch(const char* fn, const std::vector<uint16_t>& slot,
                              const std::vector<std::string>& cases, bool n0) {
    char buf[128];
    std::string out = "GBX_NOINLINE u32 " + std::string(fn) +
                      "(u32 slot, Cpu& cpu, Machine& bus, i64 room" + (n0 ? ", u32 n0" : "") +
                      ") {\n"
                      "  switch (slot) {\n";
    const std::string none = n0 ? "n0" : "0";
    for (size_t a = 0; a < 0x8000; ++a) {
      if (!slot[a]) continue;
      std::snprintf(buf, sizeof buf, "    case %u: {  // %04zX\n", slot[a], a);
      out += buf + cases[a] + "      return " + none + ";\n    }\n";
    }
    return out + "  }\n  return " + none + ";\n}\n";
  }

  Result<std::string> blocks(const SpecPlan& plan) {
    std::string out = helpers_;
    out += "#line 1 \"<specialized>\"\n";
    out += "// ROM sha256 " + plan.rom_sha256 + ", hot set " + plan.profile_hash.substr(0, 16) +
           ": " + std::to_string(plan.blocks.size()) + " blocks\n";
    // A kernel built for one ROM refuses any other (the runtime also checks the SHA-256).
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "GBX_FN bool spec_rom_matches(const GbxParams& p) {\n"
                  "  if (p.rom_size != %zuu) return false;\n"
                  "  const u8 header[0x50] = {",
                  plan.rom.size());
    out += buf;
    for (size_t i = 0x100; i < 0x150; ++i) {
      std::snprintf(buf, sizeof buf, "%s0x%02X", i == 0x100 ? "" : ",",
                    i < plan.rom.size() ? plan.rom[i] : 0);
      out += buf;
    }
    out +=
        "};\n  for (u32 i = 0; i < 0x50u; ++i)\n"
        "    if (p.rom[0x100u + i] != header[i]) return false;\n  return true;\n}\n\n";

    // Blocks, then the direct jumps between them (chains), then functions: blocks joined by
    // chains share one function so a chain is a goto; anything else returns to the
    // interpreter, which dispatches the next block itself.
    struct Blk {
      size_t index = 0;  // in plan.blocks
      uint32_t bank = 0;
      uint16_t addr = 0;
      std::vector<SpecInstr> instrs;
      int worst = 0;             // T-cycles up to the block's last instruction boundary inside it
      std::vector<size_t> next;  // chain targets (indices into blks)
      size_t fn = 0;
    };
    std::vector<Blk> blks;
    std::map<std::pair<uint32_t, uint16_t>, size_t> at;  // (bank, addr) -> blks index
    for (size_t bi = 0; bi < plan.blocks.size(); ++bi) {
      const SpecBlock& b = plan.blocks[bi];
      Blk k;
      k.index = bi;
      k.bank = b.bank;
      k.addr = b.addr;
      k.instrs = spec_decode_block(opcodes_, plan.rom, b.bank, b.addr, (int)b.instructions);
      if (k.instrs.empty()) continue;
      for (size_t i = 0; i + 1 < k.instrs.size(); ++i) k.worst += k.instrs[i].cycles;
      at[{k.bank, k.addr}] = blks.size();
      blks.push_back(std::move(k));
    }
    // A chain follows the last instruction's static target (JR, JP, CALL, RST; taken or not)
    // or its fall-through. RET, RETI, JP HL, EI and DI end with no static chain: their targets
    // are data, or IME changes.
    // Chains cross the ROM windows: banked code calls the home bank all the time (Pokemon
    // Red's routines in banks 1-N call CopyData, Bankswitch, DelayFrame... in bank 0), and
    // each such call and return went back to the dispatch. A chain to a block of another bank
    // (bank 0 from a switchable bank, or a switchable bank from bank 0 or from another bank)
    // tests at run time that the window maps that bank, as the dispatch does (chain_check):
    // bank 0 code may have switched 4000-7FFF, and 0000-3FFF moves on MBC1 (mode 1). Within
    // one bank no test is needed: a block of 4000-7FFF ends at any switch of its window, and
    // every block ends when 0000-3FFF moves (kernel/spec_bus.h spec_left).
    // From bank 0 a target in 4000-7FFF may be any bank's: the blocks there in up to
    // kMaxBankCandidates banks are chained, each with its test.
    constexpr size_t kMaxBankCandidates = 4;
    // The run-time test of a chain to another bank's block: its window maps that bank.
    auto chain_check = [&](const Blk& from, const Blk& to) -> std::string {
      if (from.bank == to.bank) return "";
      char t[96];
      std::snprintf(t, sizeof t, "bus.%s == GBX_LAUNCH(bus.m, rom) + 0x%llXu",
                    to.addr < 0x4000u ? "rom0" : "romx", (unsigned long long)to.bank * 0x4000ull);
      return t;
    };
    std::map<uint16_t, std::vector<size_t>> romx_at;  // 4000-7FFF address -> blks, by bank
    for (size_t i = 0; i < blks.size(); ++i)
      if (blks[i].addr >= 0x4000u) romx_at[blks[i].addr].push_back(i);
    auto blocks_at = [&](const Blk& k, uint32_t t) -> std::vector<size_t> {
      if (t >= 0x8000u) return {};
      uint32_t bank = 0;
      if (t >= 0x4000u && k.addr >= 0x4000u) bank = k.bank;
      if (t >= 0x4000u && k.addr < 0x4000u) {
        const auto it = romx_at.find((uint16_t)t);
        if (it == romx_at.end()) return {};
        std::vector<size_t> out = it->second;
        if (out.size() > kMaxBankCandidates) out.resize(kMaxBankCandidates);
        return out;
      }
      const auto it = at.find({bank, (uint16_t)t});
      if (it == at.end()) return {};
      return {it->second};
    };
    auto chain_to = [&](Blk& k, size_t j) {
      if (std::find(k.next.begin(), k.next.end(), j) == k.next.end()) k.next.push_back(j);
    };
    auto add_chain = [&](Blk& k, uint32_t t) {
      for (size_t j : blocks_at(k, t)) chain_to(k, j);
    };
    for (Blk& k : blks) {
      const BlockExit e = block_exit(k.instrs.back());
      const std::string& f = k.instrs.back().op->family;
      if (e.target) add_chain(k, *e.target);
      if (e.conditional || (!e.target && !e.ends && f != "ei" && f != "di")) add_chain(k, e.fall);
    }
    // Returns: a RET chains to the return sites of the calls that reach it. From each CALL's
    // (or RST's) target, the blocks its callee runs are followed (over static jumps and
    // fall-throughs, over nested calls to their own return sites) up to kMaxCalleeBlocks; each
    // RET among them gets the call's return site (the block after it) as a chain target. The
    // chain still tests the PC it popped (and the bank, across banks), so a RET that returns
    // elsewhere (a jump table, a tail call) goes back to the dispatch. sdcc code calls a helper
    // every few instructions: without these chains every return left the function.
    // Calls through HL: a JP HL in the callee chains to the HL its caller loaded before the
    // CALL (LD HL,d16), and one that pushed a constant first (LD BC,d16; PUSH BC; JP HL) is a
    // call whose code returns there: the home-bank trampolines of banked code (Pokemon Red's
    // Bankswitch, called as LD B,bank; LD HL,fn; CALL Bankswitch) run as chains, the banked
    // function's RET to the trampoline's tail and its RET to the caller.
    constexpr size_t kMaxCalleeBlocks = 64;
    // From this many PCs a block's chains are a switch on the PC (below).
    constexpr size_t kMinSwitchTargets = 4;
    constexpr int kMaxCallDepth = 2;  // calls through HL inside a callee followed, nested
    std::function<void(const std::vector<size_t>&, size_t, std::optional<uint32_t>, int)> callee =
        [&](const std::vector<size_t>& entries, size_t site, std::optional<uint32_t> hl,
            int depth) {
          std::vector<size_t> todo = entries;
          std::set<size_t> seen(entries.begin(), entries.end());
          while (!todo.empty() && seen.size() <= kMaxCalleeBlocks) {
            Blk& j = blks[todo.back()];
            todo.pop_back();
            const BlockExit e = block_exit(j.instrs.back());
            const std::string& f = j.instrs.back().op->family;
            if (f == "ret" || f == "ret_cc") chain_to(j, site);
            // Where j's code goes on inside the callee: a jump's target, a nested call's return
            // site (its fall-through), any fall-through, a call through HL's pushed return.
            std::vector<uint32_t> onward;
            if (e.target && !e.call) onward.push_back(*e.target);
            if (!e.ends) onward.push_back(e.fall);
            if (f == "jp_hl") {
              const auto own = pair_before(j.instrs, j.instrs.size() - 1, "HL");
              bool wrote = false;
              for (size_t i = 0; i + 1 < j.instrs.size(); ++i)
                wrote |= writes_pair(j.instrs[i], "HL");
              const bool known = own || (!wrote && hl);
              const uint32_t target = own ? *own : known ? *hl : 0u;
              const auto back = pushed_return(j.instrs);
              if (known) {
                const auto into = blocks_at(j, target);
                for (size_t n : into) chain_to(j, n);
                if (back && depth < kMaxCallDepth) {
                  const auto sites = blocks_at(j, *back);
                  if (!into.empty() && !sites.empty())
                    callee(into, sites.front(), std::nullopt, depth + 1);
                }
              }
              if (back) onward.push_back(*back);
            }
            for (uint32_t t : onward)
              for (size_t n : blocks_at(j, t))
                if (seen.insert(n).second) todo.push_back(n);
          }
        };
    const size_t static_blocks = blks.size();
    for (size_t ci = 0; ci < static_blocks; ++ci) {
      const BlockExit call = block_exit(blks[ci].instrs.back());
      if (!call.call) continue;
      const auto entries = blocks_at(blks[ci], *call.target);
      const auto sites = blocks_at(blks[ci], call.fall);  // the caller's own bank: one at most
      if (entries.empty() || sites.empty()) continue;
      callee(entries, sites.front(), pair_before(blks[ci].instrs, blks[ci].instrs.size() - 1, "HL"),
             0);
    }
    // Functions: union of chained blocks, hottest chains first, capped so no function grows
    // past what compiles quickly.
    constexpr size_t kMaxFnInstructions = 256;
    std::vector<size_t> root(blks.size()), size(blks.size());
    for (size_t i = 0; i < blks.size(); ++i) {
      root[i] = i;
      size[i] = blks[i].instrs.size();
    }
    auto find = [&](size_t i) {
      while (root[i] != i) i = root[i] = root[root[i]];
      return i;
    };
    std::vector<std::pair<size_t, size_t>> edges;
    for (size_t i = 0; i < blks.size(); ++i)
      for (size_t j : blks[i].next) edges.emplace_back(i, j);
    std::stable_sort(edges.begin(), edges.end(), [&](const auto& x, const auto& y) {
      return plan.blocks[blks[x.first].index].count > plan.blocks[blks[y.first].index].count;
    });
    for (const auto& [i, j] : edges) {
      const size_t a = find(i), b = find(j);
      if (a == b || size[a] + size[b] > kMaxFnInstructions) continue;
      root[b] = a;
      size[a] += size[b];
    }
    std::map<size_t, std::vector<size_t>> fns;  // root -> members, in (bank, addr) order
    for (size_t i = 0; i < blks.size(); ++i) fns[find(i)].push_back(i);
    std::vector<size_t> entry_of(blks.size());  // a block's entry number in its function
    size_t fn_no = 0;
    for (auto& [r, members] : fns) {
      for (size_t e = 0; e < members.size(); ++e) {
        blks[members[e]].fn = fn_no;
        entry_of[members[e]] = e;
      }
      ++fn_no;
    }

    // The dispatch's cases (spec_run): block slot by address, then the bank the block was
    // profiled in and room before the next event. Its table comes before the functions,
    // whose indirect exits look it up.
    std::vector<std::string> cases(0x8000);
    std::vector<uint16_t> slot(0x8000, 0);
    int slots = 0;
    for (size_t i = 0; i < blks.size(); ++i) {
      const Blk& k = blks[i];
      if (!slot[k.addr]) slot[k.addr] = (uint16_t)++slots;
      const char* window = k.addr < 0x4000u ? "rom0" : "romx";
      std::snprintf(buf, sizeof buf,
                    "      if (room > %d && bus.%s == bus.rom + 0x%llXu) {\n"
                    "        GBX_TRACE_UNIT(GBX_TRACE_BLOCK + %zuu);  // divergence meter\n"
                    "        GBX_TAIL return spec_fn_%zu(%zu, cpu, bus, room, n0);\n      }\n",
                    k.worst, window, (unsigned long long)k.bank * 0x4000ull, k.index, k.fn,
                    entry_of[i]);
      cases[k.addr] += buf;
    }
    out += slot_table("gbx_spec_slot", slot);
    for (size_t f = 0; f < fn_no; ++f) {
      std::snprintf(buf, sizeof buf,
                    "GBX_NOINLINE u32 spec_fn_%zu(u32 entry, Cpu& io, Machine& m, i64 room, u32 "
                    "n0);\n",
                    f);
      out += buf;
    }
    out += "GBX_NOINLINE u32 spec_run(u32 slot, Cpu& cpu, Machine& bus, i64 room, u32 n0);\n\n";

    fn_no = 0;
    for (auto& [r, members] : fns) {
      std::snprintf(buf, sizeof buf,
                    "GBX_NOINLINE u32 spec_fn_%zu(u32 entry, Cpu& io, Machine& m, i64 room, u32 "
                    "n0) {\n",
                    fn_no);
      out += buf;
      out += fn_locals(blks[members.front()].addr >= 0x4000u, "n0");
      out += "  switch (entry) {\n";
      for (size_t e = 0; e < members.size(); ++e) {
        std::snprintf(buf, sizeof buf, "    case %zu: goto block_%zu;\n", e,
                      blks[members[e]].index);
        out += buf;
      }
      out += "  }\n  (void)limit;\n";
      for (size_t mi : members) {
        const Blk& k = blks[mi];
        const SpecBlock& b = plan.blocks[k.index];
        std::snprintf(buf, sizeof buf,
                      "// block %zu: %02X:%04X, %zu instructions, %d T before its last, profiled "
                      "%llu entries\n"
                      "block_%zu:\n",
                      k.index, b.bank, b.addr, k.instrs.size(), k.worst,
                      (unsigned long long)b.count, k.index);
        out += buf;
        // A function's blocks may come from both windows (chains cross them): each says
        // which one its code is in, for spec_left.
        out += k.addr >= 0x4000u ? "  bus.romx_code = true;\n" : "  bus.romx_code = false;\n";
        for (const SpecInstr& in : k.instrs) {
          auto ins = counted_instruction(in, b.bank);
          if (!ins) return ins.take_error();
          out += ins.value();
        }
        // A block that jumps back to its own start with three instructions may be a wait
        // loop (kernel/step.tmpl wait_loop_skip checks the shape from the code bytes): its
        // iterations up to the next event are passed over as the interpreter's JR passes over
        // them, before the chains look at the PC.
        if (k.instrs.size() == 3 && k.instrs.back().op->family == "jr_cc" &&
            std::find(k.next.begin(), k.next.end(), mi) != k.next.end()) {
          std::snprintf(buf, sizeof buf,
                        "#if GBX_WAIT_LOOPS_ON\n"
                        "  if (cpu.pc == 0x%04X) {\n"
                        "    m.cycles = bus.cycles;\n"
                        "    const SpecWait w = spec_wait_loop(cpu, m, limit);\n"
                        "    cpu = w.cpu;\n"
                        "    n += w.retired;\n"
                        "    bus.cycles = m.cycles;\n"
                        "  }\n"
                        "#endif\n",
                        k.addr);
          out += buf;
        }
        // A chain runs the next block only when its last instruction, too, starts before the
        // next event or frame end: the rule the dispatch applies (room > worst). Within the
        // function a chain is a goto. On the cpu, a chain to another function's block is a
        // tail call (GBX_TAIL: clang's musttail, so chains never grow the stack), and a block
        // that ends jumping through data (RET, RET cc, JP HL) and that no chain took looks
        // the PC up in the dispatch's own table (spec_run): a RET to a return site no
        // traversal found, a JP HL through a jump table. Either way the next block starts
        // without the interpreter's loop top, which would do nothing but dispatch it: the
        // rule is a goto's, since anything that changes what the loop top decides ends the
        // block at its slow access (spec_left). Every block, not only these three, doing
        // the look-up measured no better on the games (tobutobugirl 0.62-0.92x in two runs,
        // the rest within noise), so static exits keep returning to the loop. A GPU returns
        // to its loop.
        // Many targets (the RET of a helper called from many sites, as sdcc's and Pokemon
        // Red's helpers are) go through one switch on the PC, which clang makes a jump table
        // or a search tree: not a compare per target, in the order the traversal found them
        // (call_ret's RET tried 16 of its 32 return sites on average). The targets' tests
        // exclude each other (one block per bank and address), so the order they are tried
        // in changes nothing but the time.
        std::string gotos, exits;  // a test per target: gotos in the function, tail calls
        std::map<uint16_t, std::pair<std::string, std::string>> by_pc;  // the same, by PC
        for (size_t t : k.next) {
          const Blk& to = blks[t];
          const std::string bank = chain_check(k, to);
          const std::string bank_and = bank.empty() ? "" : bank + " && ";
          std::snprintf(buf, sizeof buf, "bus.cycles + %d < limit", to.worst);
          const std::string cond = bank_and + buf;  // a switch case's test
          std::snprintf(buf, sizeof buf, "cpu.pc == 0x%04X && ", to.addr);
          const std::string pc_cond = buf + cond;  // a compare's
          std::snprintf(buf, sizeof buf, "spec_fn_%zu(%zu", to.fn, entry_of[t]);
          const std::string call = buf;
          auto& [in_fn, other_fn] = by_pc[to.addr];
          if (to.fn == k.fn) {
            const std::string go = ") goto block_" + std::to_string(to.index) + ";\n";
            gotos += "  if (" + pc_cond + go;
            in_fn += "      if (" + cond + go;
          } else {
            exits += tail_call(pc_cond, call);
            other_fn += tail_call(cond, call);
          }
        }
        if (by_pc.size() < kMinSwitchTargets) {
          out += gotos;
        } else {
          exits.clear();
          out += "  switch (cpu.pc) {\n";
          for (const auto& [pc, c] : by_pc) {
            std::snprintf(buf, sizeof buf, "    case 0x%04X:\n", pc);
            out += buf + c.first;
            if (!c.second.empty()) out += "#if GBX_DEVICE_CPU\n" + c.second + "#endif\n";
            out += "      break;\n";
          }
          out += "  }\n";
        }
        const std::string& last = k.instrs.back().op->family;
        if (last == "ret" || last == "ret_cc" || last == "jp_hl")
          exits += tail_call("cpu.pc < 0x8000u && gbx_spec_slot[cpu.pc]",
                             "spec_run(gbx_spec_slot[cpu.pc]");
        if (!exits.empty()) out += "#if GBX_DEVICE_CPU\n" + exits + "#endif\n";
        out += "  goto done;\n";
      }
      out += kFnDone;
      ++fn_no;
    }

    // Tails (cpu kernels): each block once more, entered at any of its instructions and
    // testing the clock before each one, for the two cases the block itself cannot take. An
    // event falls inside the block (room <= worst): the tail runs up to it, not the
    // interpreter. An interrupt returned into the block's middle (RETI goes back to the loop
    // top in specialized kernels): the tail runs the rest, not the interpreter up to the next
    // block start. The blocks keep their batched cycle checks (a check
    // or an entry at every instruction of the blocks themselves measured 0.91x and 0.63x:
    // docs/internals/specialization.md). On a GPU they are not emitted (not measured there).
    out += "#if GBX_DEVICE_CPU\n";
    std::vector<std::string> tail_cases(0x8000);
    std::vector<uint16_t> tail_slot(0x8000, 0);
    int tail_slots = 0;
    for (size_t i = 0; i < blks.size(); ++i) {
      const Blk& k = blks[i];
      if (k.instrs.size() < 2) continue;  // one instruction: the block itself always fits
      std::snprintf(buf, sizeof buf,
                    "GBX_NOINLINE u32 spec_tail_%zu(Cpu& io, Machine& m, i64 room) {  // block "
                    "%zu\n",
                    k.index, k.index);
      out += buf;
      out += fn_locals(k.addr >= 0x4000u, "0");
      out += "  switch (cpu.pc) {\n";
      for (size_t j = 0; j < k.instrs.size(); ++j) {
        std::snprintf(buf, sizeof buf, "    case 0x%04X: goto tail_%zu;\n", k.instrs[j].addr, j);
        out += buf;
      }
      out += "    default: goto done;\n  }\n";
      for (size_t j = 0; j < k.instrs.size(); ++j) {
        auto ins = counted_instruction(k.instrs[j], k.bank);
        if (!ins) return ins.take_error();
        std::snprintf(buf, sizeof buf, "tail_%zu:\n  if (bus.cycles >= limit) goto done;\n", j);
        out += buf + ins.value();
      }
      out += kFnDone;
      const char* window = k.addr < 0x4000u ? "rom0" : "romx";
      std::snprintf(
          buf, sizeof buf,
          "      if (bus.%s == bus.rom + 0x%llXu) return spec_tail_%zu(cpu, bus, room);\n", window,
          (unsigned long long)k.bank * 0x4000ull, k.index);
      for (const SpecInstr& in : k.instrs) {
        if (!tail_slot[in.addr]) tail_slot[in.addr] = (uint16_t)++tail_slots;
        tail_cases[in.addr] += buf;
      }
    }
    out += slot_table("gbx_spec_tail", tail_slot) +
           dispatch("spec_tail_run", tail_slot, tail_cases, false) + "#endif\n\n";

    // The dispatch: 0 = nothing ran (from the loop top, n0 = 0), the interpreter takes the
    // instruction.
    out += dispatch("spec_run", slot, cases, true);
    return out;
  }

 private:
  Error err(std::string msg) const { return make_error(ErrorKind::Template, std::move(msg)); }

  const std::vector<OpcodeEntry>& opcodes_;
  const std::vector<HookAddr>& hooks_;
  const std::string& helpers_;
  const SpecBodyFn& body_;
};

}  // namespace

Result<std::string> emit_specialized_blocks(const SpecPlan& plan,
                                            const std::vector<OpcodeEntry>& opcodes,
                                            const std::vector<HookAddr>& hooks,
                                            const std::string& helpers, const SpecBodyFn& body) {
  return SpecEmitter(opcodes, hooks, helpers, body).blocks(plan);
}

}  // namespace gbx
