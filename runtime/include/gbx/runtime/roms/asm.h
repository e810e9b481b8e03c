#pragma once
// A tiny SM83 assembler for hand-written test ROMs.
//
// Instructions are written in the opcode table's own notation (the pastraiser / SameBoy
// vocabulary: d8 d16 = immediates, a8 = 0xFF00+n, a16 = address, r8 = signed offset), so a
// program reads like a listing:
//
//   Asm a;                         // code starts at 0x0150, where the entry jumps
//   a.label("loop");
//   a.op("LD A,d8", 0x81);
//   a.op("LDH (a8),A", io::kSC);
//   a.op("JR NZ,r8", "loop");      // labels may be used before they are defined
//
// Case and spacing are free, `[HL]` may stand for `(HL)`, and a few common spellings are
// accepted (`JP HL`, `LDH (C),A`, `(HLI)`/`(HLD)`). Errors (unknown form, operand out of
// range, duplicate or undefined label, JR out of reach) are kept and returned by
// assemble(): the first one wins, later calls are still recorded so labels stay consistent.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

struct RomSpec;

// I/O registers as LDH offsets (address 0xFF00 + n).
namespace io {
constexpr uint8_t kSB = 0x01;  // serial data
constexpr uint8_t kSC = 0x02;  // serial control
constexpr uint8_t kDIV = 0x04;
constexpr uint8_t kTIMA = 0x05;
constexpr uint8_t kTMA = 0x06;
constexpr uint8_t kTAC = 0x07;
constexpr uint8_t kIF = 0x0F;
constexpr uint8_t kLCDC = 0x40;
constexpr uint8_t kIE = 0xFF;
}  // namespace io

// A contiguous run of assembled bytes at a CPU address.
struct AsmChunk {
  uint16_t addr = 0;
  std::vector<uint8_t> bytes;
};

class Asm {
 public:
  explicit Asm(uint16_t origin = 0x0150);

  // One instruction. `form` names the operand slot (d8, d16, a8, a16, r8), the second
  // argument fills it: a number, or a label for d16/a16 (absolute) and JR's r8 (relative).
  Asm& op(std::string_view form);
  Asm& op(std::string_view form, int value);
  Asm& op(std::string_view form, std::string_view label);

  Asm& label(std::string_view name);
  // Continues at another address (a new chunk): interrupt vectors, data.
  Asm& org(uint16_t addr);
  Asm& db(std::initializer_list<uint8_t> bytes);
  Asm& bytes(const std::vector<uint8_t>& bytes);
  Asm& ascii(std::string_view text);
  Asm& asciz(std::string_view text);  // text + 0x00

  uint16_t here() const;

  // Chunks in address order with every label resolved, or the first error.
  Result<std::vector<AsmChunk>> assemble() const;
  // The bytes of a program that is a single chunk (error if org() made more than one).
  Result<std::vector<uint8_t>> assemble_flat() const;
  // Into a ROM spec: the chunk at 0x0150 becomes the program, every other chunk a patch.
  Status place(RomSpec& spec) const;

 private:
  struct Fixup {
    size_t chunk;
    size_t pos;        // offset of the operand inside the chunk
    uint16_t next_pc;  // address after the instruction (JR's base)
    bool relative;
    std::string label;
    std::string form;
  };

  void emit(uint8_t b);
  void fail(std::string message);
  Asm& op_impl(std::string_view form, std::optional<int> value,
               std::optional<std::string_view> label);

  std::vector<AsmChunk> chunks_;
  std::map<std::string, uint16_t> labels_;
  std::vector<Fixup> fixups_;
  std::optional<Error> error_;
};

// Opcode bytes of a form, without its operand ("BIT 7,A" -> CB 7F, "LD A,d8" -> 3E).
Result<std::vector<uint8_t>> encode_form(std::string_view form);

}  // namespace gbx
