#pragma once
// The code generator: templates (data) + synthesis parameters -> one readable source.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"

namespace gbx {

// One row of the SM83 opcode table (templates/sm83/opcodes.tsv).
// How an instruction family shapes control flow, declared per family in the templates
// (manifest "family_roles", sm83/families.tsv); specialized blocks end and chain by it.
enum class FlowRole {
  Plain,     // falls through
  Jump,      // unconditional transfer: JR, JP, JP HL, RET, RETI, RST, CALL (ends the block)
  Branch,    // conditional transfer: ends the block, may fall through
  EndAfter,  // EI, DI: IME changes, the interpreter takes the next boundary
  Excluded,  // HALT, STOP, illegal opcodes: never inside a block (they touch the machine)
};
// "plain", "jump", "branch", "end_after", "excluded" (as families.tsv writes them).
const char* to_string(FlowRole r);

struct OpcodeEntry {
  int code = 0;                     // 0x00-0xFF
  bool cb = false;                  // CB-prefixed table
  std::string mnemonic;             // "LD B,(HL)"
  int length = 1;                   // bytes including prefix
  int cycles = 4;                   // T-cycles (taken)
  int cycles_not_taken = 0;         // T-cycles when a condition fails (0: unconditional)
  std::string family;               // template name under sm83/family/
  FlowRole role = FlowRole::Plain;  // the family's declared role (TemplateBundle::load)
  std::vector<std::pair<std::string, std::string>> operands;  // NAME=value
  std::string flags;  // "Z N H C" column as in Pan Docs, e.g. "Z0HC"
};

// All templates, loaded once. The bundle hash covers every file's path and bytes.
class TemplateBundle {
 public:
  static Result<TemplateBundle> load(const std::filesystem::path& root);
  // The default root: $GBX_TEMPLATE_DIR, else the root set by set_default_root (the Python
  // package's own copy, next to its module), else the source tree, else the install prefix.
  static std::filesystem::path default_root();
  static void set_default_root(const std::filesystem::path& root);

  const std::filesystem::path& root() const { return root_; }
  const std::string& hash() const { return hash_; }  // hex SHA-256
  const std::vector<OpcodeEntry>& opcodes() const { return opcodes_; }
  // Relative path (e.g. "sm83/family/ld_r_r.tmpl") -> contents; error if absent.
  Result<std::string> file(const std::string& rel) const;

 private:
  std::filesystem::path root_;
  std::string hash_;
  std::vector<std::pair<std::string, std::string>> files_;  // sorted by path
  std::vector<OpcodeEntry> opcodes_;
};

struct GeneratedSource {
  SynthParams params;
  std::string source;       // full translation unit
  std::string entry_point;  // "gbx_step"
  // Further exported functions by role (manifest "extra_entry_points"), e.g.
  // {"read_memory", "gbx_read_memory"}: the engine looks them up without knowing what they do.
  std::map<std::string, std::string> extra_entry_points;
  std::string file_name;  // "source.cpp" or "source.cu"
};

Result<GeneratedSource> generate(const TemplateBundle& bundle, const SynthParams& params);

// Renders the opcode table as a 16x16 grid of mnemonics (base or CB), SameBoy-style.
std::string render_opcode_grid(const TemplateBundle& bundle, bool cb);

}  // namespace gbx
