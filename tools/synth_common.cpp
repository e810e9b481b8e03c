// gbx-synth: the helpers its subcommands share (synth_common.h).
#include "synth_common.h"

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
  p.ppu = parse_ppu_model(o.ppu).value_or(kDefaultPpu);  // checked by CLI11
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
  add_declared(c, kSynth, "rtc_lock", o.rtc_lock);
  add_declared(c, kSynth, "layout", o.layout);
  add_declared(c, kSynth, "ppu", o.ppu);
  add_declared(c, kSynth, "obs_kind", o.obs);
  add_declared(c, kSynth, "obs_format", o.obs_format);
  add_declared(c, kSynth, "render", o.render);
  c->add_option("--arch", o.arch,
                "cuda: real archs, comma-separated (default: compile --device cuda targets "
                "the GPU present, else sm_80,sm_90)");
}

}  // namespace gbx::tool
