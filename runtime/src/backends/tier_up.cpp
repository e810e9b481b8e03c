#include "gbx/runtime/backends/tier_up.h"

#include "gbx/engine/specialize.h"

namespace gbx {

const char* tier_state_name(TierState s) {
  switch (s) {
    case TierState::Off:
      return "off";
    case TierState::Profiling:
      return "profiling";
    case TierState::Compiling:
      return "compiling";
    case TierState::Specialized:
      return "specialized";
    case TierState::Failed:
      return "failed";
  }
  return "failed";
}

Result<TierPlan> make_tier_plan(const std::vector<uint8_t>& rom,
                                const std::vector<uint32_t>& counts, int64_t frames,
                                SynthParams base) {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) return bundle.take_error();
  const SpecProfile prof = spec_profile_from_counts(bundle->opcodes(), rom, counts, frames);
  auto plan = make_spec_plan(bundle->opcodes(), rom, prof);
  if (!plan) return plan.take_error();
  base.specialize = std::move(*plan);
  return TierPlan{std::move(*bundle), std::move(base)};
}

}  // namespace gbx
