// gbx-synth: the helpers its subcommands share (synth_common.h).
#include "synth_common.h"

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "tool_options.h"

namespace gbx::tool {

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

namespace {

Result<Device> parse_device_arg(const std::string& s) {
  auto d = parse_enum_list<Device>(s, parse_device, "device", "cpu, cuda");
  if (!d) return d.take_error();
  if (d->size() != 1) return usage("give one device (cpu or cuda)");
  return d->front();
}

}  // namespace

Result<SynthParams> parse_params(Stage stage, const KernelOptions& o) {
  auto dev = parse_device_arg(o.device);
  if (!dev) return dev.take_error();
  auto mm = parse_memory_model(o.memory_model);
  if (!mm) return usage("unknown memory model '" + o.memory_model + "' (dmg, flat64k)");
  auto rm = parse_run_mode(o.run_mode);
  if (!rm) return usage("unknown run mode '" + o.run_mode + "' (frames, instructions)");
  // The kernel a backend with these options would compile: BackendConfig from the declared
  // values (apply_options; no option of this surface reads the ROM, hence Rom{}), then its
  // synthesis parameters.
  BackendConfig cfg;
  if (auto st = apply_options(o.opts, kSynth, Rom{}, cfg); !st) return st.take_error();
  cfg.stage = stage;
  cfg.memory_model = *mm;
  cfg.run_mode = *rm;
  return synth_params_for(cfg, *dev, SynthParams{}.obs_dim);
}

Result<NvrtcOptions> parse_nvrtc_options(const std::string& arch) {
  NvrtcOptions opts;
  if (arch.empty()) return opts;
  auto archs = parse_cuda_arch_list(arch);
  if (!archs) return archs.take_error();
  opts.archs = std::move(*archs);
  return opts;
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

void add_kernel_options(CLI::App* c, KernelOptions& o, bool stage_all) {
  if (stage_all)
    add_declared(c, kSynth, "stage", o.stage, {"all"});
  else
    add_declared(c, kSynth, "stage", o.stage);
  c->add_option("--device", o.device, "cpu | cuda")->capture_default_str();
  c->add_option("--memory-model", o.memory_model, "dmg | flat64k")->capture_default_str();
  c->add_option("--run-mode", o.run_mode, "frames | instructions")->capture_default_str();
  add_declared(c, kSynth, "rtc_lock", o.opts);
  add_declared(c, kSynth, "layout", o.opts);
  add_declared(c, kSynth, "ppu", o.opts);
  add_declared(c, kSynth, "dispatch", o.opts);
  add_declared(c, kSynth, "warp_majority", o.opts);
  add_declared(c, kSynth, "max_registers", o.opts);
  add_declared(c, kSynth, "obs_kind", o.opts);
  add_declared(c, kSynth, "obs_format", o.opts);
  add_declared(c, kSynth, "render", o.opts);
  c->add_option("--arch", o.arch,
                "cuda: real archs, comma-separated (default: compile --device cuda targets "
                "the GPU present, else sm_80,sm_90)");
}

}  // namespace gbx::tool
