// gbx-synth compile: compile kernels into the cache.
#include <cstdio>
#include <optional>

#include "commands.h"
#include "gbx/engine/cuda_driver.h"
#include "synth_common.h"

namespace gbx::tool {
namespace {

// `compile --device cuda` without --arch on a machine with a GPU: only device 0's own target
// (one compile per stage, what the cuda backend will load), not the multi-arch default that
// --arch and `export` keep for shipping kernels. nullopt: no usable device.
std::optional<std::string> device_target_arch() {
  auto drv = CudaDriver::get();
  if (!drv) return std::nullopt;
  CudaDriver& d = **drv;
  CUdevice dev = 0;
  int major = 0, minor = 0;
  if (d.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) !=
          CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) !=
          CUDA_SUCCESS)
    return std::nullopt;
  auto target = select_cuda_target(major * 10 + minor, nvrtc_supported_archs());
  if (!target) return std::nullopt;
  return target->arch;
}

int cmd_compile(const KernelOptions& o) {
  auto stages = parse_stages(o.stage);
  if (!stages) return fail(stages.error());
  std::string arch = o.arch;
  if (arch.empty() && o.device == "cuda")
    if (auto own = device_target_arch()) arch = *own;
  auto nv = parse_nvrtc_options(arch);
  if (!nv) return fail(nv.error());
  // Validate every option before the first (slow) compile.
  std::vector<SynthParams> all;
  for (Stage st : *stages) {
    auto params = parse_params(st, o);
    if (!params) return fail(params.error());
    all.push_back(*params);
  }
  if (!o.arch.empty() && all.front().device != Device::Cuda)
    return fail(usage("--arch needs --device cuda"));
  auto bundle = load_bundle();
  if (!bundle) return fail(bundle.error());
  KernelCache cache;
  for (const SynthParams& p : all) {
    const auto t0 = Clock::now();
    const KernelBuild* b = nullptr;
    std::string extra;
    std::optional<CpuKernel> cpu;
    std::optional<CudaKernelBuild> cuda;
    if (p.device == Device::Cpu) {
      auto k = build_cpu_kernel(*bundle, p, cache, /*load=*/false);
      if (!k) return fail(k.error());
      cpu = std::move(*k);
      b = &cpu->build;
    } else {
      auto k = build_cuda_kernel(*bundle, p, cache, *nv);
      if (!k) return fail(k.error());
      cuda = std::move(*k);
      b = &cuda->build;
      for (const CudaArchInfo& a : cuda->archs) extra += "  " + a.arch + ": " + usage_line(a.usage);
    }
    print_warnings(b->warnings);
    std::printf("%-13s %s  %-8s %9.1f ms%s\n", std::string(to_string(p.stage)).c_str(),
                b->key.c_str(), b->cached ? "cached" : "compiled", ms_since(t0), extra.c_str());
  }
  return 0;
}

}  // namespace

void register_compile(CLI::App& app, Commands& cmds) {
  static KernelOptions comp;
  auto* c = app.add_subcommand("compile", "compile kernels into the cache");
  add_kernel_options(c, comp, true);
  cmds.emplace_back(c, [] { return cmd_compile(comp); });
}

}  // namespace gbx::tool
