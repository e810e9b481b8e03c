// The option declaration (gbx/runtime/backends/options.h) against every CLI surface: each
// subcommand's --help shows exactly the declared flags of its surface with the surface's default,
// and no declared flag the declaration does not give it; apply_options builds BackendConfig from
// it, and bench's and verify's kernels come from the declared values given on their command line.
// (Python's surfaces: tests/python/test_options.py.)
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/roms/rom.h"
#include "test_util.h"

using namespace gbx;

namespace {

// Flag -> the default its --help shows ("" for none): CLI11's "  --flag TYPE[:{..}]=DEFAULT".
std::map<std::string, std::string> help_flags(const std::string& help) {
  std::map<std::string, std::string> out;
  static const std::regex line(R"(^  (--[\w-]+)(?: [A-Z]+(?::\{[^}]*\})?)?(?:=(\S+))?)");
  std::istringstream in(help);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) out[m[1]] = m[2];
  }
  return out;
}

}  // namespace

TEST_CASE("every CLI subcommand has its surface's declared flags, with the declared defaults") {
  std::set<std::string> declared_flags;
  for (const OptionDecl& d : option_decls())
    if (!d.flag.empty()) declared_flags.insert(d.flag);
  int checked = 0;
  for (const SurfaceInfo& s : surfaces())
    for (const std::string cmd : s.commands) {
      CAPTURE(cmd);
      const auto r = test::run_command(test::tool(cmd.substr(0, cmd.find(' '))) +
                                       cmd.substr(cmd.find(' ')) + " --help");
      REQUIRE(r.exit_code == 0);
      const auto flags = help_flags(r.output);
      REQUIRE(flags.size() > 2);
      for (const OptionDecl& d : option_decls()) {
        if (d.flag.empty()) continue;
        CAPTURE(d.flag);
        const auto it = flags.find(d.flag);
        if (d.namesake_on(s.surface)) continue;
        if (!d.on(s.surface)) {
          CHECK_MESSAGE(it == flags.end(),
                        "a declared flag on a command the declaration does "
                        "not give it (add the surface to its entry)");
          continue;
        }
        REQUIRE_MESSAGE(it != flags.end(), "the declaration gives this command the flag");
        const std::string want =
            d.type == OptionType::Bool && cli_default(d.default_on(s.surface)) == "false"
                ? ""
                : cli_default(d.default_on(s.surface));
        CHECK(it->second == (want == "true" ? "on" : want));
        ++checked;
      }
    }
  CHECK(checked > 30);
}

TEST_CASE("apply_options: BackendConfig from declared values, errors naming the surface's name") {
  auto rom = load_rom("builtin:ALU_LOOP");
  REQUIRE(rom.ok());
  OptionValues v;
  for (const OptionDecl& d : option_decls())
    if (d.on(kNative))
      if (auto def = default_on(d, kNative)) v[d.name] = *def;
  BackendConfig cfg;
  REQUIRE(apply_options(v, kNative, *rom, cfg).ok());
  CHECK(cfg.ppu == kDefaultPpu);
  CHECK(cfg.seen_capacity == 4096);
  CHECK(cfg.frames_per_step == 1);

  v["ppu"] = std::string("line");
  v["stage"] = std::string("obs_only");
  v["frames_per_step"] = int64_t{24};
  REQUIRE(apply_options(v, kNative, *rom, cfg).ok());
  CHECK(cfg.ppu == PpuModel::Line);
  CHECK(cfg.stage == Stage::ObsOnly);
  CHECK(cfg.frames_per_step == 24);

  v["ppu"] = std::string("dots");
  auto bad = apply_options(v, kNative, *rom, cfg);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "unknown ppu 'dots' (line, fifo)");
  bad = apply_options({{"ppu", std::string("dots")}}, kRun, *rom, cfg);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "unknown --ppu 'dots' (line, fifo)");
  bad = apply_options({{"seen_capacity", int64_t{0}}}, kNative, *rom, cfg);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "seen_capacity must be 1..65536 (got 0)");
  // An option the surface does not take.
  CHECK(!apply_options({{"seen_capacity", int64_t{8}}}, kRun, *rom, cfg).ok());
  CHECK(!apply_options({{"no_such_option", int64_t{8}}}, kNative, *rom, cfg).ok());
}

namespace {

// The synthesis parameters of the cached kernel `key` (gbx-synth cache show's "synthesis" line).
std::string kernel_params(const std::string& key) {
  const auto r = test::run_command(test::tool("gbx-synth") + " cache show " + key);
  REQUIRE(r.exit_code == 0);
  const auto at = r.output.find("synthesis ");
  REQUIRE(at != std::string::npos);
  return r.output.substr(at, r.output.find('\n', at) - at);
}

}  // namespace

TEST_CASE("bench and verify make their kernel from the declared options on their command line") {
  // Declared kernel options at values other than their defaults: each must reach the
  // BackendConfig the command makes (apply_options), so the kernel it compiled shows them.
  const std::vector<std::pair<std::string, std::string>> given = {
      {"stage", "emulate_only"}, {"layout", "interleaved"}, {"rtc_lock", ""}};
  const std::vector<std::string> want = {"stage=emulate_only;", ";layout=interleaved",
                                         ";rtc_lock=1"};
  std::string args;
  for (const auto& [name, value] : given) {
    const OptionDecl* d = find_option(name);
    REQUIRE(d);
    CHECK(d->on(kBench));
    CHECK(d->on(kVerify));
    CHECK(cli_default(d->default_on(kBench)) != (value.empty() ? "true" : value));
    args += " " + d->flag + (value.empty() ? "" : " " + value);
  }
  test::TempDir dir;
  std::vector<std::pair<std::string, std::string>> kernels;  // (command, cache key)
  const auto bench = test::run_command(
      test::tool("gbx-run") + " bench --backend cpu --rom builtin:ALU_LOOP --envs 1 --steps 1 " +
      "--warmup-steps 0 --threads 1" + args + " --json '" + (dir.path / "sweep.json").string() +
      "' 2>&1");
  REQUIRE_MESSAGE(bench.exit_code == 0, bench.output);
  std::ifstream sweep(dir.path / "sweep.json");
  kernels.emplace_back(
      "bench", nlohmann::json::parse(sweep).at("config").at("kernel_key").get<std::string>());
  // A fault from the first step: verify writes a bundle naming both backends' kernels.
  const auto verify = test::run_command(
      test::tool("gbx-run") + " verify --ref cpu --dut cpu --rom builtin:ALU_LOOP --steps 2 " +
      "--inject-fault 1:A" + args + " --out '" + dir.path.string() + "' 2>&1");
  REQUIRE_MESSAGE(verify.exit_code == 1, verify.output);
  std::ifstream meta(test::bundle_of(verify.output) / "metadata.json");
  const auto keys = nlohmann::json::parse(meta).at("kernel_cache_keys");
  kernels.emplace_back("verify ref", keys.at("ref").get<std::string>());
  kernels.emplace_back("verify dut", keys.at("dut").get<std::string>());
  for (const auto& [command, key] : kernels) {
    CAPTURE(command);
    const std::string params = kernel_params(key);
    CAPTURE(params);
    for (const std::string& w : want) CHECK(params.find(w) != std::string::npos);
  }
}

TEST_CASE("the declaration is well formed") {
  std::set<std::string> names, flags;
  for (const OptionDecl& d : option_decls()) {
    CAPTURE(d.name);
    CHECK(names.insert(d.name).second);
    if (!d.flag.empty()) CHECK(flags.insert(d.flag).second);
    CHECK(!d.doc.empty());
    CHECK(!d.py_type.empty());
    CHECK(d.surfaces_mask != 0);
    // A CLI surface needs a flag; a synthesis parameter reaches BackendConfig.
    if (d.surfaces_mask & kAllCli) CHECK(!d.flag.empty());
    if (d.synthesis) CHECK((d.apply != nullptr));
    // A default differing by surface says why.
    for (const SurfaceVariant& v : d.variants)
      if (v.default_value) CHECK(std::string(v.why).size() > 10);
    for (const SurfaceInfo& s : surfaces())
      if (d.on(s.surface) && d.type != OptionType::Any && d.default_on(s.surface)) {
        CAPTURE(s.name);
        const auto v = default_on(d, s.surface);
        REQUIRE(v.has_value());
        CHECK(check_option(d, *v, d.name).ok());
      }
  }
  CHECK(options_markdown().find("| `--ppu` |") != std::string::npos);
}
