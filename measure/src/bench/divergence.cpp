// The divergence meter: the SIMT issue model over the double's per-lane dispatch traces, and
// the run that collects them (docs/internals/divergence.md).
#include "gbx/measure/bench/divergence.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "gbx/engine/cache.h"
#include "gbx/engine/generator.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/actions/action_policy.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/states/save_state.h"

namespace gbx {

namespace {

constexpr uint32_t kNoUnit = 0xFFFFFFFFu;  // an iteration that only serviced events

// One loop iteration of one lane: the events prefix, the unit it ran and the parts of the
// uniform path it ran (bit k: kTracePart + k).
struct Iter {
  bool events = false;
  uint32_t unit = kNoUnit;
  uint64_t parts = 0;
};

// What the parts in `mask` cost under w.
double parts_cost(uint64_t mask, const UnitWeights& w) {
  double n = 0;
  for (uint32_t k = 0; mask; ++k, mask >>= 1)
    if (mask & 1) n += w.at(kTracePart + k);
  return n;
}

// Records -> iterations. An events record opens the iteration whose unit follows it; op CB is
// followed by its CB unit, which names the iteration (its weight includes op CB's case).
std::vector<Iter> iterations(const std::vector<uint32_t>& records) {
  std::vector<Iter> out;
  out.reserve(records.size());
  bool events = false;
  for (const uint32_t u : records) {
    if (is_trace_part(u)) {
      if (!out.empty()) out.back().parts |= 1ull << (u - kTracePart);
    } else if (u == kTraceEvents) {
      if (events) out.push_back(Iter{true, kNoUnit});  // two in a row: an events-only one
      events = true;
    } else if (((u >= kTraceCb && u < kTraceCb + 256) || u >= kTraceFamily) && !events &&
               !out.empty() && out.back().unit == kTraceOp + 0xCB) {
      out.back().unit = u;
    } else {
      out.push_back(Iter{events, u});
      events = false;
    }
  }
  if (events) out.push_back(Iter{true, kNoUnit});
  return out;
}

}  // namespace

std::string trace_unit_name(uint32_t unit) {
  char buf[32];
  if (unit < kTraceCb)
    std::snprintf(buf, sizeof buf, "op %02X", unit);
  else if (unit < kTraceInterrupt)
    std::snprintf(buf, sizeof buf, "cb %02X", unit - kTraceCb);
  else if (unit == kTraceInterrupt)
    return "interrupt";
  else if (unit == kTraceHalted)
    return "halted";
  else if (unit == kTraceStopLeave)
    return "stop_leave";
  else if (unit == kTraceEvents)
    return "events";
  else if (unit == kTraceUniform)
    return "uniform";
  else if (unit == kTraceWait)
    return "wait";
  else if (is_trace_part(unit))
    std::snprintf(buf, sizeof buf, "part %u", unit - kTracePart);
  else if (unit >= kTraceBlock)
    std::snprintf(buf, sizeof buf, "block %u", unit - kTraceBlock);
  else
    std::snprintf(buf, sizeof buf, "unit %u", unit);
  return buf;
}

UnitWeights count_weights() {
  UnitWeights w;
  w.fallback = 1;
  w.cost[kTraceWait] = 0;  // no dispatch
  w.source = "count (every unit 1)";
  return w;
}

SimtCost& SimtCost::operator+=(const SimtCost& o) {
  useful += o.useful;
  issued += o.issued;
  iterations += o.iterations;
  dispatches += o.dispatches;
  warps += o.warps;
  lanes_seen += o.lanes_seen;
  return *this;
}

std::string IssueSchedule::name() const {
  return (wait_bound == 0 ? std::string("simt") : "majority:" + std::to_string(wait_bound)) +
         (by_family ? "+family" : "") +
         (grouping == EnvGrouping::Pc      ? "@pc"
          : grouping == EnvGrouping::Trace ? "@trace"
                                           : "");
}

namespace {
// The issue order part of a schedule (all of `text` but its @grouping).
Result<IssueSchedule> parse_issue_order(const std::string& order, const std::string& text) {
  std::string t = order;
  const std::string suffix = "+family";
  const bool family =
      t.size() > suffix.size() && t.compare(t.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (family) t.resize(t.size() - suffix.size());
  if (t == "simt") return IssueSchedule{0, 0, family};
  const std::string head = "majority:";
  if (t.rfind(head, 0) == 0) {
    const std::string n = t.substr(head.size());
    if (!n.empty() && n.size() <= 6 && n.find_first_not_of("0123456789") == std::string::npos &&
        std::stoi(n) >= 1)
      return IssueSchedule{std::stoi(n), kMajorityOverhead, family};
  }
  return make_error(ErrorKind::Usage, "schedule '" + text +
                                          "' is not simt or majority:B (B = 1-999999 iterations "
                                          "a lane may wait), with +family or not");
}
}  // namespace

Result<IssueSchedule> IssueSchedule::parse(const std::string& text) {
  std::string t = text;
  EnvGrouping grouping = EnvGrouping::Launch;
  if (const size_t at = t.find('@'); at != std::string::npos) {
    const std::string g = t.substr(at + 1);
    if (g == "pc")
      grouping = EnvGrouping::Pc;
    else if (g == "trace")
      grouping = EnvGrouping::Trace;
    else if (g != "launch")
      return make_error(ErrorKind::Usage, "schedule '" + text + "': grouping '@" + g +
                                              "' is not @launch, @pc or @trace");
    t.resize(at);
  }
  auto s = parse_issue_order(t, text);
  if (s) s->grouping = grouping;
  return s;
}

UnitWeights UnitFamilies::widen(const UnitWeights& w) const {
  UnitWeights out = w;
  std::map<uint32_t, double> dearest;
  for (const auto& [unit, fam] : of) {
    double& d = dearest[fam];
    d = std::max(d, w.at(unit));
  }
  for (const auto& [fam, cost] : dearest) out.cost[fam] = cost + kOperandSelect;
  out.source = w.source + ", opcodes as families";
  return out;
}

Result<UnitFamilies> unit_families() {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  UnitFamilies f;
  std::map<std::string, uint32_t> index;
  for (const OpcodeEntry& op : bundle->opcodes()) {
    auto it = index.find(op.family);
    if (it == index.end()) {
      it = index.emplace(op.family, kTraceFamily + (uint32_t)f.names.size()).first;
      f.names.push_back(op.family);
    }
    f.of[(op.cb ? kTraceCb : kTraceOp) + (uint32_t)op.code] = it->second;
  }
  f.of.erase(kTraceOp + 0xCB);  // op CB opens its CB unit's iteration (iterations())
  return f;
}

namespace {

// The majority schedule (IssueSchedule): lanes advance only when their next unit is the one
// the warp runs.
std::vector<SimtCost> majority_fold(const std::vector<std::vector<Iter>>& its,
                                    const std::vector<const UnitWeights*>& weights,
                                    const IssueSchedule& sched) {
  std::vector<SimtCost> out(weights.size());
  for (SimtCost& c : out) {
    c.warps = its.empty() ? 0 : 1;
    c.lanes_seen = its.size();
  }
  const size_t n = its.size();
  std::vector<size_t> at(n, 0);
  std::vector<int64_t> waited(n, 0);
  std::vector<std::pair<uint32_t, int>> tally;  // unit, running lanes at it
  for (;;) {
    // Served first: the lane that has waited longest once one reached the bound.
    int64_t longest = -1;
    size_t forced = n;
    tally.clear();
    for (size_t i = 0; i < n; ++i) {
      if (at[i] >= its[i].size()) continue;
      const uint32_t u = its[i][at[i]].unit;
      auto t =
          std::find_if(tally.begin(), tally.end(), [&](const auto& e) { return e.first == u; });
      if (t == tally.end())
        tally.emplace_back(u, 1);
      else
        ++t->second;
      if (waited[i] >= sched.wait_bound && waited[i] > longest) {
        longest = waited[i];
        forced = i;
      }
    }
    if (tally.empty()) break;
    uint32_t chosen = 0;
    if (forced < n) {
      chosen = its[forced][at[forced]].unit;
    } else {
      const auto best =
          std::max_element(tally.begin(), tally.end(), [](const auto& a, const auto& b) {
            return a.second < b.second || (a.second == b.second && a.first > b.first);
          });
      chosen = best->first;
    }
    bool any_events = false;
    uint64_t any_parts = 0;
    for (size_t i = 0; i < n; ++i)
      if (at[i] < its[i].size() && its[i][at[i]].unit == chosen) {
        any_events |= its[i][at[i]].events;
        any_parts |= its[i][at[i]].parts;
      }
    for (size_t wi = 0; wi < weights.size(); ++wi) {
      const UnitWeights& w = *weights[wi];
      const double ev = w.at(kTraceEvents);
      const double unit = chosen == kNoUnit ? 0 : w.at(chosen);
      double useful = 0;
      uint64_t ran = 0;
      for (size_t i = 0; i < n; ++i) {
        if (at[i] >= its[i].size() || its[i][at[i]].unit != chosen) continue;
        ++ran;
        useful += w.loop_top + (its[i][at[i]].events ? ev : 0) + unit +
                  parts_cost(its[i][at[i]].parts, w);
      }
      SimtCost& c = out[wi];
      c.issued +=
          sched.overhead + w.loop_top + (any_events ? ev : 0) + unit + parts_cost(any_parts, w);
      c.useful += useful;
      c.iterations += 1;
      c.dispatches += ran;
    }
    for (size_t i = 0; i < n; ++i) {
      if (at[i] >= its[i].size()) continue;
      if (its[i][at[i]].unit == chosen) {
        ++at[i];
        waited[i] = 0;
      } else {
        ++waited[i];
      }
    }
  }
  return out;
}

}  // namespace

std::vector<SimtCost> simt_fold(const std::vector<std::vector<uint32_t>>& lanes,
                                const std::vector<const UnitWeights*>& weights,
                                const IssueSchedule& schedule) {
  std::vector<std::vector<Iter>> its;
  size_t longest = 0;
  for (const auto& l : lanes) {
    if (l.empty()) continue;
    its.push_back(iterations(l));
    longest = std::max(longest, its.back().size());
  }
  if (schedule.wait_bound > 0) return majority_fold(its, weights, schedule);
  std::vector<SimtCost> out(weights.size());
  for (SimtCost& c : out) {
    c.warps = its.empty() ? 0 : 1;
    c.lanes_seen = its.size();
  }
  std::vector<uint32_t> distinct;
  for (size_t k = 0; k < longest; ++k) {
    // The warp's k-th iteration: each distinct unit among its still-running lanes issues once;
    // the events path issues once if any lane takes it.
    distinct.clear();
    bool any_events = false;
    uint64_t any_parts = 0;  // a part issues once if any lane runs it
    for (const auto& l : its) {
      if (k >= l.size()) continue;
      any_events |= l[k].events;
      any_parts |= l[k].parts;
      if (l[k].unit != kNoUnit &&
          std::find(distinct.begin(), distinct.end(), l[k].unit) == distinct.end())
        distinct.push_back(l[k].unit);
    }
    for (size_t wi = 0; wi < weights.size(); ++wi) {
      const UnitWeights& w = *weights[wi];
      SimtCost& c = out[wi];
      const double ev = w.at(kTraceEvents);
      double issued = w.loop_top + (any_events ? ev : 0) + parts_cost(any_parts, w);
      for (const uint32_t u : distinct) issued += w.at(u);
      double useful = 0;
      uint64_t active = 0;
      for (const auto& l : its) {
        if (k >= l.size()) continue;
        ++active;
        useful += w.loop_top + (l[k].events ? ev : 0) +
                  (l[k].unit == kNoUnit ? 0 : w.at(l[k].unit)) + parts_cost(l[k].parts, w);
      }
      c.issued += issued;
      c.useful += useful;
      c.iterations += 1;
      c.dispatches += active;
    }
  }
  return out;
}

WarpFolder::WarpFolder(std::vector<const UnitWeights*> weights,
                       std::vector<IssueSchedule> schedules, const UnitFamilies* families)
    : weights_(std::move(weights)),
      schedules_(std::move(schedules)),
      families_(families),
      lanes_(32),
      family_lanes_(32),
      sum_(weights_.size() * schedules_.size()) {
  if (families_)
    for (const UnitWeights* w : weights_) family_weights_.push_back(families_->widen(*w));
}

void WarpFolder::record(uint32_t thread, uint32_t unit) {
  const int64_t warp = thread / 32;
  if (warp != warp_) {
    fold();
    warp_ = warp;
  }
  lanes_[thread % 32].push_back(unit);
}

void WarpFolder::fold() {
  if (warp_ >= 0) {
    std::vector<const UnitWeights*> widened;
    if (families_) {
      for (const UnitWeights& w : family_weights_) widened.push_back(&w);
      for (size_t l = 0; l < lanes_.size(); ++l) {
        family_lanes_[l].clear();
        for (const uint32_t u : lanes_[l]) {
          const auto it = families_->of.find(u);
          family_lanes_[l].push_back(it == families_->of.end() ? u : it->second);
        }
      }
    }
    for (size_t si = 0; si < schedules_.size(); ++si) {
      const IssueSchedule& sc = schedules_[si];
      const bool fam = sc.by_family && families_;
      const std::vector<SimtCost> c =
          simt_fold(fam ? family_lanes_ : lanes_, fam ? widened : weights_, sc);
      for (size_t i = 0; i < c.size(); ++i) sum_[si * weights_.size() + i] += c[i];
    }
  }
  for (auto& l : lanes_) l.clear();
  warp_ = -1;
}

std::vector<SimtCost> WarpFolder::flush() {
  fold();
  std::vector<SimtCost> out = sum_;
  sum_.assign(weights_.size() * schedules_.size(), SimtCost{});
  return out;
}

namespace {

using SetTrace = void (*)(void (*)(void*, unsigned, unsigned), void*);
using TraceModule = const char* (*)();

// Where a traced launch's records go: the folder (schedules on the launch's own warps) and,
// when some schedule regroups envs, every env's whole trace (`all`, by thread), dealt to warps
// once the launch is over (regrouped()).
struct TraceSink {
  WarpFolder* folder = nullptr;
  std::vector<std::vector<uint32_t>>* all = nullptr;
};
void on_trace(void* ctx, unsigned thread, unsigned unit) {
  auto* sink = static_cast<TraceSink*>(ctx);
  sink->folder->record(thread, unit);
  if (sink->all && thread < sink->all->size()) (*sink->all)[thread].push_back(unit);
}

// The envs in the order a grouping deals them to warps (IssueSchedule @pc, @trace); ties keep
// env order.
std::vector<size_t> grouping_order(EnvGrouping g, const std::vector<std::vector<uint32_t>>& all,
                                   const std::vector<CpuState>& at_start) {
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (g == EnvGrouping::Pc)
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return std::make_pair(at_start[x].run_state, at_start[x].pc) <
             std::make_pair(at_start[y].run_state, at_start[y].pc);
    });
  else if (g == EnvGrouping::Trace)
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return all[x] < all[y]; });
  return order;
}

// One schedule priced on warps dealt in `order`: each warp's lanes fed to a folder of its own.
std::vector<SimtCost> regrouped(const IssueSchedule& sc, const std::vector<size_t>& order,
                                const std::vector<std::vector<uint32_t>>& all,
                                const std::vector<const UnitWeights*>& weights,
                                const UnitFamilies* families) {
  IssueSchedule issue = sc;
  issue.grouping = EnvGrouping::Launch;
  WarpFolder f(weights, {issue}, families);
  for (size_t lane = 0; lane < order.size(); ++lane)
    for (const uint32_t u : all[order[lane]]) f.record((uint32_t)lane, u);
  return f.flush();
}

Error usage(std::string msg) { return make_error(ErrorKind::Usage, std::move(msg)); }

}  // namespace

Result<DivergenceResult> run_divergence(const DivergenceOptions& o,
                                        const std::function<void(const std::string&)>& progress) {
  if (o.warps < 1 || o.warps > 4096) return usage("--warps must be 1..4096");
  if (o.steps < 1) return usage("--steps must be >= 1");
  const OptionValues values = with_defaults(o.options, kDivergence);
  if (option_int(values, "frames_per_step") < 1) return usage("--frames-per-step must be >= 1");
  for (const int s : o.measure)
    if (s < 1 || s > o.steps)
      return usage("--measure: step " + std::to_string(s) + " is not in 1.." +
                   std::to_string(o.steps));
  auto policy = ActionPolicy::parse(o.actions, o.seed);
  if (!policy) return policy.take_error();

  // The double, before anything is built: the meter reads what the cuda kernel executes,
  // which only the double's host-compiled kernel can report.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  const auto set_trace =
      lib ? reinterpret_cast<SetTrace>(dlsym(lib, "gbx_cuda_double_set_trace")) : nullptr;
  const auto trace_module =
      lib ? reinterpret_cast<TraceModule>(dlsym(lib, "gbx_cuda_double_trace_module")) : nullptr;
  if (!set_trace || !trace_module)
    return make_error(ErrorKind::NoDevice,
                      std::string(lib ? "the libcuda.so.1 found is not the CUDA driver double"
                                      : "no libcuda.so.1 found") +
                          ": divergence runs the cuda kernel on the double (put build/cuda-double "
                          "first on LD_LIBRARY_PATH); on a GPU, measure with ncu "
                          "(docs/internals/profiling.md)");

  auto rom = load_rom(o.rom);
  if (!rom) return rom.take_error();
  std::vector<uint8_t> start;
  if (!o.load_state.empty()) {
    auto bytes = read_save_state_file(o.load_state);
    if (!bytes) return bytes.take_error();
    start = std::move(bytes.value());
  }
  if (option_text(values, "specialize").rfind("auto", 0) == 0)
    return usage("--specialize auto swaps kernels mid-run; give profile:FILE");
  BackendConfig cfg;
  if (auto st = apply_options(values, kDivergence, rom.value(), cfg); !st) return st.take_error();
  cfg.num_envs = o.warps * 32;
  auto backend = make_backend("cuda", rom.value(), cfg);
  if (!backend) return backend.take_error();
  Backend& be = *backend.value();
  if (!start.empty()) {
    if (auto st = be.set_reset_state({start}); !st) return st.take_error();
    if (auto st = be.reset(std::vector<uint8_t>((size_t)be.num_envs(), 1)); !st)
      return st.take_error();
  }

  DivergenceResult result;
  result.kernel_entry = trace_module();
  KernelCache cache;
  std::vector<std::string> warnings;
  const auto entry = cache.lookup(result.kernel_entry, &warnings);
  if (result.kernel_entry.empty() || !entry)
    return make_error(ErrorKind::Runtime, "the double ran no kernel cache entry it can name");
  auto ptx = entry->read("module.ptx");
  if (!ptx) return ptx.take_error();
  auto src = entry->read("source.cu");
  if (!src) return src.take_error();
  auto weighed = ptx_weights(ptx.value(), src.value());
  if (!weighed) return weighed.take_error();
  result.ptx_unit_weights = std::move(weighed.value());
  const UnitWeights& ptx_w = result.ptx_unit_weights;
  const UnitWeights count_w = count_weights();

  if (o.schedules.empty()) return usage("no schedule to price");
  UnitFamilies families;
  if (std::any_of(o.schedules.begin(), o.schedules.end(),
                  [](const IssueSchedule& sc) { return sc.by_family; })) {
    auto f = unit_families();
    if (!f) return f.take_error();
    families = std::move(f.value());
  }
  // Schedules on the launch's warps are folded as the trace comes; regrouped ones from every
  // env's whole trace after the launch.
  std::vector<IssueSchedule> on_launch;
  std::vector<size_t> launch_index(o.schedules.size(), SIZE_MAX);
  bool regroup = false;
  for (size_t si = 0; si < o.schedules.size(); ++si) {
    if (o.schedules[si].grouping != EnvGrouping::Launch) {
      regroup = true;
      continue;
    }
    launch_index[si] = on_launch.size();
    on_launch.push_back(o.schedules[si]);
  }
  if (on_launch.empty()) on_launch.push_back(IssueSchedule{});
  const std::vector<const UnitWeights*> weights = {&ptx_w, &count_w};
  WarpFolder folder(weights, on_launch, &families);
  std::vector<std::vector<uint32_t>> all;
  TraceSink sink{&folder, regroup ? &all : nullptr};
  std::vector<int32_t> actions;
  for (int s = 1; s <= o.steps; ++s) {
    policy->fill(s - 1, be.num_envs(), actions);
    const bool traced =
        o.measure.empty() || std::find(o.measure.begin(), o.measure.end(), s) != o.measure.end();
    std::vector<CpuState> at_start;
    if (traced && regroup) {
      auto cs = be.cpu_states();
      if (!cs) return cs.take_error();
      at_start = std::move(cs.value());
      all.assign((size_t)be.num_envs(), {});
    }
    if (traced) set_trace(&on_trace, &sink);
    Status st = be.step(actions);
    if (st) st = be.sync();
    set_trace(nullptr, nullptr);
    if (!st) return st.take_error();
    if (!traced) continue;
    const std::vector<SimtCost> c = folder.flush();
    DivergenceStep d;
    d.step = s;
    for (size_t si = 0; si < o.schedules.size(); ++si) {
      const IssueSchedule& sc = o.schedules[si];
      if (sc.grouping == EnvGrouping::Launch) {
        d.ptx.push_back(c[2 * launch_index[si]]);
        d.count.push_back(c[2 * launch_index[si] + 1]);
        continue;
      }
      const std::vector<SimtCost> g =
          regrouped(sc, grouping_order(sc.grouping, all, at_start), all, weights, &families);
      d.ptx.push_back(g[0]);
      d.count.push_back(g[1]);
    }
    result.steps.push_back(d);
    if (progress) {
      char line[160];
      std::snprintf(line, sizeof line, "step %d: %.2f lanes (ptx), %.2f lanes (count)", s,
                    d.ptx[0].lanes(), d.count[0].lanes());
      progress(line);
    }
  }
  return result;
}

}  // namespace gbx
