// module.s (engine/include/gbx/engine/object_disasm.h): a CPU kernel's object read back by
// LLVM's disassembler. It must decode every byte of the code, name each function and what its
// calls and table loads are relocated against, and refuse input that is not an object.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "gbx/engine/object_disasm.h"
#include "gbx/engine/orc_compiler.h"

namespace {

// A call to a function defined elsewhere (a relocation), a switch dense enough for a jump
// table (a relocated load from .rodata), and a loop (a backward branch).
const char* kSource = R"(
extern "C" int elsewhere(int);
namespace probe { int twice(int x) { return elsewhere(x) * 2; } }
extern "C" int pick(int op, int x) {
  switch (op) {
    case 0: return x + 3;
    case 1: return x * 7;
    case 2: return x ^ 0x55;
    case 3: return x - 9;
    case 4: return x << 2;
    case 5: return probe::twice(x);
    case 6: return x / 5;
    default: return 0;
  }
}
extern "C" int sum(const int* p, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += p[i] * (i | 1);
  return s;
}
)";

}  // namespace

TEST_CASE("module.s: every function named, every byte decoded, relocations and branch targets") {
  auto out = gbx::compile_cpu(kSource, "disasm_probe.cpp", {});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message + "\n" + out.error().detail));
  const std::string& s = out->assembly;
  INFO(s);
  CHECK(s.find("\npick:\n") != std::string::npos);
  CHECK(s.find("\nsum:\n") != std::string::npos);
  CHECK(s.find("\nprobe::twice(int):\n") != std::string::npos);  // demangled
  CHECK(s.find("# R_") != std::string::npos);
  CHECK(s.find(" elsewhere") != std::string::npos);  // the call's relocation names its target
  CHECK(s.find(".rodata") != std::string::npos);     // the jump table's load
  CHECK(s.find(" <sum+0x") != std::string::npos);    // the loop's branch back, by name
  CHECK(s.find(".byte") == std::string::npos);       // nothing left undecoded
  int instructions = 0;
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);)
    if (line.find(":\t") != std::string::npos) ++instructions;
  CHECK(instructions > 20);
}

TEST_CASE("module.s: bytes that are not an object are an error, not a crash") {
  auto r = gbx::disassemble_object("not an ELF object at all");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("module.o") != std::string::npos);
  CHECK_FALSE(gbx::disassemble_object("").ok());
}
