#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/reference/gambatte_backend.h"
#include "gbx/runtime/reference/mgba_backend.h"

namespace gbx {

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, const Rom& rom,
                                              const BackendConfig& config) {
  if (Status st = check_hooks(rom, config.hooks); !st) return st.take_error();
  if (!config.hooks.empty() && name != "cpu" && name != "cuda")
    return make_error(ErrorKind::Usage,
                      "hooks are counted by the generated kernel: the cpu and "
                      "cuda backends (" +
                          name + " runs its own interpreter)");
  if (name == "cpu") {
    auto b = CpuBackend::create(rom, config);
    if (!b) return b.take_error();
    return std::unique_ptr<Backend>(std::move(b.value()));
  }
  if (name == "cuda") {
    auto b = CudaBackend::create(rom, config);
    if (!b) return b.take_error();
    return std::unique_ptr<Backend>(std::move(b.value()));
  }
  if (name == "mgba" || name == "gambatte") {  // the reference emulators
    if (config.specialize || config.specialize_auto_frames > 0)
      return make_error(ErrorKind::Usage, "--specialize is for the cpu and cuda backends (" + name +
                                              " runs " + (name == "mgba" ? "mGBA's" : "its") +
                                              " own interpreter)");
    return name == "mgba" ? make_mgba_backend(rom, config) : make_gambatte_backend(rom, config);
  }
  return make_error(ErrorKind::Usage, "unknown backend '" + name + "' (cpu, cuda, mgba, gambatte)");
}

}  // namespace gbx
