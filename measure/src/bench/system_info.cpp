#include "gbx/measure/bench/system_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gbx/engine/cuda_driver.h"
#include "gbx/engine/kernel_builder.h"
#include "gbx/engine/nvrtc_compiler.h"
#include "gbx/engine/orc_compiler.h"

namespace gbx {
namespace {

namespace fs = std::filesystem;

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n\"");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n\"");
  return s.substr(b, e - b + 1);
}

// Value of the first "key<sep>value" line of a text file, or "".
std::string file_field(const char* path, const std::string& key, char sep) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(sep);
    if (colon == std::string::npos) continue;
    if (trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return {};
}

uint64_t meminfo_kib(const std::string& key) {
  const std::string v = file_field("/proc/meminfo", key, ':');
  return v.empty() ? 0 : std::strtoull(v.c_str(), nullptr, 10);
}

// stdout of a shell command (stderr dropped, trimmed); false if it could not run or failed.
bool run_capture(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return false;
  std::array<char, 512> buf;
  std::string text;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) text.append(buf.data(), n);
  const int status = pclose(p);
  if (status != 0) return false;
  *out = trim(text);
  return true;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The checkout GBX was built from. CMake compiles this file by its absolute path, so
// __FILE__ names the tree without a build-time definition; a binary run from inside some
// other checkout falls back to the tree around the executable.
std::string find_source_dir() {
  const fs::path here = fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
  std::error_code ec;
  if (here.is_absolute() && fs::exists(here / "measure" / "src" / "bench" / "system_info.cpp", ec))
    return here.string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  std::string top;
  if (run_capture(
          "git -C " + shell_quote(exe.parent_path().string()) + " rev-parse --show-toplevel",
          &top) &&
      fs::exists(fs::path(top) / "measure" / "src" / "bench" / "system_info.cpp", ec))
    return top;
  return {};
}

void fill_gpu(SystemInfo& s) {
  auto drv = CudaDriver::get();
  if (!drv) return;  // no driver, a stub, or no device: "none"
  CudaDriver& d = *drv.value();
  CUdevice dev = 0;
  std::array<char, 256> name{};
  if (d.cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
      d.cuDeviceGetName(name.data(), (int)name.size(), dev) == CUDA_SUCCESS)
    s.gpu_name = name.data();
  if (d.device_count() > 1) s.gpu_name += " (+" + std::to_string(d.device_count() - 1) + " more)";
  // The kernel module's version is what users quote; the API version says what it supports.
  std::string module = "unknown";
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(in, line)) {
    const auto k = line.find("Kernel Module");
    if (k != std::string::npos) {
      std::istringstream words(line.substr(k + 13));
      words >> module;
    }
  }
  const int v = d.driver_version();
  s.gpu_driver =
      module + " (CUDA " + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) + ")";
}

SystemInfo gather() {
  SystemInfo s;
  s.os = file_field("/etc/os-release", "PRETTY_NAME", '=');
  if (s.os.empty()) s.os = "unknown";
  struct utsname u {};
  if (uname(&u) == 0)
    s.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  else
    s.kernel = "unknown";
  s.cpu_model = file_field("/proc/cpuinfo", "model name", ':');
  if (s.cpu_model.empty()) s.cpu_model = "unknown";
  s.cpu_cores = (int)std::max(1u, std::thread::hardware_concurrency());
  s.mem_total_bytes = meminfo_kib("MemTotal") * 1024;
  fill_gpu(s);
  s.nvrtc_version = nvrtc_version();
  s.cpu_compiler_identity = cpu_compiler_identity();
  // "LLVM 14.0.6; triple; cpu; features"
  s.llvm_version = s.cpu_compiler_identity.substr(0, s.cpu_compiler_identity.find(';'));
#if defined(__clang__)
  s.host_compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  s.host_compiler = std::string("gcc ") + __VERSION__;
#else
  s.host_compiler = "unknown";
#endif
  s.gbx_version = kEngineId;  // "gbx-engine/<version>"
  s.gbx_version = s.gbx_version.substr(s.gbx_version.find('/') + 1);
  s.source_dir = find_source_dir();
  if (!s.source_dir.empty()) {
    std::string commit, dirty;
    const std::string git = "git -C " + shell_quote(s.source_dir);
    if (run_capture(git + " rev-parse HEAD", &commit) && !commit.empty()) {
      s.git_commit = commit;
      s.git_dirty =
          run_capture(git + " status --porcelain --untracked-files=no", &dirty) && !dirty.empty();
    }
  }
  return s;
}

}  // namespace

const SystemInfo& system_info() {
  static const SystemInfo info = gather();
  return info;
}

nlohmann::json to_json(const SystemInfo& s) {
  return {{"os", s.os},
          {"kernel", s.kernel},
          {"cpu_model", s.cpu_model},
          {"cpu_cores", s.cpu_cores},
          {"mem_total_bytes", s.mem_total_bytes},
          {"gpu_name", s.gpu_name},
          {"gpu_driver", s.gpu_driver},
          {"nvrtc_version", s.nvrtc_version},
          {"llvm_version", s.llvm_version},
          {"cpu_compiler_identity", s.cpu_compiler_identity},
          {"host_compiler", s.host_compiler},
          {"gbx_version", s.gbx_version},
          {"git_commit", s.git_commit},
          {"git_dirty", s.git_dirty},
          {"source_dir", s.source_dir}};
}

uint64_t available_memory_bytes() { return meminfo_kib("MemAvailable") * 1024; }

uint64_t resident_memory_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

std::string utc_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace gbx
