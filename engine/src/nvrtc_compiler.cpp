// NVRTC compile path. Stages, top to bottom: options -> one program per arch -> compile ->
// read log, CUBIN and PTX -> parse ptxas' report -> assemble the result.
#include "gbx/engine/nvrtc_compiler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "gbx/engine/nvrtc_library.h"

namespace gbx {
namespace {

// Only called once NvrtcLibrary::get() has succeeded (nvrtc_compile checks it first).
const NvrtcLibrary& lib() { return *NvrtcLibrary::get().value(); }

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

Error nvrtc_error(nvrtcResult r, const char* call, const char* file, int line) {
  return make_error(ErrorKind::Compile, std::string(call) +
                                            " failed: " + lib().nvrtcGetErrorString(r) + " (" +
                                            base_name(file) + ":" + std::to_string(line) + ")");
}

// For functions returning Result<T> or Status.
#define CHECK_NVRTC(call)                                          \
  do {                                                             \
    nvrtcResult gbx_nvrtc_r_ = (call);                             \
    if (gbx_nvrtc_r_ != NVRTC_SUCCESS)                             \
      return nvrtc_error(gbx_nvrtc_r_, #call, __FILE__, __LINE__); \
  } while (0)

struct ProgramDeleter {
  void operator()(_nvrtcProgram* p) const { lib().nvrtcDestroyProgram(&p); }
};
using ProgramPtr = std::unique_ptr<_nvrtcProgram, ProgramDeleter>;

// NVRTC sizes count a trailing NUL for text outputs; CUBIN sizes do not.
std::string strip_nul(std::string s) {
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

Result<std::string> program_log(nvrtcProgram prog) {
  size_t size = 0;
  CHECK_NVRTC(lib().nvrtcGetProgramLogSize(prog, &size));
  std::string log(size, '\0');
  if (size) CHECK_NVRTC(lib().nvrtcGetProgramLog(prog, log.data()));
  return strip_nul(std::move(log));
}

Result<std::string> program_ptx(nvrtcProgram prog) {
  size_t size = 0;
  CHECK_NVRTC(lib().nvrtcGetPTXSize(prog, &size));
  std::string ptx(size, '\0');
  if (size) CHECK_NVRTC(lib().nvrtcGetPTX(prog, ptx.data()));
  return strip_nul(std::move(ptx));
}

Result<std::string> program_cubin(nvrtcProgram prog) {
  size_t size = 0;
  CHECK_NVRTC(lib().nvrtcGetCUBINSize(prog, &size));
  std::string cubin(size, '\0');
  if (size) CHECK_NVRTC(lib().nvrtcGetCUBIN(prog, cubin.data()));
  return cubin;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

// The line a reader needs first: the first error, from the front end or ptxas; "" if none.
// "N errors detected in the compilation of" is a summary, not a diagnostic.
std::string first_error(std::string_view log) {
  for (std::string_view line : split_lines(log)) {
    line = trim(line);
    if (line.find("detected in the compilation of") != std::string_view::npos) continue;
    if (line.find("error:") != std::string_view::npos || starts_with(line, "ptxas error") ||
        starts_with(line, "ptxas fatal"))
      return std::string(line);
  }
  return {};
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// ---- ptxas log parsing --------------------------------------------------------------------

// Parses a leading decimal integer; advances `s` past it.
std::optional<long long> take_int(std::string_view& s) {
  size_t i = 0;
  long long v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
  if (i == 0) return std::nullopt;
  s.remove_prefix(i);
  return v;
}

// "N <what>" items such as "12 bytes stack frame"; returns N if `item` is "N <what>".
std::optional<int> item_value(std::string_view item, std::string_view what) {
  item = trim(item);
  auto n = take_int(item);
  if (!n) return std::nullopt;
  if (trim(item) != what) return std::nullopt;
  return static_cast<int>(*n);
}

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> items;
  while (true) {
    size_t c = s.find(',');
    items.push_back(trim(s.substr(0, c)));
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return items;
}

// Text between the first pair of single quotes.
std::string quoted(std::string_view s) {
  size_t a = s.find('\'');
  if (a == std::string_view::npos) return {};
  size_t b = s.find('\'', a + 1);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(a + 1, b - a - 1));
}

}  // namespace

const ResourceUsage* PtxasReport::find(std::string_view function) const {
  for (const ResourceUsage& f : functions)
    if (f.function == function) return &f;
  return nullptr;
}

PtxasReport parse_ptxas_log(std::string_view log) {
  PtxasReport report;
  // "Function properties for X" names the function its next "." line describes; "Compiling
  // entry function 'X'" names the function the next "Used" and "Compile time" lines describe.
  std::string props_for, compiling;
  auto get = [&report](const std::string& name) -> ResourceUsage& {
    for (ResourceUsage& f : report.functions)
      if (f.function == name) return f;
    report.functions.push_back(ResourceUsage{});
    report.functions.back().function = name;
    return report.functions.back();
  };

  for (std::string_view line : split_lines(log)) {
    line = trim(line);
    if (!starts_with(line, "ptxas")) continue;
    size_t colon = line.find(':');
    std::string_view body = trim(line.substr(colon == std::string_view::npos ? 5 : colon + 1));

    if (starts_with(line, "ptxas info")) {
      if (starts_with(body, "Compiling entry function")) {
        compiling = quoted(body);
        get(compiling).entry = true;
      } else if (starts_with(body, "Function properties for")) {
        props_for = std::string(trim(body.substr(std::strlen("Function properties for"))));
        get(props_for);
      } else if (starts_with(body, "Used") && !compiling.empty()) {
        ResourceUsage& f = get(compiling);
        f.barriers = f.shared_bytes = f.const_bytes = f.local_bytes = 0;
        f.cumulative_stack_bytes = 0;
        for (std::string_view item : split_commas(body)) {
          std::string_view rest = item;
          if (starts_with(rest, "Used ")) {
            rest.remove_prefix(5);
            if (auto n = item_value(rest, "registers")) f.registers = *n;
          } else if (starts_with(rest, "used ")) {
            rest.remove_prefix(5);
            if (auto n = item_value(rest, "barriers")) f.barriers = *n;
          } else if (auto n = item_value(rest, "bytes smem")) {
            f.shared_bytes = *n;
          } else if (auto n = item_value(rest, "bytes cmem[0]")) {
            f.const_bytes = *n;
          } else if (auto n = item_value(rest, "bytes lmem")) {
            f.local_bytes = *n;
          } else if (auto n = item_value(rest, "bytes cumulative stack size")) {
            f.cumulative_stack_bytes = *n;
          }
        }
      } else if (starts_with(body, "Compile time =") && !compiling.empty()) {
        std::string num(trim(body.substr(std::strlen("Compile time ="))));
        get(compiling).ptxas_ms = std::strtod(num.c_str(), nullptr);
      } else if (body.find("bytes gmem") != std::string_view::npos) {
        for (std::string_view item : split_commas(body))
          if (auto n = item_value(item, "bytes gmem")) report.global_bytes = *n;
      }
    } else if (starts_with(body, ".") && !props_for.empty()) {
      // "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
      ResourceUsage& f = get(props_for);
      body.remove_prefix(1);
      for (std::string_view item : split_commas(body)) {
        if (auto n = item_value(item, "bytes stack frame")) f.stack_frame_bytes = *n;
        if (auto n = item_value(item, "bytes spill stores")) f.spill_stores_bytes = *n;
        if (auto n = item_value(item, "bytes spill loads")) f.spill_loads_bytes = *n;
      }
    }
  }
  return report;
}

ResourceUsage summarize_entries(const PtxasReport& report) {
  ResourceUsage sum;
  int entries = 0;
  for (const ResourceUsage& f : report.functions) {
    if (!f.entry) continue;
    if (entries++ == 0) sum.function = f.function;
    sum.entry = true;
    sum.registers = std::max(sum.registers, f.registers);
    sum.barriers = std::max(sum.barriers, f.barriers);
    sum.stack_frame_bytes = std::max(sum.stack_frame_bytes, f.stack_frame_bytes);
    sum.spill_stores_bytes = std::max(sum.spill_stores_bytes, f.spill_stores_bytes);
    sum.spill_loads_bytes = std::max(sum.spill_loads_bytes, f.spill_loads_bytes);
    sum.cumulative_stack_bytes = std::max(sum.cumulative_stack_bytes, f.cumulative_stack_bytes);
    sum.shared_bytes = std::max(sum.shared_bytes, f.shared_bytes);
    sum.const_bytes = std::max(sum.const_bytes, f.const_bytes);
    sum.local_bytes = std::max(sum.local_bytes, f.local_bytes);
    sum.ptxas_ms = std::max(sum.ptxas_ms, f.ptxas_ms);
  }
  if (entries > 1) sum.function.clear();
  return sum;
}

const NvrtcArchOutput* NvrtcResult::find(std::string_view arch) const {
  for (const NvrtcArchOutput& out : cubins)
    if (out.arch == arch) return &out;
  return nullptr;
}

bool nvrtc_fast_compile_from_env() {
  const char* v = std::getenv("GBX_CUDA_FAST_COMPILE");
  return v && *v && std::string(v) != "0";
}

std::vector<std::string> nvrtc_shared_options(const NvrtcOptions& options) {
  std::vector<std::string> opts = {"--std=c++17", "-default-device", "--restrict"};
  if (options.line_info) opts.push_back("-lineinfo");
  if (options.fast_compile) opts.push_back("--Ofast-compile=max");
  // ptxas' resource report lands in the program log, which is where we read it from.
  opts.push_back("--ptxas-options=-v");
  // NVRTC >= 12.9 keeps a cache of its own (the driver's, so only where one is installed): a
  // hit skips ptxas and comes back without the -v report, i.e. without the kernel's resource
  // usage. Seen on an H100 host: a stage another process had compiled came back in ~100 ms
  // with registers unknown. GBX caches kernels itself, so NVRTC's is switched off.
  if (nvrtc_has_no_cache_option()) opts.push_back("--no-cache");
  opts.insert(opts.end(), options.extra.begin(), options.extra.end());
  return opts;
}

std::vector<std::string> nvrtc_options_for(const NvrtcOptions& options, const std::string& arch) {
  std::vector<std::string> opts = nvrtc_shared_options(options);
  opts.push_back("--gpu-architecture=" + arch);
  return opts;
}

bool nvrtc_has_no_cache_option() {
  if (!NvrtcLibrary::get()) return false;
  int major = 0, minor = 0;
  if (lib().nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return false;
  return major > 12 || (major == 12 && minor >= 9);
}

std::string nvrtc_version() {
  if (!NvrtcLibrary::get()) return "unavailable";
  int major = 0, minor = 0;
  if (lib().nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_supported_archs() {
  if (!NvrtcLibrary::get()) return {};
  int n = 0;
  if (lib().nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(static_cast<size_t>(n));
  if (lib().nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  std::sort(archs.begin(), archs.end());
  std::vector<std::string> out;
  for (int a : archs) out.push_back("sm_" + std::to_string(a));
  return out;
}

int arch_number(std::string_view arch) {
  if (starts_with(arch, "sm_"))
    arch.remove_prefix(3);
  else if (starts_with(arch, "compute_"))
    arch.remove_prefix(8);
  else
    return -1;
  auto n = take_int(arch);
  // Arch-specific ("sm_90a") and family ("sm_100f") variants share the number.
  if (!n || !(arch.empty() || arch == "a" || arch == "f")) return -1;
  return static_cast<int>(*n);
}

Result<CudaTarget> select_cuda_target(int sm, const std::vector<std::string>& supported) {
  int best = -1;
  std::string best_arch;
  for (const std::string& arch : supported) {
    int n = arch_number(arch);
    if (n == sm) return CudaTarget{arch, true};
    if (n >= 0 && n < sm && n > best) {
      best = n;
      best_arch = arch;
    }
  }
  // No NVRTC at all is not a device that is too old: say what is missing.
  if (supported.empty())
    if (auto nv = NvrtcLibrary::get(); !nv) return nv.take_error();
  if (best < 0)
    return make_error(ErrorKind::NoDevice, "no CUDA device: sm_" + std::to_string(sm) +
                                               " is older than every arch NVRTC " +
                                               nvrtc_version() + " supports");
  return CudaTarget{best_arch, false};
}

namespace {

struct Compiled {
  ProgramPtr prog;
  nvrtcResult result = NVRTC_SUCCESS;
  std::string log;
  double ms = 0;
};

Result<Compiled> run_nvrtc(const std::string& source, const std::string& file_name,
                           const std::vector<std::string>& options) {
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  Compiled c;
  auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram raw = nullptr;
  CHECK_NVRTC(
      lib().nvrtcCreateProgram(&raw, source.c_str(), file_name.c_str(), 0, nullptr, nullptr));
  c.prog.reset(raw);
  c.result = lib().nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());
  c.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto log = program_log(raw);
  if (!log) return log.take_error();
  c.log = std::move(*log);
  return c;
}

Result<NvrtcArchOutput> compile_one(const std::string& source, const std::string& file_name,
                                    const NvrtcOptions& options, const std::string& arch) {
  NvrtcArchOutput out;
  out.arch = arch;
  out.options = nvrtc_options_for(options, arch);
  auto compiled = run_nvrtc(source, file_name, out.options);
  if (!compiled) return compiled.take_error();
  out.log = compiled->log;
  out.compile_ms = compiled->ms;
  nvrtcProgram prog = compiled->prog.get();

  if (compiled->result != NVRTC_SUCCESS) {
    std::string detail = "nvrtc " + join(out.options, " ") + "\n" + out.log;
    std::string first = first_error(out.log);
    if (first.empty()) {
      // NVRTC 13.0 drops a ptxas error from the log when ptxas runs verbose; the same
      // compile without -v says what went wrong.
      std::vector<std::string> quiet;
      for (const std::string& o : out.options)
        if (o != "--ptxas-options=-v") quiet.push_back(o);
      auto again = run_nvrtc(source, file_name, quiet);
      if (again && again->result != NVRTC_SUCCESS) {
        first = first_error(again->log);
        detail += "\nnvrtc " + join(quiet, " ") + "\n" + again->log;
      }
    }
    if (first.empty())
      first =
          "NVRTC compile for " + arch + " failed: " + lib().nvrtcGetErrorString(compiled->result);
    return make_error(ErrorKind::Compile, first, detail);
  }

  auto cubin = program_cubin(prog);
  if (!cubin) return cubin.take_error();
  out.cubin = std::move(*cubin);
  auto ptx = program_ptx(prog);
  if (!ptx) return ptx.take_error();
  out.ptx = std::move(*ptx);
  if (out.cubin.empty())
    return make_error(ErrorKind::Compile, "NVRTC produced no CUBIN for " + arch);

  out.ptxas = parse_ptxas_log(out.log);
  out.usage = summarize_entries(out.ptxas);
  return out;
}

}  // namespace

Result<NvrtcResult> nvrtc_compile(const std::string& source, const std::string& file_name,
                                  const NvrtcOptions& options) {
  if (auto nv = NvrtcLibrary::get(); !nv) return nv.take_error();
  if (options.archs.empty())
    return make_error(ErrorKind::Usage, "nvrtc_compile: no target arch given");
  const std::vector<std::string> supported = nvrtc_supported_archs();
  for (const std::string& arch : options.archs) {
    // A virtual arch (compute_XX) has no CUBIN; ask for the real one, PTX comes with it.
    if (std::find(supported.begin(), supported.end(), arch) == supported.end())
      return make_error(ErrorKind::Usage, "NVRTC " + nvrtc_version() + " cannot compile for " +
                                              arch + " (supported: " + join(supported, " ") + ")");
  }

  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::optional<Result<NvrtcArchOutput>>> outs(options.archs.size());
  auto run = [&](size_t i) { outs[i] = compile_one(source, file_name, options, options.archs[i]); };
  if (options.parallel && options.archs.size() > 1) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < options.archs.size(); ++i) threads.emplace_back(run, i);
    for (std::thread& t : threads) t.join();
  } else {
    for (size_t i = 0; i < options.archs.size(); ++i) run(i);
  }

  NvrtcResult result;
  result.options_used = nvrtc_shared_options(options);
  int lowest = -1;
  for (size_t i = 0; i < outs.size(); ++i) {
    Result<NvrtcArchOutput>& out = *outs[i];
    if (!out) return out.take_error();  // the first failing arch, in the order given
    NvrtcArchOutput& o = *out;
    result.options_used.push_back(o.options.back());
    result.log += "== nvrtc " + join(o.options, " ") + "\n" + o.log;
    if (!result.log.empty() && result.log.back() != '\n') result.log += '\n';
    int n = arch_number(o.arch);
    if (lowest < 0 || n < lowest) {
      lowest = n;
      result.ptx = o.ptx;
      result.ptx_arch = "compute_" + std::to_string(n);
    }
    result.cubins.push_back(std::move(o));
  }
  result.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace gbx
