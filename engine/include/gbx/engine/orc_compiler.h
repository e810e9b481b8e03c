#pragma once
// CPU compiler: generated C++ -> optimized LLVM module -> .ll / .s / .o with the clang C++ API,
// and a process-wide ORC LLJIT that loads .o files (one JITDylib per module).
#include <cstdio>
#include <string>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

struct CpuCompileOptions {
  std::string opt_level = "-O2";
  std::vector<std::string> extra;  // appended to the driver command line
};

struct CpuCompileOutput {
  std::string llvm_ir;     // module.ll (after optimization)
  std::string assembly;    // module.s
  std::string object;      // module.o (ELF, position independent)
  std::string log;         // clang diagnostics (warnings included)
  double frontend_ms = 0;  // parse + optimize
  double codegen_ms = 0;   // .o, and the .s disassembled from it
};

// The driver command line used for every CPU kernel (ordered; part of the cache key).
std::vector<std::string> cpu_compile_args(const CpuCompileOptions& opts);
// "LLVM <version>; <triple>; <cpu>; <features>": part of the cache key.
std::string cpu_compiler_identity();
// Environment variables clang's driver reads, with their current values.
std::vector<std::pair<std::string, std::string>> cpu_compiler_environment();

// GBX_CPU_FAST_COMPILE set (and not "0") when first asked: kernels compile at -O1 and the
// backend's CodeGenOpt::Less, for test suites that compile many kernels and run each briefly
// (the analogue of GBX_CUDA_FAST_COMPILE). -O1 is on the command line, so such kernels have
// their own cache keys. Never for timing: the kernels run slower.
bool cpu_fast_compile_enabled();
// GBX_JIT_PROFILE set (and not "0") when first asked: kernels compile with -g and the JIT writes
// a perf map and registers each module with GDB's JIT interface. Read once per process.
bool jit_profile_enabled();
// GBX_JIT_CHECKS (read once per process; unset or "" by default): kernels compiled with run-time
// checks, for fuzzing what a loaded state makes a kernel do. A comma list of
//   bounds   an index outside an array of known size (a local table, a struct member array)
//            executes a trap instruction (SIGILL): -fsanitize=array-bounds,local-bounds with
//            -fsanitize-trap, no run-time library, any process;
//   address  AddressSanitizer: every load and store checked against the host's shadow memory,
//            so an access outside the state's allocations aborts with ASan's report. Only in a
//            process that carries the ASan runtime (scripts/build-asan.sh); the JIT resolves
//            the kernel's __asan_* calls from it.
// The flags are on the compile command line, so checked kernels have their own cache keys.
// An unknown word, or address without the runtime, is an error naming it.
Result<std::vector<std::string>> jit_check_flags();
// "/tmp/perf-<pid>.map" when profiling, else "".
std::string jit_perf_map_path();
// Opens a perf map for writing without following a link: a new file is created 0600 (O_EXCL);
// an existing one (a stale map of a reused pid) is reused, emptied, only when it is a regular
// file of this user with no other hard link. /tmp is writable by everyone, so anything else
// there (a link planted to make this process overwrite a file of its user's) is refused:
// nullptr and *why.
std::FILE* open_jit_perf_map(const std::string& path, std::string* why);

Result<CpuCompileOutput> compile_cpu(const std::string& source, const std::string& file_name,
                                     const CpuCompileOptions& opts);

// Loads an object into its own JITDylib (once per key per process) and returns the address of
// `symbol`. Only an explicit allow-list of host symbols (memcpy, memmove, memset) resolves, and
// with GBX_JIT_CHECKS=address the ASan runtime's __asan_* entry points.
Result<void*> jit_load_object(const std::string& key, const std::string& object,
                              const std::string& symbol);

}  // namespace gbx
