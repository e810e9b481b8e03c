// Reads top to bottom: driver command line -> cc1 invocation -> optimized module -> .ll/.o/.s
// -> JIT load -> symbol lookup. Sources stay in memory. LLVM-version specifics stay here.
#include "gbx/engine/orc_compiler.h"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Driver/Compilation.h>
#include <clang/Driver/Driver.h>
#include <clang/Driver/Job.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Demangle/Demangle.h>
#include <llvm/ExecutionEngine/JITLink/JITLink.h>
#include <llvm/ExecutionEngine/Orc/DebugObjectManagerPlugin.h>
#include <llvm/ExecutionEngine/Orc/EPCDebugObjectRegistrar.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/TargetProcess/JITLoaderGDB.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "gbx/engine/object_disasm.h"

namespace gbx {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string host_features() {
  llvm::StringMap<bool> feats;
  std::string out;
  if (llvm::sys::getHostCPUFeatures(feats)) {
    std::vector<std::string> on;
    for (const auto& f : feats)
      if (f.getValue()) on.push_back("+" + f.getKey().str());
    std::sort(on.begin(), on.end());
    for (const auto& f : on) out += (out.empty() ? "" : ",") + f;
  }
  return out;
}

std::string first_error_line(const std::string& log) {
  size_t pos = log.find("error:");
  if (pos == std::string::npos) return "clang failed to compile the generated kernel";
  size_t start = log.rfind('\n', pos);
  start = start == std::string::npos ? 0 : start + 1;
  return log.substr(start, log.find('\n', pos) - start);
}

Result<std::string> emit(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType kind) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, kind))
    return make_error(ErrorKind::Compile, "LLVM target cannot emit this file type");
  pm.run(m);
  return std::string(buf.begin(), buf.end());
}

Result<std::unique_ptr<llvm::TargetMachine>> make_target_machine(const std::string& triple,
                                                                 llvm::CodeGenOpt::Level level) {
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) return make_error(ErrorKind::Compile, "no LLVM target for " + triple + ": " + err);
  llvm::TargetOptions topts;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, llvm::sys::getHostCPUName(), host_features(), topts,
                                  llvm::Reloc::PIC_, llvm::None, level));
  if (!tm) return make_error(ErrorKind::Compile, "cannot create a target machine for " + triple);
  return tm;
}

}  // namespace

std::vector<std::string> cpu_compile_args(const CpuCompileOptions& opts) {
  // No system headers, no exceptions or RTTI: templates are self-contained
  // (docs/internals/synthesis.md). An interpreter gains nothing from vector units, while the
  // vectorizers and AVX-512 domain reassignment cost ~0.8 s of a ~3 s cold compile (measured with
  // -ftime-report).
  std::vector<std::string> args = {GBX_CLANG_EXECUTABLE,
                                   "-c",
                                   "-x",
                                   "c++",
                                   "-std=c++17",
                                   cpu_fast_compile_enabled() ? "-O1" : opts.opt_level,
                                   "-fno-math-errno",
                                   "-march=native",
                                   "-mno-avx512f",
                                   "-fno-vectorize",
                                   "-fno-slp-vectorize",
                                   "-fPIC",
                                   "-fno-exceptions",
                                   "-fno-rtti",
                                   "-nostdinc",
                                   "-nostdinc++",
                                   "-fno-threadsafe-statics",
                                   "-Wall",
                                   "-Wno-unused-function",
                                   "-Wno-unused-label",
                                   "-Wno-unused-variable",
                                   "-resource-dir",
                                   GBX_CLANG_RESOURCE_DIR};
  // Profiling builds carry DWARF so gdb and `perf annotate` map code to template lines (the
  // generated source has #line directives): a different command line, so a different cache key.
  if (jit_profile_enabled()) args.push_back("-g");
  if (auto checks = jit_check_flags()) args.insert(args.end(), checks->begin(), checks->end());
  args.insert(args.end(), opts.extra.begin(), opts.extra.end());
  return args;
}

bool cpu_fast_compile_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("GBX_CPU_FAST_COMPILE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

bool jit_profile_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("GBX_JIT_PROFILE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

namespace {
// The ASan runtime of this process, if it has one: a sanitized build links it (GCC: libasan.so;
// clang: statically, its symbols exported), and every instrumented access calls into it.
bool host_has_asan_runtime() { return ::dlsym(RTLD_DEFAULT, "__asan_report_load1") != nullptr; }
}  // namespace

Result<std::vector<std::string>> jit_check_flags() {
  static const Result<std::vector<std::string>> flags = []() -> Result<std::vector<std::string>> {
    const char* v = std::getenv("GBX_JIT_CHECKS");
    std::vector<std::string> out;
    if (!v || !*v) return out;
    bool bounds = false, address = false;
    std::string list = v;
    for (size_t pos = 0; pos <= list.size();) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      const std::string word = list.substr(pos, comma - pos);
      if (word == "bounds")
        bounds = true;
      else if (word == "address")
        address = true;
      else
        return make_error(ErrorKind::Usage, "GBX_JIT_CHECKS: unknown check '" + word +
                                                "' (a comma list of bounds, address)");
      pos = comma + 1;
    }
    if (address && !host_has_asan_runtime())
      return make_error(ErrorKind::Usage,
                        "GBX_JIT_CHECKS=address needs a process with the AddressSanitizer "
                        "runtime (a build from scripts/build-asan.sh)");
    if (bounds) {
      out.push_back("-fsanitize=array-bounds,local-bounds");
      out.push_back("-fsanitize-trap=array-bounds,local-bounds");
    }
    if (address) out.push_back("-fsanitize=address");
    return out;
  }();
  return flags;
}

namespace {
bool jit_checks_address() {
  auto flags = jit_check_flags();
  return flags && std::find(flags->begin(), flags->end(), "-fsanitize=address") != flags->end();
}
}  // namespace

std::string jit_perf_map_path() {
  return jit_profile_enabled() ? "/tmp/perf-" + std::to_string(::getpid()) + ".map" : "";
}

std::FILE* open_jit_perf_map(const std::string& path, std::string* why) {
  auto fail = [&](const std::string& text) -> std::FILE* {
    *why = text;
    return nullptr;
  };
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    // O_NONBLOCK: a FIFO planted there must fail the open, not hang it.
    fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      return fail(errno == ELOOP ? "is a symbolic link" : std::string(std::strerror(errno)));
    struct stat st {};
    std::string problem;
    if (::fstat(fd, &st) != 0)
      problem = std::strerror(errno);
    else if (!S_ISREG(st.st_mode))
      problem = "is not a regular file";
    else if (st.st_uid != ::geteuid())
      problem = "is owned by uid " + std::to_string(st.st_uid) + ", not this user";
    else if (st.st_nlink != 1)
      problem = "has other hard links";
    else if (::ftruncate(fd, 0) != 0)
      problem = std::strerror(errno);
    if (!problem.empty()) {
      ::close(fd);
      return fail(problem);
    }
  }
  if (fd < 0) return fail(std::strerror(errno));
  std::FILE* f = ::fdopen(fd, "w");
  if (!f) {
    ::close(fd);
    return fail(std::strerror(errno));
  }
  return f;
}

std::string cpu_compiler_identity() {
  return std::string("LLVM ") + LLVM_VERSION_STRING + "; " + llvm::sys::getProcessTriple() + "; " +
         llvm::sys::getHostCPUName().str() + "; " + host_features();
}

std::vector<std::pair<std::string, std::string>> cpu_compiler_environment() {
  std::vector<std::pair<std::string, std::string>> env;
  for (const char* name : {"CCC_OVERRIDE_OPTIONS", "CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH",
                           "SOURCE_DATE_EPOCH"}) {
    const char* v = std::getenv(name);
    env.emplace_back(name, v ? v : "");
  }
  return env;
}

Result<CpuCompileOutput> compile_cpu(const std::string& source, const std::string& file_name,
                                     const CpuCompileOptions& opts) {
  init_llvm_once();
  CpuCompileOutput out;
  const auto t0 = Clock::now();
  if (auto checks = jit_check_flags(); !checks) return checks.take_error();

  // 1. Driver command line -> cc1 arguments (the real clang path and resource dir, so the
  //    invocation is what `clang -c` would run).
  std::string log;
  llvm::raw_string_ostream log_os(log);
  llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_opts = new clang::DiagnosticOptions();
  auto* printer = new clang::TextDiagnosticPrinter(log_os, &*diag_opts);
  llvm::IntrusiveRefCntPtr<clang::DiagnosticIDs> diag_ids(new clang::DiagnosticIDs());
  clang::DiagnosticsEngine diags(diag_ids, &*diag_opts, printer, /*ShouldOwnClient=*/true);

  const auto arg_strings = cpu_compile_args(opts);
  std::vector<const char*> argv;
  for (const auto& a : arg_strings) argv.push_back(a.c_str());
  argv.push_back(file_name.c_str());
  clang::driver::Driver driver(GBX_CLANG_EXECUTABLE, llvm::sys::getProcessTriple(), diags);
  driver.setCheckInputsExist(false);
  std::unique_ptr<clang::driver::Compilation> comp(driver.BuildCompilation(argv));
  if (!comp || diags.hasErrorOccurred())
    return make_error(ErrorKind::Compile, "clang driver rejected the command line", log_os.str());
  const auto& jobs = comp->getJobs();
  if (jobs.size() != 1 || !llvm::isa<clang::driver::Command>(*jobs.begin()))
    return make_error(ErrorKind::Compile, "clang driver produced an unexpected job list");
  const auto& cc1_args = llvm::cast<clang::driver::Command>(*jobs.begin()).getArguments();

  // 2. cc1 invocation with the source remapped from memory.
  auto invocation = std::make_shared<clang::CompilerInvocation>();
  if (!clang::CompilerInvocation::CreateFromArgs(*invocation, cc1_args, diags))
    return make_error(ErrorKind::Compile, "clang rejected the cc1 arguments", log_os.str());
  invocation->getPreprocessorOpts().addRemappedFile(
      file_name, llvm::MemoryBuffer::getMemBufferCopy(source, file_name).release());
  // The driver passes -disable-free (a one-shot cc1 need not free): without these two a
  // long-lived process leaks every compile's AST and, past clang's 10-entry BuryPointer
  // graveyard, the backend's TargetMachine (LeakSanitizer, test_specialize).
  invocation->getFrontendOpts().DisableFree = false;
  invocation->getCodeGenOpts().DisableFree = false;

  clang::CompilerInstance ci;
  ci.setInvocation(invocation);
  ci.createDiagnostics(new clang::TextDiagnosticPrinter(log_os, &ci.getDiagnosticOpts()), true);

  // 3. Source -> optimized module (-O2 runs in the backend consumer).
  llvm::LLVMContext context;
  clang::EmitLLVMOnlyAction action(&context);
  const bool ok = ci.ExecuteAction(action);
  log_os.flush();
  out.log = log;
  if (!ok || ci.getDiagnostics().hasErrorOccurred())
    return make_error(ErrorKind::Compile, first_error_line(log), log);
  std::unique_ptr<llvm::Module> module = action.takeModule();
  if (!module) return make_error(ErrorKind::Compile, "clang produced no module", log);
  out.frontend_ms = ms_since(t0);

  {
    llvm::raw_string_ostream ir(out.llvm_ir);
    module->print(ir, nullptr);
  }

  // 4. Module -> .o for the host CPU; the .s is the .o disassembled (object_disasm.h), not a
  //    second code generation of the module (which cost as much as the .o's own).
  const auto t1 = Clock::now();
  auto tm = make_target_machine(module->getTargetTriple(), cpu_fast_compile_enabled()
                                                               ? llvm::CodeGenOpt::Less
                                                               : llvm::CodeGenOpt::Default);
  Result<std::string> object =
      tm ? emit(*module, *tm.value(), llvm::CGFT_ObjectFile) : Result<std::string>(tm.take_error());
  if (!object) return object.take_error();
  auto assembly = disassemble_object(object.value());
  if (!assembly) return assembly.take_error();
  out.object = std::move(object.value());
  out.assembly = std::move(assembly.value());
  out.codegen_ms = ms_since(t1);
  return out;
}

namespace {

// perf's JIT symbol map (tools/perf/Documentation/jit-interface.txt): one "START SIZE name" line
// per function, hex without 0x. LLVM 14's ORC has no perf plugin for JITLink, so this one writes
// every named function of each linked graph, local (static) ones included, once its addresses
// are final. The name carries the module ("[gbx-<key prefix>]"), so several kernels in one
// process stay apart.
class PerfMapPlugin : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  explicit PerfMapPlugin(std::FILE* f) : file_(f) {}

  void modifyPassConfig(llvm::orc::MaterializationResponsibility&, llvm::jitlink::LinkGraph&,
                        llvm::jitlink::PassConfiguration& config) override {
    // A static function called from its own section needs no relocation, so nothing refers to
    // its symbol and JITLink's dead-stripping drops the symbol (not the code): keep the names.
    config.PrePrunePasses.push_back([](llvm::jitlink::LinkGraph& g) {
      for (llvm::jitlink::Symbol* sym : g.defined_symbols())
        if (sym->hasName() && sym->isCallable()) sym->setLive(true);
      return llvm::Error::success();
    });
    config.PostFixupPasses.push_back([this](llvm::jitlink::LinkGraph& g) {
      write(g);
      return llvm::Error::success();
    });
  }
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility&) override {
    return llvm::Error::success();
  }
  llvm::Error notifyRemovingResources(llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::ResourceKey, llvm::orc::ResourceKey) override {}

 private:
  void write(llvm::jitlink::LinkGraph& g) {
    std::string module = g.getName();  // "gbx-<key>.o"
    if (module.size() > 2 && module.compare(module.size() - 2, 2, ".o") == 0)
      module.resize(module.size() - 2);
    if (module.size() > 16) module.resize(16);  // "gbx-" + 12 hex digits of the key
    std::string lines;
    for (const llvm::jitlink::Symbol* sym : g.defined_symbols()) {
      if (!sym->hasName() || !sym->isCallable() || sym->getSize() == 0) continue;
      char head[64];
      std::snprintf(head, sizeof head, "%llx %llx ",
                    (unsigned long long)sym->getAddress().getValue(),
                    (unsigned long long)sym->getSize());
      lines += head + llvm::demangle(sym->getName().str()) + " [" + module + "]\n";
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::fputs(lines.c_str(), file_);
    std::fflush(file_);
  }

  std::FILE* file_;
  std::mutex mu_;
};

// Adds the profiling plugins when GBX_JIT_PROFILE is set; with it unset nothing is added, so
// linking costs what it did. Returns "" or why a plugin could not be added (non-fatal).
std::string add_profile_plugins(llvm::orc::LLJIT& jit) {
  if (!jit_profile_enabled()) return "";
  auto* layer = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit.getObjLinkingLayer());
  if (!layer) return "GBX_JIT_PROFILE: the JIT's object layer is not JITLink";
  std::string problems;
  const std::string path = jit_perf_map_path();
  std::string why;
  if (std::FILE* f = open_jit_perf_map(path, &why))
    layer->addPlugin(std::make_unique<PerfMapPlugin>(f));
  else
    problems += "GBX_JIT_PROFILE: not writing " + path + ": " + why + "; ";
  // GDB's JIT interface: each linked object, its sections patched to their load addresses,
  // goes on __jit_debug_descriptor's list. The registration function is taken by address
  // (libLLVM exports it) rather than by dlsym, which misses it when libLLVM was loaded
  // RTLD_LOCAL (a Python extension).
  layer->addPlugin(std::make_unique<llvm::orc::DebugObjectManagerPlugin>(
      jit.getExecutionSession(),
      std::make_unique<llvm::orc::EPCDebugObjectRegistrar>(
          jit.getExecutionSession(),
          llvm::orc::ExecutorAddr::fromPtr(&llvm_orc_registerJITLoaderGDBWrapper))));
  return problems;
}

class Jit {
 public:
  static Result<Jit*> get() {
    static std::once_flag once;
    static Jit* instance = nullptr;
    static std::string error;
    std::call_once(once, [] {
      init_llvm_once();
      // JITLink (ObjectLinkingLayer), not LLJIT's default RuntimeDyld: JITLink puts an
      // object's sections in one contiguous block and reports an out-of-range relocation as
      // an error. RuntimeDyld maps sections separately; in a process whose address space is
      // fragmented (a Ray worker, which maps its object store) they landed more than 2 GiB
      // apart, the small code model's 32-bit PC-relative relocations were truncated, and the
      // first step crashed.
      auto jit = llvm::orc::LLJITBuilder()
                     .setObjectLinkingLayerCreator(
                         [](llvm::orc::ExecutionSession& es, const llvm::Triple&)
                             -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                           return std::make_unique<llvm::orc::ObjectLinkingLayer>(es);
                         })
                     .create();
      if (!jit) {
        error = to_string(jit.takeError());
        return;
      }
      if (std::string why = add_profile_plugins(**jit); !why.empty())
        std::fprintf(stderr, "gbx: %s\n", why.c_str());
      instance = new Jit(std::move(*jit));  // process lifetime: JIT code may run until exit
    });
    if (!instance) return make_error(ErrorKind::Runtime, "cannot create the ORC JIT: " + error);
    return instance;
  }

  Result<void*> load(const std::string& key, const std::string& object, const std::string& symbol) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = symbols_.find(key + "/" + symbol); it != symbols_.end()) return it->second;
    llvm::orc::JITDylib* jd = nullptr;
    if (auto it = dylibs_.find(key); it != dylibs_.end()) {
      jd = it->second;
    } else {
      auto created = jit_->createJITDylib("gbx-" + key + "-" + std::to_string(dylibs_.size()));
      if (!created) return make_error(ErrorKind::Runtime, "JIT: " + to_string(created.takeError()));
      jd = &*created;
      // Host symbols generated code may bind to: only what clang emits for struct copies.
      llvm::orc::SymbolMap allowed;
      auto& es = jit_->getExecutionSession();
      const auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
      allowed[es.intern("memcpy")] = {llvm::pointerToJITTargetAddress(&std::memcpy), flags};
      allowed[es.intern("memmove")] = {llvm::pointerToJITTargetAddress(&std::memmove), flags};
      allowed[es.intern("memset")] = {llvm::pointerToJITTargetAddress(&std::memset), flags};
      if (auto e = jd->define(llvm::orc::absoluteSymbols(std::move(allowed))))
        return make_error(ErrorKind::Runtime, "JIT: " + to_string(std::move(e)));
      if (jit_checks_address()) {
        // Checked kernels call the host's ASan runtime (__asan_report_load4, ...): those names
        // and no others resolve from the process.
        auto asan = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
            jit_->getDataLayout().getGlobalPrefix(),
            [](const llvm::orc::SymbolStringPtr& name) { return (*name).startswith("__asan_"); });
        if (!asan) return make_error(ErrorKind::Runtime, "JIT: " + to_string(asan.takeError()));
        jd->addGenerator(std::move(*asan));
      }
      if (auto e = jit_->addObjectFile(
              *jd, llvm::MemoryBuffer::getMemBufferCopy(object, "gbx-" + key + ".o")))
        return make_error(ErrorKind::Runtime,
                          "JIT cannot load module.o: " + to_string(std::move(e)));
      // A dylib whose object failed to link stays out of the map, so a retry starts afresh.
      dylibs_[key] = jd;
    }
    auto sym = jit_->lookup(*jd, symbol);
    if (!sym) {
      dylibs_.erase(key);
      return make_error(ErrorKind::Runtime,
                        "JIT cannot resolve " + symbol + ": " + to_string(sym.takeError()));
    }
    void* addr = llvm::jitTargetAddressToPointer<void*>(sym->getAddress());
    symbols_[key + "/" + symbol] = addr;
    return addr;
  }

 private:
  explicit Jit(std::unique_ptr<llvm::orc::LLJIT> jit) : jit_(std::move(jit)) {}
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::mutex mu_;
  std::map<std::string, llvm::orc::JITDylib*> dylibs_;  // one per module key
  std::map<std::string, void*> symbols_;                // "key/symbol" -> address
};

}  // namespace

Result<void*> jit_load_object(const std::string& key, const std::string& object,
                              const std::string& symbol) {
  auto jit = Jit::get();
  if (!jit) return jit.take_error();
  return jit.value()->load(key, object, symbol);
}

}  // namespace gbx
