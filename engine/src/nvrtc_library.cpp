// Finds and loads libnvrtc at run time. Stages: candidate places (nvrtc_library.h lists the
// order) -> dlopen -> skip toolkit copies if asked -> resolve every entry point -> first that
// loads wins; otherwise one "CUDA unavailable" error listing what was tried.
#include "gbx/engine/nvrtc_library.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <stdio.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

namespace gbx {
namespace {

namespace fs = std::filesystem;

// Newest first: a program compiled by a newer NVRTC still runs on any driver that supports
// its PTX ISA, and newer NVRTC knows newer archs.
const char* const kSonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
// Inside site-packages: the CUDA 13 wheel (nvidia-cuda-nvrtc 13.x), the CUDA 12 wheel
// (nvidia-cuda-nvrtc-cu12).
const char* const kWheelLibs[] = {"nvidia/cu13/lib/libnvrtc.so.13",
                                  "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool env_flag(const char* name) {
  std::string v = env(name);
  return !v.empty() && v != "0";
}

std::vector<std::string> toolkit_roots() {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (std::string v = env(var); !v.empty()) roots.push_back(v);
  roots.push_back("/usr/local/cuda");
  glob_t g{};
  if (glob("/usr/local/cuda-*", 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) roots.push_back(g.gl_pathv[i]);
  globfree(&g);
  roots.push_back("/opt/cuda");
  return roots;
}

std::string real_path(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::canonical(p, ec);
  return ec ? p : r.string();
}

bool inside_toolkit(const std::string& file) {
  const std::string f = real_path(file);
  for (const std::string& root : toolkit_roots()) {
    std::string r = real_path(root);
    if (!r.empty() && r.back() != '/') r += '/';
    if (f.compare(0, r.size(), r) == 0) return true;
  }
  return false;
}

std::vector<std::string> site_packages_under(const std::string& prefix) {
  std::vector<std::string> out;
  if (prefix.empty()) return out;
  glob_t g{};
  const std::string pattern = prefix + "/lib/python3*/site-packages";
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

// site-packages of the python3 on PATH: where `pip install nvidia-cuda-nvrtc` put the wheel
// when no virtual environment is active.
std::vector<std::string> python_site_packages() {
  std::string python = env("GBX_PYTHON");
  if (python.empty()) python = "python3";
  std::string quoted = "'";
  for (char c : python) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string cmd = quoted +
                          " -c 'import site; print(\"\\n\".join(site.getsitepackages() + "
                          "[site.getusersitepackages()]))' 2>/dev/null";
  std::vector<std::string> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::string text;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  pclose(p);
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    if (nl > start) out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

std::string loaded_file(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return fallback;
}

// NVRTC dlopen()s its builtins library by soname at its first compile. Wheels from 13.1 on
// find it beside themselves (RPATH $ORIGIN); 13.0's (nvidia-cuda-nvrtc 13.0.x) carry no
// RPATH, so without LD_LIBRARY_PATH a compile failed with "failed to open
// libnvrtc-builtins.so.13.0". Loading the builtins from the same directory first makes that
// dlopen find them already loaded (glibc matches a bare name against loaded sonames). The
// ".alt" variants are NVRTC's own alternates, loaded by it when it wants them.
void preload_builtins(const std::string& nvrtc_file) {
  std::error_code ec;
  const fs::path dir = fs::path(nvrtc_file).parent_path();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("libnvrtc-builtins.so.", 0) == 0 && name.find(".alt.") == std::string::npos)
      dlopen(e.path().c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open, as NVRTC is
  }
}

struct Attempt {
  std::optional<NvrtcLibrary*> lib;  // set: loaded
  std::string why;                   // otherwise: one line
};

}  // namespace

// NvrtcLibrary's friend: only loaders construct one.
struct NvrtcLibraryLoader {
  static Attempt try_load(const std::string& library, const std::string& origin,
                          bool skip_toolkit) {
    dlerror();
    void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      return {std::nullopt, library + ": " + (e ? e : "cannot be loaded")};
    }
    const std::string file = loaded_file(h, library);
    if (skip_toolkit && inside_toolkit(file)) {
      dlclose(h);
      return {std::nullopt, file + ": skipped (GBX_NVRTC_NO_TOOLKIT)"};
    }
    preload_builtins(file);
    auto* lib = new NvrtcLibrary();
    lib->path_ = file;
    lib->origin_ = origin;
    std::string missing;
#define GBX_NVRTC_RESOLVE(name)                                  \
  lib->name = reinterpret_cast<gbx_##name##_t>(dlsym(h, #name)); \
  if (!lib->name && missing.empty()) missing = #name;
    GBX_NVRTC_FUNCTIONS(GBX_NVRTC_RESOLVE)
#undef GBX_NVRTC_RESOLVE
    if (!missing.empty()) {
      delete lib;
      dlclose(h);
      return {std::nullopt, file + ": has no " + missing + " (NVRTC older than 11.2?)"};
    }
    // The handle stays open for the life of the process: NVRTC is never unloaded.
    return {lib, {}};
  }
};

std::vector<std::pair<std::string, std::string>> nvrtc_search_candidates() {
  std::vector<std::pair<std::string, std::string>> c;
  if (std::string only = env("GBX_NVRTC_LIBRARY"); !only.empty()) {
    c.emplace_back(only, "GBX_NVRTC_LIBRARY");
    return c;
  }
  const bool skip_toolkit = env_flag("GBX_NVRTC_NO_TOOLKIT");
  std::error_code ec;
  if (!skip_toolkit) {
    for (const std::string& root : toolkit_roots()) {
      if (root.find("/usr/local/cuda-") == 0) continue;  // reached through /usr/local/cuda
      for (const char* dir : {"/lib64/", "/lib/"})
        for (const char* so : kSonames)
          if (fs::exists(root + dir + so, ec)) c.emplace_back(root + dir + so, "CUDA toolkit");
    }
  }
  auto wheels_in = [&](const std::vector<std::string>& sites, const char* origin) {
    for (const std::string& site : sites)
      for (const char* lib : kWheelLibs)
        if (fs::exists(site + "/" + lib, ec)) c.emplace_back(site + "/" + lib, origin);
  };
  wheels_in(site_packages_under(env("VIRTUAL_ENV")), "python wheel ($VIRTUAL_ENV)");
  wheels_in(site_packages_under(env("CONDA_PREFIX")), "python wheel ($CONDA_PREFIX)");
  for (const char* so : kSonames) c.emplace_back(so, "dynamic loader search");
  wheels_in(python_site_packages(), "python wheel (python3)");
  return c;
}

Result<const NvrtcLibrary*> NvrtcLibrary::load(const std::string& library) {
  Attempt a = NvrtcLibraryLoader::try_load(library, "explicit", false);
  if (a.lib) return static_cast<const NvrtcLibrary*>(*a.lib);
  return make_error(ErrorKind::NoDevice, "CUDA unavailable: cannot load NVRTC from " + a.why);
}

Result<const NvrtcLibrary*> NvrtcLibrary::get() {
  static std::once_flag once;
  static std::optional<Result<const NvrtcLibrary*>> found;
  std::call_once(once, [] {
    const bool skip_toolkit = env_flag("GBX_NVRTC_NO_TOOLKIT");
    std::string tried;
    for (const auto& [place, origin] : nvrtc_search_candidates()) {
      Attempt a = NvrtcLibraryLoader::try_load(place, origin, skip_toolkit);
      if (a.lib) {
        found.emplace(static_cast<const NvrtcLibrary*>(*a.lib));
        return;
      }
      tried += "  " + a.why + "\n";
    }
    found.emplace(make_error(
        ErrorKind::NoDevice,
        "CUDA unavailable: no NVRTC library found (install the CUDA toolkit or `pip install "
        "nvidia-cuda-nvrtc`, or set GBX_NVRTC_LIBRARY to libnvrtc.so)",
        "tried:\n" + tried));
  });
  return *found;
}

}  // namespace gbx
