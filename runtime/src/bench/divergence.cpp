// The divergence meter: the SIMT issue model over the double's per-lane dispatch traces, and
// the run that collects them (docs/internals/divergence.md).
#include "gbx/runtime/divergence.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>

#include "gbx/engine/cache.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/action_policy.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/rom.h"
#include "gbx/runtime/save_state.h"
#include "gbx/runtime/specialize.h"

namespace gbx {

namespace {

constexpr uint32_t kNoUnit = 0xFFFFFFFFu;  // an iteration that only serviced events

// One loop iteration of one lane: the events prefix and the unit it ran.
struct Iter {
  bool events = false;
  uint32_t unit = kNoUnit;
};

// Records -> iterations. An events record opens the iteration whose unit follows it; op CB is
// followed by its CB unit, which names the iteration (its weight includes op CB's case).
std::vector<Iter> iterations(const std::vector<uint32_t>& records) {
  std::vector<Iter> out;
  out.reserve(records.size());
  bool events = false;
  for (const uint32_t u : records) {
    if (u == kTraceEvents) {
      if (events) out.push_back(Iter{true, kNoUnit});  // two in a row: an events-only one
      events = true;
    } else if (u >= kTraceCb && u < kTraceCb + 256 && !events && !out.empty() &&
               out.back().unit == kTraceOp + 0xCB) {
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
  else if (unit >= kTraceBlock)
    std::snprintf(buf, sizeof buf, "block %u", unit - kTraceBlock);
  else
    std::snprintf(buf, sizeof buf, "unit %u", unit);
  return buf;
}

UnitWeights count_weights() {
  UnitWeights w;
  w.fallback = 1;
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

std::vector<SimtCost> simt_fold(const std::vector<std::vector<uint32_t>>& lanes,
                                const std::vector<const UnitWeights*>& weights) {
  std::vector<std::vector<Iter>> its;
  size_t longest = 0;
  for (const auto& l : lanes) {
    if (l.empty()) continue;
    its.push_back(iterations(l));
    longest = std::max(longest, its.back().size());
  }
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
    for (const auto& l : its) {
      if (k >= l.size()) continue;
      any_events |= l[k].events;
      if (l[k].unit != kNoUnit &&
          std::find(distinct.begin(), distinct.end(), l[k].unit) == distinct.end())
        distinct.push_back(l[k].unit);
    }
    for (size_t wi = 0; wi < weights.size(); ++wi) {
      const UnitWeights& w = *weights[wi];
      SimtCost& c = out[wi];
      const double ev = w.at(kTraceEvents);
      double issued = w.loop_top + (any_events ? ev : 0);
      for (const uint32_t u : distinct) issued += w.at(u);
      double useful = 0;
      uint64_t active = 0;
      for (const auto& l : its) {
        if (k >= l.size()) continue;
        ++active;
        useful +=
            w.loop_top + (l[k].events ? ev : 0) + (l[k].unit == kNoUnit ? 0 : w.at(l[k].unit));
      }
      c.issued += issued;
      c.useful += useful;
      c.iterations += 1;
      c.dispatches += active;
    }
  }
  return out;
}

WarpFolder::WarpFolder(std::vector<const UnitWeights*> weights)
    : weights_(std::move(weights)), lanes_(32), sum_(weights_.size()) {}

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
    const std::vector<SimtCost> c = simt_fold(lanes_, weights_);
    for (size_t i = 0; i < c.size(); ++i) sum_[i] += c[i];
  }
  for (auto& l : lanes_) l.clear();
  warp_ = -1;
}

std::vector<SimtCost> WarpFolder::flush() {
  fold();
  std::vector<SimtCost> out = sum_;
  sum_.assign(weights_.size(), SimtCost{});
  return out;
}

namespace {

using SetTrace = void (*)(void (*)(void*, unsigned, unsigned), void*);
using TraceModule = const char* (*)();

void on_trace(void* ctx, unsigned thread, unsigned unit) {
  static_cast<WarpFolder*>(ctx)->record(thread, unit);
}

Error usage(std::string msg) { return make_error(ErrorKind::Usage, std::move(msg)); }

}  // namespace

Result<DivergenceResult> run_divergence(const DivergenceOptions& o,
                                        const std::function<void(const std::string&)>& progress) {
  if (o.warps < 1 || o.warps > 4096) return usage("--warps must be 1..4096");
  if (o.steps < 1) return usage("--steps must be >= 1");
  if (o.frames_per_step < 1) return usage("--frames-per-step must be >= 1");
  for (const int s : o.measure)
    if (s < 1 || s > o.steps)
      return usage("--measure: step " + std::to_string(s) + " is not in 1.." +
                   std::to_string(o.steps));
  const auto stage = parse_stage(o.stage);
  if (!stage) return usage("unknown --stage '" + o.stage + "'");
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
  BackendConfig cfg;
  cfg.num_envs = o.warps * 32;
  cfg.frames_per_step = o.frames_per_step;
  cfg.release_after_frames = o.release_after_frames;
  cfg.stage = *stage;
  if (o.specialize.rfind("auto", 0) == 0)
    return usage("--specialize auto swaps kernels mid-run; give profile:FILE");
  if (auto st = apply_specialize_option(o.specialize, rom.value(), cfg); !st)
    return st.take_error();
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

  WarpFolder folder({&ptx_w, &count_w});
  std::vector<int32_t> actions;
  for (int s = 1; s <= o.steps; ++s) {
    policy->fill(s - 1, be.num_envs(), actions);
    const bool traced =
        o.measure.empty() || std::find(o.measure.begin(), o.measure.end(), s) != o.measure.end();
    if (traced) set_trace(&on_trace, &folder);
    Status st = be.step(actions);
    if (st) st = be.sync();
    set_trace(nullptr, nullptr);
    if (!st) return st.take_error();
    if (!traced) continue;
    const std::vector<SimtCost> c = folder.flush();
    DivergenceStep d;
    d.step = s;
    d.ptx = c[0];
    d.count = c[1];
    result.steps.push_back(d);
    if (progress) {
      char line[160];
      std::snprintf(line, sizeof line, "step %d: %.2f lanes (ptx), %.2f lanes (count)", s,
                    d.ptx.lanes(), d.count.lanes());
      progress(line);
    }
  }
  return result;
}

}  // namespace gbx
