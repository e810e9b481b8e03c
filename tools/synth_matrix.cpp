// gbx-synth matrix: every generated kernel source and its cache key over the synthesis matrix
// (stages x devices x observation formats x pixel models x layouts x specialization, and the
// user-expression variants), written into one folder: `diff -r` of two such folders shows
// whether a change altered any kernel or key (scripts/synth-matrix.sh).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "gbx/engine/orc_compiler.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "synth_common.h"

namespace gbx::tool {
namespace {

struct MatrixOptions {
  std::string out;
  std::string rom = "builtin:ALU_LOOP";  // the ROM profiled for the specialized variants
  int profile_frames = 60;
};

// The observation variants: obs_v0, and the screen in each pixels format.
struct ObsVariant {
  const char* name;
  ObsKind kind;
  ObsFormat format;
};
constexpr ObsVariant kObs[] = {{"vec", ObsKind::Vec, ObsFormat::Full},
                               {"full", ObsKind::Pixels, ObsFormat::Full},
                               {"half", ObsKind::Pixels, ObsFormat::Half},
                               {"packed", ObsKind::Pixels, ObsFormat::Packed}};

// User-expression variants (full_step only): none, a reward, done + track, seen, hooks.
void set_expressions(BackendConfig& cfg, int variant) {
  if (variant == 1) cfg.reward_expr = "val(0) - prev(0)", cfg.track = {"ram(0xC000)"};
  if (variant == 2) cfg.done_expr = "ram(0xC001) == 3", cfg.track = {"ram16(0xC002)"};
  if (variant == 3) cfg.reward_expr = "seen(ram(0xC000)) ? 1 : 0", cfg.seen_capacity = 4096;
  if (variant == 4) cfg.reward_expr = "hit(0) + hit(1)", cfg.hooks = {{-1, 0x0150}, {1, 0x4000}};
}

int cmd_matrix(const MatrixOptions& o) {
  auto bundle = load_bundle();
  if (!bundle) return fail(bundle.error());
  auto rom = load_rom(o.rom);
  if (!rom) return fail(rom.error());
  ProfileRunOptions pro;
  pro.frames = o.profile_frames;
  pro.actions = "none";
  auto prof = profile_rom(*rom, pro);
  if (!prof) return fail(prof.error());
  auto plan = spec_plan_for(*rom, *prof);
  if (!plan) return fail(plan.error());
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  std::ofstream keys(std::filesystem::path(o.out) / "keys.tsv");
  const NvrtcOptions nv;
  int n = 0;
  for (Device dev : {Device::Cpu, Device::Cuda})
    for (Stage st : all_stages())
      for (const ObsVariant& obs : kObs)
        for (PpuModel ppu : {PpuModel::Line, PpuModel::Fifo})
          for (MemLayout layout : {MemLayout::EnvMajor, MemLayout::Interleaved})
            for (int spec = 0; spec < 2; ++spec)
              for (int expr = 0; expr < (st == Stage::FullStep ? 5 : 1); ++expr) {
                BackendConfig cfg;
                cfg.stage = st;
                cfg.obs = obs.kind;
                cfg.obs_format = obs.format;
                cfg.ppu = ppu;
                cfg.layout = layout;
                if (spec) cfg.specialize = *plan;
                set_expressions(cfg, expr);
                const SynthParams p = synth_params_for(cfg, dev, 32);
                auto src = generate(*bundle, p);
                if (!src) return fail(src.error());
                const CacheKeyInputs in =
                    dev == Device::Cpu
                        ? make_key_inputs(*bundle, *src, cpu_compiler_identity(),
                                          cpu_compile_args({}), cpu_compiler_environment())
                        : make_key_inputs(*bundle, *src, cuda_compiler_identity(nv),
                                          cuda_key_options(nv), nvrtc_compiler_environment());
                const std::string name = std::string(to_string(dev)) + "-" +
                                         std::string(to_string(st)) + "-" + obs.name + "-" +
                                         std::string(to_string(ppu)) + "-" +
                                         std::string(to_string(layout)) + (spec ? "-spec" : "") +
                                         "-e" + std::to_string(expr);
                std::ofstream(std::filesystem::path(o.out) / (name + ".src")) << src->source;
                keys << name << '\t' << compute_cache_key(in) << '\t' << p.canonical() << '\n';
                ++n;
              }
  if (!keys) return fail(make_error(ErrorKind::Input, "cannot write " + o.out));
  std::printf("wrote %d kernels and their keys into %s\n", n, o.out.c_str());
  return 0;
}

}  // namespace

void register_matrix(CLI::App& app, Commands& cmds) {
  static MatrixOptions m;
  auto* c = app.add_subcommand(
      "matrix", "write every generated kernel source and cache key of the synthesis matrix");
  c->add_option("--out", m.out, "output folder")->required();
  c->add_option("--rom", m.rom, "ROM profiled for the specialized variants")->capture_default_str();
  c->add_option("--profile-frames", m.profile_frames, "frames profiled")->capture_default_str();
  cmds.emplace_back(c, [] { return cmd_matrix(m); });
}

}  // namespace gbx::tool
