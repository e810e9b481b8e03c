#pragma once
// The CPU kernel's memory-read entry point for host code that holds an EnvState but no
// kernel of its own (the cuda backend's host probe, tools): built once per memory model and
// memory layout.
#include "gbx/engine/kernel_builder.h"
#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"

namespace gbx {

// Compiles (or loads from the kernel cache) an emulate_only CPU kernel for `mm` on first use
// and returns its "read_memory" entry point. Thread-safe; later calls return the same one.
Result<CpuReadMemoryFn> shared_memory_reader(MemoryModel mm,
                                             MemLayout layout = MemLayout::EnvMajor);

}  // namespace gbx
