#pragma once
// What the gbx-synth subcommands (tools/synth_*.cpp) share: the kernel-selecting options and
// their parsing, list parsing, the template bundle, resource-usage lines.
#include <CLI/CLI.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/engine/kernel_builder.h"
#include "gbx/runtime/backends/options.h"
#include "tool_common.h"

namespace gbx::tool {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Options every kernel-selecting subcommand shares.
struct KernelOptions {
  // The declared options (--rtc-lock, --layout, --ppu, --obs, --obs-format, --render), with
  // the declaration's defaults (add_declared sets them); --stage apart, as compile also takes
  // "all".
  OptionValues opts;
  std::string stage;
  std::string device = "cpu";
  std::string memory_model = "dmg";
  std::string run_mode = "frames";
  std::string arch;  // cuda: comma list; "" = NvrtcOptions' default (sm_80,sm_90)
};

// The --stage ... --arch options of KernelOptions (stage_all: --stage also takes "all").
void add_kernel_options(CLI::App* c, KernelOptions& o, bool stage_all);

std::vector<std::string> split_list(const std::string& s);
inline Error usage(std::string message) { return make_error(ErrorKind::Usage, std::move(message)); }
Result<std::vector<Stage>> parse_stages(const std::string& spec);

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

Result<SynthParams> parse_params(Stage stage, const KernelOptions& o);
Result<NvrtcOptions> parse_nvrtc_options(const std::string& arch);
Result<TemplateBundle> load_bundle();
std::string usage_line(const ResourceUsage& u);

}  // namespace gbx::tool
