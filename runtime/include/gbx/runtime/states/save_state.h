#pragma once
// Save-state blobs: one env's machine state as versioned, self-describing little-endian bytes.
//
//   offset  size  field
//        0     4  magic "GBXS"
//        4     4  blob version (kSaveStateVersion)
//        8     4  GBX_ABI_VERSION of the writer
//       12    32  SHA-256 of the ROM image
//       44     1  memory model (0 dmg, 1 flat64k)
//       45     1  payload kind (SaveStateKind)
//       46     2  reserved, 0
//       48     8  payload bytes (everything after this 56-byte header)
//       56        payload: u32 record count, then per record
//                   u8 name length, name (ASCII), u32 size, size bytes
//
// Kernel payload (cpu, cuda): one record per GBX_STATE_FIELDS entry, in table order, named
// after the field and holding the env's element (the field's per-env size), then "mem": the
// env's per-env writable memory (VRAM, WRAM, OAM, I/O, cart RAM, and whatever else the layout
// holds; with seen() only the machine's part), then, when the kernel uses seen(), "seen": the
// env's key set (docs/guide/rewards.md). Loading demands the same field names, sizes and order as
// this build, so a blob from a build with other fields is refused even when both claim the same ABI
// version. The mgba backend writes its own payload kind (mGBA's serialized core plus the GBX
// counters); the two kinds are not interchangeable.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/roms/rom.h"

namespace gbx {

class EnvState;

// Version 2 added the optional "seen" record (kernels using seen()); version 1 blobs still load.
constexpr uint32_t kSaveStateVersion = 2;
constexpr uint32_t kSaveStateVersionMin = 1;
constexpr size_t kSaveStateHeaderBytes = 56;

enum class SaveStateKind : uint8_t {
  Kernel = 0,  // GbxState fields + per-env memory (cpu and cuda backends)
  Mgba = 1,    // mGBA core state (mgba backend)
};

struct SaveStateRecord {
  std::string name;
  std::vector<uint8_t> bytes;
};

// What a blob says about itself once its header checks out.
struct SaveStateBlob {
  MemoryModel memory_model = MemoryModel::Dmg;
  SaveStateKind kind = SaveStateKind::Kernel;
  uint32_t abi = 0;  // the writer's GBX_ABI_VERSION
  std::vector<SaveStateRecord> records;
};

// Header + records for `rom`.
std::vector<uint8_t> write_save_state(const Rom& rom, MemoryModel mm, SaveStateKind kind,
                                      const std::vector<SaveStateRecord>& records);

// Checks magic, blob version, ABI version, length, ROM hash, memory model and payload kind,
// in that order, and splits the records. Every failure is one line naming the problem.
Result<SaveStateBlob> read_save_state(const std::vector<uint8_t>& blob, const Rom& rom,
                                      MemoryModel mm, SaveStateKind kind);

// Kernel blobs from/into env `env` of a host EnvState (the cuda backend uses a one-env
// EnvState holding one env's slice downloaded from the device).
std::vector<uint8_t> encode_env_state(const EnvState& state, int env);
// Validates the whole blob first, its structure and then every value (state_rules.h): on error
// `state` is untouched and the message is one line; a value error names the env (`label`, or
// `env` when label < 0: the cuda backend decodes env N into a one-env image) and the field.
Status decode_env_state(const std::vector<uint8_t>& blob, EnvState& state, int env, int label = -1);

// Files. Reading refuses anything larger than kMaxSaveStateFile before reading it; writing
// goes to a temporary file beside `path` that is renamed over it, so a failed write leaves
// no file (and no half-written one) behind.
constexpr size_t kMaxSaveStateFile = 64u << 20;
Result<std::vector<uint8_t>> read_save_state_file(const std::string& path);
Status write_save_state_file(const std::string& path, const std::vector<uint8_t>& blob);

// Record helpers for payloads made of scalars.
template <typename T>
SaveStateRecord scalar_record(std::string name, T value) {
  SaveStateRecord r{std::move(name), std::vector<uint8_t>(sizeof(T))};
  for (size_t i = 0; i < sizeof(T); ++i)
    r.bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
  return r;
}

// Little-endian scalar of record `name` with exactly sizeof(T) bytes, or an error naming it.
template <typename T>
Result<T> scalar_from(const SaveStateBlob& blob, const std::string& name);
const SaveStateRecord* find_record(const SaveStateBlob& blob, const std::string& name);

template <typename T>
Result<T> scalar_from(const SaveStateBlob& blob, const std::string& name) {
  const SaveStateRecord* r = find_record(blob, name);
  if (!r) return make_error(ErrorKind::Input, "save state has no '" + name + "' record");
  if (r->bytes.size() != sizeof(T))
    return make_error(ErrorKind::Input, "save state record '" + name + "' is " +
                                            std::to_string(r->bytes.size()) + " bytes, expected " +
                                            std::to_string(sizeof(T)));
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(r->bytes[i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace gbx
