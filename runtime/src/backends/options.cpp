// The declaration of every option (gbx/runtime/backends/options.h): one entry each, and what is
// derived from it here (checks, BackendConfig, the docs' tables).
#include "gbx/runtime/backends/options.h"

#include <climits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/specialize.h"

namespace gbx {
namespace {

constexpr uint32_t kKernelCli = kRun | kBench | kVerify | kSynth;  // the kernel's own choices

// Builder for one entry: opt(...) then the parts an option has.
struct Opt : OptionDecl {
  Opt(const char* n, const char* f, OptionType t, const char* def, uint32_t s, const char* py,
      const char* d) {
    name = n, flag = f, type = t, default_value = def, surfaces_mask = s, py_type = py, doc = d;
  }
  Opt&& one_of(std::vector<std::string> c) && { return choices = std::move(c), std::move(*this); }
  Opt&& range(int64_t lo, int64_t hi) && { return min = lo, max = hi, std::move(*this); }
  Opt&& synth() && { return synthesis = true, std::move(*this); }
  Opt&& except(uint32_t s, const char* def, const char* why, const char* d = nullptr) && {
    variants.push_back({s, def, d, why});
    return std::move(*this);
  }
  Opt&& namesake(uint32_t s, const char* why) && {
    variants.push_back({s, nullptr, nullptr, why, true});
    return std::move(*this);
  }
  Opt&& into(Status (*f)(const OptionValue&, const Rom&, BackendConfig&)) && {
    return apply = f, std::move(*this);
  }
};

const std::string& str(const OptionValue& v) { return std::get<std::string>(v); }
int i32(const OptionValue& v) { return (int)std::get<int64_t>(v); }

#define GBX_INTO(field, expr) \
  [](const OptionValue& v, const Rom&, BackendConfig& c) { return c.field = (expr), ok_status(); }

std::vector<OptionDecl> declare() {
  using T = OptionType;
  const uint32_t kFps = kRun | kBench | kBenchStages | kVerify | kDivergence | kProfile;
  std::vector<Opt> o;
  o.push_back(Opt("rom", "", T::Any, nullptr, kPython, "str | bytes",
                  "a .gb path, builtin:NAME or the ROM's contents (bytes)"));
  o.push_back(Opt("num_envs", "--envs", T::Int, nullptr, kRun | kProfile | kNative | kPython, "int",
                  "emulated Game Boys stepped together")
                  .range(1, INT_MAX)
                  .namesake(kBench | kBenchStages, "a list of env counts, each timed")
                  .except(kRun | kProfile | kNative, "1",
                          "a CLI run or a native Backend is one env "
                          "unless asked; a VecEnv names its count")
                  .into(GBX_INTO(num_envs, i32(v))));
  o.push_back(Opt("device", "", T::String, "'cpu'", kPython, "str",
                  "cpu (the JIT-compiled kernel on all cores), cuda:N, or mgba (the reference)"));
  o.push_back(Opt("backend", "--backend", T::String, "'cpu'", kRun | kBench | kNative, "str",
                  "cpu | cuda | mgba (mgba: the reference emulator, one core per env)")
                  .one_of({"cpu", "cuda", "mgba"})
                  .namesake(kBenchStages | kTestrom, "cpu | cuda: the kernel backends only"));
  o.push_back(Opt("frames_per_step", "--frames-per-step", T::Int, "1", kFps | kNative | kPython,
                  "int", "emulated frames (70224 T-cycles each) per step")
                  .range(1, INT_MAX)
                  .except(kPython | kDivergence | kBenchStages, "24",
                          "an agent acts every 24 frames (the games' step), and the divergence "
                          "meter and bench-stages measure that step; the other commands and "
                          "the native layer step frame by frame")
                  .into(GBX_INTO(frames_per_step, i32(v))));
  o.push_back(Opt("release_after_frames", "--release-after-frames", T::Int, "-1",
                  kRun | kBench | kDivergence | kProfile | kNative | kPython, "int",
                  "a step's buttons are released after this many frames (-1: held all step)")
                  .range(-1, INT_MAX)
                  .except(kPython | kDivergence, "8",
                          "an agent's press is a tap of 8 frames, as a player's, and the "
                          "divergence meter measures that step; the other commands hold "
                          "buttons for the whole step")
                  .into(GBX_INTO(release_after_frames, i32(v))));
  o.push_back(Opt("threads", "--threads", T::Int, "0",
                  kRun | kBench | kBenchStages | kNative | kPython, "int",
                  "cpu/mgba worker threads (0: all cores)")
                  .range(0, INT_MAX)
                  .into(GBX_INTO(threads, i32(v))));
  o.push_back(Opt("device_index", "--device-index", T::Int, "0", kRun | kBench | kNative, "int",
                  "cuda device")
                  .range(0, INT_MAX)
                  .into(GBX_INTO(device_index, i32(v))));
  o.push_back(Opt("block_size", "--block-size", T::Int, "0", kRun | kBench, "int",
                  "cuda threads per block, a multiple of 32 (0: chosen from the device)")
                  .range(0, INT_MAX)
                  .into(GBX_INTO(block_size, i32(v))));
  o.push_back(Opt("stage", "--stage", T::String, "'full_step'",
                  kRun | kBench | kVerify | kDivergence | kSynth | kNative, "str",
                  "the kernel's stage: emulate_only | reward_only | obs_only | full_step")
                  .one_of({"emulate_only", "reward_only", "obs_only", "full_step"})
                  .synth()
                  .except(kDivergence, "'emulate_only'",
                          "the divergence meter measures the emulator's own branches")
                  .into(GBX_INTO(stage, *parse_stage(str(v)))));
  o.push_back(Opt("actions", "", T::Any, "'pokemon8'", kPython, "str | Sequence[str]",
                  "action codec (gbx.actions): pokemon8, buttons8, multibinary or button labels"));
  o.push_back(Opt("obs", "", T::Any, "'pixels'", kPython, "Any",
                  "observation spec (gbx.observations): pixels, vec or a dict"));
  o.push_back(Opt("obs_kind", "--obs", T::String, "'vec'", kRun | kSynth | kNative, "str",
                  "what the obs stages write: vec (obs_v0) | pixels")
                  .one_of({"vec", "pixels"})
                  .synth()
                  .into(GBX_INTO(obs, *parse_obs_kind(str(v)))));
  o.push_back(Opt("obs_format", "--obs-format", T::String, "'full'", kRun | kSynth | kNative, "str",
                  "pixels layout: full | half | packed")
                  .one_of({"full", "half", "packed"})
                  .synth()
                  .into(GBX_INTO(obs_format, *parse_obs_format(str(v)))));
  o.push_back(Opt("gather", "", T::IntList, "()", kNative, "Sequence[int]",
                  "bus addresses the RAM-gather epilog copies out per env")
                  .range(0, 0xFFFF)
                  .into([](const OptionValue& v, const Rom&, BackendConfig& c) {
                    const auto& a = std::get<std::vector<int64_t>>(v);
                    c.gather_addrs.assign(a.begin(), a.end());
                    return ok_status();
                  }));
  o.push_back(Opt("render", "--render", T::Bool, "False", kSynth | kNative, "bool",
                  "draw the screen every frame even if no output reads it")
                  .synth()
                  .into(GBX_INTO(render, std::get<bool>(v))));
  o.push_back(Opt("reward", "", T::String, "None", kNative | kPython, "str | None",
                  "reward expression compiled into the kernel (docs/guide/rewards.md)")
                  .synth()
                  .except(kNative, "''", "the native layer spells 'no expression' as ''")
                  .into(GBX_INTO(reward_expr, str(v))));
  o.push_back(Opt("done", "", T::String, "None", kNative | kPython, "str | None",
                  "episode-end expression compiled into the kernel")
                  .synth()
                  .except(kNative, "''", "the native layer spells 'no expression' as ''")
                  .into(GBX_INTO(done_expr, str(v))));
  o.push_back(Opt("track", "", T::StringList, "()", kNative | kPython, "Sequence[str]",
                  "values kept per step, read as val(i) and prev(i) in expressions")
                  .synth()
                  .into(GBX_INTO(track, std::get<std::vector<std::string>>(v))));
  o.push_back(Opt("seen_capacity", "", T::Int, "4096", kNative | kPython, "int",
                  "keys the per-env seen(key) set holds exactly (when an expression uses it)")
                  .range(1, kSeenCapacityMax)
                  .synth()
                  .into(GBX_INTO(seen_capacity, (uint32_t)std::get<int64_t>(v))));
  o.push_back(Opt("hooks", "", T::Hooks, "()", kNative | kPython,
                  "Sequence[int | str | tuple[int, int]]",
                  "addresses whose instruction fetches are counted per env and step (hit(i))")
                  .synth()
                  .into(GBX_INTO(hooks, std::get<std::vector<HookAddr>>(v))));
  o.push_back(Opt("seed", "", T::Any, "None", kPython, "int | None",
                  "the envs' random streams (no-op frames, sticky actions)"));
  o.push_back(Opt("max_episode_frames", "", T::Any, "None", kPython, "int | None",
                  "an episode is truncated after this many frames"));
  o.push_back(Opt("noop_max", "", T::Int, "0", kPython, "int",
                  "a reset env runs a random number of no-op frames in [0, noop_max]"));
  o.push_back(Opt("sticky_actions", "", T::Float, "0.0", kPython, "float",
                  "probability that an env repeats its previous action for a step"));
  o.push_back(Opt("copy", "", T::Bool, "True", kPython, "bool",
                  "fresh arrays from every step (False: views of the backend's buffers)"));
  o.push_back(Opt("env_offset", "", T::Int, "0", kPython, "int",
                  "these envs are envs env_offset.. of a larger (sharded) vector env"));
  o.push_back(Opt("render_mode", "", T::Any, "None", kPython, "str | None",
                  "rgb_array: the kernel draws every frame and render() returns env 0's screen"));
  o.push_back(
      Opt("frame_stack", "", T::Int, "1", kPython, "int", "the last k observations stacked"));
  o.push_back(Opt("pixel_values", "", T::String, "'shades'", kPython, "str",
                  "shades (0 white .. 3 black) or luminance (PyBoy's greys)")
                  .one_of({"shades", "luminance"}));
  o.push_back(Opt("reset_states", "", T::Any, "None", kPython, "Sequence[bytes] | None",
                  "a pool of save states every reset draws from"));
  o.push_back(Opt("rtc_lock", "--rtc-lock", T::Bool, "False", kKernelCli, "bool",
                  "cartridge clocks (MBC3 RTC) never advance")
                  .synth()
                  .into(GBX_INTO(rtc_lock, std::get<bool>(v))));
  o.push_back(Opt("layout", "--layout", T::String, "'env_major'", kKernelCli, "str",
                  "per-env memory layout: env_major | interleaved (byte-interleaved across envs)")
                  .one_of({"env_major", "interleaved"})
                  .synth()
                  .into(GBX_INTO(layout, *parse_mem_layout(str(v)))));
  o.push_back(Opt("ppu", "--ppu", T::String, "'fifo'",
                  kKernelCli | kBenchStages | kTestrom | kNative | kPython, "str",
                  "pixel model: line (each line drawn at one dot) | fifo (the dot-by-dot pixel "
                  "FIFO); docs/machine/ppu-fifo.md")
                  .one_of({"line", "fifo"})
                  .synth()
                  .except(kBenchStages, nullptr, "",
                          "pixel model of variants without @fifo / @line: line | fifo")
                  .into(GBX_INTO(ppu, *parse_ppu_model(str(v)))));
  o.push_back(Opt("dispatch", "--dispatch", T::String, "'switch'",
                  kKernelCli | kTestrom | kDivergence, "str",
                  "opcode dispatch: switch (a case per opcode) | uniform (the register-operand "
                  "opcodes share one path, operands from a table: fewer distinct paths per GPU "
                  "warp); docs/internals/divergence.md")
                  .one_of({"switch", "uniform"})
                  .synth()
                  .into(GBX_INTO(dispatch, *parse_dispatch(str(v)))));
  o.push_back(Opt("warp_majority", "--warp-majority", T::Int, "0",
                  kKernelCli | kTestrom | kDivergence, "int",
                  "cuda: warp-level scheduling: 0 = every running lane steps together (SIMT); "
                  "B = only the lanes whose next opcode/block is the warp's most common step, a "
                  "lane waits at most B iterations; docs/internals/divergence.md")
                  .range(0, 65535)
                  .synth()
                  .into(GBX_INTO(warp_majority, (int)std::get<int64_t>(v))));
  o.push_back(Opt("max_registers", "--max-registers", T::Int, "0",
                  kKernelCli | kTestrom | kDivergence, "int",
                  "cuda: registers a thread may use in the kernels (__maxnreg__; fewer give "
                  "more warps an SM, spills cost local memory): 0 = ptxas chooses; "
                  "docs/gpu.md \"Registers and occupancy\"")
                  .range(0, 255)
                  .synth()
                  .into(GBX_INTO(max_registers, (int)std::get<int64_t>(v))));
  o.push_back(Opt("tiered_start", "--tiered-start", T::Bool, "False", kRun | kNative | kPython,
                  "bool",
                  "cuda: a kernel not in the cache starts as a quick compile while the optimized "
                  "one compiles in the background (swapped in between steps)")
                  .except(kRun, "True",
                          "a CLI run shows the quick start; Python waits unless asked, so a "
                          "training run's first steps are at full speed")
                  .into(GBX_INTO(tiered_start, std::get<bool>(v))));
  o.push_back(
      Opt("specialize", "--specialize", T::String, "'off'",
          kRun | kBench | kDivergence | kNative | kPython, "str",
          "ROM-specialized kernel: off | profile:FILE (gbx-synth profile) | auto[:N] "
          "(profile N frames, compile in the background, swap in)")
          .synth()
          .except(kDivergence, nullptr, "", "off or profile:FILE (a ROM-specialized kernel)")
          .namesake(kBenchStages | kSynth,
                    "the kernel of bench-stages' @spec variants; emit's profile file")
          .into([](const OptionValue& v, const Rom& rom, BackendConfig& c) {
            return apply_specialize_option(str(v), rom, c);
          }));
  return std::vector<OptionDecl>(o.begin(), o.end());
}

#undef GBX_INTO

std::string quoted_list(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

const std::vector<SurfaceInfo>& surfaces() {
  static const std::vector<SurfaceInfo> s = {
      {kRun, "run", {"gbx-run run"}},
      {kBench, "bench", {"gbx-run bench"}},
      {kBenchStages, "bench-stages", {"gbx-run bench-stages"}},
      {kVerify, "verify", {"gbx-run verify"}},
      {kTestrom, "testrom", {"gbx-run testrom"}},
      {kDivergence, "divergence", {"gbx-run divergence"}},
      {kSynth, "synth", {"gbx-synth emit", "gbx-synth compile"}},
      {kProfile, "profile", {"gbx-synth profile"}},
      {kNative, "native", {}},
      {kPython, "python", {}},
  };
  return s;
}

const char* to_string(OptionType t) {
  switch (t) {
    case OptionType::Int:
      return "int";
    case OptionType::Float:
      return "float";
    case OptionType::Bool:
      return "bool";
    case OptionType::String:
      return "str";
    case OptionType::StringList:
      return "list[str]";
    case OptionType::IntList:
      return "list[int]";
    case OptionType::Hooks:
      return "hooks";
    case OptionType::Any:
      return "any";
  }
  return "?";
}

const char* OptionDecl::default_on(Surface s) const {
  for (const auto& v : variants)
    if ((v.surfaces & s) && v.default_value) return v.default_value;
  return default_value;
}

bool OptionDecl::namesake_on(Surface s) const {
  for (const auto& v : variants)
    if ((v.surfaces & s) && v.namesake) return true;
  return false;
}

const std::string OptionDecl::doc_on(Surface s) const {
  for (const auto& v : variants)
    if ((v.surfaces & s) && v.doc) return v.doc;
  return doc;
}

const std::vector<OptionDecl>& option_decls() {
  static const std::vector<OptionDecl> decls = declare();
  return decls;
}

const OptionDecl* find_option(std::string_view name) {
  for (const auto& d : option_decls())
    if (d.name == name) return &d;
  return nullptr;
}

std::string cli_default(const char* python_default) {
  if (!python_default) return "";
  std::string s = python_default;
  if (s == "None" || s == "()" || s == "''") return "";
  if (s == "True") return "true";
  if (s == "False") return "false";
  if (s.size() >= 2 && s.front() == '\'' && s.back() == '\'') return s.substr(1, s.size() - 2);
  return s;
}

std::optional<OptionValue> default_on(const OptionDecl& d, Surface s) {
  const char* text = d.default_on(s);
  if (!text) return std::nullopt;
  const std::string t = cli_default(text);
  switch (d.type) {
    case OptionType::Int:
      return OptionValue{(int64_t)std::stoll(t)};
    case OptionType::Float:
      return OptionValue{std::stod(t)};
    case OptionType::Bool:
      return OptionValue{t == "true"};
    case OptionType::String:
      return OptionValue{t};
    case OptionType::StringList:
      return OptionValue{std::vector<std::string>()};
    case OptionType::IntList:
      return OptionValue{std::vector<int64_t>()};
    case OptionType::Hooks:
      return OptionValue{std::vector<HookAddr>()};
    case OptionType::Any:
      return std::nullopt;
  }
  return std::nullopt;
}

Status check_option(const OptionDecl& d, const OptionValue& v, const std::string& name) {
  if (!d.choices.empty() && std::holds_alternative<std::string>(v)) {
    const std::string& s = str(v);
    for (const auto& c : d.choices)
      if (c == s) return ok_status();
    return make_error(ErrorKind::Usage,
                      "unknown " + name + " '" + s + "' (" + quoted_list(d.choices, ", ") + ")");
  }
  auto in_range = [&](int64_t x) { return (!d.min || x >= *d.min) && (!d.max || x <= *d.max); };
  auto range_error = [&](int64_t x) {
    return make_error(ErrorKind::Usage, name + " must be " + std::to_string(*d.min) + ".." +
                                            std::to_string(*d.max) + " (got " + std::to_string(x) +
                                            ")");
  };
  // Open-ended ranges (counts: at least 0 or 1) are the runtime's to check, with the messages
  // the CLI and Python share; bounded ones are checked here.
  if (d.max && *d.max == INT_MAX) {
    if (const auto* x = std::get_if<int64_t>(&v); x && *x > INT_MAX)
      return make_error(ErrorKind::Usage, name + " must be at most " + std::to_string(INT_MAX) +
                                              " (got " + std::to_string(*x) + ")");
    return ok_status();
  }
  if (!d.max) return ok_status();
  if (const auto* x = std::get_if<int64_t>(&v); x && !in_range(*x)) return range_error(*x);
  if (const auto* xs = std::get_if<std::vector<int64_t>>(&v))
    for (int64_t x : *xs)
      if (!in_range(x)) return range_error(x);
  if (const auto* hs = std::get_if<std::vector<HookAddr>>(&v)) {
    if (hs->size() > kMaxHooks)
      return make_error(ErrorKind::Usage, name + ": at most " + std::to_string(kMaxHooks) +
                                              " hooks (got " + std::to_string(hs->size()) + ")");
  }
  return ok_status();
}

Status apply_options(const OptionValues& values, Surface surface, const Rom& rom,
                     BackendConfig& cfg) {
  for (const auto& [name, v] : values) {
    const OptionDecl* d = find_option(name);
    if (!d || !d->on(surface)) return make_error(ErrorKind::Usage, "unknown option '" + name + "'");
  }
  for (const OptionDecl& d : option_decls()) {
    auto it = values.find(d.name);
    if (it == values.end() || !d.apply) continue;
    const std::string shown = (surface & (kNative | kPython)) ? d.name : d.flag;
    if (auto st = check_option(d, it->second, shown); !st) return st;
    if (auto st = d.apply(it->second, rom, cfg); !st) return st;
  }
  return ok_status();
}

OptionValues with_defaults(OptionValues values, Surface s) {
  for (const OptionDecl& d : option_decls()) {
    if (!d.on(s) || d.namesake_on(s) || values.count(d.name)) continue;
    if (auto def = default_on(d, s)) values[d.name] = std::move(*def);
  }
  return values;
}

int64_t option_int(const OptionValues& values, const std::string& name) {
  return std::get<int64_t>(values.at(name));
}
bool option_bool(const OptionValues& values, const std::string& name) {
  return std::get<bool>(values.at(name));
}
const std::string& option_text(const OptionValues& values, const std::string& name) {
  return std::get<std::string>(values.at(name));
}

namespace {

std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string code(const std::string& s) { return s.empty() ? "" : "`" + s + "`"; }

std::string allowed(const OptionDecl& d) {
  if (!d.choices.empty()) return quoted_list(d.choices, ", ");
  if (d.min && d.max) {
    if (*d.max == INT_MAX) return ">= " + std::to_string(*d.min);
    return std::to_string(*d.min) + ".." + std::to_string(*d.max);
  }
  return "";
}

}  // namespace

std::string options_markdown() {
  std::ostringstream md;
  md << "# Options\n\n"
     << "Generated by `gbx-synth options` from the declaration in "
        "`runtime/src/backends/options.cpp` (each option once: name, type, default, allowed "
        "values, surfaces, doc) when the docs are built (`scripts/docs.sh`). *Synthesis*: the "
        "option is a synthesis parameter, part of the kernel's stage hash.\n\n";
  md << "## Command line\n\n| flag | subcommands (default) | allowed | synthesis | what |\n"
     << "| --- | --- | --- | --- | --- |\n";
  for (const OptionDecl& d : option_decls()) {
    if (d.flag.empty() || !(d.surfaces_mask & kAllCli)) continue;
    std::string on;
    for (const SurfaceInfo& s : surfaces()) {
      if (s.commands.empty() || !d.on(s.surface)) continue;
      std::string def = cli_default(d.default_on(s.surface));
      if (d.type == OptionType::Bool) def = def == "true" ? "on" : "";  // on|off, or a flag
      on += (on.empty() ? "" : ", ") + std::string(s.name) + (def.empty() ? "" : " (" + def + ")");
    }
    md << "| " << code(d.flag) << " | " << on << " | " << md_cell(allowed(d)) << " | "
       << (d.synthesis ? "yes" : "") << " | " << md_cell(d.doc) << " |\n";
  }
  md << "\n## Python\n\n`gbx.VecEnv(rom, num_envs, ...)` keywords; `gbx._native.Backend(rom, "
        "rom_bytes, **options)` takes the *native* ones.\n\n"
     << "| keyword | type | VecEnv default | native default | allowed | synthesis | what |\n"
     << "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const OptionDecl& d : option_decls()) {
    if (!d.on(kPython) && !d.on(kNative)) continue;
    auto def = [&](Surface s) -> std::string {
      if (!d.on(s)) return "";
      const char* v = d.default_on(s);
      return v ? code(v) : "required";
    };
    md << "| " << code(d.name) << " | " << md_cell(code(d.py_type)) << " | " << def(kPython)
       << " | " << def(kNative) << " | " << md_cell(allowed(d)) << " | "
       << (d.synthesis ? "yes" : "") << " | " << md_cell(d.doc) << " |\n";
  }
  md << "\n## Defaults that differ by surface, on purpose\n\n";
  for (const OptionDecl& d : option_decls())
    for (const SurfaceVariant& v : d.variants) {
      if (!v.default_value) continue;
      std::string on;
      for (const SurfaceInfo& s : surfaces())
        if (v.surfaces & s.surface) on += (on.empty() ? "" : ", ") + std::string(s.name);
      md << "- " << code(d.name) << ": " << code(v.default_value) << " on " << on << " (else "
         << (d.default_value ? code(d.default_value) : std::string("required")) << "): " << v.why
         << ".\n";
    }
  return md.str();
}

std::string options_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const OptionDecl& d : option_decls()) {
    nlohmann::json j = {
        {"name", d.name},       {"flag", d.flag},           {"type", to_string(d.type)},
        {"py_type", d.py_type}, {"synthesis", d.synthesis}, {"doc", d.doc},
        {"choices", d.choices}};
    j["default"] = d.default_value ? nlohmann::json(d.default_value) : nlohmann::json();
    if (d.min) j["min"] = *d.min;
    if (d.max) j["max"] = *d.max;
    nlohmann::json on = nlohmann::json::object();
    for (const SurfaceInfo& s : surfaces()) {
      if (!d.on(s.surface)) continue;
      const char* def = d.default_on(s.surface);
      on[s.name] = {{"default", def ? nlohmann::json(def) : nlohmann::json()},
                    {"doc", d.doc_on(s.surface)}};
    }
    j["surfaces"] = on;
    nlohmann::json why = nlohmann::json::array();
    for (const auto& v : d.variants)
      if (v.default_value) why.push_back(v.why);
    j["why_defaults_differ"] = why;
    out.push_back(j);
  }
  return out.dump(1);
}

}  // namespace gbx
