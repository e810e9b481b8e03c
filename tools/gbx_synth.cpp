// gbx-synth: emit generated kernels, compile them into the cache, inspect the cache, print the
// opcode table and export kernel variants for datasets. Thin: options in plain structs, all
// logic in the engine; this file only parses, loops and prints.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "commands.h"
#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/specialize.h"
#include "tool_common.h"

namespace {

using namespace gbx;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Options every kernel-selecting subcommand shares.
struct KernelOptions {
  std::string stage = "full_step";
  std::string device = "cpu";
  std::string memory_model = "dmg";
  std::string run_mode = "frames";
  bool rtc_lock = false;
  std::string layout = "env_major";
  std::string ppu = "line";
  std::string obs = "vec";
  std::string obs_format = "full";
  bool render = false;
  std::string arch;  // cuda: comma list; "" = NvrtcOptions' default (sm_80,sm_90)
};

struct EmitOptions : KernelOptions {
  std::string format = "source";
  std::string out_dir;
  std::string specialize;  // a profile file (gbx-synth profile): the ROM-specialized kernel
  std::string rom;         // the ROM the profile was made for
};

struct ProfileOptions {
  std::string rom;
  int frames = 600;
  std::string actions = "random";
  uint64_t seed = 1;
  std::string out;
};

struct ExportOptions {
  std::string out;
  std::string stages = "all";
  std::string devices = "cpu,cuda";
  std::string memory_models = "dmg";
  std::string run_modes = "frames";
  std::string arch;
};

struct CacheOptions {
  bool json = false;
  std::string prefix;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Error usage(std::string message) { return make_error(ErrorKind::Usage, std::move(message)); }

Result<std::vector<Stage>> parse_stages(const std::string& spec) {
  if (spec == "all") return all_stages();
  std::vector<Stage> out;
  for (const std::string& s : split_list(spec)) {
    auto st = parse_stage(s);
    if (!st)
      return usage("unknown stage '" + s +
                   "' (emulate_only, reward_only, obs_only, full_step, all)");
    out.push_back(*st);
  }
  if (out.empty()) return usage("no stage given");
  return out;
}

template <typename T, typename Parse>
Result<std::vector<T>> parse_enum_list(const std::string& spec, Parse parse, const char* what,
                                       const char* choices) {
  std::vector<T> out;
  for (const std::string& s : split_list(spec)) {
    auto v = parse(s);
    if (!v) return usage(std::string("unknown ") + what + " '" + s + "' (" + choices + ")");
    out.push_back(*v);
  }
  if (out.empty()) return usage(std::string("no ") + what + " given");
  return out;
}

Result<Device> parse_device_arg(const std::string& s) {
  auto d = parse_enum_list<Device>(s, parse_device, "device", "cpu, cuda");
  if (!d) return d.take_error();
  if (d->size() != 1) return usage("give one device (cpu or cuda)");
  return d->front();
}

Result<SynthParams> parse_params(Stage stage, const KernelOptions& o) {
  auto dev = parse_device_arg(o.device);
  if (!dev) return dev.take_error();
  auto mm = parse_memory_model(o.memory_model);
  if (!mm) return usage("unknown memory model '" + o.memory_model + "' (dmg, flat64k)");
  auto rm = parse_run_mode(o.run_mode);
  if (!rm) return usage("unknown run mode '" + o.run_mode + "' (frames, instructions)");
  auto obs = parse_obs_kind(o.obs);
  if (!obs) return usage("unknown obs kind '" + o.obs + "' (vec, pixels)");
  auto fmt = parse_obs_format(o.obs_format);
  if (!fmt) return usage("unknown obs format '" + o.obs_format + "' (full, half, packed)");
  auto layout = parse_mem_layout(o.layout);
  if (!layout) return usage("unknown --layout '" + o.layout + "' (env_major, interleaved)");
  SynthParams p;
  p.stage = stage;
  p.device = *dev;
  p.memory_model = *mm;
  p.run_mode = *rm;
  p.rtc_lock = o.rtc_lock;
  p.layout = *layout;
  p.ppu = parse_ppu_model(o.ppu).value_or(PpuModel::Line);  // checked by CLI11
  p.obs = *obs;
  p.obs_format = *fmt;
  p.render = o.render;
  return p;
}

Result<NvrtcOptions> parse_nvrtc_options(const std::string& arch) {
  NvrtcOptions opts;
  if (arch.empty()) return opts;
  auto archs = parse_cuda_arch_list(arch);
  if (!archs) return archs.take_error();
  opts.archs = std::move(*archs);
  return opts;
}

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

Result<TemplateBundle> load_bundle() {
  return TemplateBundle::load(TemplateBundle::default_root());
}

std::string usage_line(const ResourceUsage& u) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d regs, spill %d/%d B, stack %d B", u.registers,
                u.spill_stores_bytes, u.spill_loads_bytes, u.stack_frame_bytes);
  return buf;
}

// ---- emit ---------------------------------------------------------------------------------

int cmd_emit(const EmitOptions& o) {
  auto stage = parse_stage(o.stage);
  if (!stage) return tool::fail(usage("unknown stage '" + o.stage + "'"));
  auto params = parse_params(*stage, o);
  if (!params) return tool::fail(params.error());
  auto nv = parse_nvrtc_options(o.arch);
  if (!nv) return tool::fail(nv.error());
  if (!o.specialize.empty()) {
    if (o.rom.empty()) return tool::fail(usage("--specialize needs --rom (the profiled ROM)"));
    auto rom = load_rom(o.rom);
    if (!rom) return tool::fail(rom.error());
    auto plan = load_spec_plan(*rom, o.specialize);
    if (!plan) return tool::fail(plan.error());
    params->specialize = *plan;
  }
  auto bundle = load_bundle();
  if (!bundle) return tool::fail(bundle.error());
  std::string text, file;
  KernelCache cache;
  if (o.format == "source") {
    auto src = generate(*bundle, *params);
    if (!src) return tool::fail(src.error());
    text = src->source;
    file = src->file_name;
  } else if (o.format == "ll" || o.format == "asm") {
    if (params->device != Device::Cpu)
      return tool::fail(usage("--format " + o.format + " needs --device cpu"));
    auto k = build_cpu_kernel(*bundle, *params, cache, /*load=*/false);
    if (!k) return tool::fail(k.error());
    tool::print_warnings(k->build.warnings);
    file = o.format == "ll" ? "module.ll" : "module.s";
    auto r = k->build.entry.read(file);
    if (!r) return tool::fail(r.error());
    text = std::move(*r);
  } else if (o.format == "ptx") {
    if (params->device != Device::Cuda)
      return tool::fail(usage("--format ptx needs --device cuda"));
    auto k = build_cuda_kernel(*bundle, *params, cache, *nv);
    if (!k) return tool::fail(k.error());
    tool::print_warnings(k->build.warnings);
    file = "module.ptx";
    auto r = k->build.entry.read(file);
    if (!r) return tool::fail(r.error());
    text = std::move(*r);
  } else {
    return tool::fail(usage("unknown --format '" + o.format + "' (source, ll, asm, ptx)"));
  }
  if (o.out_dir.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  const auto path =
      std::filesystem::path(o.out_dir) / (std::string(to_string(params->stage)) + "_" + file);
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) return tool::fail(make_error(ErrorKind::Input, "cannot write " + path.string()));
  std::printf("wrote %s (%zu bytes)\n", path.string().c_str(), text.size());
  return 0;
}

// ---- profile ------------------------------------------------------------------------------

int cmd_profile(const ProfileOptions& o) {
  auto rom = load_rom(o.rom);
  if (!rom) return tool::fail(rom.error());
  ProfileRunOptions ro;
  ro.frames = o.frames;
  ro.actions = o.actions;
  ro.seed = o.seed;
  const auto t0 = Clock::now();
  auto prof = profile_rom(*rom, ro);
  if (!prof) return tool::fail(prof.error());
  const std::string text = spec_profile_to_json(*prof);
  auto plan = spec_plan_for(*rom, *prof);
  if (!plan) return tool::fail(plan.error());
  uint64_t hot = 0;
  for (const auto& b : (*plan)->blocks) hot += b.weight;
  std::fprintf(
      stderr,
      "profiled %d frames in %.0f ms: %llu instructions from ROM, %zu blocks; hot set "
      "%zu blocks covering %.1f%%\n",
      o.frames, ms_since(t0), (unsigned long long)prof->total_instructions, prof->blocks.size(),
      (*plan)->blocks.size(),
      prof->total_instructions ? 100.0 * (double)hot / (double)prof->total_instructions : 0.0);
  if (o.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream f(o.out, std::ios::binary);
  f << text;
  if (!f) return tool::fail(make_error(ErrorKind::Input, "cannot write " + o.out));
  return 0;
}

// ---- compile ------------------------------------------------------------------------------

int cmd_compile(const KernelOptions& o) {
  auto stages = parse_stages(o.stage);
  if (!stages) return tool::fail(stages.error());
  std::string arch = o.arch;
  if (arch.empty() && o.device == "cuda")
    if (auto own = device_target_arch()) arch = *own;
  auto nv = parse_nvrtc_options(arch);
  if (!nv) return tool::fail(nv.error());
  // Validate every option before the first (slow) compile.
  std::vector<SynthParams> all;
  for (Stage st : *stages) {
    auto params = parse_params(st, o);
    if (!params) return tool::fail(params.error());
    all.push_back(*params);
  }
  if (!o.arch.empty() && all.front().device != Device::Cuda)
    return tool::fail(usage("--arch needs --device cuda"));
  auto bundle = load_bundle();
  if (!bundle) return tool::fail(bundle.error());
  KernelCache cache;
  for (const SynthParams& p : all) {
    const auto t0 = Clock::now();
    const KernelBuild* b = nullptr;
    std::string extra;
    std::optional<CpuKernel> cpu;
    std::optional<CudaKernelBuild> cuda;
    if (p.device == Device::Cpu) {
      auto k = build_cpu_kernel(*bundle, p, cache, /*load=*/false);
      if (!k) return tool::fail(k.error());
      cpu = std::move(*k);
      b = &cpu->build;
    } else {
      auto k = build_cuda_kernel(*bundle, p, cache, *nv);
      if (!k) return tool::fail(k.error());
      cuda = std::move(*k);
      b = &cuda->build;
      for (const CudaArchInfo& a : cuda->archs) extra += "  " + a.arch + ": " + usage_line(a.usage);
    }
    tool::print_warnings(b->warnings);
    std::printf("%-13s %s  %-8s %9.1f ms%s\n", std::string(to_string(p.stage)).c_str(),
                b->key.c_str(), b->cached ? "cached" : "compiled", ms_since(t0), extra.c_str());
  }
  return 0;
}

// ---- cache --------------------------------------------------------------------------------

uint64_t entry_bytes(const CacheEntry& e) {
  uint64_t n = 0;
  if (auto f = e.meta.find("files"); f != e.meta.end() && f->is_object())
    for (const auto& rec : *f) n += rec.value("size", uint64_t{0});
  return n;
}

std::string meta_str(const json& meta, const char* a, const char* b = nullptr) {
  const json* j = &meta;
  for (const char* k : {a, b}) {
    if (!k) break;
    auto it = j->find(k);
    if (it == j->end()) return "?";
    j = &*it;
  }
  return j->is_string() ? j->get<std::string>() : j->dump();
}

std::string entry_target(const json& meta) {
  if (auto a = meta.find("archs"); a != meta.end() && a->is_array()) {
    std::string s;
    for (const auto& x : *a) s += (s.empty() ? "" : ",") + x.get<std::string>();
    return s;
  }
  return meta_str(meta, "device");
}

int cmd_cache_list(const CacheOptions& o) {
  KernelCache cache;
  const auto entries = cache.list();
  if (o.json) {
    json out = json::array();
    for (const CacheEntry& e : entries)
      out.push_back({{"key", e.key},
                     {"dir", e.dir.string()},
                     {"device", e.meta.value("device", "")},
                     {"synthesis", e.meta.value("synthesis", json::object())},
                     {"compiler_identity", e.meta.value("compiler_identity", "")},
                     {"archs", e.meta.value("archs", json::array())},
                     {"created", e.meta.value("created", "")},
                     {"bytes", entry_bytes(e)}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-16s  %-6s %-13s %-8s %-12s %-12s %10s  %s\n", "KEY", "DEVICE", "STAGE", "MEMORY",
              "RUN MODE", "TARGET", "BYTES", "CREATED");
  for (const CacheEntry& e : entries)
    std::printf("%-16s  %-6s %-13s %-8s %-12s %-12s %10llu  %s\n", e.key.substr(0, 16).c_str(),
                meta_str(e.meta, "device").c_str(), meta_str(e.meta, "synthesis", "stage").c_str(),
                meta_str(e.meta, "synthesis", "memory_model").c_str(),
                meta_str(e.meta, "synthesis", "run_mode").c_str(), entry_target(e.meta).c_str(),
                (unsigned long long)entry_bytes(e), meta_str(e.meta, "created").c_str());
  std::printf("%zu entries in %s\n", entries.size(), cache.root().string().c_str());
  return 0;
}

int cmd_cache_show(const CacheOptions& o) {
  KernelCache cache;
  auto e = cache.find_prefix(o.prefix);
  if (!e) return tool::fail(e.error());
  const json& m = e->meta;
  std::printf("key        %s\n", e->key.c_str());
  std::printf("dir        %s\n", e->dir.string().c_str());
  std::printf("synthesis  %s\n", meta_str(m, "synthesis", "canonical").c_str());
  std::printf("compiler   %s\n", meta_str(m, "compiler_identity").c_str());
  std::string opts;
  for (const auto& x : m.value("options", json::array())) opts += " " + x.get<std::string>();
  std::printf("options   %s\n", opts.c_str());
  std::printf("created    %s\n", meta_str(m, "created").c_str());
  std::printf("timings    %s\n", m.value("timings_ms", json::object()).dump().c_str());
  for (const CudaArchInfo& a : cuda_arch_info_from_meta(m))
    std::printf("%-10s %s, shared %d B, const %d B, cubin %zu B, compiled in %.0f ms\n",
                a.arch.c_str(), usage_line(a.usage).c_str(), a.usage.shared_bytes,
                a.usage.const_bytes, a.cubin_bytes, a.compile_ms);
  std::printf("files\n");
  if (auto f = m.find("files"); f != m.end() && f->is_object())
    for (auto it = f->begin(); it != f->end(); ++it)
      std::printf("  %s (%llu bytes)\n", (e->dir / it.key()).string().c_str(),
                  (unsigned long long)it.value().value("size", uint64_t{0}));
  std::printf("  %s\n", (e->dir / "meta.json").string().c_str());
  return 0;
}

// ---- table --------------------------------------------------------------------------------

int cmd_table(bool cb) {
  auto bundle = load_bundle();
  if (!bundle) return tool::fail(bundle.error());
  std::string grid = render_opcode_grid(*bundle, cb);
  std::fwrite(grid.data(), 1, grid.size(), stdout);
  return 0;
}

// ---- export -------------------------------------------------------------------------------

// One JSONL record: everything a dataset needs about one kernel variant, read from its cache
// entry (so exporting twice compiles nothing the second time).
Result<json> export_record(const KernelBuild& b, const std::string& ir_file,
                           const std::string& ir_format) {
  auto ir = b.entry.read(ir_file);
  if (!ir) return ir.take_error();
  const json& m = b.entry.meta;
  json rec = {{"schema", "gbx-kernel-export/v1"},
              {"key", b.key},
              {"device", m.value("device", "")},
              {"synthesis", m.value("synthesis", json::object())},
              {"engine_id", m.value("engine_id", "")},
              {"abi_version", m.value("abi_version", 0)},
              {"template_hash", m.value("template_hash", "")},
              {"compiler_identity", m.value("compiler_identity", "")},
              {"options", m.value("options", json::array())},
              {"source_file", b.source.file_name},
              {"source", b.source.source},
              {"ir_format", ir_format},
              {"ir", std::move(*ir)}};
  if (m.contains("resources")) {
    rec["archs"] = m.value("archs", json::array());
    rec["ptx_arch"] = m.value("ptx_arch", "");
    rec["resources"] = m["resources"];
  } else {
    json files = m.value("files", json::object());
    rec["resources"] = {{"object_bytes", files.value("module.o", json::object()).value("size", 0)},
                        {"asm_bytes", files.value("module.s", json::object()).value("size", 0)}};
  }
  return rec;
}

int cmd_export(const ExportOptions& o) {
  auto stages = parse_stages(o.stages);
  if (!stages) return tool::fail(stages.error());
  auto devices = parse_enum_list<Device>(o.devices, parse_device, "device", "cpu, cuda");
  if (!devices) return tool::fail(devices.error());
  auto mms = parse_enum_list<MemoryModel>(o.memory_models, parse_memory_model, "memory model",
                                          "dmg, flat64k");
  if (!mms) return tool::fail(mms.error());
  auto rms =
      parse_enum_list<RunMode>(o.run_modes, parse_run_mode, "run mode", "frames, instructions");
  if (!rms) return tool::fail(rms.error());
  auto nv = parse_nvrtc_options(o.arch);
  if (!nv) return tool::fail(nv.error());
  auto bundle = load_bundle();
  if (!bundle) return tool::fail(bundle.error());

  // Written beside the target and renamed, so a failed export leaves no partial file.
  const std::string tmp = o.out + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) return tool::fail(make_error(ErrorKind::Input, "cannot write " + tmp));
  KernelCache cache;
  int compiled = 0, cached = 0;
  auto emit = [&](const KernelBuild& b, const char* file, const char* format) -> Status {
    tool::print_warnings(b.warnings);
    (b.cached ? cached : compiled)++;
    auto rec = export_record(b, file, format);
    if (!rec) return rec.take_error();
    f << rec->dump() << '\n';
    return ok_status();
  };
  auto run = [&]() -> Status {
    for (MemoryModel mm : *mms)
      for (RunMode rm : *rms)
        for (Stage st : *stages)
          for (Device dev : *devices) {
            SynthParams p;
            p.stage = st;
            p.device = dev;
            p.memory_model = mm;
            p.run_mode = rm;
            if (dev == Device::Cpu) {
              auto k = build_cpu_kernel(*bundle, p, cache, /*load=*/false);
              if (!k) return k.take_error();
              if (Status s = emit(k->build, "module.ll", "llvm-ir"); !s) return s;
            } else {
              auto k = build_cuda_kernel(*bundle, p, cache, *nv);
              if (!k) return k.take_error();
              if (Status s = emit(k->build, "module.ptx", "ptx"); !s) return s;
            }
          }
    return ok_status();
  };
  Status st = run();
  f.close();
  std::error_code ec;
  if (!st || !f) {
    std::filesystem::remove(tmp, ec);
    return tool::fail(st ? make_error(ErrorKind::Input, "cannot write " + tmp) : st.error());
  }
  std::filesystem::rename(tmp, o.out, ec);
  if (ec)
    return tool::fail(make_error(ErrorKind::Input, "cannot rename " + tmp + ": " + ec.message()));
  std::printf("exported %d kernel variants to %s (%d compiled, %d cached)\n", compiled + cached,
              o.out.c_str(), compiled, cached);
  return 0;
}

void add_kernel_options(CLI::App* c, KernelOptions& o, bool stage_all) {
  c->add_option("--stage", o.stage,
                stage_all ? "emulate_only | reward_only | obs_only | full_step | all"
                          : "emulate_only | reward_only | obs_only | full_step")
      ->capture_default_str();
  c->add_option("--device", o.device, "cpu | cuda")->capture_default_str();
  c->add_option("--memory-model", o.memory_model, "dmg | flat64k")->capture_default_str();
  c->add_option("--run-mode", o.run_mode, "frames | instructions")->capture_default_str();
  c->add_flag("--rtc-lock", o.rtc_lock, "cartridge clocks (MBC3 RTC) never advance");
  c->add_option("--layout", o.layout,
                "per-env memory layout: env_major | interleaved (byte-interleaved across envs)")
      ->capture_default_str();
  c->add_option("--ppu", o.ppu,
                "pixel model: line (each line drawn at one dot) | fifo (the dot-by-dot pixel FIFO)")
      ->check(CLI::IsMember({"line", "fifo"}))
      ->capture_default_str();
  c->add_option("--obs", o.obs, "what obs stages write: vec (obs_v0) | pixels")
      ->capture_default_str();
  c->add_option("--obs-format", o.obs_format, "pixels: full | half | packed")
      ->capture_default_str();
  c->add_flag("--render", o.render, "draw the screen even if no output reads it");
  c->add_option("--arch", o.arch,
                "cuda: real archs, comma-separated (default: compile --device cuda targets "
                "the GPU present, else sm_80,sm_90)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gbx-synth: generate, compile and inspect GBX kernels"};
  app.require_subcommand(1);
  tool::Commands cmds;

  static EmitOptions emit;
  auto* e = app.add_subcommand("emit", "print (or write) a generated kernel or its compiled IR");
  add_kernel_options(e, emit, false);
  e->add_option("--format", emit.format, "source | ll | asm (cpu) | ptx (cuda)")
      ->capture_default_str();
  e->add_option("--out", emit.out_dir, "write into this directory instead of stdout");
  e->add_option("--specialize", emit.specialize,
                "profile file (gbx-synth profile): the ROM-specialized kernel");
  e->add_option("--rom", emit.rom, "with --specialize: the profiled ROM (builtin:NAME or path)");
  cmds.emplace_back(e, [] { return cmd_emit(emit); });

  static ProfileOptions prof;
  auto* pr = app.add_subcommand(
      "profile",
      "run a ROM on the profiling interpreter, write its blocks (JSON) for --specialize");
  pr->add_option("--rom", prof.rom, "builtin:NAME or a path")->required();
  pr->add_option("--frames", prof.frames, "frames to profile")->capture_default_str();
  pr->add_option("--actions", prof.actions, "random | none")->capture_default_str();
  pr->add_option("--seed", prof.seed, "seed of the random actions")->capture_default_str();
  pr->add_option("--out", prof.out, "output file (default: stdout)");
  cmds.emplace_back(pr, [] { return cmd_profile(prof); });

  static KernelOptions comp;
  auto* c = app.add_subcommand("compile", "compile kernels into the cache");
  add_kernel_options(c, comp, true);
  cmds.emplace_back(c, [] { return cmd_compile(comp); });

  static CacheOptions cache;
  auto* ca = app.add_subcommand("cache", "inspect or clear the kernel cache");
  ca->require_subcommand(1);
  auto* ls = ca->add_subcommand("list", "one line per entry");
  ls->add_flag("--json", cache.json, "JSON array instead of a table");
  cmds.emplace_back(ls, [] { return cmd_cache_list(cache); });
  auto* show = ca->add_subcommand("show", "an entry's meta.json summary and artifact paths");
  show->add_option("key", cache.prefix, "key or unique key prefix")->required();
  cmds.emplace_back(show, [] { return cmd_cache_show(cache); });
  auto* path = ca->add_subcommand("path", "print the cache root");
  cmds.emplace_back(path, [] {
    std::printf("%s\n", KernelCache().root().string().c_str());
    return 0;
  });
  auto* clear = ca->add_subcommand("clear", "delete every cached kernel");
  cmds.emplace_back(clear, [] {
    KernelCache kc;
    if (Status st = kc.clear(); !st) return tool::fail(st.error());
    std::printf("cleared %s\n", kc.root().string().c_str());
    return 0;
  });

  static bool cb = false;
  auto* t = app.add_subcommand("table", "print the opcode table as a 16x16 grid");
  t->add_flag("--cb", cb, "the CB-prefixed table");
  cmds.emplace_back(t, [] { return cmd_table(cb); });

  static ExportOptions exp;
  auto* x = app.add_subcommand("export", "write one JSON record per kernel variant (JSONL)");
  x->add_option("--out", exp.out, "output file (.jsonl)")->required();
  x->add_option("--stages", exp.stages, "all or a comma list")->capture_default_str();
  x->add_option("--devices", exp.devices, "comma list of cpu, cuda")->capture_default_str();
  x->add_option("--memory-model", exp.memory_models, "comma list of dmg, flat64k")
      ->capture_default_str();
  x->add_option("--run-mode", exp.run_modes, "comma list of frames, instructions")
      ->capture_default_str();
  x->add_option("--arch", exp.arch, "cuda archs, comma-separated (default sm_80,sm_90)");
  cmds.emplace_back(x, [] { return cmd_export(exp); });

  return tool::dispatch(app, cmds, argc, argv);
}
