// The step's output block: one contiguous allocation holding every output for all envs.
#include <cstdio>

#include "gbx/runtime/backends/backend.h"

namespace gbx {

size_t output_layout(const BackendConfig& cfg, int num_envs, std::vector<OutputSection>& out) {
  out.clear();
  size_t off = 0;
  auto add = [&](std::string name, std::string dtype, std::vector<int> shape, size_t elem) {
    size_t per_env = elem;
    for (int d : shape) per_env *= (size_t)d;
    OutputSection s{std::move(name), std::move(dtype), std::move(shape), off, per_env};
    off = (off + per_env * (size_t)num_envs + 63) & ~size_t(63);
    out.push_back(std::move(s));
  };
  if (cfg.obs == ObsKind::Vec) {
    add("obs_v0", "f32", {32}, sizeof(float));
  } else {
    switch (cfg.obs_format) {
      case ObsFormat::Full:
        add("pixels", "u8", {144, 160}, 1);
        break;
      case ObsFormat::Half:
        add("pixels", "u8", {72, 80}, 1);
        break;
      case ObsFormat::Packed:
        add("pixels", "u8", {144, 40}, 1);
        break;
    }
  }
  add("reward", "f32", {}, sizeof(float));
  add("done", "u8", {}, 1);
  if (!cfg.gather_addrs.empty()) add("gather", "u8", {(int)cfg.gather_addrs.size()}, 1);
  if (!cfg.hooks.empty()) add("hits", "u32", {(int)cfg.hooks.size()}, sizeof(uint32_t));
  return off;
}

Status check_hooks(const Rom& rom, const std::vector<HookAddr>& hooks) {
  if (hooks.size() > kMaxHooks)
    return make_error(ErrorKind::Usage, "at most " + std::to_string(kMaxHooks) + " hooks (got " +
                                            std::to_string(hooks.size()) + ")");
  const uint32_t banks = (uint32_t)(rom.bytes.size() / 0x4000);
  for (size_t i = 0; i < hooks.size(); ++i) {
    const HookAddr& h = hooks[i];
    char where[64];
    std::snprintf(where, sizeof where, "hooks[%zu] (0x%04X)", i, h.addr);
    if (h.addr >= 0xFE00 && h.addr < 0xFF80)
      return make_error(ErrorKind::Usage,
                        std::string(where) +
                            " is OAM or I/O: code runs from ROM 0000-7FFF or RAM (8000-FDFF, "
                            "HRAM FF80-FFFE)");
    if (h.addr == 0xFFFF)
      return make_error(ErrorKind::Usage,
                        std::string(where) + " is the IE register, not ROM or RAM");
    if (h.bank >= 0) {
      if (h.addr < 0x4000 || h.addr >= 0x8000)
        return make_error(
            ErrorKind::Usage,
            std::string(where) + ": a bank applies only to the switchable window 4000-7FFF");
      if ((uint32_t)h.bank >= banks)
        return make_error(ErrorKind::Usage, std::string(where) + ": bank " +
                                                std::to_string(h.bank) + " is beyond the " +
                                                std::to_string(banks) +
                                                " ROM banks of this cartridge");
    }
  }
  return ok_status();
}

}  // namespace gbx
