#include "gbx/engine/kernel_builder.h"

#include <chrono>
#include <cstdlib>

#include "gbx_abi.h"

namespace gbx {

const char* const kEngineId = "gbx-engine/" GBX_VERSION;

Status check_state_abi(const TemplateBundle& bundle) {
  auto header = bundle.file("abi/gbx_abi.h");
  if (!header) return header.take_error();
  const std::string tag = "#define GBX_ABI_VERSION ";
  const size_t at = header->find(tag);
  const int v = at == std::string::npos ? -1 : std::atoi(header->c_str() + at + tag.size());
  if (v != GBX_ABI_VERSION)
    return make_error(ErrorKind::Template, "templates declare state ABI v" + std::to_string(v) +
                                               " but this binary was built for v" +
                                               std::to_string(GBX_ABI_VERSION) + "; rebuild GBX");
  return ok_status();
}

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

CacheKeyInputs make_key_inputs(const TemplateBundle& bundle, const GeneratedSource& src,
                               const std::string& compiler_identity,
                               std::vector<std::string> options,
                               std::vector<std::pair<std::string, std::string>> environment) {
  CacheKeyInputs in;
  in.engine_id = kEngineId;
  in.abi_version = GBX_ABI_VERSION;
  in.template_hash = bundle.hash();
  in.source = src.source;
  in.device = std::string(to_string(src.params.device));
  in.compiler_identity = compiler_identity;
  in.options = std::move(options);
  in.environment = std::move(environment);
  return in;
}

nlohmann::json kernel_meta(const CacheKeyInputs& in, const GeneratedSource& src) {
  nlohmann::json m;
  m["engine_id"] = in.engine_id;
  m["abi_version"] = in.abi_version;
  m["template_hash"] = in.template_hash;
  m["device"] = in.device;
  m["synthesis"] = {{"canonical", src.params.canonical()},
                    {"stage", to_string(src.params.stage)},
                    {"device", to_string(src.params.device)},
                    {"memory_model", to_string(src.params.memory_model)},
                    {"run_mode", to_string(src.params.run_mode)},
                    {"obs_dim", src.params.obs_dim},
                    {"obs", to_string(src.params.obs)},
                    {"obs_format", to_string(src.params.obs_format)},
                    {"render", synth_renders(src.params)},
                    {"debug", src.params.debug},
                    {"rtc_lock", src.params.rtc_lock},
                    {"layout", to_string(src.params.layout)}};
  m["compiler_identity"] = in.compiler_identity;
  m["options"] = in.options;
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : in.environment) env[k] = v;
  m["environment"] = env;
  m["entry_point"] = src.entry_point;
  m["extra_entry_points"] = src.extra_entry_points;
  m["source_file"] = src.file_name;
  return m;
}

Result<CpuKernel> build_cpu_kernel(const TemplateBundle& bundle, const SynthParams& params,
                                   KernelCache& cache, bool load, const CpuCompileOptions& opts) {
  if (params.device != Device::Cpu)
    return make_error(ErrorKind::Usage, "build_cpu_kernel needs device cpu");
  if (auto st = check_state_abi(bundle); !st) return st.take_error();
  // Before the key: a cached unchecked kernel must not run in place of the checked one asked for.
  if (auto checks = jit_check_flags(); !checks) return checks.take_error();
  CpuKernel k;
  KernelBuild& b = k.build;
  const auto t0 = Clock::now();
  auto src = generate(bundle, params);
  if (!src) return src.take_error();
  b.source = std::move(src.value());
  b.generate_ms = ms_since(t0);
  const auto tk = Clock::now();
  const CacheKeyInputs in = make_key_inputs(bundle, b.source, cpu_compiler_identity(),
                                            cpu_compile_args(opts), cpu_compiler_environment());
  b.key = compute_cache_key(in);
  b.key_ms = ms_since(tk);

  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto t1 = Clock::now();
    auto hit = cache.lookup(b.key, &b.warnings);
    // Missed: wait for whoever compiles this key now, then look again (cache.h).
    std::optional<CompileLock> lock;
    if (!hit) {
      lock.emplace(cache.lock_compile(b.key));
      hit = cache.lookup(b.key, &b.warnings);
    }
    b.lookup_ms = ms_since(t1);
    if (hit) {
      b.entry = std::move(*hit);
      b.cached = true;
    } else {
      auto out = compile_cpu(b.source.source, b.source.file_name, opts);
      if (!out) return out.take_error();
      b.compile_ms = ms_since(t1);
      nlohmann::json meta = kernel_meta(in, b.source);
      meta["key"] = b.key;
      meta["timings_ms"] = {{"generate", b.generate_ms},
                            {"frontend", out->frontend_ms},
                            {"codegen", out->codegen_ms},
                            {"total", b.compile_ms}};
      b.entry = cache.publish(b.key,
                              {{b.source.file_name, b.source.source},
                               {"module.ll", out->llvm_ir},
                               {"module.s", out->assembly},
                               {"module.o", out->object},
                               {"compile.log", out->log}},
                              std::move(meta), &b.warnings);
      b.cached = false;
    }
    if (!load) return k;
    const auto t2 = Clock::now();
    auto object = b.entry.read("module.o");
    Result<void*> fn = object ? jit_load_object(b.key, object.value(), b.source.entry_point)
                              : Result<void*>(object.take_error());
    for (const auto& [role, symbol] : b.source.extra_entry_points) {
      if (!fn) break;
      auto extra = jit_load_object(b.key, object.value(), symbol);
      if (!extra)
        fn = Result<void*>(extra.take_error());
      else
        k.entries[role] = extra.value();
    }
    if (fn) {
      k.step = reinterpret_cast<CpuStepFn>(fn.value());
      b.jit_ms = ms_since(t2);
      b.load_ms = ms_since(b.cached ? t1 : t2);  // a hit's load includes reading the cache
      return k;
    }
    if (!b.cached || attempt == 1) return fn.take_error();
    // A cached object that passes the hash check but does not load: rebuild it once.
    cache_warning(&b.warnings, "cache: entry " + b.key.substr(0, 12) + " failed to load (" +
                                   fn.error().message + "); recompiling");
    std::error_code ec;
    std::filesystem::remove_all(b.entry.dir, ec);
  }
  return make_error(ErrorKind::Runtime, "unreachable");
}

}  // namespace gbx
