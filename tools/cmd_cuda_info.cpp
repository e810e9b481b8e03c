// gbx-run cuda-info: the CUDA device GBX would use, or why there is none (exit 3). Scripts
// call it to decide whether GPU work can run at all.
#include <cstdio>

#include "commands.h"
#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/nvrtc_compiler.h"
#include "tool_common.h"

namespace {

using namespace gbx;

int cmd_cuda_info(int device_index) {
  // NVRTC needs no device, so its version is known even when the driver is missing.
  auto ctx = CudaContext::open(device_index);
  if (!ctx) return tool::fail(ctx.error());
  const CudaContext& c = **ctx;
  const int v = c.driver_version();
  std::printf("device %d: %s, %s, %d SMs\n", c.index(), c.name().c_str(), c.arch().c_str(),
              c.multiprocessors());
  std::printf("driver: CUDA %d.%d (%s, %s), %d device(s)\n", v / 1000, (v % 1000) / 10,
              c.driver().library().c_str(),
              c.driver().via_get_proc_address() ? "cuGetProcAddress" : "dlsym",
              c.driver().device_count());
  auto target = select_cuda_target(c.sm(), nvrtc_supported_archs());
  if (!target) return tool::fail(target.error());
  std::printf("NVRTC %s: kernels load as %s %s\n", nvrtc_version().c_str(),
              target->cubin ? "CUBIN for" : "PTX (driver JIT) of", target->arch.c_str());
  return 0;
}

}  // namespace

namespace gbx::tool {

void register_cuda_info(CLI::App& app, Commands& cmds) {
  static int device_index = 0;
  auto* c = app.add_subcommand("cuda-info",
                               "print the CUDA device, driver and kernel target "
                               "(exit 3 with the reason when there is none)");
  c->add_option("--device-index", device_index, "cuda device")->capture_default_str();
  cmds.emplace_back(c, [] { return cmd_cuda_info(device_index); });
}

}  // namespace gbx::tool
