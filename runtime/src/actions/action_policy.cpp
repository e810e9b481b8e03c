#include "gbx/runtime/actions/action_policy.h"

#include <algorithm>
#include <fstream>
#include <iterator>

namespace gbx {
namespace {

// splitmix64's finalizer: a well-mixed 64-bit value from any counter, so action (seed, step,
// env) needs no generator state and every thread or backend draws the same one.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Result<ActionPolicy> ActionPolicy::parse(const std::string& spec, uint64_t seed) {
  ActionPolicy p;
  p.seed = seed;
  if (spec == "random") return p;
  if (spec == "none") {
    p.kind = Kind::None;
    return p;
  }
  if (spec.empty())
    return make_error(ErrorKind::Usage, "--actions must be random, none or a file path");
  p.kind = Kind::File;
  p.file = spec;
  std::ifstream in(spec, std::ios::binary);
  if (!in)
    return make_error(ErrorKind::Input, "cannot read actions file " + spec +
                                            " (--actions takes random, none or a file)");
  p.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(ErrorKind::Input, "cannot read actions file " + spec);
  if (p.bytes.empty())
    return make_error(ErrorKind::Input,
                      "actions file " + spec + " is empty (one action byte per env per step)");
  return p;
}

void ActionPolicy::fill(int64_t step, int num_envs, std::vector<int32_t>& out) const {
  out.resize((size_t)num_envs);
  switch (kind) {
    case Kind::None:
      std::fill(out.begin(), out.end(), 0);
      return;
    case Kind::Random: {
      const uint64_t base = mix(seed ^ mix((uint64_t)step));
      for (int e = 0; e < num_envs; ++e) out[(size_t)e] = (int32_t)(mix(base + (uint64_t)e) & 0xFF);
      return;
    }
    case Kind::File: {
      const uint64_t size = bytes.size();
      uint64_t at = ((uint64_t)step * (uint64_t)num_envs) % size;
      for (int e = 0; e < num_envs; ++e) {
        out[(size_t)e] = bytes[at];
        if (++at == size) at = 0;
      }
      return;
    }
  }
}

std::string ActionPolicy::name() const {
  switch (kind) {
    case Kind::Random:
      return "random";
    case Kind::None:
      return "none";
    case Kind::File:
      return "file";
  }
  return "?";
}

nlohmann::json ActionPolicy::to_json() const {
  nlohmann::json j = {{"policy", name()}};
  if (kind == Kind::Random) j["seed"] = seed;
  if (kind == Kind::File) {
    j["file"] = file;
    j["bytes"] = bytes.size();
  }
  return j;
}

}  // namespace gbx
