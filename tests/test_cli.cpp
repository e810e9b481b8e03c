// The tools on bad input: one line naming the problem and a non-zero exit, never a crash;
// a corrupt cache entry is recompiled; two processes compiling one key both succeed.
#include <doctest/doctest.h>

#include <fstream>
#include <random>

#include "gbx/runtime/outputs/mem_region.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "test_util.h"

using namespace gbx;
using test::run_command;
using test::tool;

namespace {

void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
}

// Exactly one line, starting with "error:" and containing `needle`.
void check_one_line_error(const test::CommandResult& r, int exit_code, const std::string& needle) {
  CAPTURE(r.output);
  CHECK(r.exit_code == exit_code);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.rfind("error: ", 0) == 0);
  CHECK(r.output.find(needle) != std::string::npos);
}

std::string run_rom(const std::filesystem::path& rom, const std::string& extra = "") {
  return tool("gbx-run") + " run --rom '" + rom.string() + "' --frames 1 " + extra;
}

}  // namespace

TEST_CASE("bad ROMs give one-line errors") {
  test::TempDir d;
  write_file(d.path / "empty.gb", {});
  check_one_line_error(run_command(run_rom(d.path / "empty.gb")), 1, "empty");

  write_file(d.path / "trunc.gb", std::vector<uint8_t>(1000, 0));
  check_one_line_error(run_command(run_rom(d.path / "trunc.gb")), 1, "truncated");

  std::vector<uint8_t> big(16u << 20);
  std::mt19937 rng(1);
  for (auto& b : big) b = (uint8_t)rng();
  write_file(d.path / "random.gb", big);
  check_one_line_error(run_command(run_rom(d.path / "random.gb")), 1, "16777216");

  RomSpec spec;
  spec.cart_type = 0xFE;
  spec.program = {0x18, 0xFE};
  auto huc3 = try_build_rom(spec);
  REQUIRE(huc3.ok());
  write_file(d.path / "huc3.gb", huc3.value());
  check_one_line_error(run_command(run_rom(d.path / "huc3.gb")), 1,
                       "unsupported cartridge type 0xFE (HuC3)");

  check_one_line_error(run_command(run_rom(d.path / "missing.gb")), 1, "missing.gb");
  check_one_line_error(run_command(tool("gbx-run") + " run --rom builtin:NOPE"), 1, "NOPE");
}

TEST_CASE("refused cartridges write nothing: camera 0xFC, HuC3 0xFE, CGB-only") {
  test::TempDir d;
  auto write_rom = [&](const char* name, uint8_t type, uint8_t cgb) {
    RomSpec spec;
    spec.cart_type = type;
    spec.program = {0x18, 0xFE};
    auto bytes = try_build_rom(spec);
    REQUIRE(bytes.ok());
    std::vector<uint8_t> b = bytes.value();
    b[0x143] = cgb;
    uint8_t sum = 0;  // header checksum over 0x134-0x14C
    for (int i = 0x134; i <= 0x14C; ++i) sum = (uint8_t)(sum - b[i] - 1);
    b[0x14D] = sum;
    write_file(d.path / name, b);
    return d.path / name;
  };
  const struct {
    std::filesystem::path rom;
    std::string needle;
  } cases[] = {
      {write_rom("camera.gb", 0xFC, 0x00), "unsupported cartridge type 0xFC (POCKET CAMERA)"},
      {write_rom("huc3.gb", 0xFE, 0x00), "unsupported cartridge type 0xFE (HuC3)"},
      {write_rom("cgb.gb", 0x00, 0xC0), "CGB-only cartridge (0x143 = 0xC0)"},
  };
  const auto out = [&](const char* f) { return (d.path / f).string(); };
  for (const auto& c : cases) {
    check_one_line_error(
        run_command(run_rom(c.rom, "--save-state " + out("s.gbxs") + " --screenshot " +
                                       out("s.png") + " --sav " + out("s.sav"))),
        1, c.needle);
    CHECK(!std::filesystem::exists(out("s.gbxs")));
    CHECK(!std::filesystem::exists(out("s.png")));
    CHECK(!std::filesystem::exists(out("s.sav")));
    check_one_line_error(
        run_command(tool("gbx-run") + " verify --rom '" + c.rom.string() + "' --out " + out("v")),
        2, c.needle);
    CHECK(!std::filesystem::exists(out("v")));
  }
}

// Issue 19 item 7. A wrong header checksum would lock a DMG's boot ROM up; GBX skips the boot
// ROM, so the cartridge runs, with one warning line. A size byte that disagrees with the file
// and an unknown cartridge type are one error line and a non-zero exit, for run and verify.
TEST_CASE("header checksum, size byte, cartridge type: run and verify") {
  test::TempDir d;
  RomSpec spec;
  spec.program = {0x3C, 0x18, 0xFD};  // INC A; JR -3
  const std::vector<uint8_t> good = build_rom(spec);
  auto variant = [&](const char* name, std::vector<std::pair<int, uint8_t>> bytes, bool fix) {
    std::vector<uint8_t> b = good;
    for (auto [at, v] : bytes) b[at] = v;
    if (fix) b[0x14D] = compute_header_checksum(b);
    write_file(d.path / name, b);
    return d.path / name;
  };
  const auto verify = [&](const std::filesystem::path& rom) {
    return tool("gbx-run") + " verify --ref cpu --dut cpu --steps 2 --rom '" + rom.string() +
           "' --out '" + (d.path / "v").string() + "'";
  };

  const auto checksum = variant("checksum.gb", {{0x14D, (uint8_t)(good[0x14D] ^ 0x5A)}}, false);
  for (const std::string& cmd : {run_rom(checksum, "--print-state"), verify(checksum)}) {
    auto r = run_command(cmd);
    CAPTURE(r.output);
    CHECK(r.exit_code == 0);
    char want[96];
    std::snprintf(want, sizeof want, "warning: header checksum mismatch: 0x14D holds 0x%02X",
                  good[0x14D] ^ 0x5A);
    CHECK(r.output.find(want) != std::string::npos);
    const size_t at = r.output.find("warning:");
    CHECK(r.output.find("warning:", at + 1) == std::string::npos);  // one line
  }

  const struct {
    std::filesystem::path rom;
    std::string needle;
  } cases[] = {
      {variant("size_big.gb", {{0x148, 0x02}}, true),
       "header ROM size code 0x02 says 128 KiB but the file is 32768 bytes"},
      {variant("size_bad.gb", {{0x148, 0x0A}}, true), "invalid ROM size code 0x0A at 0x148"},
      {variant("type.gb", {{0x147, 0x42}}, true), "unknown cartridge type 0x42 at 0x147"},
  };
  for (const auto& c : cases) {
    check_one_line_error(run_command(run_rom(c.rom)), 1, c.needle);
    check_one_line_error(run_command(verify(c.rom)), 2, c.needle);
  }
  // A file larger than its size byte says.
  std::vector<uint8_t> doubled = good;
  doubled.insert(doubled.end(), good.begin(), good.end());
  write_file(d.path / "doubled.gb", doubled);
  check_one_line_error(run_command(run_rom(d.path / "doubled.gb")), 1,
                       "says 32 KiB but the file is 65536 bytes");
  check_one_line_error(run_command(verify(d.path / "doubled.gb")), 2,
                       "says 32 KiB but the file is 65536 bytes");
}

TEST_CASE("parse_mem_region accepts hex LO:HI and names what is wrong otherwise") {
  auto r = parse_mem_region("C000:C100");
  REQUIRE(r.ok());
  CHECK(r->lo == 0xC000);
  CHECK(r->hi == 0xC100);
  CHECK(r->label() == "C000:C100");
  auto full = parse_mem_region("0:10000");
  REQUIRE(full.ok());
  CHECK(full->hi == 0x10000);
  CHECK(parse_mem_region("ff80:ffff").ok());

  const std::pair<std::string, std::string> bad[] = {
      {"C100:C000", "below"}, {"C000:C000", "below"}, {"XYZ", "LO:HI"},
      {"0:10001", "at most"}, {"G000:H000", "hex"},   {":C000", "hex"},
      {"C000:", "hex"},       {"1:2:3", "LO:HI"},     {"0x10:0x20", "hex"}};
  for (const auto& [text, needle] : bad) {
    CAPTURE(text);
    auto e = parse_mem_region(text);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().kind == ErrorKind::Usage);
    CHECK(e.error().message.find(needle) != std::string::npos);
    CHECK(e.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("bad CLI values give one-line errors with exit code 2") {
  check_one_line_error(run_command(tool("gbx-run") + " run --envs 0"), 2, "--envs");
  const auto huge = run_command(tool("gbx-run") + " run --envs 100000000");
  check_one_line_error(huge, 2, "needs");
  CHECK(huge.output.find("GiB") != std::string::npos);
  check_one_line_error(run_command(tool("gbx-run") + " run --stage nope"), 2, "unknown stage");
  // The reference backend refuses too, before creating any of its one-core-per-env cores.
  check_one_line_error(run_command(tool("gbx-run") + " run --backend mgba --envs 100000000"), 2,
                       "needs");
  check_one_line_error(run_command(tool("gbx-run") + " run --frames 0"), 2, "--frames");
  check_one_line_error(run_command(tool("gbx-run") + " run --backend nope"), 2, "unknown backend");
  check_one_line_error(run_command(tool("gbx-run") + " run --tiered-start maybe"), 2,
                       "--tiered-start");
  check_one_line_error(run_command(tool("gbx-synth") + " emit --stage nope"), 2, "unknown stage");
  check_one_line_error(run_command(tool("gbx-synth") + " emit --device tpu"), 2, "unknown device");
}

// A run is whole steps: --frames 1 --frames-per-step 5 ran 5 frames without a word.
TEST_CASE("--frames must be a multiple of --frames-per-step (run, profile)") {
  check_one_line_error(run_command(tool("gbx-run") + " run --frames 1 --frames-per-step 5"), 2,
                       "--frames 1 is not a multiple of --frames-per-step 5 (a run is whole "
                       "steps): use --frames 5");
  check_one_line_error(run_command(tool("gbx-run") + " run --frames 12 --frames-per-step 5"), 2,
                       "use --frames 10 or 15");
  check_one_line_error(
      run_command(tool("gbx-synth") +
                  " profile --rom builtin:ALU_LOOP --frames 7 --frames-per-step 2"),
      2, "--frames 7 is not a multiple of --frames-per-step 2");
  // A multiple runs exactly the frames asked for.
  const auto ok = run_command(tool("gbx-run") + " run --frames 10 --frames-per-step 5");
  CAPTURE(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK(ok.output.find("  frames 10  ") != std::string::npos);
}

TEST_CASE("gbx-synth emit --device cuda prints a CUDA kernel without placeholders") {
  const auto r = run_command(tool("gbx-synth") + " emit --stage full_step --device cuda");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("__global__") != std::string::npos);
  CHECK(r.output.find("{{") == std::string::npos);
}

TEST_CASE("a corrupt module.o in the cache is recompiled with a warning") {
  test::TempDir d;
  const std::string env = "GBX_CACHE_DIR='" + d.path.string() + "' ";
  const std::string compile =
      env + tool("gbx-synth") + " compile --stage emulate_only --device cpu";
  auto first = run_command(compile);
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  CHECK(first.output.find("compiled") != std::string::npos);
  CHECK(run_command(compile).output.find("cached") != std::string::npos);

  std::filesystem::path object;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d.path))
    if (e.path().filename() == "module.o") object = e.path();
  REQUIRE(!object.empty());
  {
    std::fstream f(object, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64);
    f.write("garbage!", 8);
  }
  auto again = run_command(compile);
  CAPTURE(again.output);
  CHECK(again.exit_code == 0);
  CHECK(again.output.find("warning: cache: entry") != std::string::npos);
  CHECK(again.output.find("compiled") != std::string::npos);
  // And the run path recovers the same way: truncate, then run a ROM on that stage.
  std::filesystem::resize_file(object, 10);
  auto run = run_command(env + tool("gbx-run") + " run --stage emulate_only --frames 2");
  CHECK_MESSAGE(run.exit_code == 0, run.output);
  CHECK(run.output.find("kernel load: ") != std::string::npos);
  CHECK(run.output.find("(compiled; CPU ") != std::string::npos);
  // The next run finds it: the load line says so and names the parts of a warm load.
  auto warm = run_command(env + tool("gbx-run") + " run --stage emulate_only --frames 2");
  CAPTURE(warm.output);
  CHECK(warm.exit_code == 0);
  CHECK(warm.output.find("(cached; CPU ") != std::string::npos);
  CHECK(warm.output.find(" ms): plan ") != std::string::npos);
  CHECK(warm.output.find("cache lookup ") != std::string::npos);
  CHECK(warm.output.find("JIT link ") != std::string::npos);
}

TEST_CASE("two processes compiling one key at once both succeed") {
  test::TempDir d;
  const std::string cmd = "GBX_CACHE_DIR='" + d.path.string() + "' " + tool("gbx-synth") +
                          " compile --stage reward_only --device cpu";
  auto r = run_command("(" + cmd + " > '" + (d.path / "a.txt").string() + "' 2>&1 & " + cmd +
                       " > '" + (d.path / "b.txt").string() + "' 2>&1 & wait) && " + cmd);
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("cached") != std::string::npos);
  for (const char* f : {"a.txt", "b.txt"}) {
    std::ifstream in(d.path / f);
    std::string s((std::istreambuf_iterator<char>(in)), {});
    CAPTURE(s);
    CHECK((s.find("compiled") != std::string::npos || s.find("cached") != std::string::npos));
    CHECK(s.find("error") == std::string::npos);
  }
}
