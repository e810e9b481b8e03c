// GBX CUDA double: the divergence meter's dispatch trace (docs/internals/divergence.md). Every
// host-compiled module binds its GBX_TRACE_UNIT hook (templates/prelude/cuda.h) to this one
// slot at load; a process that registers a callback gets (thread's global index, unit) for
// each dispatch the cuda kernel runs, in the order the launch runs them. No callback: the hook
// is one test of a null pointer.
#include "cuda_double.h"

namespace gbx_double {

namespace {

// The layout the shim's GbxDoubleTrace reads (modules.cpp kCudaOnCpuShim).
struct TraceSlot {
  void (*fn)(void*, unsigned, unsigned) = nullptr;
  void* ctx = nullptr;
};

TraceSlot g_trace;
std::string g_module_entry;

}  // namespace

void* trace_slot() { return &g_trace; }
void set_trace_module(const std::string& entry_key) { g_module_entry = entry_key; }

}  // namespace gbx_double

// Registers (or with fn null, removes) the callback. Launches run under the double's lock, so
// a callback set between launches is seen whole by the next one.
extern "C" __attribute__((visibility("default"))) void gbx_cuda_double_set_trace(
    void (*fn)(void* ctx, unsigned thread, unsigned unit), void* ctx) {
  std::lock_guard<std::recursive_mutex> lock(gbx_double::st().mu);
  gbx_double::g_trace.fn = fn;
  gbx_double::g_trace.ctx = ctx;
}

// The kernel cache entry (key) of the step module (the one with gbx_step) loaded last, "" before
// any: its source.cu is what runs, its module.ptx what the meter weighs.
extern "C" __attribute__((visibility("default"))) const char* gbx_cuda_double_trace_module() {
  std::lock_guard<std::recursive_mutex> lock(gbx_double::st().mu);
  return gbx_double::g_module_entry.c_str();
}
