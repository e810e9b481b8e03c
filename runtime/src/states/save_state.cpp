#include "gbx/runtime/states/save_state.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gbx/engine/cache.h"
#include "gbx/runtime/states/env_state.h"
#include "gbx/runtime/states/state_fields.h"
#include "gbx/runtime/states/state_rules.h"
#include "gbx_abi.h"

namespace gbx {
namespace {

constexpr char kMagic[4] = {'G', 'B', 'X', 'S'};
constexpr const char* kMemRecord = "mem";
// Kernels using seen(): the env's key set (StateLayout::seen_bytes), after "mem" (version 2).
constexpr const char* kSeenRecord = "seen";

Error bad(std::string message) { return make_error(ErrorKind::Input, std::move(message)); }

// State fields added since GBX_ABI_STATE_COMPAT_MIN, the last ones of GBX_STATE_FIELDS in this
// order, each with the ABI that added it. A state written before lacks them and loads them as
// zero. v13's OAM DMA set-up: older kernels landed a DMA's bytes at every step's end, so
// their states never hold one in flight.
struct AddedField {
  const char* name;
  uint32_t abi;
};
constexpr AddedField kAddedFields[] = {{"dma_pending", 13}, {"dma_overlap", 13}};

std::array<uint8_t, 32> rom_digest(const Rom& rom) {
  const std::string hex =
      rom.sha256.size() == 64
          ? rom.sha256
          : sha256_hex(std::string_view(reinterpret_cast<const char*>(rom.bytes.data()),
                                        rom.bytes.size()));
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::array<uint8_t, 32> d{};
  for (size_t i = 0; i < 32; ++i)
    d[i] = (uint8_t)(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return d;
}

std::string hex_prefix(const uint8_t* d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 6; ++i) s += {digits[d[i] >> 4], digits[d[i] & 15]};
  return s;
}

const char* kind_name(uint8_t k) {
  return k == (uint8_t)SaveStateKind::Kernel ? "kernel (cpu/cuda)"
         : k == (uint8_t)SaveStateKind::Mgba ? "mgba"
                                             : "unknown";
}

class Writer {
 public:
  std::vector<uint8_t> out;
  void u8(uint8_t v) { out.push_back(v); }
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back((uint8_t)(v >> (8 * i)));
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
};

// Bounds-checked cursor: every read past the end is the one "truncated" error.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool take(size_t k, const uint8_t** at) {
    if (n_ - pos_ < k) return false;
    *at = p_ + pos_;
    pos_ += k;
    return true;
  }
  bool le(uint64_t* v, int bytes) {
    const uint8_t* at;
    if (!take((size_t)bytes, &at)) return false;
    *v = 0;
    for (int i = 0; i < bytes; ++i) *v |= (uint64_t)at[i] << (8 * i);
    return true;
  }
  size_t left() const { return n_ - pos_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

struct FieldInfo {
  const char* name;
  size_t size;
};

const std::vector<FieldInfo>& field_table() {
  static const std::vector<FieldInfo> t = {
#define GBX_FIELD_INFO(name, size) {#name, (size_t)(size)},
      GBX_STATE_FIELDS(GBX_FIELD_INFO)
#undef GBX_FIELD_INFO
  };
  return t;
}

// Base address of each GbxState array, in table order.
std::vector<uint8_t*> field_bases(const GbxState& s) {
  return {
#define GBX_FIELD_BASE(name, size) reinterpret_cast<uint8_t*>(s.name),
      GBX_STATE_FIELDS(GBX_FIELD_BASE)
#undef GBX_FIELD_BASE
  };
}

// Conformance runs (flat64k) may hold no ROM: their blobs carry the hash of no bytes.
const Rom& rom_of(const EnvState& s) {
  static const Rom none;
  return s.rom() ? *s.rom() : none;
}

}  // namespace

const SaveStateRecord* find_record(const SaveStateBlob& blob, const std::string& name) {
  for (const SaveStateRecord& r : blob.records)
    if (r.name == name) return &r;
  return nullptr;
}

std::vector<uint8_t> write_save_state(const Rom& rom, MemoryModel mm, SaveStateKind kind,
                                      const std::vector<SaveStateRecord>& records) {
  Writer payload;
  payload.le(records.size(), 4);
  for (const SaveStateRecord& r : records) {
    payload.u8((uint8_t)r.name.size());
    payload.raw(r.name.data(), r.name.size());
    payload.le(r.bytes.size(), 4);
    payload.raw(r.bytes.data(), r.bytes.size());
  }
  Writer w;
  w.raw(kMagic, 4);
  w.le(kSaveStateVersion, 4);
  w.le(GBX_ABI_VERSION, 4);
  const auto digest = rom_digest(rom);
  w.raw(digest.data(), digest.size());
  w.u8(mm == MemoryModel::Flat64k ? 1 : 0);
  w.u8((uint8_t)kind);
  w.le(0, 2);
  w.le(payload.out.size(), 8);
  w.raw(payload.out.data(), payload.out.size());
  return std::move(w.out);
}

Result<SaveStateBlob> read_save_state(const std::vector<uint8_t>& blob, const Rom& rom,
                                      MemoryModel mm, SaveStateKind kind) {
  const size_t n = blob.size();
  if (n >= 4 && std::memcmp(blob.data(), kMagic, 4) != 0)
    return bad("not a GBX save state (the file does not start with 'GBXS')");
  if (n < kSaveStateHeaderBytes)
    return bad("save state is truncated: " + std::to_string(n) + " bytes, the header alone is " +
               std::to_string(kSaveStateHeaderBytes));
  Reader hdr(blob.data() + 4, kSaveStateHeaderBytes - 4);
  uint64_t version = 0, abi = 0, model = 0, pkind = 0, reserved = 0, payload = 0;
  const uint8_t* digest = nullptr;
  (void)(hdr.le(&version, 4) && hdr.le(&abi, 4) && hdr.take(32, &digest) && hdr.le(&model, 1) &&
         hdr.le(&pkind, 1) && hdr.le(&reserved, 2) && hdr.le(&payload, 8));
  if (version < kSaveStateVersionMin || version > kSaveStateVersion)
    return bad("save state format version " + std::to_string(version) +
               " is not supported (this build reads version " + std::to_string(kSaveStateVersion) +
               ")");
  if (abi < GBX_ABI_STATE_COMPAT_MIN || abi > GBX_ABI_VERSION)
    return bad("save state was written with state ABI v" + std::to_string(abi) +
               ", this build uses v" + std::to_string(GBX_ABI_VERSION));
  const size_t have = n - kSaveStateHeaderBytes;
  if (payload > have)
    return bad("save state is truncated: the header announces " + std::to_string(payload) +
               " bytes of state, the blob holds " + std::to_string(have));
  if (payload < have)
    return bad("save state has " + std::to_string(have - payload) +
               " unexpected bytes after its end");
  const auto want = rom_digest(rom);
  if (std::memcmp(digest, want.data(), 32) != 0)
    return bad("save state belongs to another ROM (sha256 " + hex_prefix(digest) +
               "..., the loaded ROM '" + rom.name + "' is " + hex_prefix(want.data()) + "...)");
  const uint8_t want_model = mm == MemoryModel::Flat64k ? 1 : 0;
  if (model != want_model)
    return bad(std::string("save state uses memory model ") + (model ? "flat64k" : "dmg") +
               ", this backend runs " + std::string(to_string(mm)));
  if (pkind != (uint8_t)kind)
    return bad(std::string("save state was written by the ") + kind_name((uint8_t)pkind) +
               " backend; this backend loads only " + kind_name((uint8_t)kind) + " states");

  SaveStateBlob out;
  out.memory_model = mm;
  out.kind = kind;
  out.abi = (uint32_t)abi;
  Reader r(blob.data() + kSaveStateHeaderBytes, have);
  const std::string cut = "save state is truncated inside its records";
  uint64_t count = 0;
  if (!r.le(&count, 4)) return bad(cut);
  // Each record takes at least 5 bytes: a bogus count cannot make us allocate much.
  if (count > r.left() / 5) return bad(cut);
  out.records.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t len = 0, size = 0;
    const uint8_t *name = nullptr, *bytes = nullptr;
    if (!r.le(&len, 1) || !r.take(len, &name) || !r.le(&size, 4) || !r.take(size, &bytes))
      return bad(cut);
    out.records.push_back({std::string(reinterpret_cast<const char*>(name), len),
                           std::vector<uint8_t>(bytes, bytes + size)});
  }
  if (r.left())
    return bad("save state has " + std::to_string(r.left()) + " bytes after its records");
  return out;
}

std::vector<uint8_t> encode_env_state(const EnvState& state, int env) {
  const auto& table = field_table();
  const auto bases = field_bases(state.soa());
  std::vector<SaveStateRecord> records;
  records.reserve(table.size() + 1);
  for (size_t i = 0; i < table.size(); ++i) {
    const uint8_t* p = bases[i] + (size_t)env * table[i].size;
    records.push_back({table[i].name, std::vector<uint8_t>(p, p + table[i].size)});
  }
  std::vector<uint8_t> mem = state.env_mem(env);
  const StateLayout& l = state.layout();
  if (l.seen_bytes) {
    records.push_back({kMemRecord, std::vector<uint8_t>(mem.begin(), mem.begin() + l.seen_offset)});
    records.push_back(
        {kSeenRecord, std::vector<uint8_t>(mem.begin() + l.seen_offset,
                                           mem.begin() + l.seen_offset + l.seen_bytes)});
  } else {
    records.push_back({kMemRecord, std::move(mem)});
  }
  return write_save_state(rom_of(state), state.memory_model(), SaveStateKind::Kernel, records);
}

Status decode_env_state(const std::vector<uint8_t>& blob, EnvState& state, int env, int label) {
  auto parsed = read_save_state(blob, rom_of(state), state.memory_model(), SaveStateKind::Kernel);
  if (!parsed) return parsed.take_error();
  const auto& recs = parsed->records;
  const auto& table = field_table();
  // A state of an older ABI lacks the fields added since; they are the table's last ones and
  // load as zero (kAddedFields says why that is what such a state meant).
  size_t fields = table.size();
  for (const AddedField& f : kAddedFields)
    if (parsed->abi < f.abi) --fields;
  // Fields, "mem", and "seen" when the writer's kernel used seen().
  if (recs.size() != fields + 1 && recs.size() != fields + 2)
    return bad("save state has " + std::to_string(recs.size()) +
               " records, this build's state has " + std::to_string(fields) +
               " fields + memory (+ the seen() set) for state ABI v" + std::to_string(parsed->abi));
  for (size_t i = 0; i < fields; ++i)
    if (recs[i].name != table[i].name || recs[i].bytes.size() != table[i].size)
      return bad("save state field " + std::to_string(i) + " is '" + recs[i].name + "' (" +
                 std::to_string(recs[i].bytes.size()) + " bytes), this build has '" +
                 table[i].name + "' (" + std::to_string(table[i].size) + " bytes)");
  const StateLayout& l = state.layout();
  const SaveStateRecord& mem = recs[fields];
  if (mem.name != kMemRecord || mem.bytes.size() != l.seen_offset)
    return bad("save state memory record is '" + mem.name + "' (" +
               std::to_string(mem.bytes.size()) + " bytes), this build has '" + kMemRecord + "' (" +
               std::to_string(l.seen_offset) + " bytes per env)");
  const SaveStateRecord* seen = recs.size() == fields + 2 ? &recs.back() : nullptr;
  if (seen && seen->name != kSeenRecord)
    return bad("save state record " + std::to_string(recs.size() - 1) + " is '" + seen->name +
               "', this build expects '" + kSeenRecord + "' there");
  // A set is restored into a kernel with the same capacity; a state without one (or one from a
  // kernel without seen()) starts an empty set; a set loaded where no expression uses seen()
  // has nowhere to go and is dropped.
  if (seen && l.seen_bytes && seen->bytes.size() != l.seen_bytes)
    return bad("save state's seen() set has " + std::to_string(seen->bytes.size()) +
               " bytes, this kernel's (seen_capacity) has " + std::to_string(l.seen_bytes));
  // Values: every field within what the kernels rely on (state_rules.cpp).
  StateRuleInput rules;
  rules.records = &recs;
  rules.mbc = state.rom() ? (unsigned)state.rom()->header.mbc : 0u;
  rules.flat64k = state.memory_model() == MemoryModel::Flat64k;
  rules.seen_bytes = l.seen_bytes;
  if (Status st = check_state_values(rules); !st)
    return bad("save state for env " + std::to_string(label < 0 ? env : label) + ": " +
               st.error().message);
  const auto bases = field_bases(state.soa());
  for (size_t i = 0; i < table.size(); ++i) {
    uint8_t* dst = bases[i] + (size_t)env * table[i].size;
    if (i < fields)
      std::memcpy(dst, recs[i].bytes.data(), table[i].size);
    else
      std::memset(dst, 0, table[i].size);
  }
  state.write_env_mem(env, 0, mem.bytes.data(), mem.bytes.size());
  state.clear_seen(env);
  if (seen && l.seen_bytes)
    state.write_env_mem(env, l.seen_offset, seen->bytes.data(), seen->bytes.size());
  return ok_status();
}

Result<std::vector<uint8_t>> read_save_state_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return bad("cannot read save state '" + path + "': no such file");
  if (!fs::is_regular_file(status)) return bad("save state '" + path + "' is not a regular file");
  const auto size = fs::file_size(path, ec);
  if (ec) return bad("cannot read save state '" + path + "': " + ec.message());
  if (size > kMaxSaveStateFile)
    return bad("save state '" + path + "' is " + std::to_string(size) +
               " bytes; no GBX save state is larger than " + std::to_string(kMaxSaveStateFile));
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes(size);
  if (!in || !in.read(reinterpret_cast<char*>(bytes.data()), (std::streamsize)size))
    return bad("cannot read save state '" + path + "': " + std::strerror(errno));
  return bytes;
}

Status write_save_state_file(const std::string& path, const std::vector<uint8_t>& blob) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  auto fail = [&](const std::string& why) {
    std::remove(tmp.c_str());
    return make_error(ErrorKind::Input, "cannot write save state '" + path + "': " + why);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return fail(std::strerror(errno));
    out.write(reinterpret_cast<const char*>(blob.data()), (std::streamsize)blob.size());
    out.flush();
    if (!out) return fail(std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return fail(std::strerror(errno));
  return ok_status();
}

}  // namespace gbx
