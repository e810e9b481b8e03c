// gbx-synth export: one JSON record per kernel variant (JSONL), for datasets.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "synth_common.h"

namespace gbx::tool {
namespace {

struct ExportOptions {
  std::string out;
  std::string stages = "all";
  std::string devices = "cpu,cuda";
  std::string memory_models = "dmg";
  std::string run_modes = "frames";
  std::string arch;
};

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
  if (!stages) return fail(stages.error());
  auto devices = parse_enum_list<Device>(o.devices, parse_device, "device", "cpu, cuda");
  if (!devices) return fail(devices.error());
  auto mms = parse_enum_list<MemoryModel>(o.memory_models, parse_memory_model, "memory model",
                                          "dmg, flat64k");
  if (!mms) return fail(mms.error());
  auto rms =
      parse_enum_list<RunMode>(o.run_modes, parse_run_mode, "run mode", "frames, instructions");
  if (!rms) return fail(rms.error());
  auto nv = parse_nvrtc_options(o.arch);
  if (!nv) return fail(nv.error());
  auto bundle = load_bundle();
  if (!bundle) return fail(bundle.error());

  // Written beside the target and renamed, so a failed export leaves no partial file.
  const std::string tmp = o.out + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) return fail(make_error(ErrorKind::Input, "cannot write " + tmp));
  KernelCache cache;
  int compiled = 0, cached = 0;
  auto emit = [&](const KernelBuild& b, const char* file, const char* format) -> Status {
    print_warnings(b.warnings);
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
    return fail(st ? make_error(ErrorKind::Input, "cannot write " + tmp) : st.error());
  }
  std::filesystem::rename(tmp, o.out, ec);
  if (ec) return fail(make_error(ErrorKind::Input, "cannot rename " + tmp + ": " + ec.message()));
  std::printf("exported %d kernel variants to %s (%d compiled, %d cached)\n", compiled + cached,
              o.out.c_str(), compiled, cached);
  return 0;
}

}  // namespace

void register_export(CLI::App& app, Commands& cmds) {
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
}

}  // namespace gbx::tool
