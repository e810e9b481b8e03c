#pragma once
// The generator's emitter for ROM-specialized blocks (the SPECIALIZED_BLOCKS site of
// kernel/step.tmpl): straight-line C++ per block, chained blocks joined into functions, and the
// dispatch table by address. Private to engine/src (generator.cpp calls it).
#include <functional>
#include <string>
#include <vector>

#include "gbx/engine/generator.h"
#include "gbx/engine/specialize.h"

namespace gbx {

inline std::string line_directive(int line, const std::string& rel) {
  return "#line " + std::to_string(line) + " \"templates/" + rel + "\"\n";
}

// A family body with an opcode's operands substituted (the generator's expand_body): the
// template's path, the template line of lines[0], one string per template line.
struct SpecBody {
  std::string path;
  int body_line = 1;
  std::vector<std::string> lines;
};
using SpecBodyFn = std::function<Result<SpecBody>(const OpcodeEntry&)>;

// The specialized blocks of `plan`, after `helpers` (the specialized_helpers template, already
// behind its #line); `hooks` are counted where the interpreter counts them.
Result<std::string> emit_specialized_blocks(const SpecPlan& plan,
                                            const std::vector<OpcodeEntry>& opcodes,
                                            const std::vector<HookAddr>& hooks,
                                            const std::string& helpers, const SpecBodyFn& body);

}  // namespace gbx
