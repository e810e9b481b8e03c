// CUDA synthesis pipeline. Stages, top to bottom: key inputs -> lookup -> NVRTC compile ->
// meta.json -> publish; then the per-device choice of image.
#include "gbx/engine/cuda_kernel_builder.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "gbx/engine/nvrtc_library.h"

namespace gbx {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string cubin_file(const std::string& arch) { return "module." + arch + ".cubin"; }

json usage_json(const ResourceUsage& u) {
  return {{"function", u.function},
          {"registers", u.registers},
          {"spill_stores_bytes", u.spill_stores_bytes},
          {"spill_loads_bytes", u.spill_loads_bytes},
          {"stack_frame_bytes", u.stack_frame_bytes},
          {"cumulative_stack_bytes", u.cumulative_stack_bytes},
          {"shared_bytes", u.shared_bytes},
          {"const_bytes", u.const_bytes},
          {"local_bytes", u.local_bytes},
          {"barriers", u.barriers},
          {"ptxas_ms", u.ptxas_ms}};
}

template <typename T>
T get_or(const json& j, const char* name, T fallback) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

ResourceUsage usage_from_json(const json& j) {
  ResourceUsage u;
  if (!j.is_object()) return u;
  u.function = get_or<std::string>(j, "function", "");
  u.entry = u.function == "gbx_step";
  u.registers = get_or(j, "registers", -1);
  u.spill_stores_bytes = get_or(j, "spill_stores_bytes", -1);
  u.spill_loads_bytes = get_or(j, "spill_loads_bytes", -1);
  u.stack_frame_bytes = get_or(j, "stack_frame_bytes", -1);
  u.cumulative_stack_bytes = get_or(j, "cumulative_stack_bytes", -1);
  u.shared_bytes = get_or(j, "shared_bytes", -1);
  u.const_bytes = get_or(j, "const_bytes", -1);
  u.local_bytes = get_or(j, "local_bytes", -1);
  u.barriers = get_or(j, "barriers", -1);
  u.ptxas_ms = get_or(j, "ptxas_ms", -1.0);
  return u;
}

json arch_meta(const NvrtcArchOutput& o) {
  json callees = json::array();
  for (const ResourceUsage& f : o.ptxas.functions)
    if (!f.entry)
      callees.push_back({{"function", f.function},
                         {"stack_frame_bytes", f.stack_frame_bytes},
                         {"spill_stores_bytes", f.spill_stores_bytes},
                         {"spill_loads_bytes", f.spill_loads_bytes}});
  json r = usage_json(o.usage);
  r["cubin_file"] = cubin_file(o.arch);
  r["cubin_bytes"] = o.cubin.size();
  r["compile_ms"] = o.compile_ms;
  r["callees"] = std::move(callees);
  return r;
}

// Generation and key inputs shared by build and lookup.
struct Prepared {
  GeneratedSource source;
  CacheKeyInputs inputs;
  std::string key;
  double generate_ms = 0;
};

Result<Prepared> prepare(const TemplateBundle& bundle, const SynthParams& params,
                         const NvrtcOptions& opts) {
  if (params.device != Device::Cuda)
    return make_error(ErrorKind::Usage, "build_cuda_kernel needs device cuda");
  if (Status st = check_cuda_archs(opts.archs); !st) return st.take_error();
  if (Status st = check_state_abi(bundle); !st) return st.take_error();
  Prepared p;
  const auto t0 = Clock::now();
  auto src = generate(bundle, params);
  if (!src) return src.take_error();
  p.source = std::move(src.value());
  p.generate_ms = ms_since(t0);
  p.inputs = make_key_inputs(bundle, p.source, cuda_compiler_identity(opts), cuda_key_options(opts),
                             nvrtc_compiler_environment());
  p.key = compute_cache_key(p.inputs);
  return p;
}

// A hit whose meta.json records every requested arch, or nullopt (a bad entry is removed with
// a warning so that the caller's compile replaces it).
std::optional<CudaKernelBuild> lookup(KernelCache& cache, Prepared& p, const NvrtcOptions& opts,
                                      std::vector<std::string>* warnings) {
  const auto t0 = Clock::now();
  auto hit = cache.lookup(p.key, warnings);
  if (!hit) return std::nullopt;
  CudaKernelBuild k;
  k.archs = cuda_arch_info_from_meta(hit->meta);
  k.ptx_arch = get_or<std::string>(hit->meta, "ptx_arch", "");
  std::string missing;
  for (const std::string& arch : opts.archs)
    if (!k.find(arch) || !hit->meta["files"].contains(cubin_file(arch))) missing = arch;
  if (!hit->meta["files"].contains("module.ptx")) missing = "ptx";
  if (!missing.empty()) {
    cache_warning(warnings, "cache: entry " + p.key.substr(0, 12) + " has no " + missing +
                                " image; recompiling");
    std::error_code ec;
    std::filesystem::remove_all(hit->dir, ec);
    return std::nullopt;
  }
  k.build.source = p.source;
  k.build.key = p.key;
  k.build.cached = true;
  k.build.generate_ms = p.generate_ms;
  k.build.load_ms = ms_since(t0);
  k.build.entry = std::move(*hit);
  return k;
}

}  // namespace

std::string cuda_compiler_identity(const NvrtcOptions& opts) {
  return "NVRTC " + nvrtc_version() + "; archs " + join(opts.archs, ",") + "; output cubin+ptx";
}

std::vector<std::string> cuda_key_options(const NvrtcOptions& opts) {
  std::vector<std::string> out = nvrtc_shared_options(opts);
  for (const std::string& arch : opts.archs) out.push_back("--gpu-architecture=" + arch);
  return out;
}

std::vector<std::pair<std::string, std::string>> nvrtc_compiler_environment() {
  // NVRTC's documentation lists no environment variables; these are the ones libnvrtc 13.0
  // looks up (its getenv names). NVRTC_APPEND_FLAGS changes the compile itself; the PCH and
  // concurrency switches should not change output but are read, so they are keyed too.
  std::vector<std::pair<std::string, std::string>> env;
  for (const char* name : {"NVRTC_APPEND_FLAGS", "NVRTC_DISABLE_CONCURRENT_NVVM",
                           "NVRTC_DISABLE_PCH", "NVRTC_PCH_HEAP_SIZE"}) {
    const char* v = std::getenv(name);
    env.emplace_back(name, v ? v : "");
  }
  return env;
}

Status check_cuda_archs(const std::vector<std::string>& archs) {
  // Without NVRTC every arch would look unknown; say what is really missing.
  if (auto nv = NvrtcLibrary::get(); !nv) return nv.take_error();
  if (archs.empty()) return make_error(ErrorKind::Usage, "no CUDA arch given (e.g. sm_90)");
  const std::vector<std::string> supported = nvrtc_supported_archs();
  for (const std::string& arch : archs) {
    if (std::find(supported.begin(), supported.end(), arch) == supported.end())
      return make_error(ErrorKind::Usage, "unknown CUDA arch '" + arch + "' (NVRTC " +
                                              nvrtc_version() +
                                              " supports: " + join(supported, " ") + ")");
  }
  for (size_t i = 0; i < archs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (archs[i] == archs[j])
        return make_error(ErrorKind::Usage, "CUDA arch '" + archs[i] + "' given twice");
  return ok_status();
}

Result<std::vector<std::string>> parse_cuda_arch_list(std::string_view list) {
  std::vector<std::string> archs;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string item(list.substr(0, comma));
    item.erase(std::remove_if(item.begin(), item.end(), [](char c) { return c == ' '; }),
               item.end());
    if (!item.empty()) archs.push_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (Status st = check_cuda_archs(archs); !st) return st.take_error();
  return archs;
}

const CudaArchInfo* CudaKernelBuild::find(std::string_view arch) const {
  for (const CudaArchInfo& a : archs)
    if (a.arch == arch) return &a;
  return nullptr;
}

std::vector<CudaArchInfo> cuda_arch_info_from_meta(const json& meta) {
  std::vector<CudaArchInfo> out;
  auto archs = meta.find("archs");
  auto resources = meta.find("resources");
  if (archs == meta.end() || !archs->is_array() || resources == meta.end() ||
      !resources->is_object())
    return out;
  for (const json& a : *archs) {
    if (!a.is_string()) continue;
    CudaArchInfo info;
    info.arch = a.get<std::string>();
    auto r = resources->find(info.arch);
    if (r == resources->end() || !r->is_object()) continue;
    info.usage = usage_from_json(*r);
    info.cubin_file = get_or<std::string>(*r, "cubin_file", cubin_file(info.arch));
    info.cubin_bytes = get_or<size_t>(*r, "cubin_bytes", 0);
    info.compile_ms = get_or(*r, "compile_ms", 0.0);
    if (auto c = r->find("callees"); c != r->end() && c->is_array())
      for (const json& f : *c) info.callees.push_back(usage_from_json(f));
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::string> cuda_kernel_key(const TemplateBundle& bundle, const SynthParams& params,
                                    const NvrtcOptions& opts) {
  auto p = prepare(bundle, params, opts);
  if (!p) return p.take_error();
  return p->key;
}

Result<std::optional<CudaKernelBuild>> find_cuda_kernel(const TemplateBundle& bundle,
                                                        const SynthParams& params,
                                                        KernelCache& cache,
                                                        const NvrtcOptions& opts) {
  auto p = prepare(bundle, params, opts);
  if (!p) return p.take_error();
  std::vector<std::string> warnings;
  auto k = lookup(cache, *p, opts, &warnings);
  if (k) k->build.warnings = std::move(warnings);
  return k;
}

Result<CudaKernelBuild> build_cuda_kernel(const TemplateBundle& bundle, const SynthParams& params,
                                          KernelCache& cache, const NvrtcOptions& opts) {
  auto prepared = prepare(bundle, params, opts);
  if (!prepared) return prepared.take_error();
  Prepared& p = *prepared;
  std::vector<std::string> warnings;
  if (auto hit = lookup(cache, p, opts, &warnings)) {
    hit->build.warnings = std::move(warnings);
    return std::move(*hit);
  }
  // Missed: wait for whoever compiles this key now, then look again (cache.h).
  const CompileLock lock = cache.lock_compile(p.key);
  if (auto hit = lookup(cache, p, opts, &warnings)) {
    hit->build.warnings = std::move(warnings);
    return std::move(*hit);
  }

  const auto t0 = Clock::now();
  auto out = nvrtc_compile(p.source.source, p.source.file_name, opts);
  if (!out) return out.take_error();
  CudaKernelBuild k;
  KernelBuild& b = k.build;
  b.source = std::move(p.source);
  b.key = p.key;
  b.generate_ms = p.generate_ms;
  b.compile_ms = ms_since(t0);
  b.warnings = std::move(warnings);

  std::map<std::string, std::string> files = {
      {b.source.file_name, b.source.source}, {"module.ptx", out->ptx}, {"compile.log", out->log}};
  json meta = kernel_meta(p.inputs, b.source);
  meta["key"] = b.key;
  meta["nvrtc_version"] = nvrtc_version();
  meta["archs"] = opts.archs;
  meta["ptx_arch"] = out->ptx_arch;
  meta["ptx_file"] = "module.ptx";
  json resources = json::object();
  for (const NvrtcArchOutput& o : out->cubins) {
    files[cubin_file(o.arch)] = o.cubin;
    resources[o.arch] = arch_meta(o);
  }
  meta["resources"] = std::move(resources);
  meta["timings_ms"] = {
      {"generate", b.generate_ms}, {"compile", b.compile_ms}, {"nvrtc_wall", out->compile_ms}};
  b.entry = cache.publish(b.key, files, std::move(meta), &b.warnings);
  b.cached = false;
  k.archs = cuda_arch_info_from_meta(b.entry.meta);
  k.ptx_arch = out->ptx_arch;
  return k;
}

namespace {

// select_cuda_target's choice for `sm`, and the entry that holds it: the shared entry for
// opts.archs when it names the device's arch (so `gbx-synth compile` warms the runtime's
// cache), else the entry for that arch alone. `compile`: build the latter on a miss.
Result<std::optional<CudaDeviceKernel>> device_kernel(const TemplateBundle& bundle,
                                                      const SynthParams& params, KernelCache& cache,
                                                      int sm, const NvrtcOptions& opts,
                                                      bool compile) {
  if (auto nv = NvrtcLibrary::get(); !nv) return nv.take_error();
  auto target = select_cuda_target(sm, nvrtc_supported_archs());
  if (!target) return target.take_error();
  CudaDeviceKernel dk;
  dk.target = *target;
  bool have = false;
  const bool shared_entry = target->cubin && std::find(opts.archs.begin(), opts.archs.end(),
                                                       target->arch) != opts.archs.end();
  if (shared_entry && check_cuda_archs(opts.archs).ok()) {
    auto found = find_cuda_kernel(bundle, params, cache, opts);
    if (!found) return found.take_error();
    if (found->has_value()) {
      dk.build = std::move(**found);
      have = true;
    }
  }
  if (!have) {
    NvrtcOptions one = opts;
    one.archs = {target->arch};
    if (compile) {
      auto built = build_cuda_kernel(bundle, params, cache, one);
      if (!built) return built.take_error();
      dk.build = std::move(*built);
    } else {
      auto found = find_cuda_kernel(bundle, params, cache, one);
      if (!found) return found.take_error();
      if (!found->has_value()) return std::optional<CudaDeviceKernel>();
      dk.build = std::move(**found);
    }
  }
  dk.image_file = target->cubin ? cubin_file(target->arch) : "module.ptx";
  auto image = dk.build.build.entry.read(dk.image_file);
  if (!image) return image.take_error();
  dk.image = std::move(*image);
  return std::optional<CudaDeviceKernel>(std::move(dk));
}

}  // namespace

Result<CudaDeviceKernel> build_cuda_kernel_for_device(const TemplateBundle& bundle,
                                                      const SynthParams& params, KernelCache& cache,
                                                      int sm, const NvrtcOptions& opts) {
  auto dk = device_kernel(bundle, params, cache, sm, opts, true);
  if (!dk) return dk.take_error();
  return std::move(**dk);
}

Result<std::optional<CudaDeviceKernel>> find_cuda_kernel_for_device(const TemplateBundle& bundle,
                                                                    const SynthParams& params,
                                                                    KernelCache& cache, int sm,
                                                                    const NvrtcOptions& opts) {
  return device_kernel(bundle, params, cache, sm, opts, false);
}

}  // namespace gbx
