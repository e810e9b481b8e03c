#pragma once
// The GPU divergence meter without a GPU (docs/internals/divergence.md). The cuda kernel runs
// on the CUDA driver test double, whose trace hook (templates/prelude/cuda.h GBX_TRACE_UNIT,
// tests/cuda_double/trace.cpp) reports every dispatch unit each env runs. Envs are grouped
// into warps as a launch groups them (env e on lane e % 32 of warp e / 32) and a SIMT issue
// model prices each warp: at its k-th loop iteration every still-running lane runs its own
// k-th unit, and the warp issues each distinct unit once. Predicted active lanes per issued
// instruction are comparable to ncu's smsp__thread_inst_executed_per_inst_executed.ratio.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/runtime/backends/options.h"

namespace gbx {

// Dispatch unit ids: templates/prelude/cuda.h's GBX_TRACE_*.
inline constexpr uint32_t kTraceOp = 0;    // + base opcode
inline constexpr uint32_t kTraceCb = 256;  // + CB opcode
inline constexpr uint32_t kTraceInterrupt = 512;
inline constexpr uint32_t kTraceHalted = 513;
inline constexpr uint32_t kTraceStopLeave = 514;
inline constexpr uint32_t kTraceEvents = 515;   // a prefix: service_events, then the unit
inline constexpr uint32_t kTraceUniform = 516;  // the uniform dispatch's shared path
// warp_majority kernels: the lane waited for its turn at the loop top (warp_turn) and ran no
// unit. It costs nothing of its own: the iteration's loop top (the vote included) is all the
// lane executes, as on a GPU where it sits out the others' unit.
inline constexpr uint32_t kTraceWait = 517;
inline constexpr uint32_t kTraceBlock = 1024;  // + specialized block index
// + k (0..63): a conditional part of the uniform path (templates/sm83/uniform.h GBX_UPART),
// a record that belongs to the iteration before it. A warp issues a part once if any of its
// lanes in that iteration runs it; a lane is useful only in its own parts.
inline constexpr uint32_t kTracePart = 2048;
inline constexpr uint32_t kTraceParts = 64;
inline bool is_trace_part(uint32_t u) { return u >= kTracePart && u < kTracePart + kTraceParts; }

// "op 3E", "cb 7C", "interrupt", "halted", "stop_leave", "events", "uniform", "part 3",
// "block 12".
std::string trace_unit_name(uint32_t unit);

// What a unit costs to issue once: its instruction count in the compiled code.
struct UnitWeights {
  std::map<uint32_t, double> cost;  // units the code was measured for
  double fallback = 1;              // any other unit
  double loop_top = 0;              // every iteration of every running lane (uniform)
  std::string source;               // what the numbers are ("count", "ptx ...")
  double at(uint32_t unit) const {
    const auto it = cost.find(unit);
    return it == cost.end() ? fallback : it->second;
  }
};

// Every unit costs 1: lanes per issued dispatch.
UnitWeights count_weights();

// Instruction counts from the kernel's PTX (module.ptx of its cache entry) and its source.cu:
// each opcode's case of gbx_step's dispatch switch, each CB case of execute_cb (plus op CB's
// own case), each specialized block's code from its entry in its spec_fn, and service_events
// and interrupt dispatch where they are functions of their own; see divergence.md for the
// rules. Other loop-top paths cost the median opcode. A PTX without gbx_step's switch: Input.
// A uniform-dispatch kernel's path and its parts cost the instructions between their marks
// (sm83/uniform.h: "// gbx-path begin/end", "// gbx-part K" ... "// gbx-part-end K"), the
// path less the parts inside it.
Result<UnitWeights> ptx_weights(const std::string& ptx, const std::string& source_cu);

struct SimtCost {
  double useful = 0;        // sum over lane iterations of the lane's cost
  double issued = 0;        // sum over warp iterations of the distinct paths' costs
  uint64_t iterations = 0;  // warp loop iterations
  uint64_t dispatches = 0;  // lane loop iterations
  uint64_t warps = 0;
  uint64_t lanes_seen = 0;  // lanes that ran at least one iteration
  // Active lanes per issued instruction (32 when every lane runs every unit together).
  double lanes() const { return issued > 0 ? useful / issued : 0; }
  double efficiency() const { return lanes() / 32; }
  SimtCost& operator+=(const SimtCost& o);
};

// How a warp's lanes are lined up at the dispatch loop's top.
//   simt (wait_bound 0): as the kernel is today: every running lane takes its next iteration
//     at every warp iteration, and the warp issues each distinct unit among them.
//   majority:B: a warp-level scheduler (a candidate of docs/internals/divergence.md): at each
//     iteration only the lanes whose next unit is the warp's most common one run it; the
//     others wait, and a lane that has waited B iterations is served first (its unit runs,
//     with every lane that shares it). Each env's emulated time is its own, so what every
//     env computes is unchanged; only the issue order differs. The scheduler's own
//     instructions (`overhead`: match, vote and counters, run by every running lane) are
//     issued each iteration and counted as issued, not useful.
//   +family (a suffix of either): the uniform-dispatch candidate, estimated before it is
//     built: every opcode of an instruction family (templates/sm83/opcodes.tsv: LD r,r' is
//     one family, ALU A,r one, the CB page's BIT/SET/RES/rotates a few) is one unit, lanes on
//     LD B,C and LD D,E running the same instructions with their operands chosen by index.
//     A family unit costs its dearest opcode plus kOperandSelect; the families whose
//     members also differ in their operation (alu: ADD/SUB/AND/...) would pay for that
//     inside, which this leaves out, so +family bounds the gain from above.
//   @pc, @trace (a suffix of any): the regrouping candidate, which envs share a warp. Before
//     each launch the envs are sorted by a key and dealt to warps 32 at a time in that order
//     (the backend would keep an env-to-lane permutation; actions, observations and states
//     stay in env order for the user). @pc: the env's run state and PC at the step's start,
//     what a host could read between launches (the regrouping the issue names: by what the env
//     ran last). @trace: the step's own dispatch sequence, lexicographically: envs that will
//     run the same units in the same order share warps, which no real launch can know in
//     advance (an optimistic reference for any key, not a proven optimum). Without a suffix
//     (@launch): env e on lane e % 32 of warp e / 32, as the kernel launches today.
enum class EnvGrouping { Launch, Pc, Trace };
struct IssueSchedule {
  int wait_bound = 0;  // 0: simt
  double overhead = 0;
  bool by_family = false;
  EnvGrouping grouping = EnvGrouping::Launch;
  std::string name() const;  // "simt", "majority:16", "simt+family", "simt@pc"
  // "simt", "majority:B" (B >= 1; overhead kMajorityOverhead), either with "+family", any of
  // them with "@pc" or "@trace".
  static Result<IssueSchedule> parse(const std::string& text);
};
// Instructions a family handler spends choosing its operands by index (a table load and the
// register-file index): an estimate, as kMajorityOverhead.
inline constexpr double kOperandSelect = 4;

// Opcode units -> family units (kTraceFamily + index), and each weight set's family costs.
inline constexpr uint32_t kTraceFamily = 1u << 20;
struct UnitFamilies {
  std::map<uint32_t, uint32_t> of;  // op/cb unit -> family unit
  std::vector<std::string> names;   // family unit - kTraceFamily -> template name
  // `w` with each family unit's cost (its dearest member + kOperandSelect) added.
  UnitWeights widen(const UnitWeights& w) const;
};
// From the opcode table of the templates the kernels are built from.
Result<UnitFamilies> unit_families();
// The majority scheduler's per-iteration cost in instructions: an estimate (match.any, popc,
// a max reduction over the warp, the selection compare, the wait counter and its bound
// check) until a kernel that runs it gives its PTX count.
inline constexpr double kMajorityOverhead = 12;

// One warp: lanes[i] is lane i's trace in the order it ran (units as above; an events record
// and op CB are merged into the iteration they open). One cost per weight set.
std::vector<SimtCost> simt_fold(const std::vector<std::vector<uint32_t>>& lanes,
                                const std::vector<const UnitWeights*>& weights,
                                const IssueSchedule& schedule = {});

// Collects a launch's trace (thread index, unit) warp by warp: a warp's lanes are folded and
// dropped when a thread of another warp reports, and at flush(). Results are per schedule,
// then per weight set: index schedule * weights.size() + weight.
class WarpFolder {
 public:
  // `families` (needed by +family schedules) must outlive the folder.
  explicit WarpFolder(std::vector<const UnitWeights*> weights,
                      std::vector<IssueSchedule> schedules = {IssueSchedule{}},
                      const UnitFamilies* families = nullptr);
  void record(uint32_t thread, uint32_t unit);
  // Folds what is held and returns the sums since the last flush.
  std::vector<SimtCost> flush();

 private:
  void fold();
  std::vector<const UnitWeights*> weights_;
  std::vector<IssueSchedule> schedules_;
  const UnitFamilies* families_ = nullptr;
  std::vector<UnitWeights> family_weights_;  // weights_, widened by families_
  std::vector<std::vector<uint32_t>> lanes_, family_lanes_;
  int64_t warp_ = -1;
  std::vector<SimtCost> sum_;
};

struct DivergenceOptions {
  std::string rom;
  std::string load_state;  // every env starts from it ("" = post-boot)
  int warps = 4;           // envs = warps * 32
  // The declared options of gbx-run divergence (gbx/runtime/backends/options.h):
  // --frames-per-step (24), --release-after-frames (8, as scripts/bench-gpu's games runs),
  // --stage (emulate_only), --specialize (off or profile:FILE); one absent takes the command
  // line's default (with_defaults). The kernel's BackendConfig is made from them
  // (apply_options).
  OptionValues options;
  int steps = 21;
  std::vector<int> measure;  // 1-based steps traced (empty: every step)
  std::string actions = "random";
  uint64_t seed = 1;
  std::vector<IssueSchedule> schedules = {IssueSchedule{}};  // each priced on the same trace
};

struct DivergenceStep {
  int step = 0;  // 1-based
  // Per DivergenceOptions::schedules entry: PTX weights, and every unit 1.
  std::vector<SimtCost> ptx, count;
};

struct DivergenceResult {
  std::string kernel_entry;      // the cache entry the double ran
  UnitWeights ptx_unit_weights;  // from its module.ptx (DivergenceStep::ptx)
  std::vector<DivergenceStep> steps;
};

// Runs the options on the cuda backend, which must be the CUDA driver double: anything else
// (a real driver, none) is an error in one line. progress gets a line per step.
Result<DivergenceResult> run_divergence(const DivergenceOptions& o,
                                        const std::function<void(const std::string&)>& progress);

}  // namespace gbx
