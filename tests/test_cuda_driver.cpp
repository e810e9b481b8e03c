// Driver API loader. Without a driver (this machine, CI) it must fail fast with one
// "no CUDA device: ..." line; the toolkit's stub libcuda must be recognised as such. Where a
// device exists, the last case does a real round trip through NVRTC and the driver.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/nvrtc_compiler.h"
#include "skip.h"

#ifndef GBX_TEST_CUDA_STUB_LIBCUDA
#define GBX_TEST_CUDA_STUB_LIBCUDA "/usr/local/cuda/lib64/stubs/libcuda.so"
#endif

using namespace gbx;

namespace {

bool one_line_no_device(const Error& e) {
  return e.kind == ErrorKind::NoDevice && e.message.rfind("no CUDA device: ", 0) == 0 &&
         e.message.find('\n') == std::string::npos;
}

Status alloc_too_much(const CudaDriver& drv) {
  CUdeviceptr p = 0;
  GBX_CHECK_CU(drv, cuMemAlloc(&p, size_t(1) << 62));
  return ok_status();
}

const char* kRoundTripKernel = R"(
typedef struct RtParams { const int* in; int* out; int n; int add; } RtParams;
extern "C" __global__ void gbx_step(const RtParams p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.out[i] = p.in[i] * 3 + p.add;
}
)";

struct RtParams {
  const int* in;
  int* out;
  int n;
  int add;
};

}  // namespace

TEST_CASE("CudaDriver::get reports a missing driver as one NoDevice line") {
  auto first = CudaDriver::get();
  if (first.ok()) {
    CHECK((*first)->device_count() > 0);
    CHECK((*first)->driver_version() >= 11000);
    CHECK(static_cast<bool>((*first)->cuLaunchKernel));
    CHECK(static_cast<bool>((*first)->cuCtxSynchronize));
    return;
  }
  const Error& e = first.error();
  INFO("message: ", e.message);
  CHECK(one_line_no_device(e));
  // Loaded once: the second call answers with the same error.
  auto second = CudaDriver::get();
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message == e.message);
  MESSAGE("CudaDriver::get(): ", e.message);
}

TEST_CASE("no libcuda.so.1 on the search path: the documented message") {
  auto loaded = CudaDriver::load("libcuda.so.1");
  if (loaded.ok()) return;  // a driver is installed; the get() case covers it
  const Error& e = loaded.error();
  CHECK(one_line_no_device(e));
  bool known = e.message == "no CUDA device: libcuda.so.1 not found (no NVIDIA driver installed)" ||
               e.message == "no CUDA device: only the CUDA toolkit's stub libcuda is present" ||
               e.message.rfind("no CUDA device: cuInit: CUDA_ERROR_NO_DEVICE", 0) == 0 ||
               e.message == "no CUDA device: the NVIDIA driver reports no devices";
  CHECK_MESSAGE(known, e.message);
}

TEST_CASE("a library path that does not exist") {
  auto loaded = CudaDriver::load("/nonexistent/gbx/libcuda.so.1");
  REQUIRE_FALSE(loaded.ok());
  CHECK(one_line_no_device(loaded.error()));
  CHECK(loaded.error().message ==
        "no CUDA device: /nonexistent/gbx/libcuda.so.1 not found (no NVIDIA driver installed)");
  CHECK_FALSE(loaded.error().detail.empty());  // dlerror()
}

TEST_CASE("the toolkit's stub libcuda is reported as such") {
  if (!std::filesystem::exists(GBX_TEST_CUDA_STUB_LIBCUDA)) {
    MESSAGE("no stub libcuda at " GBX_TEST_CUDA_STUB_LIBCUDA);
    return;
  }
  auto loaded = CudaDriver::load(GBX_TEST_CUDA_STUB_LIBCUDA);
  REQUIRE_FALSE(loaded.ok());
  CHECK(one_line_no_device(loaded.error()));
  CHECK(loaded.error().message ==
        "no CUDA device: only the CUDA toolkit's stub libcuda is present");
}

TEST_CASE("a shared library that is not a CUDA driver: a driver error, not \"no device\"") {
  auto loaded = CudaDriver::load("libm.so.6");
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().kind == ErrorKind::Runtime);
  CHECK(loaded.error().message == "CUDA driver error: libm.so.6 has no cuInit (not a CUDA driver)");
}

TEST_CASE("CUresult names without a driver") {
  CHECK(cu_result_name(CUDA_ERROR_STUB_LIBRARY) == "CUDA_ERROR_STUB_LIBRARY");
  CHECK(cu_result_name(CUDA_ERROR_NO_DEVICE) == "CUDA_ERROR_NO_DEVICE");
  CHECK(cu_result_name(CUDA_ERROR_OUT_OF_MEMORY) == "CUDA_ERROR_OUT_OF_MEMORY");
  CHECK(cu_result_name(static_cast<CUresult>(12345)) == "CUresult 12345");
}

TEST_CASE("launch shapes cover every thread") {
  LaunchShape s = launch_shape(1000, 256);
  CHECK(s.block == 256);
  CHECK(s.grid == 4);
  CHECK(launch_shape(1024, 256).grid == 4);
  CHECK(launch_shape(1025, 256).grid == 5);
  CHECK(launch_shape(1, 128).grid == 1);
  CHECK(launch_shape(0, 128).grid == 1);  // a launch needs one block; the kernel bounds-checks
  CHECK(launch_shape(100, 0).block == 1);
  CHECK(launch_shape(100, 0).grid == 100);
  CHECK(launch_shape(4096LL * 1024, 1024).grid == 4096);
}

TEST_CASE("throughput launch shape: H100, A100 and L4 attribute sets") {
  struct Gpu {
    const char* name;
    LaunchDevice dev;
  };
  const Gpu gpus[] = {{"H100 SXM", {132, 1024}}, {"A100", {108, 1024}}, {"L4", {58, 1024}}};
  for (const Gpu& g : gpus) {
    CAPTURE(g.name);
    const long long sms = g.dev.multiprocessors;
    for (long long envs :
         {1LL, 7LL, 32LL, 100LL, 31 * sms, 32 * sms, 32 * sms + 1, 64 * sms, 128 * sms - 1,
          128 * sms, 1000LL, 4096LL, 8192LL, 16384LL, 65536LL, 1LL << 20}) {
      CAPTURE(envs);
      const LaunchShape s = throughput_launch_shape(g.dev, envs);
      CHECK(s.block % 32 == 0);
      CHECK(s.block >= 32);
      CHECK(s.block <= 256);
      CHECK((long long)s.grid * s.block >= envs);                      // every env has a thread
      CHECK((long long)(s.grid - 1) * s.block < std::max(envs, 1LL));  // no empty block
      if (envs >= 32 * sms) CHECK(s.grid >= sms);                      // every SM gets a block
      if (envs < 32 * sms) CHECK(s.block == 32);  // too few envs: smallest blocks
      if (envs >= kDefaultBlockSize * sms) CHECK(s.block == kDefaultBlockSize);
    }
  }
  // 8192 envs on 132 SMs: 256 blocks of 32, every SM busy (blocks of 896 would be ~10, most
  // SMs idle).
  CHECK(throughput_launch_shape({132, 1024}, 8192).block == 32);
  CHECK(throughput_launch_shape({132, 1024}, 8192).grid == 256);
  CHECK(throughput_launch_shape({132, 1024}, 16384).block == 64);
  CHECK(throughput_launch_shape({108, 1024}, 16384).block == 128);  // 128 blocks >= 108 SMs
  CHECK(throughput_launch_shape({58, 1024}, 65536).block == 128);
  // --block-size overrides, validated against the device limit.
  CHECK(throughput_launch_shape({132, 1024}, 1000, 96).block == 96);
  CHECK(throughput_launch_shape({132, 1024}, 1000, 96).grid == 11);
  CHECK(check_block_size(96).ok());
  CHECK(check_block_size(256).ok());
  CHECK(check_block_size(1024).ok());
  CHECK(check_block_size(100).error().kind == ErrorKind::Usage);
  CHECK(check_block_size(0).error().kind == ErrorKind::Usage);
  CHECK(check_block_size(2048).error().message ==
        "--block-size 2048: must be a multiple of 32 from 32 to 1024");
  CHECK(check_block_size(1024, 512).error().kind == ErrorKind::Usage);
}

TEST_CASE("device round trip: NVRTC -> module -> launch -> read back") {
  auto drv = CudaDriver::get();
  if (!drv.ok()) {
    // The no-device cases above are real tests: the file passes, this case says it skipped.
    GBX_SKIP(drv.error().message);
  }
  auto ctx_r = CudaContext::open(0);
  REQUIRE_MESSAGE(ctx_r.ok(), ctx_r.error().message);
  CudaContext& ctx = **ctx_r;
  MESSAGE("device 0: ", ctx.name(), " ", ctx.arch(), ", driver ", ctx.driver_version(), ", NVRTC ",
          nvrtc_version());
  CHECK(ctx.sm() >= 50);
  CHECK_FALSE(ctx.name().empty());

  auto target = select_cuda_target(ctx.sm(), nvrtc_supported_archs());
  REQUIRE_MESSAGE(target.ok(), target.error().message);
  NvrtcOptions opts;
  opts.archs = {target->arch};
  auto compiled = nvrtc_compile(kRoundTripKernel, "gbx_round_trip.cu", opts);
  REQUIRE_MESSAGE(compiled.ok(), compiled.error().message);
  const NvrtcArchOutput& out = compiled->cubins.at(0);

  for (ModuleImage kind : {ModuleImage::Cubin, ModuleImage::Ptx}) {
    if (kind == ModuleImage::Cubin && !target->cubin) continue;
    INFO((kind == ModuleImage::Cubin ? "CUBIN" : "PTX"));
    auto mod = CudaModule::load(ctx, kind == ModuleImage::Cubin ? out.cubin : out.ptx, kind);
    REQUIRE_MESSAGE(mod.ok(), mod.error().message, "\n", mod.error().detail);
    auto fn = mod->function("gbx_step");
    REQUIRE_MESSAGE(fn.ok(), fn.error().message);
    auto missing = mod->function("no_such_kernel");
    CHECK_FALSE(missing.ok());

    const int n = 10000;
    std::vector<int> in(n), result(n, -1);
    for (int i = 0; i < n; ++i) in[i] = i - 5000;
    auto in_buf = DeviceBuffer::alloc(ctx, n * sizeof(int));
    auto out_buf = DeviceBuffer::alloc(ctx, n * sizeof(int));
    REQUIRE(in_buf.ok());
    REQUIRE(out_buf.ok());
    auto stream = CudaStream::create(ctx);
    REQUIRE(stream.ok());
    REQUIRE(in_buf->upload(in.data(), in.size() * sizeof(int), 0, stream->get()).ok());
    REQUIRE(out_buf->fill(0xff, stream->get()).ok());
    CHECK_FALSE(in_buf->upload(in.data(), sizeof(int), n * sizeof(int), stream->get()).ok());
    CHECK_FALSE(in_buf->upload(in.data(), sizeof(int), 0, nullptr).ok());  // legacy stream

    RtParams p{in_buf->as<const int>(), out_buf->as<int>(), n, 7};
    void* args[] = {&p};
    auto shape = occupancy_launch_shape(ctx.driver(), *fn, n);
    REQUIRE_MESSAGE(shape.ok(), shape.error().message);
    CHECK(shape->block >= 32);
    CHECK(static_cast<long long>(shape->grid) * shape->block >= n);

    REQUIRE(launch_kernel(ctx.driver(), *fn, *shape, args, stream->get()).ok());
    REQUIRE(out_buf->download(result.data(), result.size() * sizeof(int), 0, stream->get()).ok());
    REQUIRE(stream->synchronize().ok());
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += result[i] != in[i] * 3 + 7;
    CHECK(wrong == 0);
  }

  Status oom = alloc_too_much(ctx.driver());
  REQUIRE_FALSE(oom.ok());
  CHECK(oom.error().message.find("cuMemAlloc(&p, size_t(1) << 62) failed: CUDA_ERROR_") == 0);
  CHECK(oom.error().message.find("test_cuda_driver.cpp:") != std::string::npos);
  REQUIRE(ctx.synchronize().ok());
}
