// Per-game profile: one env single-stepped on the interpreter (run mode instructions), the
// host classifying each kernel call; then the specialized plan's coverage (gbx/runtime/
// game_profile.h, docs/benchmarks/games.md).
#include "gbx/measure/bench/game_profile.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "gbx/engine/specialize.h"
#include "gbx/runtime/actions/action_policy.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/states/save_state.h"

namespace gbx {
namespace {

constexpr int64_t kFrameCycles = 70224;

// The bank mapped at 4000-7FFF, as templates/hw/cartridge.h mbc_update_windows maps it.
uint32_t romx_bank(const GbxState& s, const Rom& rom) {
  const uint32_t mask = (uint32_t)(rom.bytes.size() >> 14) - 1u;
  const uint32_t lo = s.mbc_rom_bank[0];
  uint32_t bank = 1;
  switch (rom.header.mbc) {
    case 1:    // MBC1
    case 7: {  // MBC1M
      const uint32_t shift = rom.header.mbc == 7 ? 4u : 5u;
      uint32_t low = lo & 0x1Fu;
      if (low == 0) low = 1;
      low &= (1u << shift) - 1u;
      bank = ((uint32_t)(s.mbc_ram_bank[0] & 3u) << shift) | low;
      break;
    }
    case 2:
      bank = lo & 0x0Fu;
      if (bank == 0) bank = 1;
      break;
    case 3:
    case 4:
      bank = lo & 0x7Fu;
      if (bank == 0) bank = 1;
      break;
    case 5:
    case 6:
      bank = ((uint32_t)(s.mbc_rom_bank_hi[0] & 1u) << 8) | lo;
      break;
    default:
      break;
  }
  return bank & mask;
}

const char* region_of(uint32_t pc) {
  if (pc < 0x4000u) return "rom0";
  if (pc < 0x8000u) return "romx";
  if (pc - 0xC000u < 0x2000u) return "wram";
  if (pc - 0xFF80u < 0x7Fu) return "hram";
  return "other";
}

const char* class_of(const std::string& family, bool cb) {
  if (cb) return family == "cb_bit" ? "cb_bit" : "cb_other";
  if (family.rfind("ld", 0) == 0) return "load";
  if (family == "push" || family == "pop") return "stack";
  if (family == "jr" || family == "jr_cc" || family == "jp" || family == "jp_cc" ||
      family == "jp_hl" || family == "call" || family == "call_cc" || family == "ret" ||
      family == "ret_cc" || family == "reti" || family == "rst")
    return "jump";
  if (family == "nop" || family == "halt" || family == "stop" || family == "di" || family == "ei" ||
      family == "illegal")
    return "control";
  return "alu";  // alu, inc/dec, add_hl_rr, add_sp_e8, rot_a, daa, cpl, scf, ccf
}

// The memory operand of an instruction at its execution: the address, and whether it writes
// (read-modify-write counts as a write). false when it has none (stack pushes aside).
bool memory_operand(const OpcodeEntry& op, const OpcodeEntry* cb, const uint8_t* bytes,
                    const GbxState& s, uint32_t& addr, bool& write) {
  const std::string& m = (cb ? *cb : op).mnemonic;
  const size_t open = m.find('(');
  if (open == std::string::npos) return false;
  const uint32_t hl = ((uint32_t)s.h[0] << 8) | s.l[0];
  const std::string inner = m.substr(open + 1, m.find(')', open) - open - 1);
  if (inner.rfind("HL", 0) == 0)
    addr = hl;
  else if (inner == "BC")
    addr = ((uint32_t)s.b[0] << 8) | s.c[0];
  else if (inner == "DE")
    addr = ((uint32_t)s.d[0] << 8) | s.e[0];
  else if (inner == "C")
    addr = 0xFF00u | s.c[0];
  else if (inner == "a8")
    addr = 0xFF00u | bytes[1];
  else if (inner == "a16")
    addr = (uint32_t)bytes[1] | ((uint32_t)bytes[2] << 8);
  else
    return false;
  const size_t space = m.find(' ');
  const bool dest_first = space != std::string::npos && space + 1 == open;
  const std::string verb = m.substr(0, space);
  if (cb)
    write = verb != "BIT";
  else if (verb == "LD" || verb == "LDH")
    write = dest_first;
  else
    write = verb == "INC" || verb == "DEC";
  return true;
}

const char* vector_name(uint32_t pc) {
  switch (pc) {
    case 0x40:
      return "vblank";
    case 0x48:
      return "stat";
    case 0x50:
      return "timer";
    case 0x58:
      return "serial";
    default:
      return "joypad";
  }
}

}  // namespace

Result<GameProfile> profile_game(const Rom& rom, const GameProfileOptions& go) {
  const ProfileRunOptions& o = go.run;
  if (go.frames < 1) return make_error(ErrorKind::Usage, "--frames must be at least 1");
  const OptionValues values = with_defaults(o.options, kProfile);
  const int64_t frames_per_step = option_int(values, "frames_per_step");
  const int64_t release_after_frames = option_int(values, "release_after_frames");
  if (frames_per_step < 1)
    return make_error(ErrorKind::Usage, "--frames-per-step must be at least 1");
  if (o.actions != "random" && o.actions != "none")
    return make_error(ErrorKind::Usage, "--actions must be random or none");
  auto policy = ActionPolicy::parse(o.actions, o.seed);
  if (!policy) return policy.take_error();
  std::vector<uint8_t> blob;
  if (!o.load_state.empty()) {
    auto b = read_save_state_file(o.load_state);
    if (!b) return b.take_error();
    blob = std::move(b.value());
  }
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  const std::vector<OpcodeEntry>& table = bundle.value().opcodes();
  const OpcodeEntry* base[256] = {};
  const OpcodeEntry* cbt[256] = {};
  for (const auto& e : table) (e.cb ? cbt : base)[e.code & 0xFF] = &e;

  auto start = [&](BackendConfig cfg) -> Result<std::unique_ptr<CpuBackend>> {
    cfg.num_envs = 1;
    cfg.stage = Stage::EmulateOnly;
    cfg.threads = 1;
    auto be = CpuBackend::create(rom, cfg);
    if (!be) return be.take_error();
    if (!blob.empty()) {
      if (Status st = be.value()->set_reset_state({blob}); !st)
        return make_error(st.error().kind,
                          "--load-state " + o.load_state + ": " + st.error().message);
      if (Status st = be.value()->reset(std::vector<uint8_t>{1}); !st) return st.take_error();
    }
    return be;
  };

  GameProfile g;
  const int64_t steps = (go.frames + frames_per_step - 1) / frames_per_step;
  g.frames = steps * frames_per_step;

  // The plan first, and where its blocks' instructions lie.
  std::vector<uint8_t> in_block(rom.bytes.size(), 0);
  std::shared_ptr<const SpecPlan> plan;
  if (go.plan) {
    auto prof = profile_rom(rom, o);
    if (!prof) return prof.take_error();
    auto made = spec_plan_for(rom, prof.value());
    if (!made) return made.take_error();
    plan = made.value();
    g.planned = true;
    g.plan_blocks = plan->blocks.size();
    const SpecLimits limits;
    std::vector<uint8_t> starts(rom.bytes.size(), 0);
    for (const auto& b : prof.value().blocks) {
      const uint64_t off = (uint64_t)b.bank * 0x4000u + (b.addr & 0x3FFFu);
      if (off < starts.size()) starts[off] = 1;
    }
    for (const auto& b : plan->blocks) {
      auto instrs = spec_decode_block(table, rom.bytes, b.bank, b.addr, (int)b.instructions);
      for (const auto& in : instrs) {
        const uint64_t off = (uint64_t)b.bank * 0x4000u + (in.addr & 0x3FFFu);
        if (off < in_block.size()) in_block[off] = 1;
      }
      g.block_ends[spec_block_end(table, rom.bytes, b, limits, starts)] += b.count;
    }
  }

  // The trace.
  BackendConfig cfg;
  cfg.run_mode = RunMode::Instructions;
  cfg.instructions_per_step = 1;
  cfg.release_after_frames = -1;  // the host releases the buttons (below)
  auto made = start(cfg);
  if (!made) return made.take_error();
  CpuBackend& be = *made.value();
  const GbxState& s = be.state().soa();
  const int64_t frame0 = s.cycle_count[0] - s.cycle_in_frame[0];
  const int64_t end = frame0 + g.frames * kFrameCycles;
  std::vector<int32_t> step_actions, action(1, 0);
  struct Frame {
    const char* vector;
    uint32_t sp;
  };
  std::vector<Frame> handlers;
  int64_t cur_step = -1;
  while (s.cycle_count[0] < end) {
    const int64_t cycles = s.cycle_count[0];
    const int64_t frame = (cycles - frame0) / kFrameCycles;
    const int64_t k = frame / frames_per_step;
    if (k != cur_step) {
      policy->fill(k, 1, step_actions);
      cur_step = k;
    }
    const bool held = release_after_frames < 0 || frame % frames_per_step < release_after_frames;
    action[0] = held ? step_actions[0] : 0;
    const uint32_t pc = s.pc[0], sp = s.sp[0];
    const uint8_t ime = s.ime[0], run = s.run_state[0];
    const uint32_t bank = romx_bank(s, rom);
    uint8_t bytes[3] = {0, 0, 0};
    const OpcodeEntry* op = nullptr;
    const OpcodeEntry* cb = nullptr;
    uint32_t addr = 0;
    bool write = false, has_mem = false;
    if (run == 0) {
      auto mem = be.read_memory(0, pc, std::min<uint32_t>(pc + 3, 0x10000u));
      if (!mem) return mem.take_error();
      std::copy(mem.value().begin(), mem.value().end(), bytes);
      op = base[bytes[0]];
      if (op && op->family == "prefix_cb") cb = cbt[bytes[1]];
      if (op) has_mem = memory_operand(*op, cb, bytes, s, addr, write);
    }
    if (Status st = be.step(action); !st) return st.take_error();
    const uint64_t d = (uint64_t)(s.cycle_count[0] - cycles);
    g.cycles += d;
    const uint32_t pc2 = s.pc[0];
    const bool dispatched =
        ime && !s.ime[0] && s.sp[0] == ((sp - 2) & 0xFFFFu) &&
        (pc2 == 0x40 || pc2 == 0x48 || pc2 == 0x50 || pc2 == 0x58 || pc2 == 0x60);
    if (dispatched) {
      ++g.interrupts;
      handlers.push_back({vector_name(pc2), sp});
      continue;
    }
    if (run != 0) {  // asleep (or woken without a dispatch: IME off)
      if (d == 0 && s.run_state[0] != 0 && s.pc[0] == pc) {
        // Nothing can wake it (no event ahead: the loop ends the call without moving the
        // clock): asleep to the end of the trace.
        g.halted_cycles += (uint64_t)(end - cycles);
        g.cycles += (uint64_t)(end - cycles);
        break;
      }
      g.halted_cycles += d;
      continue;
    }
    if (!op) continue;
    ++g.instructions;
    const OpcodeEntry& e = cb ? *cb : *op;
    g.families[e.family] += 1;
    g.classes[class_of(e.family, cb != nullptr)] += 1;
    const char* region = region_of(pc);
    g.regions[region] += 1;
    if (!handlers.empty()) g.handlers[handlers.back().vector] += 1;
    if (e.family == "halt") ++g.halts;
    if (!cb && (bytes[0] == 0x22 || bytes[0] == 0x2A || bytes[0] == 0x32 || bytes[0] == 0x3A))
      ++g.copy_ops;
    if (has_mem) {
      if (write && addr < 0x8000u) {
        ++g.mbc_writes;
        if (romx_bank(s, rom) != bank) ++g.bank_switches;
      }
      if (write && addr >= 0xFF00u && (addr < 0xFF80u || addr == 0xFFFFu)) ++g.io_writes;
      if (!write && addr == 0xFF00u) ++g.joypad_reads;
    }
    if (g.planned) {
      const uint64_t off = pc < 0x4000u ? pc : (uint64_t)bank * 0x4000u + (pc - 0x4000u);
      if (pc < 0x8000u && off < in_block.size() && in_block[off])
        ++g.in_plan;
      else
        g.outside_plan[region] += 1;
    }
    while (!handlers.empty() && s.sp[0] >= handlers.back().sp) handlers.pop_back();
  }

  // The specialized kernel over the same steps.
  if (plan) {
    BackendConfig sc;
    if (Status st = apply_options(values, kProfile, rom, sc); !st) return st.take_error();
    sc.specialize = plan;
    auto spec = start(sc);
    if (!spec) return spec.take_error();
    CpuBackend& sb = *spec.value();
    const uint64_t i0 = (uint64_t)sb.state().soa().instr_count[0];
    auto r0 = sb.specialized_instr_counts();
    if (!r0) return r0.take_error();
    for (int k = 0; k < steps; ++k) {
      policy->fill(k, 1, step_actions);
      if (Status st = sb.step(step_actions); !st) return st.take_error();
    }
    auto r1 = sb.specialized_instr_counts();
    if (!r1) return r1.take_error();
    g.spec_retired = (uint64_t)(r1.value()[0] - r0.value()[0]);
    g.spec_total = (uint64_t)sb.state().soa().instr_count[0] - i0;
  }
  return g;
}

namespace {

std::string pct(uint64_t n, uint64_t of) {
  char b[32];
  std::snprintf(b, sizeof b, "%5.1f%%", of ? 100.0 * (double)n / (double)of : 0.0);
  return b;
}

// Rows of a table, largest first.
std::vector<std::pair<std::string, uint64_t>> ranked(const std::map<std::string, uint64_t>& m) {
  std::vector<std::pair<std::string, uint64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  return v;
}

}  // namespace

std::string game_profile_text(const std::string& name, const GameProfile& p) {
  std::string out;
  char line[256];
  const double per_frame = p.cycles ? (double)kFrameCycles / (double)p.cycles : 0;
  std::snprintf(
      line, sizeof line,
      "%s: %lld frames, %.0f instructions/frame, halted %.1f%% of cycles, %.2f HALTs/frame, "
      "%.2f interrupts/frame\n",
      name.c_str(), (long long)p.frames, p.instructions_per_frame(), 100.0 * p.halted_share(),
      (double)p.halts * per_frame, (double)p.interrupts * per_frame);
  out += line;
  std::snprintf(line, sizeof line,
                "  per frame: %.1f MBC writes (%.1f bank switches), %.1f I/O writes, %.1f joypad "
                "reads; copy ops (LD A,(HL+/-), LD (HL+/-),A) %s of instructions\n",
                (double)p.mbc_writes * per_frame, (double)p.bank_switches * per_frame,
                (double)p.io_writes * per_frame, (double)p.joypad_reads * per_frame,
                pct(p.copy_ops, p.instructions).c_str());
  out += line;
  auto table = [&](const char* title, const std::map<std::string, uint64_t>& m, uint64_t of,
                   size_t most) {
    out += std::string("  ") + title + ":";
    size_t n = 0;
    for (const auto& [k, v] : ranked(m)) {
      if (n++ == most) break;
      out += " " + k + " " + pct(v, of);
    }
    out += "\n";
  };
  table("classes", p.classes, p.instructions, 99);
  table("code in", p.regions, p.instructions, 99);
  table("in handlers", p.handlers, p.instructions, 99);
  table("top families", p.families, p.instructions, 8);
  if (p.planned) {
    uint64_t exits = 0;
    for (const auto& kv : p.block_ends) exits += kv.second;
    std::snprintf(line, sizeof line,
                  "  plan: %llu blocks; traced at a block's address %s; retired in blocks on the "
                  "specialized kernel %s\n",
                  (unsigned long long)p.plan_blocks, pct(p.in_plan, p.instructions).c_str(),
                  pct(p.spec_retired, p.spec_total).c_str());
    out += line;
    table("outside blocks", p.outside_plan, p.instructions, 99);
    table("block ends (by entries)", p.block_ends, exits, 99);
  }
  return out;
}

std::string game_profile_json(const std::string& name, const GameProfile& p) {
  nlohmann::json j;
  j["kind"] = "gbx-game-profile";
  j["name"] = name;
  j["frames"] = p.frames;
  j["instructions"] = p.instructions;
  j["instructions_per_frame"] = p.instructions_per_frame();
  j["cycles"] = p.cycles;
  j["halted_cycles"] = p.halted_cycles;
  j["halted_share"] = p.halted_share();
  j["interrupts"] = p.interrupts;
  j["halts"] = p.halts;
  j["families"] = p.families;
  j["classes"] = p.classes;
  j["regions"] = p.regions;
  j["handlers"] = p.handlers;
  j["mbc_writes"] = p.mbc_writes;
  j["bank_switches"] = p.bank_switches;
  j["io_writes"] = p.io_writes;
  j["joypad_reads"] = p.joypad_reads;
  j["copy_ops"] = p.copy_ops;
  if (p.planned) {
    j["plan"] = {{"blocks", p.plan_blocks},
                 {"in_plan", p.in_plan},
                 {"in_plan_share", p.instructions ? (double)p.in_plan / p.instructions : 0.0},
                 {"outside", p.outside_plan},
                 {"block_ends", p.block_ends},
                 {"spec_retired", p.spec_retired},
                 {"spec_total", p.spec_total},
                 {"spec_share", p.spec_total ? (double)p.spec_retired / p.spec_total : 0.0}};
  }
  return j.dump(1) + "\n";
}

}  // namespace gbx
