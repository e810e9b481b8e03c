// Warp mode of the CUDA driver double (tests/cuda_double/warps.cpp): the kernels of warps.cu,
// compiled by NVRTC and run by the double with each warp's lanes as fibers, give what the CUDA
// rules say (computed here case by case); what a GPU leaves undefined aborts; and GBX's own
// kernels run in warp mode (GBX_CUDA_DOUBLE_WARPS=all) as thread by thread.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gbx/engine/cache.h"
#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/engine/nvrtc_compiler.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "nvrtc_available.h"
#include "test_cuda_double/common.h"

using namespace gbx;
using namespace cuda_double_test;

namespace {

// warps.cu as a module of the double: its NVRTC CUBIN published in the kernel cache beside
// its source, as GBX's kernels are (the double finds the source by the image's hash).
const CudaModule& warp_module() {
  static CudaModule* m = [] {
    std::ifstream in(std::string(GBX_TEST_SOURCE_DIR) + "/test_cuda_double/warps.cu");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string source = ss.str();
    REQUIRE(!source.empty());
    NvrtcOptions opts;
    opts.archs = {"sm_90"};
    opts.line_info = false;
    const std::string key =
        sha256_hex("gbx-test-cuda-double-warps/1\n" + cuda_compiler_identity(opts) + "\n" + source);
    KernelCache cache;
    std::vector<std::string> warnings;
    std::string cubin;
    if (auto hit = cache.lookup(key, &warnings))
      if (auto c = hit->read("module.sm_90.cubin")) cubin = *c;
    if (cubin.empty()) {
      auto out = nvrtc_compile(source, "warps.cu", opts);
      REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message + "\n" + out.error().detail));
      cubin = out->find("sm_90")->cubin;
      cache.publish(key, {{"source.cu", source}, {"module.sm_90.cubin", cubin}},
                    {{"kind", "test_cuda_double warp kernels"}}, &warnings);
    }
    auto mod = CudaModule::load(context(), cubin, ModuleImage::Cubin);
    REQUIRE_MESSAGE(mod.ok(), (mod.ok() ? "" : mod.error().message));
    return new CudaModule(std::move(*mod));
  }();
  return *m;
}

// Launches `name` <<<grid, block>>> with one buffer of words[i] 32-bit words for parameter i,
// every word 0xEEEEEEEE before; returns buffer `result`'s words after.
std::vector<uint32_t> run(const std::string& name, unsigned grid, unsigned block,
                          std::vector<size_t> words, size_t result = 0) {
  CudaContext& ctx = context();
  auto fn = warp_module().function(name);
  REQUIRE(fn.ok());
  auto s = CudaStream::create(ctx);
  REQUIRE(s.ok());
  std::vector<DeviceBuffer> bufs;
  std::vector<CUdeviceptr> ptrs;
  for (size_t w : words) {
    auto b = DeviceBuffer::alloc(ctx, w * 4);
    REQUIRE(b.ok());
    REQUIRE(b->fill(0xEE, s->get()).ok());
    ptrs.push_back(b->ptr());
    bufs.push_back(std::move(*b));
  }
  std::vector<void*> args;
  for (CUdeviceptr& p : ptrs) args.push_back(&p);
  REQUIRE(launch_kernel(ctx.driver(), *fn, LaunchShape{grid, block}, args.data(), s->get()).ok());
  std::vector<uint32_t> out(words[result]);
  REQUIRE(bufs[result].download(out.data(), out.size() * 4, 0, s->get()).ok());
  REQUIRE(s->synchronize().ok());
  return out;
}

constexpr uint32_t kUntouched = 0xEEEEEEEEu;

uint32_t lanes_where(bool (*pred)(unsigned)) {
  uint32_t m = 0;
  for (unsigned l = 0; l < 32; ++l) m |= uint32_t(pred(l)) << l;
  return m;
}

}  // namespace

TEST_CASE("warp mode: votes, matches, shuffles and reductions on divergent lanes") {
  GBX_REQUIRE_NVRTC();
  const std::vector<uint32_t> o = run("warp_votes", 1, 64, {64 * 20});
  const uint32_t every_third = lanes_where([](unsigned l) { return l % 3 == 0; });
  CHECK(every_third == 0x49249249u);
  for (unsigned t = 0; t < 64; ++t) {
    CAPTURE(t);
    const unsigned lane = t & 31;
    const bool odd = lane & 1;
    const uint32_t* r = &o[t * 20];
    CHECK(r[0] == every_third);
    // Each arm of the branch votes among its own lanes, named by its own mask.
    CHECK(r[1] == (odd ? lanes_where([](unsigned l) { return (l & 1) && l > 20; })
                       : lanes_where([](unsigned l) { return !(l & 1) && l < 6; })));
    CHECK(r[2] == (odd ? 0xaaaaaaaau : 0x55555555u));  // the lanes converged in that arm
    CHECK(r[3] == (odd ? 1u : 0u));                    // lane 7 is odd
    CHECK(r[4] == (odd ? 1u : 0u));                    // lane 0 is even
    CHECK(r[5] == 0xfu << (lane & ~3u));
    CHECK(r[6] == 0xffffffffu);  // t / 32 is the same across a warp
    CHECK(r[7] == 1u);
    CHECK(r[8] == ((lane & ~7u) + 3) * 10);                  // srcLane 3 in groups of 8
    CHECK(r[9] == (lane % 16 < 2 ? lane : lane - 2) * 10);   // the group's first 2 keep theirs
    CHECK(r[10] == (lane + 5 < 32 ? lane + 5 : lane) * 10);  // the last 5 keep theirs
    CHECK(r[11] == (lane % 8 >= 4 ? lane - 4 : lane) * 10);  // xor into a later group: own
    CHECK(r[12] == 10u);                                     // srcLane 33 is lane 1
    CHECK(r[13] == 2 * (lane ^ 1) + 1);                      // a double: 8 bytes moved
    CHECK(r[14] == 496u);                                    // 0 + 1 + ... + 31
    CHECK(r[15] == uint32_t(-5));
    CHECK(r[16] == 0u);  // lane / 16 differs: no match, predicate false
    CHECK(r[17] == 0u);
    CHECK(r[18] == 93u);
    CHECK(r[19] == 11u + 100u * (odd ? 22u : 1u));  // __popc, __ffs
  }
}

TEST_CASE("warp mode: a partial warp, and lanes that exited take no part") {
  GBX_REQUIRE_NVRTC();
  const std::vector<uint32_t> o = run("partial_warp", 2, 48, {96 * 4});
  for (unsigned t = 0; t < 96; ++t) {
    CAPTURE(t);
    const unsigned b = t / 48, tid = t % 48, warp = tid / 32, lane = tid & 31;
    const uint32_t* r = &o[t * 4];
    CHECK(r[0] == (warp == 0 ? 0xffffffffu : 0x0000ffffu));  // warp 1 has 16 lanes
    CHECK(r[1] == b * 48 + (tid ^ 8));
    if (warp == 1 && lane >= 12) {
      CHECK(r[2] == kUntouched);
      CHECK(r[3] == kUntouched);
    } else {
      CHECK(r[2] == (warp == 0 ? 0xffffffffu : 0x00000fffu));
      CHECK(r[3] == (warp == 0 ? 0xffffffffu : 0x00000fffu));
    }
  }
}

TEST_CASE("warp mode: lanes meet wherever they call from; blocks meet at __syncthreads") {
  GBX_REQUIRE_NVRTC();
  // Thread by thread, lane 0 would read lane 1's word before lane 1 wrote it.
  const std::vector<uint32_t> x = run("syncwarp_exchange", 1, 32, {32, 32}, 1);
  for (unsigned t = 0; t < 32; ++t) {
    CAPTURE(t);
    CHECK(x[t] == ((t & 1) ? (t - 1) * 5 + 1 : (t + 1) * 3));
  }
  // Lanes 16..31 wait at the second vote while lanes 0..15 vote among themselves first.
  const std::vector<uint32_t> l = run("arrive_later", 1, 32, {64});
  for (unsigned lane = 0; lane < 32; ++lane) {
    CAPTURE(lane);
    CHECK(l[lane * 2] == (lane < 16 ? 0x0000aaaau : 0u));
    CHECK(l[lane * 2 + 1] == 0xffff0008u);
  }
  const std::vector<uint32_t> b = run("block_exchange", 2, 64, {128});
  for (unsigned i = 0; i < 128; ++i) {
    CAPTURE(i);
    const unsigned blk = i / 64, t = i % 64;
    CHECK(b[i] == blk * 1000 + (t + 32) % 64 + (16u << 16));  // 16 of 64 voted at _count
  }
}

TEST_CASE("warp mode: what a GPU leaves undefined aborts, naming the lanes") {
  GBX_REQUIRE_NVRTC();
  (void)warp_module();  // loaded (and compiled for the host) here, not in each child
  struct Case {
    const char* kernel;
    const char* says;
  };
  for (const Case& c :
       {Case{"bad_masks",
             "lanes that meet disagree: thread (16,0,0) of block (0,0,0) (warp 0, "
             "lane 16) calls __ballot_sync(mask 0xffffffff, 4-byte value) at "},
        Case{"bad_masks", "(warp 0, lane 0) calls __ballot_sync(mask 0x0000ffff, 4-byte value)"},
        Case{"bad_self", "calls __syncwarp(mask 0x00000001) at "},
        Case{"bad_self", "a mask that does not name the calling lane"},
        Case{"bad_exited_source",
             "reads lane 0 in __shfl_sync(mask 0xffffffff, 4-byte value, "
             "width 32) at "},
        Case{"bad_exited_source", ", which has exited: its value is undefined on a GPU"},
        Case{"bad_barrier", "(warp 0, lane 0) waits in __syncwarp(mask 0xffffffff) at "},
        Case{"bad_barrier", "which waits at __syncthreads at "},
        Case{"bad_barrier", "a deadlock on a GPU"},
        Case{"bad_never_meet",
             "the lanes never meet: thread (0,0,0) of block (0,0,0) (warp 0, "
             "lane 0) waits in __syncwarp(mask 0xffffffff) at "},
        Case{"bad_never_meet",
             "(warp 0, lane 16), which waits in __ballot_sync(mask "
             "0xffffffff, 4-byte value) at "}}) {
    CAPTURE(c.kernel);
    Child child = in_child([&] { (void)run(c.kernel, 1, 32, {32}); });
    CAPTURE(child.err);
    CHECK(child.signal == SIGABRT);
    CHECK(has(child.err, "GBX CUDA double: kernel " + std::string(c.kernel) + " <<<1, 32>>>"));
    CHECK(has(child.err, c.says));
    CHECK(has(child.err, " at source.cu:"));  // the call sites, as lines of warps.cu
  }
}

TEST_CASE("GBX's kernel in warp mode (GBX_CUDA_DOUBLE_WARPS=all) matches cpu; its stack fits") {
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 40;  // a full warp and a partial one, with block 32
  cfg.stage = Stage::FullStep;
  cfg.block_size = 32;
  auto cpu = make_backend("cpu", *rom, cfg);
  REQUIRE(cpu.ok());
  auto cuda = CudaBackend::create(*rom, cfg);
  REQUIRE_MESSAGE(cuda.ok(), (cuda.ok() ? "" : cuda.error().message));
  // From here: the steps' gbx_step launches. (Creation's env-copy launches, up to millions of
  // threads that exit at once, would cost seconds in warp mode and test nothing more.)
  setenv("GBX_CUDA_DOUBLE_WARPS", "all", 1);
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> actions(cfg.num_envs, step * 16);
    REQUIRE((*cpu)->step(actions).ok());
    REQUIRE((*cuda)->step(actions).ok());
  }
  REQUIRE((*cuda)->sync().ok());
  unsetenv("GBX_CUDA_DOUBLE_WARPS");
  for (int env : {0, 31, 32, 39}) {
    CAPTURE(env);
    auto a = (*cpu)->get_cpu_state(env);
    auto b = (*cuda)->get_cpu_state(env);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(b->pc == a->pc);
    CHECK(b->a == a->a);
    CHECK(b->cycle_count == a->cycle_count);
    CHECK(b->instr_count == a->instr_count);
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  void* sym = dlsym(lib, "gbx_cuda_double_lane_stack_peak");
  REQUIRE(sym != nullptr);
  const uint64_t peak = reinterpret_cast<uint64_t (*)()>(sym)();
  MESSAGE("deepest lane stack use in warp mode: ", peak / 1024, " KiB");
  CHECK(peak > 0);
  dlclose(lib);
}

TEST_CASE("warp mode: lane stacks hold 96 KiB of locals, and the stack meter sees them") {
  GBX_REQUIRE_NVRTC();
  const std::vector<uint32_t> o = run("deep_stack", 1, 32, {32});
  for (unsigned t = 0; t < 32; ++t) CHECK(o[t] == t % 24 + 1);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  void* sym = dlsym(lib, "gbx_cuda_double_lane_stack_peak");
  REQUIRE(sym != nullptr);
  const uint64_t peak = reinterpret_cast<uint64_t (*)()>(sym)();
  CHECK(peak >= 96 * 1024);
  CHECK(peak < 192 * 1024);  // 3/4 of the 256 KiB stack: beyond, the double aborts
  dlclose(lib);
}
