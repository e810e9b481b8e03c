// gbx._native: the thin layer between Python and the C++ runtime. It owns one backend and its
// output buffers and hands them to numpy as views (no copy on the cpu backend); the
// Gymnasium API, action codecs and episode bookkeeping are plain Python (python/gbx/). This
// file is the module: its functions, its exceptions, and the Backend class, whose members the
// native_*.cpp files define and bind by topic (native.h).
#include "native.h"

#include <nanobind/stl/optional.h>

#include "gbx/engine/cache.h"
#include "gbx/engine/generator.h"
#include "gbx/engine/user_expr.h"
#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/reference/mgba_backend.h"

namespace gbx::py {

namespace {

// The runtime's argument checks are shared with the CLI and name its flags; from Python each
// is the parameter it comes from (the declaration's flag -> name). "--frames" alone is the
// backends' frames-per-step check.
const std::vector<std::pair<std::string, std::string>>& parameter_names() {
  static const auto names = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const gbx::OptionDecl& d : gbx::option_decls())
      if (!d.flag.empty() && d.on(gbx::kNative)) out.emplace_back(d.flag, d.name);
    out.emplace_back("--frames", "frames_per_step");
    return out;
  }();
  return names;
}

bool flag_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

}  // namespace

std::string python_names(const std::string& msg) {
  std::string out;
  for (size_t i = 0; i < msg.size();) {
    bool renamed = false;
    if (msg.compare(i, 2, "--") == 0 && (i == 0 || !flag_char(msg[i - 1]))) {
      for (const auto& [flag, name] : parameter_names()) {
        const size_t n = flag.size();
        if (msg.compare(i, n, flag) == 0 && (i + n == msg.size() || !flag_char(msg[i + n]))) {
          out += name;
          i += n;
          renamed = true;
          break;
        }
      }
    }
    if (!renamed) out += msg[i++];
  }
  return out;
}

[[noreturn]] void raise_out_of_memory(int num_envs, const char* what) {
  const std::string msg = "cannot allocate memory for num_envs=" + std::to_string(num_envs) + " (" +
                          what + "): lower num_envs";
  PyErr_SetString(PyExc_MemoryError, msg.c_str());
  throw nb::python_error();
}

[[noreturn]] void raise(const gbx::Error& e) {
  switch (e.kind) {
    case gbx::ErrorKind::Usage:
    case gbx::ErrorKind::Input:
      throw nb::value_error(python_names(e.message).c_str());
    case gbx::ErrorKind::Compile: {
      // The first error line, then the compiler log (a user expression's errors are a few
      // lines; the log repeats the first one).
      std::string msg = e.message;
      std::string d = e.detail;
      if (d.compare(0, msg.size(), msg) == 0) d = d.substr(msg.size());
      while (!d.empty() && d[0] == '\n') d.erase(0, 1);
      if (d.size() > 4000) d = d.substr(0, 4000) + "...";
      if (!d.empty()) msg += "\n" + d;
      throw CompileError(msg);
    }
    case gbx::ErrorKind::NoDevice:
      throw NoDeviceError(e.message);
    default:
      throw std::runtime_error(e.message);
  }
}

}  // namespace gbx::py

using namespace nanobind::literals;
namespace nb = nanobind;
using gbx::py::CompileError;
using gbx::py::NoDeviceError;

NB_MODULE(_native, m) {
  m.doc() = "GBX native layer: backends, their output buffers, kernel compilation";
  nb::exception<CompileError>(m, "CompileError", PyExc_ValueError);
  nb::exception<NoDeviceError>(m, "NoDeviceError", PyExc_RuntimeError);

  m.def(
      "set_template_root", [](const std::string& p) { gbx::TemplateBundle::set_default_root(p); },
      "path"_a, "Templates the kernels are generated from (the package's own copy).");
  m.def("mgba_built_in", &gbx::mgba_built_in,
        "Whether this build has the mgba device (built where libmgba-dev was installed).");
  m.def("take_cache_warnings", &gbx::take_cache_warnings,
        "Kernel cache warnings since the last call (a refused cache directory, a rejected or "
        "corrupt entry), oldest first; gbx.VecEnv turns them into gbx.CacheWarning.");
  m.def(
      "check_expression",
      [](const std::string& text, const std::string& what, int num_tracked, bool allow_tracked,
         int num_hooks, std::optional<std::vector<std::string>> only) {
        gbx::UserExprView view = gbx::py::unwrap(gbx::user_expr_view(
            gbx::py::unwrap(gbx::TemplateBundle::load(gbx::TemplateBundle::default_root()))));
        if (only) view = gbx::restrict_view(view, *only);
        (void)gbx::py::unwrap(
            gbx::prepare_user_expr(text, what, view, num_tracked, allow_tracked, num_hooks));
      },
      "text"_a, "what"_a = "expr", "num_tracked"_a = 0, "allow_tracked"_a = false,
      "num_hooks"_a = 0, "only"_a = nb::none(),
      "Checks an expression of the reward language with the kernel's checker "
      "(engine/src/user_expr.cpp); a ValueError names its line and column. only: the names "
      "allowed (the host evaluator's), else every name of the templates' view.");
  m.def("template_root", []() { return gbx::TemplateBundle::default_root().string(); });
  m.attr("ABI_VERSION") = GBX_ABI_VERSION;
  m.attr("USER_TRACK_MAX") = GBX_USER_TRACK_MAX;
  m.attr("SEEN_CAPACITY_MAX") = gbx::kSeenCapacityMax;
  m.attr("MAX_HOOKS") = gbx::kMaxHooks;
  // The option declaration (gbx/runtime/backends/options.h) as JSON: gbx.options reads it.
  m.attr("OPTIONS_JSON") = gbx::options_json();

  gbx::py::NativeClass c(m, "Backend");
  gbx::py::bind_env(c);
  gbx::py::bind_states(c);
  gbx::py::bind_cuda(c);
  gbx::py::bind_pyboy_compat(m);
}
