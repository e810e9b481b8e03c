#include "gbx/runtime/roms/asm.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <unordered_map>

#include "gbx/runtime/roms/rom_builder.h"

namespace gbx {
namespace {

std::string hex16(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04X", v & 0xFFFFu);
  return buf;
}

// The base opcode table in the usual 16x16 layout ("" = illegal or the CB prefix). Rows
// 4x-Bx are the regular LD r,r' and ALU blocks and are generated below.
// clang-format off
constexpr std::array<const char*, 64> kRows0to3 = {
/*       x0          x1           x2            x3        x4          x5          x6            x7      x8             x9           xA            xB        xC       xD       xE         xF */
/* 0x */ "NOP",      "LD BC,d16", "LD (BC),A",  "INC BC", "INC B",    "DEC B",    "LD B,d8",    "RLCA", "LD (a16),SP", "ADD HL,BC", "LD A,(BC)",  "DEC BC", "INC C", "DEC C", "LD C,d8", "RRCA",
/* 1x */ "STOP",     "LD DE,d16", "LD (DE),A",  "INC DE", "INC D",    "DEC D",    "LD D,d8",    "RLA",  "JR r8",       "ADD HL,DE", "LD A,(DE)",  "DEC DE", "INC E", "DEC E", "LD E,d8", "RRA",
/* 2x */ "JR NZ,r8", "LD HL,d16", "LD (HL+),A", "INC HL", "INC H",    "DEC H",    "LD H,d8",    "DAA",  "JR Z,r8",     "ADD HL,HL", "LD A,(HL+)", "DEC HL", "INC L", "DEC L", "LD L,d8", "CPL",
/* 3x */ "JR NC,r8", "LD SP,d16", "LD (HL-),A", "INC SP", "INC (HL)", "DEC (HL)", "LD (HL),d8", "SCF",  "JR C,r8",     "ADD HL,SP", "LD A,(HL-)", "DEC SP", "INC A", "DEC A", "LD A,d8", "CCF",
};
constexpr std::array<const char*, 64> kRowsCtoF = {
/*       x0            x1        x2           x3        x4             x5         x6          x7         x8             x9          xA            xB    xC            xD          xE          xF */
/* Cx */ "RET NZ",     "POP BC", "JP NZ,a16", "JP a16", "CALL NZ,a16", "PUSH BC", "ADD A,d8", "RST 00H", "RET Z",       "RET",      "JP Z,a16",   "",   "CALL Z,a16", "CALL a16", "ADC A,d8", "RST 08H",
/* Dx */ "RET NC",     "POP DE", "JP NC,a16", "",       "CALL NC,a16", "PUSH DE", "SUB d8",   "RST 10H", "RET C",       "RETI",     "JP C,a16",   "",   "CALL C,a16", "",         "SBC A,d8", "RST 18H",
/* Ex */ "LDH (a8),A", "POP HL", "LD (C),A",  "",       "",            "PUSH HL", "AND d8",   "RST 20H", "ADD SP,r8",   "JP (HL)",  "LD (a16),A", "",   "",           "",         "XOR d8",   "RST 28H",
/* Fx */ "LDH A,(a8)", "POP AF", "LD A,(C)",  "DI",     "",            "PUSH AF", "OR d8",    "RST 30H", "LD HL,SP+r8", "LD SP,HL", "LD A,(a16)", "EI", "",           "",         "CP d8",    "RST 38H",
};
// clang-format on
constexpr std::array<const char*, 8> kReg8 = {"B", "C", "D", "E", "H", "L", "(HL)", "A"};
constexpr std::array<const char*, 8> kAlu = {"ADD A,", "ADC A,", "SUB ", "SBC A,",
                                             "AND ",   "XOR ",   "OR ",  "CP "};
constexpr std::array<const char*, 8> kShift = {"RLC", "RRC", "RL",   "RR",
                                               "SLA", "SRA", "SWAP", "SRL"};

enum class Slot { None, D8, A8, D16, Rel8, Signed8 };

struct Encoding {
  std::vector<uint8_t> opcode;
  Slot slot = Slot::None;
};

// Upper case, `[ ]` as `( )`, one space between mnemonic and operands, none elsewhere.
std::string normalize(std::string_view form) {
  std::string mnemonic, operands;
  size_t i = 0;
  while (i < form.size() && std::isspace(static_cast<unsigned char>(form[i]))) ++i;
  while (i < form.size() && !std::isspace(static_cast<unsigned char>(form[i])))
    mnemonic += static_cast<char>(std::toupper(static_cast<unsigned char>(form[i++])));
  for (; i < form.size(); ++i) {
    char c = form[i];
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (c == '[') c = '(';
    if (c == ']') c = ')';
    operands += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  std::string out = operands.empty() ? mnemonic : mnemonic + " " + operands;
  static const std::array<std::pair<const char*, const char*>, 4> kInside = {
      {{"(HLI)", "(HL+)"}, {"(HLD)", "(HL-)"}, {"($FF00+C)", "(C)"}, {"(0XFF00+C)", "(C)"}}};
  for (const auto& [from, to] : kInside) {
    size_t at = out.find(from);
    if (at != std::string::npos) out.replace(at, std::string_view(from).size(), to);
  }
  static const std::array<std::pair<const char*, const char*>, 4> kWhole = {
      {{"JP HL", "JP (HL)"},
       {"LDH (C),A", "LD (C),A"},
       {"LDH A,(C)", "LD A,(C)"},
       {"STOP 0", "STOP"}}};
  for (const auto& [from, to] : kWhole)
    if (out == from) return to;
  return out;
}

Slot slot_of(const std::string& key) {
  auto has = [&](const char* tok) { return key.find(tok) != std::string::npos; };
  if (has("D16") || has("A16")) return Slot::D16;
  if (has("D8")) return Slot::D8;
  if (has("A8")) return Slot::A8;
  // JR's r8 is a branch displacement; ADD SP / LD HL,SP+ take a plain signed byte.
  if (has("R8")) return key.rfind("JR", 0) == 0 ? Slot::Rel8 : Slot::Signed8;
  return Slot::None;
}

const std::unordered_map<std::string, Encoding>& table() {
  static const std::unordered_map<std::string, Encoding> t = [] {
    std::unordered_map<std::string, Encoding> m;
    auto add = [&](const std::string& form, std::vector<uint8_t> bytes) {
      std::string key = normalize(form);
      m[key] = Encoding{std::move(bytes), slot_of(key)};
    };
    for (int op = 0; op < 256; ++op) {
      std::string name;
      if (op < 0x40) {
        name = kRows0to3[op];
      } else if (op < 0x80) {
        name =
            op == 0x76 ? "HALT" : std::string("LD ") + kReg8[(op >> 3) & 7] + "," + kReg8[op & 7];
      } else if (op < 0xC0) {
        name = std::string(kAlu[(op >> 3) & 7]) + kReg8[op & 7];
      } else {
        name = kRowsCtoF[op - 0xC0];
      }
      if (name.empty()) continue;
      // STOP is two bytes on the bus (10 00); assemblers emit the padding byte.
      if (op == 0x10) {
        add(name, {0x10, 0x00});
      } else {
        add(name, {static_cast<uint8_t>(op)});
      }
    }
    for (int op = 0; op < 256; ++op) {
      const char* reg = kReg8[op & 7];
      int group = op >> 6, n = (op >> 3) & 7;
      std::string name;
      if (group == 0) {
        name = std::string(kShift[n]) + " " + reg;
      } else {
        static constexpr std::array<const char*, 4> kBitOps = {"", "BIT", "RES", "SET"};
        name = std::string(kBitOps[group]) + " " + std::to_string(n) + "," + reg;
      }
      add(name, {0xCB, static_cast<uint8_t>(op)});
    }
    return m;
  }();
  return t;
}

const char* slot_name(Slot s) {
  switch (s) {
    case Slot::D8:
      return "d8";
    case Slot::A8:
      return "a8";
    case Slot::D16:
      return "d16/a16";
    case Slot::Rel8:
    case Slot::Signed8:
      return "r8";
    case Slot::None:
      break;
  }
  return "none";
}

}  // namespace

Result<std::vector<uint8_t>> encode_form(std::string_view form) {
  auto it = table().find(normalize(form));
  if (it == table().end())
    return make_error(ErrorKind::Input, "unknown SM83 instruction '" + std::string(form) + "'");
  return it->second.opcode;
}

Asm::Asm(uint16_t origin) { chunks_.push_back(AsmChunk{origin, {}}); }

uint16_t Asm::here() const {
  const AsmChunk& c = chunks_.back();
  return static_cast<uint16_t>(c.addr + c.bytes.size());
}

void Asm::fail(std::string message) {
  if (!error_) error_ = make_error(ErrorKind::Input, "asm at " + hex16(here()) + ": " + message);
}

void Asm::emit(uint8_t b) {
  AsmChunk& c = chunks_.back();
  if (c.addr + c.bytes.size() >= 0x10000) {
    fail("code runs past 0xFFFF");
    return;
  }
  c.bytes.push_back(b);
}

Asm& Asm::op(std::string_view form) { return op_impl(form, std::nullopt, std::nullopt); }
Asm& Asm::op(std::string_view form, int value) { return op_impl(form, value, std::nullopt); }
Asm& Asm::op(std::string_view form, std::string_view label) {
  return op_impl(form, std::nullopt, label);
}

Asm& Asm::op_impl(std::string_view form, std::optional<int> value,
                  std::optional<std::string_view> label) {
  const std::string quoted = "'" + std::string(form) + "'";
  auto it = table().find(normalize(form));
  if (it == table().end()) {
    fail("unknown SM83 instruction " + quoted);
    return *this;
  }
  const Encoding& enc = it->second;
  const bool has_operand = value.has_value() || label.has_value();
  if (enc.slot == Slot::None && has_operand) {
    fail(quoted + " takes no operand");
    return *this;
  }
  if (enc.slot != Slot::None && !has_operand) {
    fail(quoted + " needs a " + std::string(slot_name(enc.slot)) + " operand");
    return *this;
  }
  if (label && enc.slot != Slot::D16 && enc.slot != Slot::Rel8) {
    fail(quoted + " takes a number, not a label");
    return *this;
  }
  const uint16_t start = here();
  for (uint8_t b : enc.opcode) emit(b);

  const int v = value.value_or(0);
  auto range = [&](int lo, int hi) {
    if (v < lo || v > hi) {
      fail(quoted + " operand " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
           std::to_string(hi));
      return false;
    }
    return true;
  };
  switch (enc.slot) {
    case Slot::None:
      break;
    case Slot::D8:
      if (range(-128, 255)) emit(static_cast<uint8_t>(v));
      break;
    case Slot::A8:
      // 0xFF00+n may be written as the full address.
      if (v >= 0xFF00 && v <= 0xFFFF) {
        emit(static_cast<uint8_t>(v));
      } else if (range(0, 0xFF)) {
        emit(static_cast<uint8_t>(v));
      }
      break;
    case Slot::Signed8:
    case Slot::Rel8:
      if (label) {
        fixups_.push_back(Fixup{chunks_.size() - 1, chunks_.back().bytes.size(),
                                static_cast<uint16_t>(start + enc.opcode.size() + 1), true,
                                std::string(*label), std::string(form)});
        emit(0);
      } else if (range(-128, 127)) {
        emit(static_cast<uint8_t>(v));
      }
      break;
    case Slot::D16:
      if (label) {
        fixups_.push_back(Fixup{chunks_.size() - 1, chunks_.back().bytes.size(),
                                static_cast<uint16_t>(start + enc.opcode.size() + 2), false,
                                std::string(*label), std::string(form)});
        emit(0);
        emit(0);
      } else if (range(-32768, 0xFFFF)) {
        emit(static_cast<uint8_t>(v));
        emit(static_cast<uint8_t>(v >> 8));
      }
      break;
  }
  return *this;
}

Asm& Asm::label(std::string_view name) {
  if (name.empty()) {
    fail("empty label name");
  } else if (!labels_.emplace(std::string(name), here()).second) {
    fail("label '" + std::string(name) + "' defined twice");
  }
  return *this;
}

Asm& Asm::org(uint16_t addr) {
  if (chunks_.back().bytes.empty()) {
    chunks_.back().addr = addr;
  } else {
    chunks_.push_back(AsmChunk{addr, {}});
  }
  return *this;
}

Asm& Asm::db(std::initializer_list<uint8_t> bytes) {
  for (uint8_t b : bytes) emit(b);
  return *this;
}

Asm& Asm::bytes(const std::vector<uint8_t>& bytes) {
  for (uint8_t b : bytes) emit(b);
  return *this;
}

Asm& Asm::ascii(std::string_view text) {
  for (char c : text) emit(static_cast<uint8_t>(c));
  return *this;
}

Asm& Asm::asciz(std::string_view text) {
  ascii(text);
  emit(0);
  return *this;
}

Result<std::vector<AsmChunk>> Asm::assemble() const {
  if (error_) return *error_;
  std::vector<AsmChunk> out = chunks_;
  for (const Fixup& f : fixups_) {
    auto it = labels_.find(f.label);
    const unsigned at = out[f.chunk].addr + f.pos;
    if (it == labels_.end())
      return make_error(ErrorKind::Input, "asm at " + hex16(at) + ": undefined label '" + f.label +
                                              "' in '" + f.form + "'");
    if (f.relative) {
      const int offset = static_cast<int>(it->second) - static_cast<int>(f.next_pc);
      if (offset < -128 || offset > 127)
        return make_error(ErrorKind::Input, "asm at " + hex16(at) + ": '" + f.form + "' to '" +
                                                f.label + "' needs offset " +
                                                std::to_string(offset) + ", JR reaches -128..127");
      out[f.chunk].bytes[f.pos] = static_cast<uint8_t>(offset);
    } else {
      out[f.chunk].bytes[f.pos] = static_cast<uint8_t>(it->second);
      out[f.chunk].bytes[f.pos + 1] = static_cast<uint8_t>(it->second >> 8);
    }
  }
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const AsmChunk& c) { return c.bytes.empty(); }),
      out.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const AsmChunk& a, const AsmChunk& b) { return a.addr < b.addr; });
  for (size_t i = 1; i < out.size(); ++i) {
    const unsigned prev_end = out[i - 1].addr + out[i - 1].bytes.size();
    if (prev_end > out[i].addr)
      return make_error(ErrorKind::Input, "asm: code at " + hex16(out[i - 1].addr) + ".." +
                                              hex16(prev_end - 1) + " overlaps code at " +
                                              hex16(out[i].addr));
  }
  return out;
}

Result<std::vector<uint8_t>> Asm::assemble_flat() const {
  auto chunks = assemble();
  if (!chunks) return chunks.take_error();
  if (chunks->empty()) return std::vector<uint8_t>{};
  if (chunks->size() != 1)
    return make_error(ErrorKind::Input, "asm: program has " + std::to_string(chunks->size()) +
                                            " chunks (org), expected one");
  return std::move(chunks->front().bytes);
}

Status Asm::place(RomSpec& spec) const {
  auto chunks = assemble();
  if (!chunks) return chunks.take_error();
  for (AsmChunk& c : *chunks) {
    if (c.addr + c.bytes.size() > 0x8000)
      return make_error(ErrorKind::Input, "asm: code at " + hex16(c.addr) +
                                              " is outside the cartridge ROM (0x0000-0x7FFF)");
    if (c.addr == 0x0150) {
      spec.program = std::move(c.bytes);
    } else {
      spec.patches.emplace_back(c.addr, std::move(c.bytes));
    }
  }
  return ok_status();
}

}  // namespace gbx
