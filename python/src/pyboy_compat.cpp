// gbx._native for gbx.pyboy_compat (PyBoy state import): only what the importer cannot do in
// Python: the DMG post-boot state of a ROM as a GBX save state (the baseline whose fields the
// importer overwrites), the ROM bytes behind a spec, and the per-env memory offsets. Loading
// and saving go through Backend.load_state/save_state.
#include "gbx/runtime/states/env_state.h"
#include "gbx/runtime/states/save_state.h"
#include "native.h"

namespace gbx::py {

using namespace nb::literals;

namespace {

gbx::Rom rom_of(const std::string& spec, nb::bytes bytes) {
  if (bytes.size() == 0) return unwrap(gbx::load_rom(spec));
  const auto* p = static_cast<const uint8_t*>(bytes.data());
  return unwrap(gbx::rom_from_bytes(spec.empty() ? "bytes" : spec,
                                    std::vector<uint8_t>(p, p + bytes.size())));
}

nb::bytes post_boot_state(const std::string& spec, nb::bytes rom_bytes) {
  const gbx::Rom rom = rom_of(spec, rom_bytes);
  gbx::EnvState state(1, gbx::MemoryModel::Dmg, &rom);
  state.reset_dmg();
  const std::vector<uint8_t> blob = gbx::encode_env_state(state, 0);
  return nb::bytes(reinterpret_cast<const char*>(blob.data()), blob.size());
}

nb::bytes rom_bytes(const std::string& spec) {
  const gbx::Rom rom = unwrap(gbx::load_rom(spec));
  return nb::bytes(reinterpret_cast<const char*>(rom.bytes.data()), rom.bytes.size());
}

}  // namespace

void bind_pyboy_compat(nb::module_& m) {
  m.def("post_boot_state", &post_boot_state, "rom"_a, "rom_bytes"_a = nb::bytes(""),
        "The DMG post-boot state of `rom` as a GBX save-state blob (no kernel is compiled).");
  m.def("rom_bytes", &rom_bytes, "rom"_a, "The bytes of a ROM spec (path or builtin:NAME).");
  m.attr("MEM_VRAM") = GBX_MEM_VRAM;
  m.attr("MEM_WRAM") = GBX_MEM_WRAM;
  m.attr("MEM_OAM") = GBX_MEM_OAM;
  m.attr("MEM_IO") = GBX_MEM_IO;
  m.attr("MEM_CART_RAM") = GBX_MEM_CART_RAM;
  m.attr("SAVE_STATE_VERSION") = gbx::kSaveStateVersion;
}

}  // namespace gbx::py
