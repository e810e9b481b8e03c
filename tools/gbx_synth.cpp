// gbx-synth: emit generated kernels, compile them into the cache, inspect the cache.
// Thin: options in plain structs, all logic in the engine.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "gbx/engine/kernel_builder.h"
#include "tool_common.h"

namespace {

using namespace gbx;

struct EmitOptions {
  std::string stage = "full_step";
  std::string device = "cpu";
  std::string memory_model = "dmg";
  std::string run_mode = "frames";
  std::string format = "source";
  std::string out_dir;
};

struct CompileOptions {
  std::string stage = "full_step";
  std::string device = "cpu";
  std::string memory_model = "dmg";
  std::string run_mode = "frames";
};

Result<SynthParams> parse_params(const std::string& stage, const std::string& device,
                                 const std::string& mm, const std::string& rm) {
  SynthParams p;
  auto st = parse_stage(stage);
  if (!st) return make_error(ErrorKind::Usage, "unknown stage '" + stage +
                                                   "' (emulate_only, reward_only, obs_only, full_step)");
  auto dev = parse_device(device);
  if (!dev) return make_error(ErrorKind::Usage, "unknown device '" + device + "' (cpu, cuda)");
  auto m = parse_memory_model(mm);
  if (!m) return make_error(ErrorKind::Usage, "unknown memory model '" + mm + "' (dmg, flat64k)");
  auto r = parse_run_mode(rm);
  if (!r) return make_error(ErrorKind::Usage, "unknown run mode '" + rm + "' (frames, instructions)");
  p.stage = *st;
  p.device = *dev;
  p.memory_model = *m;
  p.run_mode = *r;
  return p;
}

int cmd_emit(const EmitOptions& o) {
  auto params = parse_params(o.stage, o.device, o.memory_model, o.run_mode);
  if (!params) return tool::fail(params.error());
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return tool::fail(bundle.error());
  std::string text;
  std::string file;
  if (o.format == "source") {
    auto src = generate(bundle.value(), params.value());
    if (!src) return tool::fail(src.error());
    text = src->source;
    file = src->file_name;
  } else if (o.format == "ll" || o.format == "asm") {
    if (params->device != Device::Cpu)
      return tool::fail(make_error(ErrorKind::Usage, "--format " + o.format + " needs --device cpu"));
    KernelCache cache;
    auto k = build_cpu_kernel(bundle.value(), params.value(), cache, /*load=*/false);
    if (!k) return tool::fail(k.error());
    tool::print_warnings(k->build.warnings);
    file = o.format == "ll" ? "module.ll" : "module.s";
    auto r = k->build.entry.read(file);
    if (!r) return tool::fail(r.error());
    text = r.value();
  } else {
    return tool::fail(make_error(ErrorKind::Usage, "unknown --format '" + o.format +
                                                       "' (source, ll, asm, ptx)"));
  }
  if (o.out_dir.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  const auto path = std::filesystem::path(o.out_dir) /
                    (std::string(to_string(params->stage)) + "_" + file);
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) return tool::fail(make_error(ErrorKind::Input, "cannot write " + path.string()));
  std::printf("wrote %s (%zu bytes)\n", path.string().c_str(), text.size());
  return 0;
}

int cmd_compile(const CompileOptions& o) {
  std::vector<Stage> stages;
  if (o.stage == "all") {
    stages = all_stages();
  } else {
    auto st = parse_stage(o.stage);
    if (!st) return tool::fail(make_error(ErrorKind::Usage, "unknown stage '" + o.stage + "'"));
    stages = {*st};
  }
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return tool::fail(bundle.error());
  KernelCache cache;
  for (Stage st : stages) {
    auto params = parse_params(std::string(to_string(st)), o.device, o.memory_model, o.run_mode);
    if (!params) return tool::fail(params.error());
    if (params->device != Device::Cpu)
      return tool::fail(make_error(ErrorKind::Usage, "device cuda: not built yet"));
    auto k = build_cpu_kernel(bundle.value(), params.value(), cache);
    if (!k) return tool::fail(k.error());
    tool::print_warnings(k->build.warnings);
    const auto& b = k->build;
    std::printf("%-13s %s  %-8s %8.1f ms\n", std::string(to_string(st)).c_str(), b.key.c_str(),
                b.cached ? "cached" : "compiled", b.cached ? b.load_ms : b.compile_ms + b.load_ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gbx-synth: generate, compile and inspect GBX kernels"};
  app.require_subcommand(1);

  EmitOptions emit;
  auto* e = app.add_subcommand("emit", "print (or write) the generated kernel source");
  e->add_option("--stage", emit.stage, "emulate_only | reward_only | obs_only | full_step");
  e->add_option("--device", emit.device, "cpu | cuda");
  e->add_option("--memory-model", emit.memory_model, "dmg | flat64k");
  e->add_option("--run-mode", emit.run_mode, "frames | instructions");
  e->add_option("--format", emit.format, "source | ll | asm | ptx");
  e->add_option("--out", emit.out_dir, "write into this directory instead of stdout");

  CompileOptions comp;
  auto* c = app.add_subcommand("compile", "compile kernels into the cache");
  c->add_option("--stage", comp.stage, "a stage or all");
  c->add_option("--device", comp.device, "cpu | cuda");
  c->add_option("--memory-model", comp.memory_model, "dmg | flat64k");
  c->add_option("--run-mode", comp.run_mode, "frames | instructions");

  CLI11_PARSE(app, argc, argv);
  if (*e) return cmd_emit(emit);
  if (*c) return cmd_compile(comp);
  return 2;
}
