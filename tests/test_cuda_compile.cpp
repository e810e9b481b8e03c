// CUDA compile path end to end, with real NVRTC compiles (NVRTC needs no GPU, so this runs in
// CI): every stage for sm_80 and sm_90 into a private cache, artifacts and meta.json checked,
// a second build all cached, gbx-synth on that cache, template errors mapped back to their
// template file and line, keys, and the cuda backend's fast "no device" path.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/engine/orc_compiler.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx_abi.h"
#include "nvrtc_available.h"
#include "test_util.h"

using namespace gbx;
using nlohmann::json;

namespace {

const std::vector<std::string> kArchs = {"sm_80", "sm_90"};

const TemplateBundle& bundle() {
  static const TemplateBundle* b = [] {
    auto r = TemplateBundle::load(TemplateBundle::default_root());
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return new TemplateBundle(std::move(r.value()));
  }();
  return *b;
}

SynthParams params(Stage st, Device d) {
  SynthParams p;
  p.stage = st;
  p.device = d;
  return p;
}

bool is_elf(const std::string& image) {
  return image.size() > 4 && image.compare(0, 4,
                                           "\x7f"
                                           "ELF") == 0;
}

// The expensive part, done once for the whole file: the four stages for both archs, compiled
// into a private cache (so CI always compiles cold and never touches the user's cache).
struct CompiledStages {
  test::TempDir dir;
  std::vector<CudaKernelBuild> builds;  // all_stages() order
};

const CompiledStages& compiled_stages() {
  // Destroyed at exit, which removes the temp cache.
  static std::unique_ptr<CompiledStages> c([] {
    auto* out = new CompiledStages();
    KernelCache cache(out->dir.path);
    NvrtcOptions opts;
    opts.archs = kArchs;
    for (Stage st : all_stages()) {
      auto k = build_cuda_kernel(bundle(), params(st, Device::Cuda), cache, opts);
      REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message + "\n" + k.error().detail));
      out->builds.push_back(std::move(k.value()));
    }
    return out;
  }());
  return *c;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

TEST_CASE("generated CUDA kernels include no headers, so NVRTC needs none at run time") {
  // NVRTC from a wheel comes without the toolkit's headers; the templates are self-contained.
  for (Stage st : all_stages()) {
    auto src = generate(bundle(), params(st, Device::Cuda));
    REQUIRE(src.ok());
    CAPTURE(to_string(st));
    CHECK(src->source.find("#include") == std::string::npos);
  }
  for (const std::string& o : nvrtc_shared_options(NvrtcOptions{})) {
    CHECK(o.rfind("-I", 0) != 0);
    CHECK(o.rfind("--include-path", 0) != 0);
    CHECK(o.rfind("--pre-include", 0) != 0);
  }
}

TEST_CASE("keys: 4 stages x 2 devices give 8 distinct keys (generation only)") {
  GBX_REQUIRE_NVRTC();
  std::set<std::string> keys;
  for (Stage st : all_stages()) {
    auto cpu_src = generate(bundle(), params(st, Device::Cpu));
    REQUIRE(cpu_src.ok());
    keys.insert(
        compute_cache_key(make_key_inputs(bundle(), *cpu_src, cpu_compiler_identity(),
                                          cpu_compile_args({}), cpu_compiler_environment())));
    auto cuda_key = cuda_kernel_key(bundle(), params(st, Device::Cuda));
    REQUIRE(cuda_key.ok());
    keys.insert(*cuda_key);
  }
  CHECK(keys.size() == 8);

  // The arch list, its order and the variables NVRTC reads are inputs of the key.
  NvrtcOptions a, b, c;
  a.archs = {"sm_80", "sm_90"};
  b.archs = {"sm_90", "sm_80"};
  c.archs = {"sm_90"};
  const SynthParams full = params(Stage::FullStep, Device::Cuda);
  auto ka = cuda_kernel_key(bundle(), full, a);
  auto kb = cuda_kernel_key(bundle(), full, b);
  auto kc = cuda_kernel_key(bundle(), full, c);
  REQUIRE(ka.ok());
  REQUIRE(kb.ok());
  REQUIRE(kc.ok());
  CHECK(*ka != *kb);
  CHECK(*ka != *kc);
  CHECK(*kb != *kc);
  CHECK(cuda_kernel_key(bundle(), full, a).value() == *ka);  // deterministic
  {
    test::ScopedEnv env("NVRTC_APPEND_FLAGS", "-DGBX_TEST_FLAG=1");
    auto kenv = cuda_kernel_key(bundle(), full, a);
    REQUIRE(kenv.ok());
    CHECK(*kenv != *ka);
  }
  CHECK(cuda_kernel_key(bundle(), full, a).value() == *ka);

  CHECK(cuda_compiler_identity(a) ==
        "NVRTC " + nvrtc_version() + "; archs sm_80,sm_90; output cubin+ptx");
  std::vector<std::string> opts = cuda_key_options(a);
  REQUIRE(opts.size() >= 2);
  CHECK(opts[opts.size() - 2] == "--gpu-architecture=sm_80");
  CHECK(opts.back() == "--gpu-architecture=sm_90");
}

TEST_CASE("arch lists and devices are checked before anything compiles") {
  GBX_REQUIRE_NVRTC();
  auto ok = parse_cuda_arch_list("sm_80, sm_90");
  REQUIRE(ok.ok());
  CHECK(*ok == kArchs);
  for (const char* bad : {"sm_1", "compute_90", "", "sm_90,sm_90", "gfx90a"}) {
    CAPTURE(bad);
    auto r = parse_cuda_arch_list(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == ErrorKind::Usage);
    CHECK(r.error().message.find('\n') == std::string::npos);
  }
  test::TempDir dir;
  KernelCache cache(dir.path);
  auto wrong_device = build_cuda_kernel(bundle(), params(Stage::FullStep, Device::Cpu), cache);
  REQUIRE_FALSE(wrong_device.ok());
  CHECK(wrong_device.error().kind == ErrorKind::Usage);
  NvrtcOptions bad;
  bad.archs = {"sm_12345"};
  auto bad_arch = build_cuda_kernel(bundle(), params(Stage::FullStep, Device::Cuda), cache, bad);
  REQUIRE_FALSE(bad_arch.ok());
  CHECK(bad_arch.error().kind == ErrorKind::Usage);
  CHECK(bad_arch.error().message.find("sm_12345") != std::string::npos);
  CHECK(cache.list().empty());
}

TEST_CASE("all four stages compile to PTX and CUBIN for sm_80 and sm_90") {
  GBX_REQUIRE_NVRTC();
  const CompiledStages& c = compiled_stages();
  REQUIRE(c.builds.size() == 4);
  std::set<std::string> keys;
  for (const CudaKernelBuild& k : c.builds) {
    const KernelBuild& b = k.build;
    const std::string stage(to_string(b.source.params.stage));
    CAPTURE(stage);
    keys.insert(b.key);
    CHECK_FALSE(b.cached);
    CHECK(b.compile_ms > 0);
    REQUIRE_FALSE(b.entry.in_memory());
    CHECK(b.entry.dir.parent_path().parent_path() == c.dir.path / "kernels" / "v1");

    auto source = b.entry.read("source.cu");
    REQUIRE(source.ok());
    CHECK(*source == b.source.source);
    CHECK(source->find("#line") != std::string::npos);

    auto ptx = b.entry.read("module.ptx");
    REQUIRE(ptx.ok());
    CHECK(ptx->find(".entry gbx_step") != std::string::npos);
    CHECK(ptx->find(".target sm_80") != std::string::npos);  // the lowest arch's PTX
    CHECK(k.ptx_arch == "compute_80");
    // The device sees the host's GbxParams byte for byte: same size and alignment.
    std::smatch param;
    REQUIRE(std::regex_search(
        *ptx, param, std::regex(R"(\.param \.align (\d+) \.b8 gbx_step_param_0\[(\d+)\])")));
    CHECK(std::stoul(param[1].str()) == alignof(GbxParams));
    CHECK(std::stoul(param[2].str()) == sizeof(GbxParams));

    for (const std::string& arch : kArchs) {
      CAPTURE(arch);
      auto cubin = b.entry.read("module." + arch + ".cubin");
      REQUIRE(cubin.ok());
      CHECK(is_elf(*cubin));
      const CudaArchInfo* info = k.find(arch);
      REQUIRE(info != nullptr);
      CHECK(info->cubin_bytes == cubin->size());
      CHECK(info->usage.registers > 0);
      CHECK(info->usage.registers <= 255);
      CHECK(info->usage.spill_stores_bytes >= 0);
      CHECK(info->usage.spill_loads_bytes >= 0);
      CHECK(info->usage.stack_frame_bytes >= 0);
      // README "Hot fields in registers": no spills, and the per-env Machine (the frame)
      // without its cold fields stays under the 144 B of the first CUDA kernels.
      CHECK(info->usage.spill_stores_bytes == 0);
      CHECK(info->usage.spill_loads_bytes == 0);
      CHECK(info->usage.stack_frame_bytes < 144);
      CHECK(info->compile_ms > 0);
      MESSAGE(stage, " ", arch, ": ", info->usage.registers, " registers, spill ",
              info->usage.spill_stores_bytes, "/", info->usage.spill_loads_bytes, " bytes, stack ",
              info->usage.stack_frame_bytes, " bytes, ", info->compile_ms, " ms");
    }

    auto log = b.entry.read("compile.log");
    REQUIRE(log.ok());
    CHECK(log->find("--gpu-architecture=sm_80") != std::string::npos);
    CHECK(log->find("--gpu-architecture=sm_90") != std::string::npos);
    CHECK(log->find("ptxas info    : Used") != std::string::npos);

    // meta.json on disk (not the in-memory copy): what `gbx-synth cache show` reads.
    const json meta = json::parse(read_text(b.entry.dir / "meta.json"));
    CHECK(meta["key"] == b.key);
    CHECK(meta["device"] == "cuda");
    CHECK(meta["synthesis"]["stage"] == stage);
    CHECK(meta["archs"] == json(kArchs));
    CHECK(meta["compiler_identity"].get<std::string>().find("NVRTC") == 0);
    CHECK(meta["environment"].contains("NVRTC_APPEND_FLAGS"));
    CHECK(meta["options"].back() == "--gpu-architecture=sm_90");
    for (const std::string& arch : kArchs) {
      const json& r = meta["resources"][arch];
      CHECK(r["registers"].get<int>() > 0);
      CHECK(r["spill_stores_bytes"].is_number_integer());
      CHECK(r["spill_loads_bytes"].is_number_integer());
      CHECK(r["stack_frame_bytes"].is_number_integer());
      CHECK(r["shared_bytes"].is_number_integer());
      CHECK(r["const_bytes"].is_number_integer());
    }
    for (const char* f :
         {"source.cu", "module.ptx", "module.sm_80.cubin", "module.sm_90.cubin", "compile.log"})
      CHECK(meta["files"].contains(f));
    CHECK(meta["timings_ms"]["compile"].get<double>() > 0);
  }
  CHECK(keys.size() == 4);
}

// max_registers (docs/gpu.md "Registers and occupancy"): __maxnreg__ on gbx_step, in the key
// of cuda kernels only, and ptxas keeps to it: emulate_only under a cap of 64, where its own
// choice is ~125 registers. An -O3 compile, not a quick one: after an --Ofast-compile=max
// compile, NVRTC (13.4 and 13.5 at least) compiles the pixel FIFO kernel of the case below,
// in the same process, with 518 / 1058 B of spill code instead of 8 / 32.
TEST_CASE("max_registers caps the step kernel's registers; out of range is a usage error") {
  GBX_REQUIRE_NVRTC();
  SynthParams capped = params(Stage::EmulateOnly, Device::Cuda);
  capped.max_registers = 64;
  const SynthParams plain = params(Stage::EmulateOnly, Device::Cuda);
  CHECK(capped.canonical() != plain.canonical());
  SynthParams cpu_capped = params(Stage::EmulateOnly, Device::Cpu);
  cpu_capped.max_registers = 64;
  CHECK(cpu_capped.canonical() == params(Stage::EmulateOnly, Device::Cpu).canonical());
  for (int bad : {8, 256}) {
    SynthParams b = capped;
    b.max_registers = bad;
    auto src = generate(bundle(), b);
    REQUIRE_FALSE(src.ok());
    CHECK(src.error().kind == ErrorKind::Usage);
    CHECK(src.error().message.find("max_registers must be 16..255") != std::string::npos);
  }

  test::TempDir dir;
  KernelCache cache(dir.path);
  NvrtcOptions opts;
  opts.archs = {"sm_90"};
  opts.fast_compile = false;
  auto k = build_cuda_kernel(bundle(), capped, cache, opts);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message + "\n" + k.error().detail));
  auto ptx = k->build.entry.read("module.ptx");
  REQUIRE(ptx.ok());
  CHECK(std::regex_search(*ptx, std::regex(R"(\.entry gbx_step\([^)]*\)\s*\.maxnreg 64)")));
  const CudaArchInfo* info = k->find("sm_90");
  REQUIRE(info != nullptr);
  CHECK(info->usage.registers > 0);
  CHECK(info->usage.registers <= 64);
  MESSAGE("emulate_only sm_90, max_registers=64: ", info->usage.registers, " registers, spill ",
          info->usage.spill_stores_bytes, "/", info->usage.spill_loads_bytes, " bytes, stack ",
          info->usage.stack_frame_bytes, " bytes");
}

// ppu=fifo (docs/machine/ppu-fifo.md): the pixel FIFO is only in its own kernels and compiles for
// CUDA. Pixel kernels are not held to the 144 B frame of the others (the line renderer's
// per-line arrays live there: 832 B on sm_90); measured when this was written, the FIFO adds
// 112 B of frame and 166 / 422 B of spill stores / loads (its out-of-line pipeline), bounded
// here so that growth shows.
TEST_CASE("ppu=fifo: a pixels kernel compiles for CUDA with either renderer") {
  GBX_REQUIRE_NVRTC();
  test::TempDir dir;
  KernelCache cache(dir.path);
  NvrtcOptions opts;
  opts.archs = {"sm_90"};
  int64_t frame[2] = {0, 0};
  for (PpuModel ppu : {PpuModel::Line, PpuModel::Fifo}) {
    CAPTURE(to_string(ppu));
    SynthParams p = params(Stage::ObsOnly, Device::Cuda);
    p.obs = ObsKind::Pixels;
    p.ppu = ppu;
    auto k = build_cuda_kernel(bundle(), p, cache, opts);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message + "\n" + k.error().detail));
    const std::string& src = k->build.source.source;
    CHECK((src.find("struct LcdFifo") != std::string::npos) == (ppu == PpuModel::Fifo));
    CHECK((src.find("#define GBX_PPU_FIFO 1") != std::string::npos) == (ppu == PpuModel::Fifo));
    const CudaArchInfo* info = k->find("sm_90");
    REQUIRE(info != nullptr);
    if (ppu == PpuModel::Line) {
      CHECK(info->usage.spill_stores_bytes == 0);
      CHECK(info->usage.spill_loads_bytes == 0);
    } else {
      CHECK(info->usage.spill_stores_bytes <= 256);
      CHECK(info->usage.spill_loads_bytes <= 512);
    }
    CHECK(info->usage.stack_frame_bytes < 1024);
    frame[ppu == PpuModel::Fifo] = info->usage.stack_frame_bytes;
    MESSAGE("obs_only:pixels ppu=", to_string(ppu), " sm_90: ", info->usage.registers,
            " registers, spill ", info->usage.spill_stores_bytes, "/",
            info->usage.spill_loads_bytes, " bytes, stack ", info->usage.stack_frame_bytes,
            " bytes");
  }
  CHECK(frame[1] - frame[0] <= 128);
  MESSAGE("per-env frame: line ", frame[0], " B, fifo ", frame[1], " B");
}

TEST_CASE("a second build finds every stage in the cache") {
  GBX_REQUIRE_NVRTC();
  const CompiledStages& c = compiled_stages();
  KernelCache cache(c.dir.path);
  NvrtcOptions opts;
  opts.archs = kArchs;
  for (size_t i = 0; i < all_stages().size(); ++i) {
    auto k = build_cuda_kernel(bundle(), params(all_stages()[i], Device::Cuda), cache, opts);
    REQUIRE(k.ok());
    CHECK(k->build.cached);
    CHECK(k->build.compile_ms == 0);
    CHECK(k->build.key == c.builds[i].build.key);
    REQUIRE(k->archs.size() == 2);
    CHECK(k->archs[1].usage.registers == c.builds[i].archs[1].usage.registers);
    CHECK(k->build.warnings.empty());
  }
  CHECK(cache.list().size() == 4);

  // A device whose arch is in the shared entry loads that entry's CUBIN: nothing compiles.
  for (int sm : {80, 90}) {
    auto dk = build_cuda_kernel_for_device(bundle(), params(Stage::FullStep, Device::Cuda), cache,
                                           sm, opts);
    REQUIRE_MESSAGE(dk.ok(), (dk.ok() ? "" : dk.error().message));
    CHECK(dk->build.build.cached);
    CHECK(dk->target.cubin);
    CHECK(dk->image_file == "module.sm_" + std::to_string(sm) + ".cubin");
    CHECK(is_elf(dk->image));
  }
  CHECK(cache.list().size() == 4);
  auto too_old = build_cuda_kernel_for_device(bundle(), params(Stage::FullStep, Device::Cuda),
                                              cache, 20, opts);
  REQUIRE_FALSE(too_old.ok());
  CHECK(too_old.error().kind == ErrorKind::NoDevice);
}

TEST_CASE("gbx-synth on a warm cache: compile, emit ptx, cache show, export compile nothing") {
  GBX_REQUIRE_NVRTC();
  const CompiledStages& c = compiled_stages();
  const std::string env = "GBX_CACHE_DIR='" + c.dir.path.string() + "' ";
  const std::string synth = env + test::tool("gbx-synth");

  auto comp = test::run_command(synth + " compile --stage all --device cuda --arch sm_80,sm_90");
  CAPTURE(comp.output);
  CHECK(comp.exit_code == 0);
  CHECK(test::count_lines(comp.output) == 4);
  std::istringstream lines(comp.output);
  for (std::string line; std::getline(lines, line);) {
    CHECK(line.find(" cached ") != std::string::npos);
    CHECK(line.find("sm_80: ") != std::string::npos);
    CHECK(line.find("sm_90: ") != std::string::npos);
    CHECK(line.find(" regs, spill ") != std::string::npos);
  }

  auto ptx = test::run_command(
      synth + " emit --stage full_step --device cuda --format ptx --arch sm_80,sm_90");
  CHECK(ptx.exit_code == 0);
  CHECK(ptx.output.find(".entry gbx_step") != std::string::npos);

  const std::string key = c.builds.back().build.key;
  auto show = test::run_command(synth + " cache show " + key.substr(0, 10));
  CAPTURE(show.output);
  CHECK(show.exit_code == 0);
  CHECK(show.output.find(key) != std::string::npos);
  CHECK(show.output.find("module.sm_90.cubin") != std::string::npos);
  CHECK(show.output.find("regs, spill") != std::string::npos);

  auto list = test::run_command(synth + " cache list --json");
  CHECK(list.exit_code == 0);
  const json entries = json::parse(list.output, nullptr, false);
  REQUIRE(entries.is_array());
  CHECK(entries.size() == 4);

  const std::filesystem::path out = c.dir.path / "export.jsonl";
  auto exp = test::run_command(synth + " export --out '" + out.string() +
                               "' --stages all --devices cuda --arch sm_80,sm_90");
  CAPTURE(exp.output);
  CHECK(exp.exit_code == 0);
  CHECK(exp.output.find("(0 compiled, 4 cached)") != std::string::npos);
  std::istringstream records(read_text(out));
  int n = 0;
  for (std::string line; std::getline(records, line); ++n) {
    const json r = json::parse(line, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["device"] == "cuda");
    CHECK(r["ir_format"] == "ptx");
    CHECK(r["ir"].get<std::string>().find(".entry gbx_step") != std::string::npos);
    CHECK(r["source"].get<std::string>().find("gbx_step") != std::string::npos);
    CHECK(r["resources"]["sm_90"]["registers"].get<int>() > 0);
    CHECK(r["synthesis"]["memory_model"] == "dmg");
  }
  CHECK(n == 4);
  CHECK(list.output.find(c.builds.front().build.key) != std::string::npos);
}

TEST_CASE("gbx-synth rejects unknown stages, devices and archs with one line, exit 2") {
  GBX_REQUIRE_NVRTC();
  test::TempDir dir;
  const std::string synth = "GBX_CACHE_DIR='" + dir.path.string() + "' " + test::tool("gbx-synth");
  for (const char* args :
       {" compile --stage nope --device cuda", " compile --device gpu",
        " compile --device cuda --arch sm_1", " emit --device cuda --format ptx --arch sm_80,bogus",
        " export --out x.jsonl --devices cpu,tpu"}) {
    auto r = test::run_command(synth + args);
    CAPTURE(args);
    CAPTURE(r.output);
    CHECK(r.exit_code == 2);
    CHECK(test::count_lines(r.output) == 1);
    CHECK(r.output.rfind("error: ", 0) == 0);
  }
  CHECK_FALSE(std::filesystem::exists(dir.path / "kernels"));
}

TEST_CASE("a broken family template fails to compile with its template file and line") {
  GBX_REQUIRE_NVRTC();
  test::TempDir dir;
  const std::filesystem::path root = dir.path / "templates";
  std::filesystem::copy(TemplateBundle::default_root(), root,
                        std::filesystem::copy_options::recursive);
  const std::filesystem::path family = root / "sm83" / "family" / "alu.tmpl";
  std::string text = read_text(family);
  REQUIRE_FALSE(text.empty());
  if (text.back() != '\n') text += '\n';
  const int broken_line = test::count_lines(text) + 1;
  text += "gbx_no_such_identifier += 1;\n";
  std::ofstream(family, std::ios::trunc) << text;

  auto broken = TemplateBundle::load(root);
  REQUIRE_MESSAGE(broken.ok(), (broken.ok() ? "" : broken.error().message));
  KernelCache cache(dir.path / "cache");
  NvrtcOptions opts;
  opts.archs = {"sm_80"};
  auto k = build_cuda_kernel(*broken, params(Stage::EmulateOnly, Device::Cuda), cache, opts);
  REQUIRE_FALSE(k.ok());
  const Error& e = k.error();
  CAPTURE(e.message);
  CHECK(e.kind == ErrorKind::Compile);
  CHECK(e.message.find('\n') == std::string::npos);
  std::smatch m;
  const std::regex where(R"(templates/sm83/family/alu\.tmpl\((\d+)\))");
  REQUIRE(std::regex_search(e.message, m, where));
  CHECK(std::stoi(m[1].str()) == broken_line);
  CHECK(e.message.find("gbx_no_such_identifier") != std::string::npos);
  CHECK(e.detail.find("--gpu-architecture=sm_80") != std::string::npos);  // the full log
  CHECK(cache.list().empty());
}

TEST_CASE("cuda backend and gbx-run without a device: NoDevice in one line, nothing compiled") {
  auto drv = CudaDriver::get();
  if (drv.ok()) {
    // A machine with a GPU: the device cases live in test_cuda_backend; here, cuda-info works.
    auto info = test::run_command(test::tool("gbx-run") + " cuda-info");
    CAPTURE(info.output);
    CHECK(info.exit_code == 0);
    CHECK(info.output.find("sm_") != std::string::npos);
    return;
  }
  test::TempDir dir;
  test::ScopedEnv env("GBX_CACHE_DIR", dir.path.string());
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  BackendConfig cfg;
  cfg.num_envs = 8;
  auto b = make_backend("cuda", *rom, cfg);
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().kind == ErrorKind::NoDevice);
  CHECK(b.error().message.rfind("no CUDA device: ", 0) == 0);
  CHECK(b.error().message.find('\n') == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path / "kernels"));  // failed before any compile

  const std::string run = "GBX_CACHE_DIR='" + dir.path.string() + "' " + test::tool("gbx-run");
  auto r =
      test::run_command(run + " run --backend cuda --rom builtin:ALU_LOOP --envs 8 --frames 10");
  CAPTURE(r.output);
  CHECK(r.exit_code == 3);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.rfind("error: no CUDA device: ", 0) == 0);
  auto info = test::run_command(run + " cuda-info");
  CHECK(info.exit_code == 3);
  CHECK(info.output.rfind("error: no CUDA device: ", 0) == 0);
  CHECK_FALSE(std::filesystem::exists(dir.path / "kernels"));
}
