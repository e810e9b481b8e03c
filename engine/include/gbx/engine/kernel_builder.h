#pragma once
// Synthesis pipeline for one parameter set: generate -> key -> cache lookup -> compile on a
// miss -> publish -> load. Used by gbx-synth and by the runtime's backends.
#include <map>
#include <string>
#include <vector>

#include "gbx/engine/cache.h"
#include "gbx/engine/generator.h"
#include "gbx/engine/orc_compiler.h"

struct GbxParams;  // templates/abi/gbx_abi.h

namespace gbx {

extern const char* const kEngineId;  // "gbx-engine/<version>"

struct KernelBuild {
  GeneratedSource source;
  std::string key;  // the stage hash
  bool cached = false;
  double generate_ms = 0;
  double compile_ms = 0;  // 0 on a cache hit
  double load_ms = 0;     // cache read + JIT load (CPU)
  // The parts of a load (CPU): the stage hash of the generated source, the cache lookup (its
  // integrity check included), and reading module.o + JIT link + symbol lookup.
  double key_ms = 0;
  double lookup_ms = 0;
  double jit_ms = 0;
  CacheEntry entry;
  std::vector<std::string> warnings;
};

CacheKeyInputs make_key_inputs(const TemplateBundle& bundle, const GeneratedSource& src,
                               const std::string& compiler_identity,
                               std::vector<std::string> options,
                               std::vector<std::pair<std::string, std::string>> environment);

// Templates are read at run time: a kernel generated from templates whose state ABI
// (abi/gbx_abi.h) differs from the one this binary was built with would corrupt memory.
// Both kernel builders refuse such a bundle before generating anything.
Status check_state_abi(const TemplateBundle& bundle);

// The device-independent part of an entry's meta.json: key inputs and synthesis parameters.
nlohmann::json kernel_meta(const CacheKeyInputs& in, const GeneratedSource& src);

// Signature of the CPU entry point (see templates/kernel/step.tmpl).
using CpuStepFn = void (*)(const ::GbxParams* params, int env_begin, int env_end);

// Signature of the CPU memory-read entry point (role "read_memory"): env's bus addresses
// [lo, hi) into out, side-effect free (see templates/kernel/step.tmpl).
using CpuReadMemoryFn = void (*)(const ::GbxParams* params, int env, unsigned lo, unsigned hi,
                                 unsigned flags, unsigned char* out);

struct CpuKernel {
  KernelBuild build;
  CpuStepFn step = nullptr;
  std::map<std::string, void*> entries;  // extra entry points by role (manifest)
  void* entry(const std::string& role) const {
    auto it = entries.find(role);
    return it == entries.end() ? nullptr : it->second;
  }
};

// Compiles (or finds in the cache) and, if `load`, JIT-loads the kernel. A cached entry that
// fails to load is discarded and recompiled once, with a warning.
Result<CpuKernel> build_cpu_kernel(const TemplateBundle& bundle, const SynthParams& params,
                                   KernelCache& cache, bool load = true,
                                   const CpuCompileOptions& opts = {});

}  // namespace gbx
