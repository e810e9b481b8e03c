// gbx-synth emit: print (or write) a generated kernel, its LLVM IR, assembly or PTX.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "gbx/runtime/backends/specialize.h"
#include "synth_common.h"

namespace gbx::tool {
namespace {

struct EmitOptions : KernelOptions {
  std::string format = "source";
  std::string out_dir;
  std::string specialize;  // a profile file (gbx-synth profile): the ROM-specialized kernel
  std::string rom;         // the ROM the profile was made for
};

int cmd_emit(const EmitOptions& o) {
  auto stage = parse_stage(o.stage);
  if (!stage) return fail(usage("unknown stage '" + o.stage + "'"));
  auto params = parse_params(*stage, o);
  if (!params) return fail(params.error());
  auto nv = parse_nvrtc_options(o.arch);
  if (!nv) return fail(nv.error());
  if (!o.specialize.empty()) {
    if (o.rom.empty()) return fail(usage("--specialize needs --rom (the profiled ROM)"));
    auto rom = load_rom(o.rom);
    if (!rom) return fail(rom.error());
    auto plan = load_spec_plan(*rom, o.specialize);
    if (!plan) return fail(plan.error());
    params->specialize = *plan;
  }
  auto bundle = load_bundle();
  if (!bundle) return fail(bundle.error());
  std::string text, file;
  KernelCache cache;
  if (o.format == "source") {
    auto src = generate(*bundle, *params);
    if (!src) return fail(src.error());
    text = src->source;
    file = src->file_name;
  } else if (o.format == "ll" || o.format == "asm") {
    if (params->device != Device::Cpu)
      return fail(usage("--format " + o.format + " needs --device cpu"));
    auto k = build_cpu_kernel(*bundle, *params, cache, /*load=*/false);
    if (!k) return fail(k.error());
    print_warnings(k->build.warnings);
    file = o.format == "ll" ? "module.ll" : "module.s";
    auto r = k->build.entry.read(file);
    if (!r) return fail(r.error());
    text = std::move(*r);
  } else if (o.format == "ptx") {
    if (params->device != Device::Cuda) return fail(usage("--format ptx needs --device cuda"));
    auto k = build_cuda_kernel(*bundle, *params, cache, *nv);
    if (!k) return fail(k.error());
    print_warnings(k->build.warnings);
    file = "module.ptx";
    auto r = k->build.entry.read(file);
    if (!r) return fail(r.error());
    text = std::move(*r);
  } else {
    return fail(usage("unknown --format '" + o.format + "' (source, ll, asm, ptx)"));
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
  if (!f) return fail(make_error(ErrorKind::Input, "cannot write " + path.string()));
  std::printf("wrote %s (%zu bytes)\n", path.string().c_str(), text.size());
  return 0;
}

}  // namespace

void register_emit(CLI::App& app, Commands& cmds) {
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
}

}  // namespace gbx::tool
