#pragma once
// Every option of the engine declared once (runtime/src/backends/options.cpp): its name, type,
// default (and the default of a surface that differs on purpose, with why), allowed values or
// range, whether it is a synthesis parameter (part of the stage hash), the surfaces that take
// it and one line of doc. From the declaration come the CLI11 flags of every subcommand that
// takes an option (tools/tool_options.h), the keyword arguments of gbx._native.Backend
// (python/src/native_env.cpp) and their stub, the check of gbx.VecEnv's signature, the option
// tables of the docs (`gbx-synth options`) and BackendConfig from option values
// (apply_options). A new option is one entry there plus its use.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"

namespace gbx {

struct BackendConfig;
struct Rom;

// Where an option can be given: a CLI subcommand, the native module or gbx.VecEnv.
enum Surface : uint32_t {
  kRun = 1u << 0,          // gbx-run run
  kBench = 1u << 1,        // gbx-run bench
  kBenchStages = 1u << 2,  // gbx-run bench-stages
  kVerify = 1u << 3,       // gbx-run verify
  kTestrom = 1u << 4,      // gbx-run testrom
  kDivergence = 1u << 5,   // gbx-run divergence
  kSynth = 1u << 6,        // gbx-synth emit and compile (the kernel-selecting options)
  kProfile = 1u << 7,      // gbx-synth profile
  kNative = 1u << 8,       // gbx._native.Backend(rom, rom_bytes, **options)
  kPython = 1u << 9,       // gbx.VecEnv(...)
};
constexpr uint32_t kAllCli =
    kRun | kBench | kBenchStages | kVerify | kTestrom | kDivergence | kSynth | kProfile;

// A surface's name ("run", "bench", ..., "native", "python") and, for a CLI surface, the
// command lines whose --help shows its options ("gbx-run run", "gbx-synth emit", ...).
struct SurfaceInfo {
  Surface surface;
  const char* name;
  std::vector<const char*> commands;
};
const std::vector<SurfaceInfo>& surfaces();

enum class OptionType {
  Int,
  Float,
  Bool,
  String,
  StringList,  // list of str
  IntList,     // list of int
  Hooks,       // list of (bank, address) pairs
  Any,         // Python only: a spec that gbx.VecEnv parses itself (obs, actions, ...)
};
const char* to_string(OptionType t);

// One option's value, as given on a surface.
using OptionValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>,
                                 std::vector<int64_t>, std::vector<HookAddr>>;
using OptionValues = std::map<std::string, OptionValue>;

// A surface whose default or doc differs from the declaration's, and why.
struct SurfaceVariant {
  uint32_t surfaces = 0;
  const char* default_value = nullptr;  // nullptr: the declaration's default
  const char* doc = nullptr;            // nullptr: the declaration's doc
  const char* why = "";
  // These surfaces have a flag of this name that is an option of their own (a list of env
  // counts, a subset of the backends): not this one, and not derived from it.
  bool namesake = false;
};

struct OptionDecl {
  std::string name;  // the Python keyword; BackendConfig's field where it has one
  std::string flag;  // the CLI flag ("--frames-per-step"); "" where no CLI takes it
  OptionType type = OptionType::String;
  // The default as Python writes it ("24", "'fifo'", "None", "()"); nullptr: required.
  const char* default_value = nullptr;
  uint32_t surfaces_mask = 0;
  std::string doc;
  std::string py_type;  // the Python annotation ("int", "str | None", ...)
  std::vector<std::string> choices;
  std::optional<int64_t> min, max;
  bool synthesis = false;  // a synthesis parameter: enters the stage hash
  std::vector<SurfaceVariant> variants;
  // Puts a checked value into BackendConfig (nullptr: the surface uses the value itself).
  Status (*apply)(const OptionValue& v, const Rom& rom, BackendConfig& cfg) = nullptr;

  bool on(Surface s) const { return (surfaces_mask & s) != 0; }
  // Whether surface s has a flag of this name of its own (SurfaceVariant::namesake).
  bool namesake_on(Surface s) const;
  // The default and doc this surface shows.
  const char* default_on(Surface s) const;
  const std::string doc_on(Surface s) const;
};

// The declaration, in the order the docs list it.
const std::vector<OptionDecl>& option_decls();
const OptionDecl* find_option(std::string_view name);
// The declaration's text form of a default ("'fifo'" -> "fifo", "True" -> "true"), as the CLI
// shows it; "" for None and empty lists.
std::string cli_default(const char* python_default);

// The default this surface gives d as a value (Int, Float, Bool, String and list types; "None"
// is an empty string, "()" an empty list); nullopt for a required or Any option.
std::optional<OptionValue> default_on(const OptionDecl& d, Surface s);

// v against the declaration: allowed values, bounded ranges (open-ended ones, the counts, are
// the runtime's to check, with the messages the CLI and Python share) and the hook count;
// Usage errors naming the option `name`.
Status check_option(const OptionDecl& d, const OptionValue& v, const std::string& name);
// The values (each checked) into cfg, in declaration order; names not declared for `surface`
// are refused. Errors name each option as `surface` spells it (Python name or CLI flag).
Status apply_options(const OptionValues& values, Surface surface, const Rom& rom,
                     BackendConfig& cfg);

// values, plus the default surface s gives each option declared on it that values lacks
// (default_on; a namesake, an Any and a required option are left out): what a command line
// that leaves those flags out gives. The measuring tools' options (BenchOptions, VerifyOptions,
// ...) carry the declared values this way, so a caller that sets only some of them runs with
// the command line's defaults for the rest.
OptionValues with_defaults(OptionValues values, Surface s);
// A value of `values` by its declared name, typed: std::out_of_range when it is absent (fill
// it with with_defaults), std::bad_variant_access when it has another type.
int64_t option_int(const OptionValues& values, const std::string& name);
bool option_bool(const OptionValues& values, const std::string& name);
const std::string& option_text(const OptionValues& values, const std::string& name);

// The declaration as Markdown tables (the docs' options page) and as JSON.
std::string options_markdown();
std::string options_json();

}  // namespace gbx
