// cuda backend, contexts and modules: one context per device and one loaded module per
// (device, kernel key) for the whole process, shared by every backend that runs them.
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "cuda_backend_internal.h"

namespace gbx::cuda_detail {
namespace {

// Contexts and modules live for the rest of the process, like the driver itself: tearing them
// down from static destructors would race the driver's own shutdown.
struct Registry {
  std::mutex mu;
  std::map<int, std::shared_ptr<CudaContext>> contexts;
  std::map<std::pair<int, std::string>, std::shared_ptr<CudaLoadedKernel>> kernels;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// CUDA 13's NVRTC emits PTX ISA 9.0 and CUBINs an older driver may not accept; say so when
// the driver is older.
std::string driver_hint(const CudaContext& ctx, const Error& e) {
  const std::string nv = nvrtc_version();  // "13.0"
  const int nvrtc =
      std::atoi(nv.c_str()) * 1000 +
      (nv.find('.') != std::string::npos ? std::atoi(nv.c_str() + nv.find('.') + 1) * 10 : 0);
  if (ctx.driver_version() >= nvrtc) return {};
  for (const char* code : {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_IMAGE",
                           "CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_INVALID_PTX"})
    if (e.message.find(code) != std::string::npos)
      return " (driver " + std::to_string(ctx.driver_version()) + " may be older than NVRTC " +
             nvrtc_version() + ")";
  return {};
}

}  // namespace

Result<std::shared_ptr<CudaLoadedKernel>> shared_module(
    const CudaContext& ctx, const std::string& key, const std::string& image, bool cubin,
    const std::string& what, const std::string& entry_point, const std::string& read_entry) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto id = std::make_pair(ctx.index(), key);
  if (auto it = r.kernels.find(id); it != r.kernels.end()) return it->second;
  auto mod = CudaModule::load(ctx, image, cubin ? ModuleImage::Cubin : ModuleImage::Ptx);
  if (!mod) {
    Error e = mod.take_error();
    e.message = "loading " + what + ": " + e.message + driver_hint(ctx, e);
    return e;
  }
  auto fn = mod->function(entry_point);
  if (!fn) return fn.take_error();
  auto loaded = std::make_shared<CudaLoadedKernel>();
  if (!read_entry.empty()) {
    auto rd = mod->function(read_entry);
    if (!rd) return rd.take_error();
    loaded->read_memory = *rd;
  }
  loaded->module = std::move(*mod);
  loaded->function = *fn;
  r.kernels[id] = loaded;
  return loaded;
}

Result<std::shared_ptr<CudaContext>> shared_context(int device_index) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.contexts.find(device_index); it != r.contexts.end()) {
    if (Status st = it->second->make_current(); !st) return st.take_error();
    return it->second;
  }
  auto ctx = CudaContext::open(device_index);
  if (!ctx) return ctx.take_error();
  std::shared_ptr<CudaContext> shared(std::move(*ctx));
  r.contexts[device_index] = shared;
  return shared;
}

Result<std::shared_ptr<CudaLoadedKernel>> shared_kernel(const CudaContext& ctx,
                                                        const CudaDeviceKernel& k) {
  const auto& extra = k.build.build.source.extra_entry_points;
  const auto rd = extra.find("read_memory");
  return shared_module(ctx, k.build.build.key + "/" + k.image_file, k.image, k.target.cubin,
                       k.image_file + " of kernel " + k.build.build.key.substr(0, 12),
                       k.build.build.source.entry_point, rd == extra.end() ? "" : rd->second);
}

}  // namespace gbx::cuda_detail
