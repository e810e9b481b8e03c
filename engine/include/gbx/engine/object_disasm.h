#pragma once
// A CPU kernel's module.s, read back from its module.o with LLVM's MC disassembler.
#include <string>

#include "gbx/engine/result.h"

namespace gbx {

// The code sections of an ELF object as assembly text (AT&T syntax, as perf annotate and
// gdb show it): each function under its symbol name, each instruction with its offset in the
// section and the relocation it carries (call targets, constant-pool and jump-table loads).
// Disassembling the full_step kernel's object takes about 60 ms; emitting the .s from the module
// was a second code generation, as dear as the .o's own (test-cache compiles, 2026-12-07:
// 1,410 of 2,353 s of cpu compile time went to the two codegen runs side by side).
Result<std::string> disassemble_object(const std::string& object);

}  // namespace gbx
