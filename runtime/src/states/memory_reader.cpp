#include "gbx/runtime/states/memory_reader.h"

#include <map>
#include <mutex>
#include <utility>

namespace gbx {

Result<CpuReadMemoryFn> shared_memory_reader(MemoryModel mm, MemLayout layout) {
  static std::mutex mu;
  static std::map<std::pair<MemoryModel, MemLayout>, CpuReadMemoryFn> readers;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = readers.find({mm, layout}); it != readers.end()) return it->second;
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  SynthParams p;
  p.stage = Stage::EmulateOnly;
  p.device = Device::Cpu;
  p.memory_model = mm;
  p.layout = layout;
  KernelCache cache;
  auto k = build_cpu_kernel(bundle.value(), p, cache);
  if (!k) return k.take_error();
  auto fn = reinterpret_cast<CpuReadMemoryFn>(k->entry("read_memory"));
  if (!fn)
    return make_error(ErrorKind::Template,
                      "templates/manifest.json names no read_memory entry point");
  readers[{mm, layout}] = fn;
  return fn;
}

}  // namespace gbx
