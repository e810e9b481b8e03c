// NVRTC compile path: real compiles (NVRTC needs no GPU), the ptxas report parser on a
// captured log, #line mapping of diagnostics, option lists and target selection.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "gbx/engine/nvrtc_compiler.h"
#include "gbx/engine/nvrtc_library.h"
#include "nvrtc_available.h"
#include "test_util.h"

using namespace gbx;

namespace {

// Shaped like the generated kernel: one TU, no #includes, a by-value struct of pointers.
const char* kSmallKernel = R"(
typedef struct TinyState { unsigned short* pc; unsigned char* a; } TinyState;
typedef struct TinyParams { TinyState s; const unsigned char* rom; int num_envs; } TinyParams;
extern "C" __global__ void gbx_step(const TinyParams p) {
  int env = blockIdx.x * blockDim.x + threadIdx.x;
  if (env >= p.num_envs) return;
  unsigned short pc = p.s.pc[env];
  p.s.a[env] = p.rom[pc & 0x7fff];
  p.s.pc[env] = pc + 1;
}
)";

// `ptxas -v` output captured from NVRTC 13.0 (sm_80, --maxrregcount=16, a kernel forced to
// spill, a second kernel and a non-inlined helper).
const char* kCapturedLog =
    "ptxas warning : For profile sm_80 adjusting per thread register count of 16 to lower "
    "bound of 24\n"
    "ptxas info    : Overriding maximum register limit 256 for 'k2' with  24 of maxrregcount "
    "option\n"
    "ptxas info    : Overriding maximum register limit 256 for 'k' with  24 of maxrregcount "
    "option\n"
    "ptxas info    : 256 bytes gmem, 64 bytes cmem[3], 8 bytes cmem[4]\n"
    "ptxas info    : Compiling entry function 'k2' for 'sm_80'\n"
    "ptxas info    : Function properties for k2\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n"
    "ptxas info    : Compile time = 2.077 ms\n"
    "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
    "ptxas info    : Function properties for k\n"
    "ptxas         .     1392 bytes stack frame, 1216 bytes spill stores, 1232 bytes spill "
    "loads\n"
    "ptxas info    : Used 24 registers, used 1 barriers, 1392 bytes cumulative stack size, "
    "1024 bytes smem, 376 bytes cmem[0]\n"
    "ptxas info    : Compile time = 62.923 ms\n"
    "ptxas info    : Function properties for _Z6helperfi\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";

bool is_elf(const std::string& image) {
  return image.size() > 4 && image.compare(0, 4,
                                           "\x7f"
                                           "ELF") == 0;
}

}  // namespace

TEST_CASE("ptxas report parser reads a captured log") {
  PtxasReport r = parse_ptxas_log(kCapturedLog);
  CHECK(r.global_bytes == 256);
  REQUIRE(r.functions.size() == 3);

  const ResourceUsage* k = r.find("k");
  REQUIRE(k != nullptr);
  CHECK(k->entry);
  CHECK(k->registers == 24);
  CHECK(k->barriers == 1);
  CHECK(k->stack_frame_bytes == 1392);
  CHECK(k->spill_stores_bytes == 1216);
  CHECK(k->spill_loads_bytes == 1232);
  CHECK(k->cumulative_stack_bytes == 1392);
  CHECK(k->shared_bytes == 1024);
  CHECK(k->const_bytes == 376);
  CHECK(k->local_bytes == 0);
  CHECK(k->ptxas_ms == doctest::Approx(62.923));

  const ResourceUsage* k2 = r.find("k2");
  REQUIRE(k2 != nullptr);
  CHECK(k2->entry);
  CHECK(k2->registers == 8);
  CHECK(k2->shared_bytes == 0);  // absent from the "Used" line means zero
  CHECK(k2->const_bytes == 360);
  CHECK(k2->spill_stores_bytes == 0);

  const ResourceUsage* helper = r.find("_Z6helperfi");
  REQUIRE(helper != nullptr);
  CHECK_FALSE(helper->entry);
  CHECK(helper->stack_frame_bytes == 0);
  CHECK(helper->registers == -1);  // ptxas reports registers for entries only

  ResourceUsage sum = summarize_entries(r);
  CHECK(sum.function.empty());  // two entries
  CHECK(sum.registers == 24);
  CHECK(sum.spill_stores_bytes == 1216);
  CHECK(sum.const_bytes == 376);
}

TEST_CASE("ptxas report parser: sm_90 form, empty and foreign input") {
  // sm_90 prints no cmem[0] for a kernel; the parameter bank is reported elsewhere.
  PtxasReport r = parse_ptxas_log(
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'gbx_step' for 'sm_90'\n"
      "ptxas info    : Function properties for gbx_step\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers\n"
      "ptxas info    : Compile time = 12.646 ms\n");
  ResourceUsage u = summarize_entries(r);
  CHECK(u.function == "gbx_step");
  CHECK(u.registers == 12);
  CHECK(u.const_bytes == 0);
  CHECK(u.spill_loads_bytes == 0);
  CHECK(r.global_bytes == 0);

  CHECK(parse_ptxas_log("").functions.empty());
  PtxasReport none = parse_ptxas_log("t.cu(3): warning: something\nnot ptxas at all\n");
  CHECK(none.functions.empty());
  CHECK(summarize_entries(none).registers == -1);
}

TEST_CASE("nvrtc options list is ordered and stable") {
  NvrtcOptions opts;
  std::vector<std::string> expected = {"--std=c++17", "-default-device", "--restrict", "-lineinfo",
                                       "--ptxas-options=-v"};
  // NVRTC's own compile cache is off wherever the loaded NVRTC can switch it off (12.9+).
  if (nvrtc_has_no_cache_option()) expected.push_back("--no-cache");
  expected.push_back("--gpu-architecture=sm_90");
  CHECK(nvrtc_options_for(opts, "sm_90") == expected);
  CHECK(nvrtc_options_for(opts, "sm_90") == nvrtc_options_for(opts, "sm_90"));

  opts.line_info = false;
  opts.extra = {"--maxrregcount=64"};
  std::vector<std::string> no_lines = nvrtc_options_for(opts, "sm_80");
  CHECK(std::find(no_lines.begin(), no_lines.end(), "-lineinfo") == no_lines.end());
  REQUIRE(no_lines.size() == expected.size());
  CHECK(no_lines[no_lines.size() - 2] == "--maxrregcount=64");  // extras before the arch
  CHECK(no_lines.back() == "--gpu-architecture=sm_80");
}

TEST_CASE("nvrtc version and supported archs") {
  GBX_REQUIRE_NVRTC();
  std::string v = nvrtc_version();
  CHECK(v.find('.') != std::string::npos);
  CHECK(v != "unknown");
  std::vector<std::string> archs = nvrtc_supported_archs();
  REQUIRE_FALSE(archs.empty());
  CHECK(std::find(archs.begin(), archs.end(), "sm_80") != archs.end());
  CHECK(std::find(archs.begin(), archs.end(), "sm_90") != archs.end());
  CHECK(std::is_sorted(archs.begin(), archs.end(), [](const std::string& a, const std::string& b) {
    return arch_number(a) < arch_number(b);
  }));
}

TEST_CASE("small kernel compiles to CUBIN and PTX for sm_80 and sm_90") {
  GBX_REQUIRE_NVRTC();
  NvrtcOptions opts;  // sm_80 + sm_90
  auto r = nvrtc_compile(kSmallKernel, "gbx_small.cu", opts);
  REQUIRE_MESSAGE(r.ok(), r.error().message, "\n", r.error().detail);

  REQUIRE(r->cubins.size() == 2);
  CHECK(r->cubins[0].arch == "sm_80");
  CHECK(r->cubins[1].arch == "sm_90");
  for (const NvrtcArchOutput& out : r->cubins) {
    INFO("arch ", out.arch, "\nlog:\n", out.log);
    CHECK(is_elf(out.cubin));
    CHECK(out.ptx.find(".entry gbx_step") != std::string::npos);
    CHECK(out.ptx.find(".target " + out.arch) != std::string::npos);
    CHECK(out.usage.function == "gbx_step");
    CHECK(out.usage.registers >= 1);
    CHECK(out.usage.spill_stores_bytes == 0);
    CHECK(out.usage.spill_loads_bytes == 0);
    CHECK(out.usage.stack_frame_bytes == 0);
    CHECK(out.usage.shared_bytes == 0);
    CHECK(out.log.find("Used") != std::string::npos);
    CHECK(out.options == nvrtc_options_for(opts, out.arch));
    CHECK(out.compile_ms > 0);
  }
  CHECK(r->find("sm_90") == &r->cubins[1]);
  CHECK(r->find("sm_75") == nullptr);

  // Lowest arch's PTX: the portable one.
  CHECK(r->ptx_arch == "compute_80");
  CHECK(r->ptx == r->cubins[0].ptx);
  CHECK(r->ptx.find(".entry") != std::string::npos);
  CHECK(r->ptx.back() != '\0');

  std::vector<std::string> used = nvrtc_shared_options(opts);
  used.push_back("--gpu-architecture=sm_80");
  used.push_back("--gpu-architecture=sm_90");
  CHECK(r->options_used == used);
  CHECK(r->log.find("--gpu-architecture=sm_80") != std::string::npos);
  CHECK(r->log.find("for 'sm_90'") != std::string::npos);
  CHECK(r->compile_ms > 0);
  MESSAGE("NVRTC ", nvrtc_version(), " sm_80+sm_90 small kernel: ", r->compile_ms, " ms (sm_80 ",
          r->cubins[0].compile_ms, " ms, sm_90 ", r->cubins[1].compile_ms, " ms)");
}

TEST_CASE("serial and parallel compiles give the same images") {
  GBX_REQUIRE_NVRTC();
  NvrtcOptions par, ser;
  ser.parallel = false;
  auto a = nvrtc_compile(kSmallKernel, "gbx_small.cu", par);
  auto b = nvrtc_compile(kSmallKernel, "gbx_small.cu", ser);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->cubins.size() == b->cubins.size());
  for (size_t i = 0; i < a->cubins.size(); ++i) {
    CHECK(a->cubins[i].cubin == b->cubins[i].cubin);
    CHECK(a->cubins[i].ptx == b->cubins[i].ptx);
  }
}

TEST_CASE("compile errors name the #line template file") {
  GBX_REQUIRE_NVRTC();
  const std::string src =
      "extern \"C\" __global__ void gbx_step(int* p) {\n"
      "#line 7 \"templates/sm83/family/broken.tmpl\"\n"
      "  int x = ;\n"
      "  p[0] = x;\n"
      "}\n";
  NvrtcOptions opts;
  auto r = nvrtc_compile(src, "gbx_broken.cu", opts);
  REQUIRE_FALSE(r.ok());
  const Error& e = r.error();
  CHECK(e.kind == ErrorKind::Compile);
  INFO("message: ", e.message, "\ndetail:\n", e.detail);
  CHECK(e.message.find('\n') == std::string::npos);
  CHECK(e.message.rfind("templates/sm83/family/broken.tmpl(", 0) == 0);
  bool line_7_or_8 = e.message.find("broken.tmpl(7)") != std::string::npos ||
                     e.message.find("broken.tmpl(8)") != std::string::npos;
  CHECK(line_7_or_8);
  CHECK(e.message.find("error") != std::string::npos);
  // Full log in the detail, including NVRTC's summary line the message leaves out.
  CHECK(e.detail.find("detected in the compilation of \"gbx_broken.cu\"") != std::string::npos);
  CHECK(e.detail.find(e.message) != std::string::npos);
}

TEST_CASE("ptxas errors are compile errors too") {
  GBX_REQUIRE_NVRTC();
  // The front end accepts this; ptxas rejects the shared memory size.
  const std::string src =
      "extern \"C\" __global__ void gbx_step(char* p) {\n"
      "  __shared__ char big[1 << 20];\n"
      "  big[threadIdx.x] = p[threadIdx.x];\n"
      "  __syncthreads();\n"
      "  p[threadIdx.x] = big[threadIdx.x ^ 1];\n"
      "}\n";
  NvrtcOptions opts;
  opts.archs = {"sm_80"};
  auto r = nvrtc_compile(src, "gbx_big_shared.cu", opts);
  REQUIRE_FALSE(r.ok());
  INFO("message: ", r.error().message, "\ndetail:\n", r.error().detail);
  CHECK(r.error().kind == ErrorKind::Compile);
  CHECK(r.error().message.rfind("ptxas error", 0) == 0);
  CHECK(r.error().message.find("gbx_step") != std::string::npos);
  CHECK(r.error().detail.find("--gpu-architecture=sm_80") != std::string::npos);
}

TEST_CASE("unsupported or missing arch is a usage error") {
  GBX_REQUIRE_NVRTC();
  NvrtcOptions opts;
  opts.archs = {"sm_80", "sm_12"};
  auto r = nvrtc_compile(kSmallKernel, "gbx_small.cu", opts);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == ErrorKind::Usage);
  CHECK(r.error().message.find("sm_12") != std::string::npos);

  opts.archs = {};
  auto none = nvrtc_compile(kSmallKernel, "gbx_small.cu", opts);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().kind == ErrorKind::Usage);
}

TEST_CASE("arch numbers and device target selection") {
  CHECK(arch_number("sm_90") == 90);
  CHECK(arch_number("compute_80") == 80);
  CHECK(arch_number("sm_121") == 121);
  CHECK(arch_number("sm_90a") == 90);
  CHECK(arch_number("gfx90a") == -1);
  CHECK(arch_number("sm_") == -1);

  const std::vector<std::string> supported = {"sm_75", "sm_80", "sm_86", "sm_90", "sm_120"};
  auto own = select_cuda_target(90, supported);
  REQUIRE(own.ok());
  CHECK(own->arch == "sm_90");
  CHECK(own->cubin);

  // A device NVRTC does not know: PTX of the highest arch below it, JIT-compiled by the driver.
  auto newer = select_cuda_target(89, supported);
  REQUIRE(newer.ok());
  CHECK(newer->arch == "sm_86");
  CHECK_FALSE(newer->cubin);
  auto newest = select_cuda_target(130, supported);
  REQUIRE(newest.ok());
  CHECK(newest->arch == "sm_120");
  CHECK_FALSE(newest->cubin);

  auto older = select_cuda_target(70, supported);
  REQUIRE_FALSE(older.ok());
  CHECK(older.error().kind == ErrorKind::NoDevice);
  CHECK(older.error().message.rfind("no CUDA device", 0) == 0);

  // This NVRTC's own list picks a CUBIN for the archs GBX compiles by default.
  GBX_REQUIRE_NVRTC();
  auto real = select_cuda_target(90, nvrtc_supported_archs());
  REQUIRE(real.ok());
  CHECK(real->cubin);
}

TEST_CASE("NVRTC search order: an explicit library is the only candidate") {
  test::ScopedEnv only("GBX_NVRTC_LIBRARY", "/opt/somewhere/libnvrtc.so.13");
  auto c = nvrtc_search_candidates();
  REQUIRE(c.size() == 1);
  CHECK(c[0].first == "/opt/somewhere/libnvrtc.so.13");
  CHECK(c[0].second == "GBX_NVRTC_LIBRARY");
}

TEST_CASE("NVRTC search order: GBX_NVRTC_NO_TOOLKIT drops the toolkit, keeps the rest") {
  test::ScopedEnv no_explicit("GBX_NVRTC_LIBRARY", "");
  test::ScopedEnv no_toolkit("GBX_NVRTC_NO_TOOLKIT", "1");
  auto c = nvrtc_search_candidates();
  bool soname13 = false;
  for (const auto& [place, origin] : c) {
    CHECK(origin != "CUDA toolkit");
    soname13 |= place == "libnvrtc.so.13" && origin == "dynamic loader search";
  }
  CHECK(soname13);
}

TEST_CASE("NVRTC search order: a wheel in $VIRTUAL_ENV is found") {
  test::TempDir venv;
  const auto lib = venv.path / "lib/python3.11/site-packages/nvidia/cu13/lib";
  std::filesystem::create_directories(lib);
  {
    std::FILE* f = std::fopen((lib / "libnvrtc.so.13").c_str(), "w");
    std::fclose(f);
  }
  test::ScopedEnv no_explicit("GBX_NVRTC_LIBRARY", "");
  test::ScopedEnv v("VIRTUAL_ENV", venv.path.string());
  bool found = false;
  for (const auto& [place, origin] : nvrtc_search_candidates())
    found |= place == (lib / "libnvrtc.so.13").string() && origin == "python wheel ($VIRTUAL_ENV)";
  CHECK(found);
}

TEST_CASE("a library that is not NVRTC, or none, is 'CUDA unavailable' in one line") {
  auto missing = NvrtcLibrary::load("/nonexistent/libnvrtc.so.13");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == ErrorKind::NoDevice);
  CHECK(missing.error().message.rfind("CUDA unavailable: ", 0) == 0);
  CHECK(missing.error().message.find('\n') == std::string::npos);
  auto foreign = NvrtcLibrary::load("libm.so.6");
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.error().message.find("has no nvrtcGetErrorString") != std::string::npos);
}

TEST_CASE("without NVRTC, gbx-synth compile --device cuda says so in one line, exit 3") {
  test::TempDir cache;
  const std::string env =
      "GBX_CACHE_DIR='" + cache.path.string() + "' GBX_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13 ";
  auto r =
      test::run_command(env + test::tool("gbx-synth") + " compile --stage full_step --device cuda");
  CAPTURE(r.output);
  CHECK(r.exit_code == 3);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.rfind("error: CUDA unavailable: no NVRTC library found (", 0) == 0);
  CHECK(r.output.find("pip install nvidia-cuda-nvrtc") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(cache.path / "kernels"));
}

TEST_CASE("the loaded NVRTC says where it came from") {
  GBX_REQUIRE_NVRTC();
  auto nv = NvrtcLibrary::get();
  REQUIRE(nv.ok());
  CHECK_FALSE((*nv)->path().empty());
  CHECK_FALSE((*nv)->origin().empty());
  MESSAGE("NVRTC ", nvrtc_version(), " from ", (*nv)->path(), " (", (*nv)->origin(), ")");
}
