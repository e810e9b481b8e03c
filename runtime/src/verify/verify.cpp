#include "gbx/runtime/verify.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "gbx/engine/cache.h"
#include "gbx/runtime/backend.h"
#include "gbx/runtime/rom.h"
#include "gbx/runtime/screen_image.h"
#include "gbx/runtime/specialize.h"
#include "gbx/runtime/system_info.h"
#include "gbx_abi.h"

namespace gbx {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kBundleSchemaVersion = 1;
constexpr uint32_t kMaxDumpBytes = 1024;

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", digits, v);
  return buf;
}

std::string upper(std::string s) {
  for (char& c : s) c = (char)std::toupper((unsigned char)c);
  return s;
}

bool parse_hex(const std::string& s, uint32_t* out) {
  if (s.empty() || s.size() > 5) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (!std::isxdigit((unsigned char)c)) return false;
    v = v * 16 + (uint32_t)(std::isdigit((unsigned char)c)
                                ? c - '0'
                                : std::toupper((unsigned char)c) - 'A' + 10);
  }
  *out = v;
  return true;
}

std::string flags_text(uint8_t f) {
  std::string s = "----";
  if (f & 0x80) s[0] = 'Z';
  if (f & 0x40) s[1] = 'N';
  if (f & 0x20) s[2] = 'H';
  if (f & 0x10) s[3] = 'C';
  return s;
}

std::string reg_text(const std::string& reg, int v) {
  if (reg == "PC" || reg == "SP") return "0x" + hex((uint32_t)v, 4);
  if (reg == "F") return "0x" + hex((uint32_t)v, 2) + " (" + flags_text((uint8_t)v) + ")";
  return "0x" + hex((uint32_t)v, 2);
}

const char* run_state_text(uint8_t r) {
  switch (r) {
    case GBX_RUN_ACTIVE:
      return "active";
    case GBX_RUN_HALTED:
      return "halted";
    case GBX_RUN_STOPPED:
      return "stopped";
    default:
      return "unknown";
  }
}

// Bit mixing of SplitMix64: a per-step action that needs no generator state, so a re-run
// from reset (pinpointing, repro.sh) replays exactly the same inputs.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// gambatte (libretro) stops only at its own frame ends, so its registers are never from GBX's
// instant: it is compared by screens and memory regions alone (gambatte_backend.h).
bool compares_registers(const std::string& ref) { return ref != "gambatte"; }

// What verify compares of one backend at one step.
struct Snapshot {
  CpuState cpu;
  std::vector<std::vector<uint8_t>> mem;  // one per compared region
  std::vector<std::string> mem_sha;
  std::vector<uint8_t> screen;  // 160x144 shades, when the screens are compared
};

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
    cfg.num_envs = 1;
    cfg.frames_per_step = o_.frames_per_step;
    cfg.stage = o_.stage;
    cfg.threads = 1;  // one env
    cfg.rtc_lock = o_.rtc_lock;
    cfg.layout = o_.layout;
    cfg.ppu = o_.ppu;
    cfg.render = o_.screen;
    auto ref = make_backend(o_.ref, rom_, cfg);
    if (!ref) return ref.take_error();
    ref_ = std::move(ref.value());
    cfg.layout = o_.dut_layout;
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
        action_for_step(o_.actions, o_.seed, step, o_.frames_per_step)};
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
  if (o.frames_per_step < 1)
    return usage("--frames-per-step must be at least 1, got " + std::to_string(o.frames_per_step));
  if (o.compare_every < 1)
    return usage("--compare-every must be at least 1, got " + std::to_string(o.compare_every));
  if (o.actions.gen == ActionGen::Hold &&
      (o.actions.hold_frames % o.frames_per_step || o.actions.release_frames % o.frames_per_step))
    return usage("--actions " + to_string(o.actions) + " needs frame counts that are " +
                 "multiples of --frames-per-step " + std::to_string(o.frames_per_step));
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
    const int64_t profile_steps =
        (cfg.specialize_auto_frames + o.frames_per_step - 1) / o.frames_per_step;
    if (o.steps <= profile_steps)
      return usage("--dut-specialize " + o.dut_specialize + " profiles " +
                   std::to_string(cfg.specialize_auto_frames) +
                   " frames, so the specialized kernel runs from step " +
                   std::to_string(profile_steps + 1) + "; --steps " + std::to_string(o.steps) +
                   " ends before it");
  }
  return ok_status();
}

// ---- mismatch bundle -----------------------------------------------------------------------

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum((unsigned char)c) || c == '-' || c == '.' ? c : '_';
  return out.empty() ? "rom" : out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The bytes of a region worth dumping: all of it when small, else the 1024 bytes around the
// first difference (or its start when ref and dut agree there).
MemRegion dump_window(const MemRegion& r, const std::vector<uint8_t>& ref,
                      const std::vector<uint8_t>& dut) {
  if (r.hi - r.lo <= kMaxDumpBytes) return r;
  uint32_t first = 0;
  while (first < ref.size() && first < dut.size() && ref[first] == dut[first]) ++first;
  if (first >= ref.size()) first = 0;
  uint32_t lo = r.lo + (first & ~0xFFu);
  lo = lo >= r.lo + 256 ? lo - 256 : r.lo;  // a little context before the difference
  lo = std::min(lo, r.hi - kMaxDumpBytes);
  return MemRegion{lo, lo + kMaxDumpBytes};
}

Status write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f) return make_error(ErrorKind::Runtime, "cannot write " + p.string());
  return ok_status();
}

Status write_bytes(const fs::path& p, const std::vector<uint8_t>& b, uint32_t off, uint32_t n) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data() + off), (std::streamsize)n);
  f.close();
  if (!f) return make_error(ErrorKind::Runtime, "cannot write " + p.string());
  return ok_status();
}

struct BundleInput {
  const VerifyOptions* opts;
  const Rom* rom;
  Backend* ref;
  Backend* dut;
  int64_t step, detected_at, last_match;
  const Snapshot* ref_snap;
  const Snapshot* dut_snap;
  const std::vector<FieldDiff>* diffs;
};

json state_json(Backend& b, const Snapshot& s, int64_t step, const std::string& prefix,
                const std::vector<MemRegion>& regions, const std::vector<std::string>& dumps) {
  json regs = json::object();
  for (const std::string& r : cpu_register_names())
    regs[r] = reg_text(r, get_cpu_register(s.cpu, r));
  json mem = json::object();
  for (size_t i = 0; i < regions.size(); ++i) mem[regions[i].label()] = {{"sha256", s.mem_sha[i]}};
  json dump_files = json::array();
  for (const std::string& d : dumps) dump_files.push_back(prefix + d);
  auto serial = b.serial_output(0);
  const std::string key = b.kernel_key();
  return {{"backend", b.name()},
          {"step", step},
          {"env", 0},
          {"registers", regs},
          {"flags",
           {{"Z", (s.cpu.f & 0x80) != 0},
            {"N", (s.cpu.f & 0x40) != 0},
            {"H", (s.cpu.f & 0x20) != 0},
            {"C", (s.cpu.f & 0x10) != 0}}},
          {"ime", s.cpu.ime},
          {"run_state", run_state_text(s.cpu.run_state)},
          {"cycle_count", s.cpu.cycle_count},
          {"instr_count", s.cpu.instr_count},
          {"trap",
           {{"kind", s.cpu.trap_kind},
            {"pc", "0x" + hex(s.cpu.trap_pc, 4)},
            {"opcode", "0x" + hex(s.cpu.trap_opcode, 2)}}},
          {"serial", serial ? serial.value() : std::string()},
          {"memory", mem},
          {"memory_dumps", dump_files},
          {"kernel_key", key.empty() ? json(nullptr) : json(key)}};
}

Result<fs::path> write_bundle(const BundleInput& in) {
  const VerifyOptions& o = *in.opts;
  const std::string utc = utc_timestamp();
  const std::string name =
      utc + "_" + sanitize(in.rom->name) + "_" + sanitize(o.ref) + "_vs_" + sanitize(o.dut);
  const fs::path root = o.out_dir / "mismatch";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return make_error(ErrorKind::Runtime, "cannot create " + root.string() + ": " + ec.message());
  // Built aside and renamed, so a reader never sees half a bundle.
  const fs::path tmp = root / (".tmp-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec)
    return make_error(ErrorKind::Runtime, "cannot create " + tmp.string() + ": " + ec.message());

  std::vector<std::string> files;
  auto put = [&](const std::string& file, const std::string& text) -> Status {
    files.push_back(file);
    return write_text(tmp / file, text);
  };

  // Memory dumps: the compared regions, else a default set that shows what micro-ROMs touch.
  std::vector<MemRegion> dump_regions = o.regions;
  const bool compared = !o.regions.empty();
  if (!compared) dump_regions = {{0xC000, 0xC100}, {0xFF00, 0xFF80}, {0xFF80, 0x10000}};
  if (!compared && o.ref == "gambatte") dump_regions.erase(dump_regions.begin() + 1);  // no I/O
  std::vector<std::string> dumps;
  json dump_meta = json::array();
  for (size_t i = 0; i < dump_regions.size(); ++i) {
    const MemRegion& r = dump_regions[i];
    std::vector<uint8_t> rb, db;
    if (compared) {
      rb = in.ref_snap->mem[i];
      db = in.dut_snap->mem[i];
    } else {
      auto a = in.ref->read_memory(0, r.lo, r.hi);
      if (!a) return a.take_error();
      auto b = in.dut->read_memory(0, r.lo, r.hi);
      if (!b) return b.take_error();
      rb = std::move(a.value());
      db = std::move(b.value());
    }
    const MemRegion w = dump_window(r, rb, db);
    const std::string tag = "mem_" + w.file_tag() + ".bin";
    for (const auto& [prefix, bytes] : {std::pair{"ref_", &rb}, std::pair{"dut_", &db}}) {
      files.push_back(prefix + tag);
      if (auto st = write_bytes(tmp / (prefix + tag), *bytes, w.lo - r.lo, w.hi - w.lo); !st)
        return st.take_error();
    }
    dumps.push_back(tag);
    dump_meta.push_back({{"region", r.label()},
                         {"dumped", w.label()},
                         {"compared", compared},
                         {"ref", "ref_" + tag},
                         {"dut", "dut_" + tag}});
  }

  // The two screens as pictures, when they were compared.
  for (const auto& [file, snap] :
       {std::pair{"ref_screen.png", in.ref_snap}, std::pair{"dut_screen.png", in.dut_snap}}) {
    if (snap->screen.empty()) continue;
    files.push_back(file);
    if (auto st = write_png((tmp / file).string(), screen_image(snap->screen)); !st)
      return st.take_error();
  }

  if (auto st =
          put("ref_state.json",
              state_json(*in.ref, *in.ref_snap, in.step, "ref_", o.regions, dumps).dump(2) + "\n");
      !st)
    return st.take_error();
  if (auto st =
          put("dut_state.json",
              state_json(*in.dut, *in.dut_snap, in.step, "dut_", o.regions, dumps).dump(2) + "\n");
      !st)
    return st.take_error();

  json fields = json::array();
  for (const FieldDiff& d : *in.diffs)
    fields.push_back({{"field", d.field}, {"ref", d.ref}, {"dut", d.dut}});
  const json diff = {{"step", in.step},
                     {"detected_at_step", in.detected_at},
                     {"last_matching_step", in.last_match},
                     {"first", fields.empty() ? json(nullptr) : fields[0]},
                     {"fields", fields}};
  if (auto st = put("diff.json", diff.dump(2) + "\n"); !st) return st.take_error();

  std::string actions;
  for (int64_t s = 1; s <= in.step; ++s) {
    const int32_t a = action_for_step(o.actions, o.seed, s, o.frames_per_step);
    actions += json{{"step", s}, {"action", a}}.dump() + "\n";
  }
  if (auto st = put("actions.jsonl", actions); !st) return st.take_error();

  std::string repro =
      "#!/bin/sh\n# Re-runs the verify that wrote this bundle; exit 1 while the mismatch is "
      "there.\n";
  if (const char* cache = std::getenv("GBX_CACHE_DIR"))
    repro += ": \"${GBX_CACHE_DIR:=" + std::string(cache) + "}\"\nexport GBX_CACHE_DIR\n";
  repro +=
      "cd " + shell_quote(o.cwd.string()) + " || exit 2\nexec " + shell_quote(o.tool_path.string());
  for (const std::string& a : o.args) repro += " " + shell_quote(a);
  repro += "\n";
  if (auto st = put("repro.sh", repro); !st) return st.take_error();
  fs::permissions(tmp / "repro.sh",
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);

  const SystemInfo& sys = system_info();
  auto key_or_null = [](const std::string& k) { return k.empty() ? json(nullptr) : json(k); };
  json regions = json::array();
  for (const MemRegion& r : o.regions) regions.push_back(r.label());
  files.push_back("metadata.json");
  const json meta = {
      {"schema_version", kBundleSchemaVersion},
      {"kind", "gbx-verify-mismatch"},
      {"created_utc", utc},
      {"rom",
       {{"name", in.rom->name},
        {"spec", o.rom},
        {"size", in.rom->bytes.size()},
        {"sha256", in.rom->sha256}}},
      {"backends", {{"ref", o.ref}, {"dut", o.dut}}},
      {"step", in.step},
      {"detected_at_step", in.detected_at},
      {"env", 0},
      {"first_diff", fields.empty() ? json(nullptr) : fields[0]},
      {"settings",
       {{"steps", o.steps},
        {"frames_per_step", o.frames_per_step},
        {"compare_every", o.compare_every},
        {"stage", std::string(to_string(o.stage))},
        {"num_envs", 1},
        {"mem_regions", regions},
        {"screen", o.screen},
        {"inject_fault",
         o.fault ? json(std::to_string(o.fault->step) + ":" + o.fault->reg) : json(nullptr)}}},
      {"actions",
       {{"generator", to_string(o.actions)}, {"seed", o.seed}, {"file", "actions.jsonl"}}},
      {"system", to_json(sys)},
      {"kernel_cache_keys",
       {{"ref", key_or_null(in.ref->kernel_key())}, {"dut", key_or_null(in.dut->kernel_key())}}},
      {"memory_dumps", dump_meta},
      {"command", {{"tool", o.tool_path.string()}, {"args", o.args}, {"cwd", o.cwd.string()}}},
      {"files", files}};
  if (auto st = write_text(tmp / "metadata.json", meta.dump(2) + "\n"); !st) return st.take_error();

  fs::path dest = root / name;
  for (int n = 2; fs::exists(dest, ec); ++n) dest = root / (name + "-" + std::to_string(n));
  fs::rename(tmp, dest, ec);
  if (ec)
    return make_error(ErrorKind::Runtime, "cannot rename " + tmp.string() + " to " + dest.string() +
                                              ": " + ec.message());
  return dest;
}

}  // namespace

std::string MemRegion::label() const { return hex(lo, 4) + ":" + hex(hi, 4); }
std::string MemRegion::file_tag() const { return hex(lo, 4) + "_" + hex(hi, 4); }

Result<MemRegion> parse_mem_region(const std::string& text, const std::string& flag) {
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad " + flag + " '" + text + "': " + why);
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos)
    return bad("expected LO:HI in hex, e.g. C000:C100");
  MemRegion r;
  if (!parse_hex(text.substr(0, colon), &r.lo) || !parse_hex(text.substr(colon + 1), &r.hi))
    return bad("LO and HI must be hex digits only, e.g. C000:C100");
  if (r.hi > 0x10000) return bad("HI must be at most 10000 (the end of the 64 KiB bus)");
  if (r.lo >= r.hi) return bad("LO must be below HI (HI is exclusive)");
  return r;
}

Result<FaultSpec> parse_fault_spec(const std::string& text) {
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad --inject-fault '" + text + "': " + why);
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) return bad("expected STEP:REG, e.g. 37:A");
  const std::string step = text.substr(0, colon);
  if (step.empty() || step.size() > 18 ||
      !std::all_of(step.begin(), step.end(), [](char c) { return std::isdigit((unsigned char)c); }))
    return bad("STEP must be a positive decimal number");
  FaultSpec f;
  f.step = std::stoll(step);
  f.reg = upper(text.substr(colon + 1));
  const auto& names = cpu_register_names();
  if (std::find(names.begin(), names.end(), f.reg) == names.end())
    return bad("REG must be one of PC SP A F B C D E H L");
  if (f.step < 1) return bad("STEP must be at least 1");
  return f;
}

std::optional<ActionGen> parse_action_gen(const std::string& s) {
  if (s == "noop") return ActionGen::Noop;
  if (s == "seeded_random") return ActionGen::SeededRandom;
  if (s == "striped") return ActionGen::Striped;
  return std::nullopt;
}

std::string to_string(ActionGen g) {
  switch (g) {
    case ActionGen::Noop:
      return "noop";
    case ActionGen::SeededRandom:
      return "seeded_random";
    case ActionGen::Striped:
      return "striped";
    case ActionGen::Hold:
      return "hold";
  }
  return "noop";
}

Result<ActionSchedule> parse_action_schedule(const std::string& s) {
  if (auto g = parse_action_gen(s)) return ActionSchedule(*g);
  auto bad = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::Usage, "bad --actions '" + s + "': " + why);
  };
  if (s.rfind("hold", 0) != 0)
    return bad("expected noop, seeded_random, striped or hold:H:R (e.g. hold:8:16)");
  const auto c1 = s.find(':'), c2 = s.find(':', c1 == std::string::npos ? c1 : c1 + 1);
  if (s.size() < 5 || c1 != 4 || c2 == std::string::npos)
    return bad("expected hold:H:R, frames held and released, e.g. hold:8:16");
  auto number = [](const std::string& t, int* out) {
    if (t.empty() || t.size() > 6 ||
        !std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit((unsigned char)c); }))
      return false;
    *out = std::stoi(t);
    return true;
  };
  ActionSchedule a(ActionGen::Hold);
  if (!number(s.substr(c1 + 1, c2 - c1 - 1), &a.hold_frames) ||
      !number(s.substr(c2 + 1), &a.release_frames))
    return bad("H and R must be decimal frame counts (at most 6 digits)");
  if (a.hold_frames < 1) return bad("H (frames held) must be at least 1");
  return a;
}

std::string to_string(const ActionSchedule& a) {
  if (a.gen != ActionGen::Hold) return to_string(a.gen);
  return "hold:" + std::to_string(a.hold_frames) + ":" + std::to_string(a.release_frames);
}

int32_t action_for_step(const ActionSchedule& a, uint64_t seed, int64_t step, int frames_per_step) {
  switch (a.gen) {
    case ActionGen::Noop:
      return 0;
    case ActionGen::SeededRandom:
      return (int32_t)(mix64(seed * 0x100000001B3ull ^ (uint64_t)step) & 0xFF);
    case ActionGen::Striped: {
      const int64_t k = (step - 1) % 9;
      return k < 8 ? (int32_t)(1 << k) : 0;
    }
    case ActionGen::Hold: {
      const int64_t frame = (step - 1) * frames_per_step;
      const int64_t period = (int64_t)a.hold_frames + a.release_frames;
      if (frame % period >= a.hold_frames) return 0;
      // One button per press, drawn from (seed, press number) alone.
      const uint64_t press = (uint64_t)(frame / period);
      return (int32_t)1 << (mix64(seed * 0x9E3779B97F4A7C15ull ^ mix64(press)) % 8);
    }
  }
  return 0;
}

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
  if (auto st = validate(opts); !st) return st.take_error();
  VerifyOptions o = opts;
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
