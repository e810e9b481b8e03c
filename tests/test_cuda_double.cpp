// The cuda backend's host code end to end on the CUDA driver test double
// (tests/cuda_double/), which CTest puts on LD_LIBRARY_PATH for this suite only: the double
// itself (fake device addresses, race detection, failure injection) and the tools and GPU
// scripts on top of it. test_cuda_backend runs on the double too (test_cuda_backend_on_double).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gbx/engine/cuda_driver.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "gbx_abi.h"
#include "test_cuda_double/common.h"
#include "test_util.h"

using namespace gbx;
using namespace cuda_double_test;

namespace {

const char* kDoubleName = "GBX CUDA double (H100 attributes)";

// The backend whose kernel (cached by then) the raw-driver cases below launch.
CudaBackend& backend() {
  static CudaBackend* b = [] {
    auto rom = load_rom("builtin:ALU_LOOP");
    REQUIRE(rom.ok());
    BackendConfig cfg;
    cfg.num_envs = 8;
    cfg.stage = Stage::FullStep;
    auto be = CudaBackend::create(*rom, cfg);
    REQUIRE_MESSAGE(be.ok(), (be.ok() ? "" : be.error().message + "\n" + be.error().detail));
    return be->release();
  }();
  return *b;
}

// An empty launch of the real kernel (num_envs 0: every thread exits at its bounds check)
// whose parameter block points at `buf`: the double takes the kernel as touching it.
Status launch_touching(const DeviceBuffer& buf, CUstream stream) {
  CudaBackend& be = backend();
  static CudaModule* mod = [&] {
    auto m = CudaModule::load(be.context(), be.kernel().image,
                              be.kernel().target.cubin ? ModuleImage::Cubin : ModuleImage::Ptx);
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
    return new CudaModule(std::move(*m));
  }();
  auto fn = mod->function("gbx_step");
  REQUIRE(fn.ok());
  GbxParams p{};
  p.rom = buf.as<const unsigned char>();
  p.num_envs = 0;
  void* args[] = {&p};
  return launch_kernel(be.context().driver(), *fn, launch_shape(64, 32), args, stream);
}

std::string gbx_run() { return test::tool("gbx-run"); }

// A command line with the double on the library path (or `lib_path` instead) and
// GBX_CUDA_DOUBLE_FAIL set to `fail` ("" = unset).
std::string with_env(const std::string& cmd, const std::string& fail,
                     const std::string& lib_path = double_dir()) {
  std::string env = "LD_LIBRARY_PATH='" + lib_path + "' ";
  env += fail.empty() ? "env -u GBX_CUDA_DOUBLE_FAIL " : "GBX_CUDA_DOUBLE_FAIL=" + fail + " ";
  return env + cmd;
}

// A machine with a real driver installed cannot show the "no driver library" behaviour.
bool system_has_libcuda() {
  return test::run_command("ldconfig -p | grep -q 'libcuda\\.so\\.1 '").exit_code == 0;
}

}  // namespace

TEST_CASE("the double is the driver GBX loads, with H100 attributes") {
  CudaContext& ctx = context();
  CHECK(ctx.name() == kDoubleName);
  CHECK(ctx.arch() == "sm_90");
  CHECK(ctx.multiprocessors() == 132);
  CHECK(ctx.max_threads_per_block() == 1024);
  CHECK(ctx.driver().via_get_proc_address());
  CHECK(ctx.driver().library() == "libcuda.so.1");
  auto info = test::run_command(with_env(gbx_run() + " cuda-info", ""));
  CAPTURE(info.output);
  CHECK(info.exit_code == 0);
  CHECK(has(info.output, kDoubleName));
  CHECK(has(info.output, "132 SMs"));
}

TEST_CASE("device addresses: in a range the host cannot read, copies stay inside allocations") {
  CudaContext& ctx = context();
  auto buf = DeviceBuffer::alloc(ctx, 4096);
  REQUIRE(buf.ok());
  CHECK(buf->ptr() >= 0x0000800000000000ull);  // not a canonical user-space address
  const CUdeviceptr p = buf->ptr();
  Child c = in_child([p] {
    volatile const unsigned char* host = reinterpret_cast<const unsigned char*>(p);
    std::printf("%d\n", host[0]);  // what a host read of device memory does on a GPU machine
  });
  CAPTURE(c.err);
  // Killed by SIGSEGV; under AddressSanitizer its SEGV report and a non-zero exit instead.
  CHECK(((c.signaled && c.signal == SIGSEGV) || (c.exit_code != 0 && has(c.err, "SEGV"))));

  auto stream = CudaStream::create(ctx);
  REQUIRE(stream.ok());
  std::vector<unsigned char> data(4096, 7), back(4096, 0);
  REQUIRE(buf->upload(data.data(), 4096, 0, stream->get()).ok());
  REQUIRE(buf->download(back.data(), 4096, 0, stream->get()).ok());
  REQUIRE(stream->synchronize().ok());
  CHECK(back == data);
  // One byte past the allocation: the driver refuses it (DeviceBuffer's own check aside).
  const CudaDriver& drv = ctx.driver();
  CHECK(drv.cuMemcpyDtoHAsync(back.data(), p + 1, 4096, stream->get()) == CUDA_ERROR_INVALID_VALUE);
  CHECK(buf->upload(data.data(), 16, 0, nullptr).error().message.find("needs the stream") !=
        std::string::npos);
}

TEST_CASE("a legacy-stream upload with no edge before a non-blocking launch aborts") {
  CudaContext& ctx = context();
  (void)backend();  // compile/cache the kernel in this process, not in each child
  auto buf = DeviceBuffer::alloc(ctx, 256);
  REQUIRE(buf.ok());
  std::vector<unsigned char> bytes(256, 1);

  // What an upload with no stream would do: cuMemcpyHtoD on the legacy stream,
  // which returns once the source is staged and does not order a CU_STREAM_NON_BLOCKING one.
  Child racy = in_child([&] {
    auto s = CudaStream::create(ctx);
    if (ctx.driver().cuMemcpyHtoD(buf->ptr(), bytes.data(), bytes.size()) != CUDA_SUCCESS)
      _exit(91);
    (void)launch_touching(*buf, s->get());
  });
  CAPTURE(racy.err);
  CHECK(racy.signaled);
  CHECK(racy.signal == SIGABRT);
  CHECK(has(racy.err, "GBX CUDA double: race on device memory"));
  CHECK(has(racy.err, "kernel gbx_step"));
  CHECK(has(racy.err, "cuMemcpyHtoD of 256 bytes on the legacy default stream"));
  CHECK(has(racy.err, "CU_STREAM_NON_BLOCKING"));

  // The same with a sync edge, or an event edge, is legal.
  for (int edge : {0, 1}) {
    CAPTURE(edge);
    Child ok = in_child([&] {
      auto s = CudaStream::create(ctx);
      const CudaDriver& d = ctx.driver();
      if (d.cuMemcpyHtoD(buf->ptr(), bytes.data(), bytes.size()) != CUDA_SUCCESS) _exit(91);
      if (edge == 0) {
        if (d.cuCtxSynchronize() != CUDA_SUCCESS) _exit(92);
      } else {
        CUevent e = nullptr;
        if (d.cuEventCreate(&e, 0) != CUDA_SUCCESS) _exit(93);
        if (d.cuEventRecord(e, nullptr) != CUDA_SUCCESS) _exit(94);
        if (d.cuStreamWaitEvent(s->get(), e, 0) != CUDA_SUCCESS) _exit(95);
      }
      if (!launch_touching(*buf, s->get()).ok()) _exit(96);
      if (!s->synchronize().ok()) _exit(97);
    });
    CAPTURE(ok.err);
    CHECK_FALSE(ok.signaled);
    CHECK(ok.exit_code == 0);
  }
}

TEST_CASE("two non-blocking streams touching one buffer without an edge abort") {
  CudaContext& ctx = context();
  auto buf = DeviceBuffer::alloc(ctx, 1024);
  REQUIRE(buf.ok());
  Child racy = in_child([&] {
    auto a = CudaStream::create(ctx);
    auto b = CudaStream::create(ctx);
    std::vector<unsigned char> in(1024, 3), out(16);
    (void)buf->upload(in.data(), in.size(), 0, a->get());
    (void)buf->download(out.data(), out.size(), 512, b->get());  // may run before the upload
  });
  CAPTURE(racy.err);
  CHECK(racy.signal == SIGABRT);
  CHECK(has(racy.err, "cuMemcpyDtoHAsync of 16 bytes on stream"));
  // Disjoint ranges do not race.
  Child disjoint = in_child([&] {
    auto a = CudaStream::create(ctx);
    auto b = CudaStream::create(ctx);
    std::vector<unsigned char> in(512, 3), out(16);
    (void)buf->upload(in.data(), in.size(), 0, a->get());
    (void)buf->download(out.data(), out.size(), 512, b->get());
    (void)a->synchronize();
    (void)b->synchronize();
  });
  CAPTURE(disjoint.err);
  CHECK(disjoint.exit_code == 0);
}

TEST_CASE("page-locked memory: async copies land at the sync, in-flight sources stay put") {
  CudaContext& ctx = context();
  const CudaDriver& d = ctx.driver();
  auto buf = DeviceBuffer::alloc(ctx, 64);
  REQUIRE(buf.ok());
  auto s = CudaStream::create(ctx);
  REQUIRE(s.ok());
  auto pinned = PinnedBuffer::alloc(ctx, 64);
  REQUIRE(pinned.ok());
  uint8_t* h = pinned->data();
  for (int i = 0; i < 64; ++i) h[i] = (uint8_t)i;
  REQUIRE(buf->upload(h, 64, 0, s->get()).ok());
  REQUIRE(s->synchronize().ok());  // the source may change only now
  std::fill(h, h + 64, 0);
  REQUIRE(buf->download(h, 64, 0, s->get()).ok());
  // Not synchronised yet: on a GPU the bytes may not be there; the double poisons them.
  CHECK(h[5] == 0xCD);
  REQUIRE(s->synchronize().ok());
  CHECK(h[5] == 5);
  CHECK(h[63] == 63);
  // Pageable destinations are staged by the driver: there at the call's return.
  std::vector<uint8_t> pageable(64, 0);
  REQUIRE(buf->download(pageable.data(), 64, 0, s->get()).ok());
  CHECK(pageable[7] == 7);
  REQUIRE(s->synchronize().ok());

  Child rewrite = in_child([&] {
    auto s2 = CudaStream::create(ctx);
    (void)buf->upload(h, 64, 0, s2->get());
    h[0] = 99;  // the copy may not have read it yet
    (void)s2->synchronize();
  });
  CAPTURE(rewrite.err);
  CHECK(rewrite.signal == SIGABRT);
  CHECK(has(rewrite.err, "rewrote page-locked memory"));
  CHECK(has(rewrite.err, "cuMemcpyHtoDAsync of 64 bytes"));

  Child freed = in_child([&] {
    auto s2 = CudaStream::create(ctx);
    auto p2 = PinnedBuffer::alloc(ctx, 64);
    (void)buf->download(p2->data(), 64, 0, s2->get());
    *p2 = PinnedBuffer();  // cuMemFreeHost with the copy not known complete
  });
  CAPTURE(freed.err);
  CHECK(freed.signal == SIGABRT);
  CHECK(has(freed.err, "cuMemFreeHost"));
  CHECK(d.cuMemFreeHost(&pageable[0]) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("every __global__ function of a module is launchable with its own parameters") {
  CudaBackend& be = backend();
  CudaContext& ctx = context();
  auto m = CudaModule::load(ctx, be.kernel().image,
                            be.kernel().target.cubin ? ModuleImage::Cubin : ModuleImage::Ptx);
  REQUIRE(m.ok());
  CHECK(m->function("gbx_step").ok());
  CHECK(m->function("gbx_read_memory").ok());
  CHECK_FALSE(m->function("gbx_no_such_kernel").ok());
  // ROM bytes through gbx_read_memory: six parameters, two of them device pointers.
  REQUIRE(be.sync().ok());
  auto rom = be.read_memory(3, 0x0100, 0x0104);
  REQUIRE(rom.ok());
  CHECK(*rom == std::vector<uint8_t>{0x00, 0xC3, 0x50, 0x01});  // NOP; JP 0150 (Pan Docs: header)
}

TEST_CASE("a kernel handed a freed buffer aborts naming the parameter") {
  CudaContext& ctx = context();
  (void)backend();
  Child c = in_child([&] {
    auto s = CudaStream::create(ctx);
    CUdeviceptr freed = 0;
    {
      auto buf = DeviceBuffer::alloc(ctx, 64);
      freed = buf->ptr();
    }
    CudaBackend& be = backend();
    auto m = CudaModule::load(ctx, be.kernel().image,
                              be.kernel().target.cubin ? ModuleImage::Cubin : ModuleImage::Ptx);
    auto fn = m->function("gbx_step");
    GbxParams prm{};
    prm.rom = reinterpret_cast<const unsigned char*>(freed);
    void* args[] = {&prm};
    (void)launch_kernel(ctx.driver(), *fn, launch_shape(1, 32), args, s->get());
  });
  CAPTURE(c.err);
  CHECK(c.signal == SIGABRT);
  CHECK(has(c.err, "lies in no live allocation"));
}

TEST_CASE("gbx-run verify --ref cpu --dut cuda matches on every built-in ROM") {
  (void)backend();
  test::TempDir out;
  int roms = 0;
  for (const BuiltinRom& br : builtin_roms()) {
    CAPTURE(br.name);
    auto r = test::run_command(
        with_env(gbx_run() + " verify --ref cpu --dut cuda --rom builtin:" + br.name +
                     " --steps 40 --actions seeded_random --out '" + out.path.string() + "'",
                 ""));
    CAPTURE(r.output);
    CHECK(r.exit_code == 0);
    ++roms;
  }
  CHECK(roms >= 8);
}

TEST_CASE("gbx-run run and bench on the double; --block-size") {
  (void)backend();
  auto cpu = test::run_command(gbx_run() +
                               " run --backend cpu --rom builtin:ALU_LOOP --envs 100 --frames 8 "
                               "--env 99 --print-state");
  auto cuda = test::run_command(with_env(
      gbx_run() + " run --backend cuda --rom builtin:ALU_LOOP --envs 100 --frames 8 --env 99 "
                  "--print-state --block-size 64",
      ""));
  CAPTURE(cpu.output);
  CAPTURE(cuda.output);
  REQUIRE(cpu.exit_code == 0);
  REQUIRE(cuda.exit_code == 0);
  auto state_line = [](const std::string& s) { return s.substr(s.find("env 99:")); };
  CHECK(state_line(cuda.output) == state_line(cpu.output));

  auto bad = test::run_command(
      with_env(gbx_run() + " run --backend cuda --rom builtin:ALU_LOOP --block-size 48", ""));
  CHECK(bad.exit_code == 2);
  CHECK(has(bad.output, "error: --block-size 48: must be a multiple of 32 from 32 to 1024"));

  test::TempDir dir;
  const std::string json = (dir.path / "bench.json").string();
  auto bench = test::run_command(with_env(gbx_run() +
                                              " bench --backend cuda --rom builtin:ALU_LOOP "
                                              "--envs 1,64 --steps 4 --warmup-steps 1 "
                                              "--block-size 32 --json '" +
                                              json + "' --out '" + dir.path.string() + "'",
                                          ""));
  CAPTURE(bench.output);
  REQUIRE(bench.exit_code == 0);
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j.dump().find("\"block_size\":32") != std::string::npos);
  CHECK(j["results"].size() == 2);
}

TEST_CASE("injected driver failures are errors naming the driver's code, never 'no device'") {
  (void)backend();  // the kernel is cached: the children fail at the injected call, not compiling
  const std::string run =
      gbx_run() + " run --backend cuda --rom builtin:ALU_LOOP --envs 16 --frames 4";
  struct Case {
    const char* fail;
    const char* code;
  };
  for (const Case& c :
       {Case{"init", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"}, Case{"oom", "CUDA_ERROR_OUT_OF_MEMORY"},
        Case{"oom:3", "CUDA_ERROR_OUT_OF_MEMORY"}, Case{"load", "CUDA_ERROR_INVALID_IMAGE"},
        Case{"launch:2", "CUDA_ERROR_LAUNCH_FAILED"}}) {
    CAPTURE(std::string(c.fail));
    auto r = test::run_command(with_env(run, c.fail));
    CAPTURE(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.exit_code != 3);
    CHECK(has(r.output, "error: "));
    CHECK(has(r.output, c.code));
    CHECK_FALSE(has(r.output, "no CUDA device"));
    CHECK(test::count_lines(r.output) == 1);
  }
  auto info = test::run_command(with_env(gbx_run() + " cuda-info", "init"));
  CAPTURE(info.output);
  CHECK(info.exit_code == 1);
  CHECK(has(info.output,
            "error: CUDA driver error: cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"));

  // No device, and no driver library at all: "no CUDA device", exit 3.
  auto none = test::run_command(with_env(run, "nodevice"));
  CHECK(none.exit_code == 3);
  CHECK(has(none.output, "error: no CUDA device: the NVIDIA driver reports no devices"));
  if (!system_has_libcuda()) {
    auto absent = test::run_command(with_env(run, "", "/nonexistent"));
    CHECK(absent.exit_code == 3);
    CHECK(has(absent.output, "error: no CUDA device: libcuda.so.1 not found"));
  }

  // verify: a driver failure is "any other failure" (4), not "no device" (3).
  auto v = test::run_command(with_env(
      gbx_run() + " verify --ref cpu --dut cuda --rom builtin:ALU_LOOP --steps 2", "init"));
  CAPTURE(v.output);
  CHECK(v.exit_code == 4);
}

TEST_CASE("scripts/check-gpu: a broken driver fails, no driver skips") {
  const std::string script = std::string(GBX_TEST_REPO_DIR) + "/scripts/check-gpu";
  const std::string env =
      "GBX_SKIP_BUILD=1 GBX_BUILD_DIR='" + std::string(GBX_TEST_BUILD_DIR) + "' ";
  auto broken = test::run_command(with_env(env + script, "init"));
  CAPTURE(broken.output);
  CHECK(broken.exit_code == 1);
  CHECK(has(broken.output, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"));
  CHECK(has(broken.output, "check-gpu: FAILED"));
  CHECK_FALSE(has(broken.output, "skipped"));

  if (!system_has_libcuda()) {
    auto none = test::run_command(with_env(env + script, "", "/nonexistent"));
    CAPTURE(none.output);
    CHECK(none.exit_code == 0);
    CHECK(has(none.output, "skipped: no CUDA device: libcuda.so.1 not found"));
  }

  auto no_device = test::run_command(with_env(env + script, "nodevice"));
  CAPTURE(no_device.output);
  CHECK(no_device.exit_code == 0);
  CHECK(has(no_device.output, "skipped: no CUDA device: the NVIDIA driver reports no devices"));
}

TEST_CASE("scripts/bench-gpu --games: its table on the double; without a device, the rest") {
  // Tiny sizes: one game (ARROWS reads the joypad), 4-frame steps, 32 envs, a 1-step meter.
  const std::string script = std::string(GBX_TEST_REPO_DIR) + "/scripts/bench-gpu";
  test::TempDir dir;
  const std::string env =
      "GBX_SKIP_BUILD=1 GBX_BUILD_DIR='" + std::string(GBX_TEST_BUILD_DIR) + "' GBX_ARTIFACTS='" +
      dir.path.string() +
      "' GBX_GAMES_ROMS=builtin:ARROWS GBX_GAMES_SEGMENTS=2 GBX_GAMES_HOLD=2 GBX_GAMES_FPS=4 "
      "GBX_GAMES_RELEASE=2 GBX_GAMES_PROFILE=4 BENCH_GAMES_REPORT_FRAMES=4 BENCH_GAMES_ENVS=32 "
      "BENCH_GAMES_SECS=0.05 BENCH_GAMES_CPU_ENVS=4 BENCH_GAMES_METER_WARPS=1 "
      "BENCH_GAMES_METER_STEPS=1 ";
  auto row = [](const std::string& out) {
    const auto at = out.find("\nARROWS ");
    return at == std::string::npos ? std::string()
                                   : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  };
  auto r = test::run_command(with_env(env + script + " --games", ""));
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "cuda random"));
  const std::string line = row(r.output);
  CAPTURE(line);
  REQUIRE_FALSE(line.empty());
  CHECK_FALSE(has(line, " - "));  // every column measured: cuda, meter, cpu, profile

  if (!system_has_libcuda()) {
    auto none = test::run_command(with_env(env + script + " --games", "", "/nonexistent"));
    CAPTURE(none.output);
    CHECK(none.exit_code == 0);
    CHECK(has(none.output, "bench-gpu --games: no CUDA device: libcuda.so.1 not found"));
    CHECK(has(none.output, "the cuda columns are left out"));
    const std::string l = row(none.output);
    CAPTURE(l);
    REQUIRE_FALSE(l.empty());
    CHECK(has(l, "%"));  // halted share and the meter's efficiency
  }
}
