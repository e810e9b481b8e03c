#pragma once
// SingleStepTests SM83 suite through the JIT-compiled flat64k kernel: one test case per env,
// one instruction per run.
#include <filesystem>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"

namespace gbx {

struct ConformanceOptions {
  std::filesystem::path dir;      // the extracted suite (folder of *.json)
  std::vector<std::string> only;  // file stems to run ("00", "cb 7e"); empty = all
  int threads = 0;
  Dispatch dispatch = Dispatch::Switch;  // the kernel's opcode dispatch (synthesis option)
};

struct ConformanceFile {
  std::string name;  // "cb 7e.json"
  int cases = 0;
  int failed_cases = 0;
  std::string first_diff;  // "case 'cb 7e 0012': f expected 0xA0 got 0x20"
  std::string exception;   // documented exception applied to this file, if any
};

struct ConformanceReport {
  std::vector<ConformanceFile> files;
  int passed() const;
  int failed() const;
};

// Files whose expectations come from another emulator's model and disagree with Pan Docs:
// what is not compared for them, and why. Printed by the runner and listed in README.
struct ConformanceException {
  std::string file;
  bool compare_pc;
  bool compare_cycles;
  std::string reason;
};
const std::vector<ConformanceException>& conformance_exceptions();

Result<ConformanceReport> run_sm83_conformance(const ConformanceOptions& opts);

}  // namespace gbx
