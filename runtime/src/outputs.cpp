// The step's output block: one contiguous allocation holding every output for all envs.
#include "gbx/runtime/backend.h"

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
  return off;
}

}  // namespace gbx
