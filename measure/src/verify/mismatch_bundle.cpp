// verify's mismatch bundle: a directory with the report, both states, memory dumps around
// the first difference and a repro.sh that runs the same check again.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gbx/engine/cache.h"
#include "gbx/measure/bench/system_info.h"
#include "gbx/runtime/backends/specialize.h"
#include "gbx/runtime/outputs/screen_image.h"
#include "gbx_abi.h"
#include "verify_internal.h"

namespace gbx::verify_detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kBundleSchemaVersion = 1;
constexpr uint32_t kMaxDumpBytes = 1024;

std::string flags_text(uint8_t f) {
  std::string s = "----";
  if (f & 0x80) s[0] = 'Z';
  if (f & 0x40) s[1] = 'N';
  if (f & 0x20) s[2] = 'H';
  if (f & 0x10) s[3] = 'C';
  return s;
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

}  // namespace

std::string reg_text(const std::string& reg, int v) {
  if (reg == "PC" || reg == "SP") return "0x" + hex((uint32_t)v, 4);
  if (reg == "F") return "0x" + hex((uint32_t)v, 2) + " (" + flags_text((uint8_t)v) + ")";
  return "0x" + hex((uint32_t)v, 2);
}

namespace {

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

}  // namespace

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
    const int32_t a = action_for_step(o.actions, o.seed, s, frames_per_step(o));
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
        {"frames_per_step", frames_per_step(o)},
        {"compare_every", o.compare_every},
        {"stage", option_text(o.options, "stage")},
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

}  // namespace gbx::verify_detail
