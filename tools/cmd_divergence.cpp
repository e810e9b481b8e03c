// gbx-run divergence: predicted SIMT efficiency of the cuda kernel, measured without a GPU on
// the CUDA driver double (gbx/measure/bench/divergence.h, docs/internals/divergence.md).
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "gbx/measure/bench/divergence.h"
#include "tool_common.h"
#include "tool_options.h"

namespace {

using namespace gbx;

struct DivergenceCli {
  DivergenceOptions o;
  std::string measure;
  std::string actions = "random,none";
  std::string schedules = "simt";
};

Result<std::vector<int>> parse_steps(const std::string& list) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      return make_error(ErrorKind::Usage, "--measure: '" + item + "' is not a step number");
    out.push_back(v);
  }
  return out;
}

int cmd_divergence(DivergenceCli& c) {
  auto measure = parse_steps(c.measure);
  if (!measure) return tool::fail(measure.error());
  c.o.measure = measure.value();
  std::vector<std::string> policies;
  std::stringstream ss(c.actions);
  for (std::string p; std::getline(ss, p, ',');) policies.push_back(p);
  if (policies.empty())
    return tool::fail(make_error(ErrorKind::Usage, "--actions names no policy"));
  c.o.schedules.clear();
  std::stringstream sched(c.schedules);
  for (std::string t; std::getline(sched, t, ',');) {
    auto s = IssueSchedule::parse(t);
    if (!s) return tool::fail(s.error());
    c.o.schedules.push_back(s.value());
  }
  if (c.o.schedules.empty())
    return tool::fail(make_error(ErrorKind::Usage, "--schedule names no schedule"));
  for (const std::string& p : policies) {
    DivergenceOptions o = c.o;
    o.actions = p;
    auto r = run_divergence(o, nullptr);
    if (!r) return tool::fail(r.error());
    if (&p == &policies.front())
      std::printf("%-8s %5s %-24s %8s %7s %8s %10s %10s %12s\n", "actions", "step", "schedule",
                  "lanes", "eff", "lanes#", "disp/lane", "warp_iters", "issued/warp");
    for (const DivergenceStep& s : r->steps)
      for (size_t si = 0; si < o.schedules.size(); ++si) {
        const SimtCost& ptx = s.ptx[si];
        const SimtCost& count = s.count[si];
        // issued/warp: PTX instructions a warp issues in the step, the cost of the same
        // emulated work whatever the kernel (dispatch variants run one trajectory).
        std::printf(
            "%-8s %5d %-24s %8.2f %6.1f%% %8.2f %10.0f %10llu %12.0f\n", p.c_str(), s.step,
            o.schedules[si].name().c_str(), ptx.lanes(), 100 * ptx.efficiency(), count.lanes(),
            count.lanes_seen ? (double)count.dispatches / (double)count.lanes_seen : 0,
            (unsigned long long)count.iterations, ptx.warps ? ptx.issued / (double)ptx.warps : 0);
      }
    std::printf("# %s: kernel %s, %d warps (%d envs), weights %s\n", p.c_str(),
                r->kernel_entry.substr(0, 16).c_str(), o.warps, o.warps * 32,
                r->ptx_unit_weights.source.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

namespace gbx::tool {

void register_divergence(CLI::App& app, Commands& cmds) {
  static DivergenceCli d;
  auto* c = app.add_subcommand(
      "divergence",
      "predict the cuda kernel's SIMT efficiency on the CUDA driver double (no GPU): "
      "lanes = active lanes per issued instruction, as ncu's thread_inst_executed ratio");
  c->add_option("--rom", d.o.rom, "ROM file or builtin:NAME")->required();
  c->add_option("--load-state", d.o.load_state, "save state every env starts from");
  c->add_option("--warps", d.o.warps, "warps measured (envs = 32 x warps)")->capture_default_str();
  add_declared(c, kDivergence, "frames_per_step", d.o.options);
  add_declared(c, kDivergence, "release_after_frames", d.o.options);
  c->add_option("--steps", d.o.steps, "steps run")->capture_default_str();
  c->add_option("--measure", d.measure, "steps traced, e.g. 1,21 (default: every step)");
  c->add_option("--actions", d.actions, "policies, each run in turn: random, none, a file")
      ->capture_default_str();
  c->add_option("--seed", d.o.seed, "random actions' seed")->capture_default_str();
  add_declared(c, kDivergence, "specialize", d.o.options);
  add_declared(c, kDivergence, "stage", d.o.options);
  add_declared(c, kDivergence, "dispatch", d.o.options);
  add_declared(c, kDivergence, "warp_majority", d.o.options);
  add_declared(c, kDivergence, "max_registers", d.o.options);
  c->add_option("--schedule", d.schedules,
                "issue schedules priced on the same trace: simt (the kernel as it is), "
                "majority:B (lanes of the warp's most common next unit run; B: most "
                "iterations a lane waits), either with +family (uniform dispatch by "
                "instruction family), any with @pc (envs regrouped into warps before each "
                "launch by run state and PC) or @trace (by the step's own trace, which no "
                "launch knows in advance)")
      ->capture_default_str();
  cmds.emplace_back(c, [] { return cmd_divergence(d); });
}

}  // namespace gbx::tool
