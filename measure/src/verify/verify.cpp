#include "gbx/measure/verify/verify.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "gbx/engine/cache.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx_abi.h"
#include "verify_internal.h"

namespace gbx {
namespace {

using verify_detail::BundleInput;
using verify_detail::frames_per_step;
using verify_detail::hex;
using verify_detail::reg_text;
using verify_detail::Snapshot;
using verify_detail::write_bundle;

// gambatte (libretro) stops only at its own frame ends, so its registers are never from GBX's
// instant: it is compared by screens and memory regions alone (gambatte_backend.h).
bool compares_registers(const std::string& ref) { return ref != "gambatte"; }

class Verifier {
 public:
  explicit Verifier(const VerifyOptions& o) : o_(o) {}

  Status open() {
    auto rom = load_rom(o_.rom);
    if (!rom) return rom.take_error();
    rom_ = std::move(rom.value());
    if (o_.warn)
      for (const std::string& w : rom_.warnings) o_.warn(w);
    BackendConfig cfg;
    if (auto st = apply_options(o_.options, kVerify, rom_, cfg); !st) return st;
    cfg.num_envs = 1;
    cfg.threads = 1;  // one env
    cfg.render = o_.screen;
    auto ref = make_backend(o_.ref, rom_, cfg);
    if (!ref) return ref.take_error();
    ref_ = std::move(ref.value());
    if (o_.dut_layout) cfg.layout = *o_.dut_layout;
    if (auto st = apply_specialize_option(o_.dut_specialize, rom_, cfg); !st) return st;
    auto dut = make_backend(o_.dut, rom_, cfg);
    if (!dut) return dut.take_error();
    dut_ = std::move(dut.value());
    if (cfg.specialize) dut_kernel_ = "specialized";
    return ok_status();
  }

  // What the dut runs: see VerifyReport::dut_kernel.
  const std::string& dut_kernel() const { return dut_kernel_; }

  Status reset() {
    if (auto st = ref_->reset(o_.seed); !st) return st;
    return dut_->reset(o_.seed);
  }

  // Runs step `step` (1-based) on both, then the test-only fault if it is due.
  Status advance(int64_t step) {
    const std::vector<int32_t> action = {
        action_for_step(o_.actions, o_.seed, step, frames_per_step(o_))};
    for (Backend* b : {ref_.get(), dut_.get()}) {
      if (auto st = b->step(action); !st) return st;
      if (auto st = b->sync(); !st) return st;
    }
    if (Status st = tier_up(step); !st) return st;
    if (o_.fault && o_.fault->step == step) {
      auto s = dut_->get_cpu_state(0);
      if (!s) return s.take_error();
      const std::string& reg = o_.fault->reg;
      // Flip the carry flag in F (its low nibble is always zero), the low bit elsewhere.
      const int value = get_cpu_register(s.value(), reg) ^ (reg == "F" ? 0x10 : 0x01);
      if (auto st = dut_->debug_poke_register(0, reg, (uint16_t)value); !st) return st;
    }
    return ok_status();
  }

  Result<Snapshot> snapshot(Backend& b) {
    Snapshot s;
    auto cpu = b.get_cpu_state(0);
    if (!cpu) return cpu.take_error();
    s.cpu = cpu.value();
    for (const MemRegion& r : o_.regions) {
      auto m = b.read_memory(0, r.lo, r.hi);
      if (!m) return m.take_error();
      s.mem_sha.push_back(sha256_hex(
          std::string_view(reinterpret_cast<const char*>(m.value().data()), m.value().size())));
      s.mem.push_back(std::move(m.value()));
    }
    if (o_.screen) {
      auto sc = b.read_screen(0);
      if (!sc) return sc.take_error();
      s.screen = std::move(sc.value());
    }
    return s;
  }

  // Differing fields in comparison order.
  std::vector<FieldDiff> compare(const Snapshot& r, const Snapshot& d) const {
    std::vector<FieldDiff> diffs;
    if (!compares_registers(o_.ref)) return compare_memory_and_screen(r, d, diffs);
    for (const std::string& reg : cpu_register_names()) {
      const int rv = get_cpu_register(r.cpu, reg), dv = get_cpu_register(d.cpu, reg);
      if (rv != dv) diffs.push_back({reg, reg_text(reg, rv), reg_text(reg, dv)});
    }
    auto counter = [&](const char* name, int64_t rv, int64_t dv) {
      if (rv >= 0 && dv >= 0 && rv != dv)
        diffs.push_back({name, std::to_string(rv), std::to_string(dv)});
    };
    counter("cycle_count", r.cpu.cycle_count, d.cpu.cycle_count);
    counter("instr_count", r.cpu.instr_count, d.cpu.instr_count);
    return compare_memory_and_screen(r, d, diffs);
  }

  std::vector<FieldDiff> compare_memory_and_screen(const Snapshot& r, const Snapshot& d,
                                                   std::vector<FieldDiff>& diffs) const {
    for (size_t i = 0; i < o_.regions.size(); ++i) {
      if (r.mem_sha[i] == d.mem_sha[i]) continue;
      size_t k = 0;
      while (k < r.mem[i].size() && r.mem[i][k] == d.mem[i][k]) ++k;
      const std::string at = hex(o_.regions[i].lo + (uint32_t)k, 4);
      diffs.push_back(
          {"mem " + o_.regions[i].label(),
           at + "=0x" + hex(r.mem[i][k], 2) + " (sha256 " + r.mem_sha[i].substr(0, 12) + ")",
           at + "=0x" + hex(d.mem[i][k], 2) + " (sha256 " + d.mem_sha[i].substr(0, 12) + ")"});
    }
    if (r.screen != d.screen) {
      size_t k = 0, n = 0;
      while (k < r.screen.size() && k < d.screen.size() && r.screen[k] == d.screen[k]) ++k;
      for (size_t i = 0; i < r.screen.size() && i < d.screen.size(); ++i)
        n += r.screen[i] != d.screen[i];
      const std::string at = "x=" + std::to_string(k % GBX_SCREEN_W) +
                             " y=" + std::to_string(k / GBX_SCREEN_W) + " shade ";
      const std::string count = " (" + std::to_string(n) + " pixels differ)";
      diffs.push_back({"screen",
                       at + (k < r.screen.size() ? std::to_string(r.screen[k]) : "-") + count,
                       at + (k < d.screen.size() ? std::to_string(d.screen[k]) : "-") + count});
    }
    return diffs;
  }

  Backend& ref() { return *ref_; }
  Backend& dut() { return *dut_; }
  const Rom& rom() const { return rom_; }

 private:
  // --dut-specialize auto: a run would go on while the specialized kernel compiles; verify
  // waits for it after the profile's last step, so every later step checks that kernel.
  Status tier_up(int64_t step) {
    // A compile that fails is reported by the status check below, with the step.
    if (dut_->specialize_status() == "compiling") (void)dut_->finish_tier_up();
    const std::string status = dut_->specialize_status();
    if (status.rfind("failed", 0) == 0)
      return make_error(ErrorKind::Runtime, "--dut-specialize " + o_.dut_specialize +
                                                ": the specialized kernel " + status +
                                                " (after step " + std::to_string(step) + ")");
    if (status == "specialized" && dut_kernel_.empty())
      dut_kernel_ = "specialized from step " + std::to_string(step + 1);
    return ok_status();
  }

  const VerifyOptions& o_;
  Rom rom_;
  std::unique_ptr<Backend> ref_, dut_;
  std::string dut_kernel_;
};

Status validate(const VerifyOptions& o) {
  auto usage = [](std::string m) -> Status { return make_error(ErrorKind::Usage, std::move(m)); };
  if (o.ref != "mgba" && o.ref != "gambatte" && o.ref != "cpu" && o.ref != "cuda")
    return usage("unknown backend '" + o.ref + "' for --ref (mgba, gambatte, cpu, cuda)");
  if (o.dut == "mgba" || o.dut == "gambatte")
    return usage("--dut must be cpu or cuda: " + o.dut + " serves as a reference only");
  if (o.dut != "cpu" && o.dut != "cuda")
    return usage("unknown backend '" + o.dut + "' for --dut (cpu, cuda)");
  if (o.steps < 1) return usage("--steps must be at least 1, got " + std::to_string(o.steps));
  const int fps = frames_per_step(o);
  if (fps < 1) return usage("--frames-per-step must be at least 1, got " + std::to_string(fps));
  if (o.compare_every < 1)
    return usage("--compare-every must be at least 1, got " + std::to_string(o.compare_every));
  if (o.actions.gen == ActionGen::Hold &&
      (o.actions.hold_frames % fps || o.actions.release_frames % fps))
    return usage("--actions " + to_string(o.actions) + " needs frame counts that are " +
                 "multiples of --frames-per-step " + std::to_string(fps));
  if (o.fault && (o.fault->step < 1 || o.fault->step > o.steps))
    return usage("--inject-fault step " + std::to_string(o.fault->step) + " is outside 1.." +
                 std::to_string(o.steps));
  for (const MemRegion& r : o.regions)
    if (r.lo >= r.hi || r.hi > 0x10000) return usage("bad memory region " + r.label());
  if (o.dut_specialize.rfind("auto", 0) == 0) {
    BackendConfig cfg;
    if (Status st = apply_specialize_option(o.dut_specialize, Rom{}, cfg); !st) return st;
    // The profile ends with step ceil(N / frames-per-step); the specialized kernel runs from
    // the step after it. A check that never reaches it would check nothing it was asked to.
    const int64_t profile_steps = (cfg.specialize_auto_frames + fps - 1) / fps;
    if (o.steps <= profile_steps)
      return usage("--dut-specialize " + o.dut_specialize + " profiles " +
                   std::to_string(cfg.specialize_auto_frames) +
                   " frames, so the specialized kernel runs from step " +
                   std::to_string(profile_steps + 1) + "; --steps " + std::to_string(o.steps) +
                   " ends before it");
  }
  return ok_status();
}
}  // namespace

std::string VerifyReport::verdict() const {
  const std::string dut_text = dut + (dut_kernel.empty() ? "" : " " + dut_kernel);
  const std::string ref_text =
      compares_registers(ref) ? ref : ref + ": screens and memory only, no registers";
  if (match)
    return "verify: match (" + std::to_string(steps) + " steps, " + std::to_string(comparisons) +
           " comparisons, ref " + ref_text + ", dut " + dut_text + ", rom " + rom_name + ")";
  std::string first = diffs.empty()
                          ? std::string("none recorded")
                          : diffs[0].field + " ref=" + diffs[0].ref + " dut=" + diffs[0].dut;
  return "verify: MISMATCH at step " + std::to_string(mismatch_step) + " (first diff: " + first +
         "; ref " + ref_text + ", dut " + dut_text + "); bundle: " + bundle.string();
}

Result<VerifyReport> run_verify(const VerifyOptions& opts) {
  VerifyOptions o = opts;
  o.options = with_defaults(o.options, kVerify);
  if (auto st = validate(o); !st) return st.take_error();
  // Without registers, gambatte with no region and no screen would compare nothing.
  if (!compares_registers(o.ref) && o.regions.empty()) o.screen = true;
  Verifier v(o);
  if (auto st = v.open(); !st) return st.take_error();
  if (auto st = v.reset(); !st) return st.take_error();

  VerifyReport rep;
  rep.rom_name = v.rom().name;
  rep.ref = o.ref;
  rep.dut = o.dut;

  using Clock = std::chrono::steady_clock;
  auto last_progress = Clock::now();
  auto progress = [&](int64_t step) {
    if (!o.progress || Clock::now() - last_progress < std::chrono::seconds(1)) return;
    last_progress = Clock::now();
    o.progress("verify: step " + std::to_string(step) + "/" + std::to_string(o.steps));
  };

  int64_t last_match = 0, detected = 0;
  std::vector<FieldDiff> diffs;
  std::optional<Snapshot> ref_snap, dut_snap;
  for (int64_t step = 1; step <= o.steps; ++step) {
    if (auto st = v.advance(step); !st) return st.take_error();
    if (step % o.compare_every != 0 && step != o.steps) continue;
    auto r = v.snapshot(v.ref());
    if (!r) return r.take_error();
    auto d = v.snapshot(v.dut());
    if (!d) return d.take_error();
    ++rep.comparisons;
    diffs = v.compare(r.value(), d.value());
    if (!diffs.empty()) {
      detected = step;
      ref_snap = std::move(r.value());
      dut_snap = std::move(d.value());
      break;
    }
    last_match = step;
    progress(step);
  }
  if (detected == 0) {
    rep.steps = o.steps;
    rep.dut_kernel = v.dut_kernel();
    return rep;
  }

  // Seen only at a coarse comparison: replay from reset to the last agreement, then compare
  // every step so the bundle holds the first divergent one.
  int64_t first = detected;
  if (detected > last_match + 1) {
    if (auto st = v.reset(); !st) return st.take_error();
    for (int64_t step = 1; step <= last_match; ++step)
      if (auto st = v.advance(step); !st) return st.take_error();
    for (int64_t step = last_match + 1; step <= detected; ++step) {
      if (auto st = v.advance(step); !st) return st.take_error();
      auto r = v.snapshot(v.ref());
      if (!r) return r.take_error();
      auto d = v.snapshot(v.dut());
      if (!d) return d.take_error();
      ++rep.comparisons;
      auto step_diffs = v.compare(r.value(), d.value());
      if (step_diffs.empty()) continue;
      first = step;
      diffs = std::move(step_diffs);
      ref_snap = std::move(r.value());
      dut_snap = std::move(d.value());
      break;
    }
    // A replay that never diverges means a backend is not deterministic: the bundle then
    // keeps the original detection (its snapshots and step; the replay also ended there).
  }

  rep.match = false;
  rep.steps = first;
  rep.mismatch_step = first;
  rep.detected_at_step = detected;
  rep.diffs = diffs;
  BundleInput in{&o,       &v.rom(),   &v.ref(),   &v.dut(),   first,
                 detected, last_match, &*ref_snap, &*dut_snap, &rep.diffs};
  auto bundle = write_bundle(in);
  if (!bundle) return bundle.take_error();
  rep.bundle = bundle.value();
  rep.dut_kernel = v.dut_kernel();
  return rep;
}

}  // namespace gbx