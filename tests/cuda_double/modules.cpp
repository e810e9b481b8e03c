// GBX CUDA double: modules. An image is matched by SHA-256 to the kernel cache entry that lists
// it; that entry's source.cu is compiled for the host (a shim for the CUDA keywords, a launcher
// per __global__ function) and JIT-loaded.
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cuda_double.h"
#include "gbx/engine/cache.h"
#include "gbx/engine/orc_compiler.h"

namespace gbx_double {

namespace {

// The CUDA source compiled for the host: the keywords become host attributes, the built-in
// index variables plain globals the launcher sets before each thread's call. Launches run
// under the double's lock, one at a time.
const char* kCudaOnCpuShim = R"(// GBX CUDA double: CUDA keywords for the host compiler.
#define __device__
#define __global__
#define __host__
#define __forceinline__ __attribute__((always_inline)) inline
#define __noinline__ __attribute__((noinline))
#define __maxnreg__(n)
#define __launch_bounds__(...)
// Profiling kernels count with it; threads run one after another, relaxed is enough.
static inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
struct GbxDoubleDim3 { unsigned x, y, z; };
static GbxDoubleDim3 threadIdx, blockIdx, blockDim, gridDim;
// The divergence meter's hook (prelude/cuda.h GBX_TRACE_UNIT; trace.cpp): the unit goes to
// the callback registered with gbx_cuda_double_set_trace, with the thread's global index.
struct GbxDoubleTrace { void (*fn)(void*, unsigned, unsigned); void* ctx; };
static GbxDoubleTrace* gbx_double_trace;
#define GBX_DEVICE_TRACE(u)                                                        \
  do {                                                                             \
    if (gbx_double_trace->fn)                                                      \
      gbx_double_trace->fn(gbx_double_trace->ctx,                                  \
                           blockIdx.x * blockDim.x + threadIdx.x, (unsigned)(u));  \
  } while (0)
extern "C" void gbx_double_trace_bind(GbxDoubleTrace* t) { gbx_double_trace = t; }
)";

struct KernelDecl {
  std::string name;
  std::vector<std::string> param_types;
};

// The `__global__ void NAME(T0 a, T1 b, ...)` declarations of a CUDA source: parameter types
// are what precedes each parameter's name.
std::vector<KernelDecl> kernel_decls(const std::string& src) {
  std::vector<KernelDecl> out;
  const std::string tag = "__global__ void ";
  for (size_t at = src.find(tag); at != std::string::npos; at = src.find(tag, at + 1)) {
    const size_t name_at = at + tag.size();
    const size_t open = src.find('(', name_at);
    const size_t close = src.find(')', open);
    if (open == std::string::npos || close == std::string::npos) continue;
    KernelDecl d;
    d.name = src.substr(name_at, open - name_at);
    std::string params = src.substr(open + 1, close - open - 1);
    size_t begin = 0;
    while (begin <= params.size()) {
      size_t comma = params.find(',', begin);
      if (comma == std::string::npos) comma = params.size();
      std::string p = params.substr(begin, comma - begin);
      size_t e = p.find_last_not_of(" \t\n");
      size_t b = e;
      while (b != std::string::npos && b > 0 &&
             (std::isalnum((unsigned char)p[b - 1]) || p[b - 1] == '_'))
        --b;
      if (e != std::string::npos) d.param_types.push_back(p.substr(0, b));
      begin = comma + 1;
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string launcher(const KernelDecl& k) {
  std::string types, call, sizes;
  for (size_t i = 0; i < k.param_types.size(); ++i) {
    const std::string t = "gbx_double_" + k.name + "_" + std::to_string(i);
    types += "typedef " + k.param_types[i] + " " + t + ";\n";
    call += (i ? ", *(" : "*(") + t + "*)args[" + std::to_string(i) + "]";
    sizes += "    sizes[" + std::to_string(i) + "] = sizeof(" + t + ");\n";
  }
  const std::string count = std::to_string(k.param_types.size());
  return "\n// GBX CUDA double: the grid of " + k.name + ", one thread after another.\n" + types +
         "extern \"C\" unsigned gbx_double_kernel_" + k.name +
         "(void* const* args, const unsigned* d, unsigned* sizes) {\n"
         "  if (!d) {\n" +
         sizes + "    return " + count +
         ";\n  }\n"
         "  gridDim.x = d[0]; gridDim.y = d[1]; gridDim.z = d[2];\n"
         "  blockDim.x = d[3]; blockDim.y = d[4]; blockDim.z = d[5];\n"
         "  for (unsigned bz = 0; bz < d[2]; ++bz) for (unsigned by = 0; by < d[1]; ++by)\n"
         "  for (unsigned bx = 0; bx < d[0]; ++bx) {\n"
         "    blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;\n"
         "    for (unsigned tz = 0; tz < d[5]; ++tz) for (unsigned ty = 0; ty < d[4]; ++ty)\n"
         "    for (unsigned tx = 0; tx < d[3]; ++tx) {\n"
         "      threadIdx.x = tx; threadIdx.y = ty; threadIdx.z = tz;\n"
         "      " +
         k.name + "(" + call +
         ");\n"
         "    }\n"
         "  }\n"
         "  return " +
         count +
         ";\n"
         "}\n";
}

// A CUBIN is an ELF file; its size is where its last section or header table ends.
size_t elf_size(const uint8_t* p) {
  if (p[4] != 2) die("cuModuleLoadData: only 64-bit ELF images are modelled");
  uint64_t shoff, phoff;
  uint16_t phentsize, phnum, shentsize, shnum;
  std::memcpy(&phoff, p + 0x20, 8);
  std::memcpy(&shoff, p + 0x28, 8);
  std::memcpy(&phentsize, p + 0x36, 2);
  std::memcpy(&phnum, p + 0x38, 2);
  std::memcpy(&shentsize, p + 0x3A, 2);
  std::memcpy(&shnum, p + 0x3C, 2);
  size_t end = std::max<size_t>(64, shoff + (size_t)shnum * shentsize);
  end = std::max<size_t>(end, phoff + (size_t)phnum * phentsize);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = p + shoff + (size_t)i * shentsize;
    uint32_t type;
    uint64_t off, size;
    std::memcpy(&type, sh + 4, 4);
    std::memcpy(&off, sh + 0x18, 8);
    std::memcpy(&size, sh + 0x20, 8);
    if (type != 8 /* SHT_NOBITS */) end = std::max<size_t>(end, off + size);
  }
  return end;
}

std::string image_bytes(const void* image) {
  const auto* p = static_cast<const uint8_t*>(image);
  if (p[0] == 0x7F && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')
    return std::string(reinterpret_cast<const char*>(p), elf_size(p));
  return std::string(static_cast<const char*>(image));  // PTX: NUL-terminated text
}

// The prelude block of a generated source is the text between its #line marker and the next
// one; the shim goes right before it so the prelude's own macros see the keywords defined.
CUresult compile_for_host(const gbx::CacheEntry& entry, const std::string& sha, Module& m) {
  auto src = entry.read("source.cu");
  if (!src) {
    note("cache entry %s has no readable source.cu: %s", entry.key.c_str(),
         src.error().message.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  const std::vector<KernelDecl> decls = kernel_decls(*src);
  if (decls.empty()) {
    note("cache entry %s's source.cu declares no __global__ function", entry.key.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::string source = std::string(kCudaOnCpuShim) + warp_shim() + *src;
  for (const KernelDecl& d : decls)
    source += launcher(d) + lane_launcher(d.name, d.param_types.size());

  gbx::CpuCompileOptions opts;
  if (auto checks = gbx::jit_check_flags(); !checks) {
    note("%s", checks.error().message.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::string key_text = "gbx-cuda-double/3\n" + gbx::cpu_compiler_identity() + "\n";
  for (const auto& a : gbx::cpu_compile_args(opts)) key_text += a + "\n";
  key_text += source;
  const std::string key = gbx::sha256_hex(key_text);
  gbx::KernelCache cache;
  std::vector<std::string> warnings;
  std::string object;
  if (auto hit = cache.lookup(key, &warnings)) {
    if (auto o = hit->read("module.o")) object = *o;
  }
  if (object.empty()) {
    auto out = gbx::compile_cpu(source, "cuda_double_" + entry.key.substr(0, 12) + ".cpp", opts);
    if (!out) {
      note("compiling cache entry %s's source.cu for the host failed: %s\n%s", entry.key.c_str(),
           out.error().message.c_str(), out.error().detail.c_str());
      return CUDA_ERROR_INVALID_IMAGE;
    }
    object = out->object;
    nlohmann::json meta = {
        {"kind", "gbx-cuda-double host object"}, {"cuda_entry", entry.key}, {"image_sha256", sha}};
    cache.publish(key, {{"source.cpp", source}, {"module.o", object}}, meta, &warnings);
  }
  auto bind = gbx::jit_load_object("gbx-cuda-double-" + key, object, "gbx_double_trace_bind");
  if (!bind) {
    note("loading the host object of cache entry %s failed: %s", entry.key.c_str(),
         bind.error().message.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  reinterpret_cast<void (*)(void*)> (*bind)(trace_slot());
  for (const KernelDecl& d : decls) {
    auto fn = gbx::jit_load_object("gbx-cuda-double-" + key, object, "gbx_double_kernel_" + d.name);
    if (!fn) {
      note("loading the host object of cache entry %s failed: %s", entry.key.c_str(),
           fn.error().message.c_str());
      return CUDA_ERROR_INVALID_IMAGE;
    }
    Kernel k;
    k.launch = reinterpret_cast<LaunchFn>(*fn);
    k.warps = names_warp_intrinsic(*src);
    if (std::string e = attach_lanes("gbx-cuda-double-" + key, object, d.name, k); !e.empty()) {
      note("loading the host object of cache entry %s failed: %s", entry.key.c_str(), e.c_str());
      return CUDA_ERROR_INVALID_IMAGE;
    }
    unsigned sizes[kMaxParams] = {};
    if (d.param_types.size() > kMaxParams) die("kernel %s: too many parameters", d.name.c_str());
    const unsigned count = k.launch(nullptr, nullptr, sizes);
    k.param_sizes.assign(sizes, sizes + count);
    size_t total = 0;
    for (unsigned sz : k.param_sizes) total += (sz + 15) / 16 * 16;
    if (total > kMaxParamsBytes) {
      note("cache entry %s: kernel %s takes %zu bytes of parameters (the limit is %zu)",
           entry.key.c_str(), d.name.c_str(), total, kMaxParamsBytes);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    m.kernels[d.name] = std::move(k);
  }
  return CUDA_SUCCESS;
}

}  // namespace

// The host compile (seconds) runs outside the driver lock: a module loaded on one thread (a
// background tier-up, runtime/src/backends/cuda_tier_up.cpp) must not stall another thread's
// launches, as it does not on a GPU. Only the checks and the module list are under the lock.
CUresult load_module(CUmodule* out, const void* image) {
  {
    std::lock_guard<std::recursive_mutex> lock(st().mu);
    NEED_CONTEXT();
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    if (injection().hit("load", true)) return CUDA_ERROR_INVALID_IMAGE;
  }
  const std::string bytes = image_bytes(image);
  const std::string sha = gbx::sha256_hex(bytes);
  gbx::KernelCache cache;
  for (const gbx::CacheEntry& e : cache.list()) {
    const auto files = e.meta.find("files");
    if (files == e.meta.end() || !files->is_object()) continue;
    bool match = false;
    for (const auto& [name, f] : files->items())
      match |= (name.rfind("module.", 0) == 0) && f.value("sha256", std::string()) == sha;
    if (!match) continue;
    auto m = std::make_unique<Module>();
    m->image_sha256 = sha;
    if (CUresult r = compile_for_host(e, sha, *m); r != CUDA_SUCCESS) return r;
    std::lock_guard<std::recursive_mutex> lock(st().mu);
    if (m->kernels.count("gbx_step")) set_trace_module(e.key);
    *out = reinterpret_cast<CUmodule>(m.get());
    st().modules.push_back(std::move(m));
    return CUDA_SUCCESS;
  }
  note("module image (%zu bytes, SHA-256 %s) matches no kernel cache entry under %s", bytes.size(),
       sha.c_str(), cache.root().string().c_str());
  return CUDA_ERROR_INVALID_IMAGE;
}

Module* module_of(CUmodule h) {
  for (auto& m : st().modules)
    if (reinterpret_cast<CUmodule>(m.get()) == h) return m.get();
  die("use of module handle %p that was never loaded or is unloaded", (void*)h);
}

CUresult d_cuModuleLoadData(CUmodule* m, const void* image) {
  // load_module takes the lock itself (not during the host compile).
  return load_module(m, image);
}

CUresult d_cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned, CUjit_option*, void**) {
  // load_module takes the lock itself (not during the host compile).
  return load_module(m, image);
}

CUresult d_cuModuleUnload(CUmodule h) {
  LOCK();
  auto& mods = st().modules;
  for (auto it = mods.begin(); it != mods.end(); ++it)
    if (reinterpret_cast<CUmodule>(it->get()) == h) {
      // The JIT-loaded code stays mapped (the ORC JIT keeps one dylib per key per process).
      mods.erase(it);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult d_cuModuleGetFunction(CUfunction* f, CUmodule h, const char* name) {
  LOCK();
  NEED_CONTEXT();
  if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
  Module* m = module_of(h);
  auto k = m->kernels.find(name);
  if (k == m->kernels.end()) return CUDA_ERROR_NOT_FOUND;
  auto fn = std::make_unique<Function>();
  fn->module = m;
  fn->name = name;
  fn->kernel = &k->second;
  *f = reinterpret_cast<CUfunction>(fn.get());
  st().functions.push_back(std::move(fn));
  return CUDA_SUCCESS;
}

}  // namespace gbx_double
