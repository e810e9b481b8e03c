// gbx-run bench and report: sweep JSON fields and their arithmetic, the report's table and
// per-core ratio on a recorded sweep, the PNG (or the warning without matplotlib), bad input.
// No assertion depends on how fast anything ran.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "gbx/measure/bench/bench.h"
#include "gbx/measure/bench/bench_stages.h"
#include "gbx/runtime/actions/action_policy.h"
#include "test_util.h"

using namespace gbx;
using nlohmann::json;
using test::run_command;
using test::tool;
namespace fs = std::filesystem;

namespace {

json read_json(const fs::path& p) {
  std::ifstream in(p);
  json j = json::parse(in, nullptr, false);
  REQUIRE_MESSAGE(!j.is_discarded(), (p.string() + " is not JSON"));
  return j;
}

void write_json(const fs::path& p, const json& j) {
  std::ofstream f(p);
  f << j.dump(2);
}

void check_one_line_error(const test::CommandResult& r, int exit_code, const std::string& needle) {
  CAPTURE(r.output);
  CHECK(r.exit_code == exit_code);
  CHECK(test::count_lines(r.output) == 1);
  CHECK(r.output.rfind("error: ", 0) == 0);
  CHECK(r.output.find(needle) != std::string::npos);
}

json result(int envs, double total_sps, int threads, int64_t steps = 100) {
  return {{"num_envs", envs},
          {"steps", steps},
          {"seconds", (double)(envs * steps) / total_sps},
          {"total_env_steps", envs * steps},
          {"total_sps", total_sps},
          {"per_env_sps", total_sps / envs},
          {"frames_per_sec", total_sps},
          {"sync_every", 64},
          {"stage", "full_step"},
          {"threads", threads}};
}

json sweep(const std::string& backend, const std::string& label, json results) {
  return {{"schema_version", 1},
          {"system", {{"cpu_model", "test"}}},
          {"config",
           {{"backend", backend},
            {"label", label},
            {"rom", {{"name", "ALU_LOOP"}}},
            {"stage", "full_step"},
            {"frames_per_step", 1}}},
          {"results", results}};
}

bool have_matplotlib() {
  return run_command("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null").exit_code == 0;
}

}  // namespace

TEST_CASE("parse_env_list") {
  auto l = parse_env_list("1,8,64");
  REQUIRE(l.ok());
  CHECK(l.value() == std::vector<int>{1, 8, 64});
  for (const std::string bad : {"", "0", "1,,2", "a", "-1", "1,2,", "99999999999"}) {
    CAPTURE(bad);
    auto e = parse_env_list(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().kind == ErrorKind::Usage);
  }
}

TEST_CASE("bench writes one sweep JSON with its schema's fields") {
  test::TempDir d;
  for (const std::string backend : {"cpu", "mgba"}) {
    CAPTURE(backend);
    const fs::path out = d.path / (std::string(backend) + ".json");
    const auto r = run_command(tool("gbx-run") + " bench --backend " + backend +
                               " --envs 1,3 --steps 4 --warmup-steps 1 --frames-per-step 2 "
                               "--threads 1 --stage reward_only --json '" +
                               out.string() + "'");
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("total_sps") != std::string::npos);  // the table
    CHECK(r.output.find("sweep: " + out.string()) != std::string::npos);
    const json s = read_json(out);
    CHECK(s["schema_version"] == kBenchSchemaVersion);
    CHECK(s["system"].contains("cpu_model"));
    CHECK(s["system"].contains("git_commit"));
    CHECK(s["config"]["backend"] == backend);
    CHECK(s["config"]["label"] == std::string(backend) + "-t1");
    CHECK(s["config"]["rom"]["name"] == "ALU_LOOP");
    CHECK(s["config"]["frames_per_step"] == 2);
    CHECK(s["config"]["stage"] == "reward_only");
    CHECK(s["config"]["actions"] == json{{"policy", "random"}, {"seed", 1}});  // the default
    REQUIRE(s["results"].size() == 2);
    int i = 0;
    for (const json& res : s["results"]) {
      const int envs = i++ == 0 ? 1 : 3;
      for (const std::string f :
           {"num_envs", "seconds", "total_env_steps", "total_sps", "per_env_sps", "frames_per_sec",
            "sync_every", "stage", "threads"}) {
        CAPTURE(f);
        CHECK(res.contains(f));
      }
      CHECK(res["num_envs"] == envs);
      CHECK(res["steps"] == 4);
      CHECK(res["total_env_steps"] == 4 * envs);
      CHECK(res["threads"] == 1);
      CHECK(res["sync_every"] == 64);
      CHECK(res["stage"] == "reward_only");
      const double secs = res["seconds"];
      const double total = res["total_sps"];
      CHECK(secs > 0);
      CHECK(total == doctest::Approx(4.0 * envs / secs));
      CHECK(res["per_env_sps"].get<double>() == doctest::Approx(total / envs));
      CHECK(res["frames_per_sec"].get<double>() == doctest::Approx(2 * total));
    }
  }
}

TEST_CASE("report on recorded sweeps: table, per-core ratio, PNG") {
  test::TempDir d;
  // cpu: 5000 frames/s with 1 env on 1 thread, 16000 with 8 on 2 threads. mgba: 1000 and
  // 4000. Speedups 5x and 4x; per core at each sweep's fastest point: 16000/2 = 8000 against
  // 4000/2 = 2000, so 4x (not 5000 from the 1-env point).
  write_json(d.path / "cpu.json",
             sweep("cpu", "cpu", json::array({result(1, 5000, 1), result(8, 16000, 2)})));
  write_json(d.path / "mgba.json",
             sweep("mgba", "mgba", json::array({result(1, 1000, 1), result(8, 4000, 2)})));
  const std::string cmd = tool("gbx-run") + " report '" + (d.path / "cpu.json").string() + "' '" +
                          (d.path / "mgba.json").string() + "' --baseline mgba --out '" +
                          d.path.string() + "'";
  const auto r = run_command(cmd);
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("cpu vs mgba") != std::string::npos);
  // envs, baseline sps, dut sps, speedup, per-env sps
  CHECK(r.output.find("       1             1000             5000     5.00x         5000.0") !=
        std::string::npos);
  CHECK(r.output.find("       8             4000            16000     4.00x         2000.0") !=
        std::string::npos);
  CHECK(r.output.find("8000 frames/s/core") != std::string::npos);
  CHECK(r.output.find("5000 frames/s/core") == std::string::npos);
  CHECK(r.output.find("2000 frames/s/core") != std::string::npos);
  CHECK(r.output.find("4.00x mgba per core") != std::string::npos);

  if (have_matplotlib()) {
    const auto at = r.output.find("plot: ");
    REQUIRE(at != std::string::npos);
    std::string png = r.output.substr(at + 6);
    png = png.substr(0, png.find('\n'));
    CHECK(fs::path(png).parent_path() == d.path / "report");
    REQUIRE(fs::exists(png));
    std::ifstream f(png, std::ios::binary);
    char magic[8] = {};
    f.read(magic, 8);
    CHECK(std::string(magic + 1, 3) == "PNG");
  } else {
    CHECK(r.output.find("warning: matplotlib is not available") != std::string::npos);
  }

  // A python that cannot import matplotlib (site-packages off): table, warning, exit 0.
  const fs::path nompl = d.path / "python-without-matplotlib";
  {
    std::ofstream f(nompl);
    f << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  }
  fs::permissions(nompl, fs::perms::owner_all);
  const auto w = run_command(cmd + " --python '" + nompl.string() + "'");
  CAPTURE(w.output);
  CHECK(w.exit_code == 0);
  CHECK(w.output.find("4.00x mgba per core") != std::string::npos);
  CHECK(w.output.find("warning: matplotlib is not available") != std::string::npos);
  CHECK(w.output.find("plot: ") == std::string::npos);
}

TEST_CASE("report without the baseline sweep still prints the table") {
  test::TempDir d;
  write_json(d.path / "cpu.json", sweep("cpu", "cpu-t1", json::array({result(4, 3000, 1)})));
  const auto r = run_command(tool("gbx-run") + " report '" + (d.path / "cpu.json").string() +
                             "' --out '" + d.path.string() + "' --python /bin/false");
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("       4                -             3000         -") != std::string::npos);
  CHECK(r.output.find("no sweep of baseline 'mgba'") != std::string::npos);
}

TEST_CASE("bench and report: bad input gives one-line errors") {
  test::TempDir d;
  const std::string bench = tool("gbx-run") + " bench --out '" + d.path.string() + "' ";
  check_one_line_error(run_command(bench + "--backend nope --envs 1"), 2, "unknown backend");
  check_one_line_error(run_command(bench + "--envs 0"), 2, "--envs");
  check_one_line_error(run_command(bench + "--envs 1,,8"), 2, "--envs");
  check_one_line_error(run_command(bench + "--envs 1 --frames-per-step 0"), 2, "--frames-per-step");
  check_one_line_error(run_command(bench + "--envs 1 --stage nope"), 2, "unknown stage");
  check_one_line_error(run_command(bench + "--envs 100000000"), 2, "needs");
  // mGBA's per-core footprint is measured, then the sweep is refused before anything runs.
  const auto mgba = run_command(bench + "--backend mgba --envs 1,50000000");
  check_one_line_error(mgba, 2, "KiB per core");
  CHECK(mgba.output.find("available") != std::string::npos);

  write_json(d.path / "broken.json", json{{"schema_version", 1}, {"config", json::object()}});
  check_one_line_error(
      run_command(tool("gbx-run") + " report '" + (d.path / "broken.json").string() + "'"), 1,
      "config.backend");
  check_one_line_error(
      run_command(tool("gbx-run") + " report '" + (d.path / "missing.json").string() + "'"), 1,
      "missing.json");
  CHECK_FALSE(fs::exists(d.path / "bench"));
}

// ---- action policies ([F].3) -----------------------------------------------------------------

TEST_CASE("actions random: seeded, different per env and per step, same for any env count") {
  auto p = ActionPolicy::parse("random", 7);
  REQUIRE(p.ok());
  std::vector<int32_t> s0, s1, again, fewer;
  p->fill(0, 256, s0);
  p->fill(1, 256, s1);
  p->fill(0, 256, again);
  p->fill(0, 16, fewer);
  CHECK(s0 == again);
  CHECK(s0 != s1);
  CHECK(std::vector<int32_t>(s0.begin(), s0.begin() + 16) == fewer);
  std::set<int32_t> distinct(s0.begin(), s0.end());
  CHECK(distinct.size() > 128);  // 256 draws of a byte: ~162 distinct values expected
  for (int32_t a : s0) CHECK((a >= 0 && a <= 255));
  auto other = ActionPolicy::parse("random", 8);
  std::vector<int32_t> o0;
  other->fill(0, 256, o0);
  CHECK(o0 != s0);
  CHECK(p->to_json() == json{{"policy", "random"}, {"seed", 7}});
}

TEST_CASE("actions none: all zero") {
  auto p = ActionPolicy::parse("none", 7);
  REQUIRE(p.ok());
  std::vector<int32_t> a(5, 99);
  for (int step : {0, 1, 1000}) {
    p->fill(step, 64, a);
    CHECK(a == std::vector<int32_t>(64, 0));
  }
  CHECK(p->to_json() == json{{"policy", "none"}});
}

TEST_CASE("actions FILE: one byte per env per step, step-major, repeating") {
  test::TempDir d;
  const fs::path f = d.path / "actions.bin";
  {
    std::ofstream out(f, std::ios::binary);
    for (int i = 0; i < 10; ++i) out.put((char)(i * 16 + 1));
  }
  auto p = ActionPolicy::parse(f.string(), 0);
  REQUIRE(p.ok());
  std::vector<int32_t> a;
  p->fill(0, 4, a);
  CHECK(a == std::vector<int32_t>{1, 17, 33, 49});
  p->fill(1, 4, a);
  CHECK(a == std::vector<int32_t>{65, 81, 97, 113});
  p->fill(2, 4, a);  // bytes 8, 9, then the file again
  CHECK(a == std::vector<int32_t>{129, 145, 1, 17});
  CHECK(p->to_json() == json{{"policy", "file"}, {"file", f.string()}, {"bytes", 10}});

  const fs::path empty = d.path / "empty.bin";
  std::ofstream(empty).close();
  auto e = ActionPolicy::parse(empty.string(), 0);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().kind == ErrorKind::Input);
  auto m = ActionPolicy::parse((d.path / "missing.bin").string(), 0);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().message.find("missing.bin") != std::string::npos);
}

TEST_CASE("bench --actions: recorded in the sweep, FILE read, bad FILE is one line") {
  test::TempDir d;
  const fs::path actions = d.path / "a.bin";
  {
    std::ofstream out(actions, std::ios::binary);
    for (int i = 0; i < 64; ++i) out.put((char)i);
  }
  const std::string bench = tool("gbx-run") +
                            " bench --backend cpu --rom builtin:JOYPAD_IRQ --envs 4 --steps 3 "
                            "--warmup-steps 1 --threads 1 --out '" +
                            d.path.string() + "' ";
  struct Case {
    std::string args;
    json want;
  };
  for (const Case& c :
       {Case{"--actions none", json{{"policy", "none"}}},
        Case{"--actions random --seed 42", json{{"policy", "random"}, {"seed", 42}}},
        Case{"--actions '" + actions.string() + "'",
             json{{"policy", "file"}, {"file", actions.string()}, {"bytes", 64}}}}) {
    CAPTURE(c.args);
    const fs::path out = d.path / "s.json";
    const auto r = run_command(bench + c.args + " --json '" + out.string() + "'");
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("actions " + c.want["policy"].get<std::string>()) != std::string::npos);
    CHECK(read_json(out)["config"]["actions"] == c.want);
  }
  check_one_line_error(run_command(bench + "--actions '" + (d.path / "nope.bin").string() + "'"), 1,
                       "nope.bin");
  const fs::path empty = d.path / "empty.bin";
  std::ofstream(empty).close();
  check_one_line_error(run_command(bench + "--actions '" + empty.string() + "'"), 1, "empty");
}

TEST_CASE("bench --load-state: every env starts from a state made by run --actions FILE") {
  test::TempDir d;
  const fs::path schedule = d.path / "schedule.bin";
  {
    std::ofstream out(schedule, std::ios::binary);
    for (int i = 0; i < 4; ++i) out.put((char)(0x11 << (i & 1)));
  }
  const fs::path state = d.path / "mid.state";
  const auto made = run_command(tool("gbx-run") +
                                " run --rom builtin:JOYPAD_IRQ --envs 1 --threads 1 --frames 8 "
                                "--frames-per-step 2 --stage emulate_only --actions '" +
                                schedule.string() + "' --save-state '" + state.string() + "'");
  CAPTURE(made.output);
  REQUIRE(made.exit_code == 0);
  REQUIRE(fs::exists(state));
  const std::string bench = tool("gbx-run") +
                            " bench --backend cpu --rom builtin:JOYPAD_IRQ --envs 2 --steps 2 "
                            "--warmup-steps 1 --threads 1 --frames-per-step 4 --out '" +
                            d.path.string() + "' ";
  const fs::path out = d.path / "s.json";
  const auto r =
      run_command(bench + "--load-state '" + state.string() + "' --json '" + out.string() + "'");
  CAPTURE(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(read_json(out)["config"]["load_state"] == state.string());
  check_one_line_error(run_command(bench + "--load-state '" + (d.path / "nope").string() + "'"), 1,
                       "nope");
  const auto st = run_command(tool("gbx-run") +
                              " bench-stages --rom builtin:JOYPAD_IRQ --envs 2 --rounds 1 "
                              "--steps-per-round 1 --warmup-steps 0 --threads 1 --variants "
                              "emulate_only emulate_only@t1 --load-state '" +
                              state.string() + "'");
  CAPTURE(st.output);
  CHECK(st.exit_code == 0);
}

TEST_CASE("bench-stages: @tN variants and actions") {
  auto v = parse_stage_variant("obs_only:pixels@t2");
  REQUIRE(v.ok());
  CHECK(v->threads == 2);
  CHECK(v->stage == Stage::ObsOnly);
  CHECK(v->obs == ObsKind::Pixels);
  CHECK(parse_stage_variant("emulate_only")->threads == -1);
  CHECK_FALSE(parse_stage_variant("emulate_only@t2")->specialized);
  for (const std::string spec : {"emulate_only@t2@spec", "emulate_only@spec@t2"}) {
    auto s = parse_stage_variant(spec);
    REQUIRE(s.ok());
    CHECK(s->specialized);
    CHECK(s->threads == 2);
    CHECK(s->label == spec);
  }
  CHECK(parse_stage_variant("emulate_only@spec")->threads == -1);
  // @fifo / @line: the pixel model (docs/machine/ppu-fifo.md); without either, the options' --ppu.
  auto fifo = parse_stage_variant("obs_only:pixels@fifo@t1");
  REQUIRE(fifo.ok());
  CHECK(fifo->ppu_set);
  CHECK(fifo->ppu == PpuModel::Fifo);
  CHECK(fifo->threads == 1);
  CHECK(parse_stage_variant("obs_only:pixels@line")->ppu == PpuModel::Line);
  CHECK_FALSE(parse_stage_variant("obs_only:pixels")->ppu_set);
  for (const std::string bad :
       {"emulate_only@", "emulate_only@2", "emulate_only@t0", "emulate_only@tx", "nope@t1",
        "emulate_only@spec@spec", "emulate_only@t1@t2", "emulate_only@specs",
        "emulate_only@fifo@line", "emulate_only@fif"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_stage_variant(bad).ok());
  }
  const auto r = run_command(tool("gbx-run") +
                             " bench-stages --rom builtin:ALU_LOOP --envs 4 --frames-per-step 1 "
                             "--rounds 2 --steps-per-round 1 --warmup-steps 0 --variants "
                             "emulate_only@t1 emulate_only@t2 --actions none");
  CAPTURE(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("emulate_only@t2") != std::string::npos);
  CHECK(r.output.find("actions none") != std::string::npos);
  CHECK(r.output.find("frames/cpu-s") != std::string::npos);
  CHECK(r.output.find("median") != std::string::npos);

  // A list of env counts: every variant at every count, in the same rounds, a row each.
  const auto multi = run_command(tool("gbx-run") +
                                 " bench-stages --rom builtin:ALU_LOOP --envs 2,3 "
                                 "--frames-per-step 1 --rounds 2 --steps-per-round 1 "
                                 "--warmup-steps 0 --variants emulate_only@t1 emulate_only@t2");
  CAPTURE(multi.output);
  CHECK(multi.exit_code == 0);
  CHECK(multi.output.find("envs 2,3 ") != std::string::npos);
  int rows = 0;
  for (const char* row : {"emulate_only@t1 ", "emulate_only@t2 "})
    for (size_t at = multi.output.find(row); at != std::string::npos;
         at = multi.output.find(row, at + 1))
      ++rows;
  CHECK(rows == 4);
  const auto bad = run_command(
      tool("gbx-run") + " bench-stages --envs 2,0 --variants emulate_only@t1 emulate_only@t2");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.rfind("error: ", 0) == 0);
}

TEST_CASE("bench --seconds: the window ends at the first step past it on the clock") {
  // A fake clock, 1 s a reading through the warm-up (a slow one), then 0.01 s a reading: a
  // step count from the warm-up's rate stops after 3 steps, reading the clock only at syncs
  // after 256 (sync every 64); the clock read at every step stops at 2 s, 200 steps.
  for (const int64_t sync_every : {0, 64}) {
    CAPTURE(sync_every);
    BenchOptions o;
    o.options["backend"] = std::string("cpu");
    o.envs = {1};
    o.options["threads"] = int64_t{1};
    o.options["stage"] = std::string("emulate_only");
    o.warmup_steps = 1;
    o.target_seconds = 2;
    o.sync_every = sync_every;
    double t = 0;
    int readings = 0;
    o.clock = [&] { return t += ++readings <= 3 ? 1.0 : 0.01; };
    auto r = run_bench(o);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    const json& res = r.value()["results"][0];
    CHECK(res["steps"].get<int64_t>() >= 199);
    CHECK(res["steps"].get<int64_t>() <= 202);
    CHECK(res["seconds"].get<double>() == doctest::Approx(2.0).epsilon(0.02));
    CHECK(res["warmup_seconds"].get<double>() == doctest::Approx(1.0));
  }
}
