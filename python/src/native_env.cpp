// gbx._native Backend: construction, stepping, the output block and its numpy views (no copy
// on the cpu backend; a host copy of the block for the others).
#include <algorithm>
#include <new>

#include "gbx/runtime/backends/options.h"
#include "gbx/runtime/backends/specialize.h"
#include "native.h"

namespace gbx::py {

using namespace nb::literals;

namespace {

std::string py_type_name(const nb::handle& v) { return nb::inst_name(v).c_str(); }

// One keyword argument as the declaration types it; a TypeError naming the Python name.
gbx::OptionValue native_value(const gbx::OptionDecl& d, const nb::handle& v) {
  auto wrong = [&](const char* want) {
    return nb::type_error((d.name + " must be " + want + ", got " + py_type_name(v)).c_str());
  };
  try {
    switch (d.type) {
      case gbx::OptionType::Int:
        if (nb::isinstance<nb::bool_>(v)) throw wrong("an int");
        return nb::cast<int64_t>(v);
      case gbx::OptionType::Float:
        return nb::cast<double>(v);
      case gbx::OptionType::Bool:
        return nb::cast<bool>(v);
      case gbx::OptionType::String:
        return nb::cast<std::string>(v);
      case gbx::OptionType::StringList:
        return nb::cast<std::vector<std::string>>(v);
      case gbx::OptionType::IntList:
        return nb::cast<std::vector<int64_t>>(v);
      case gbx::OptionType::Hooks: {
        std::vector<gbx::HookAddr> out;
        for (const auto& [bank, addr] : nb::cast<std::vector<std::pair<int64_t, int64_t>>>(v)) {
          if (addr < 0 || addr > 0xFFFF || bank < -1 || bank > 0xFFFF)
            throw nb::value_error(("hook bank:address " + std::to_string(bank) + ":" +
                                   std::to_string(addr) + " is outside 0x0000-0xFFFF")
                                      .c_str());
          out.push_back({(int32_t)bank, (uint16_t)addr});
        }
        return out;
      }
      case gbx::OptionType::Any:
        break;
    }
  } catch (const nb::cast_error&) {
  }
  throw wrong(gbx::to_string(d.type));
}

// The keyword arguments checked against the declaration, the native defaults filled in.
gbx::OptionValues native_options(const nb::kwargs& kwargs) {
  gbx::OptionValues out;
  for (auto [k, v] : kwargs) {
    const std::string name = nb::cast<std::string>(k);
    const gbx::OptionDecl* d = gbx::find_option(name);
    if (!d || !d->on(gbx::kNative))
      throw nb::type_error(("Backend() got an unexpected keyword argument '" + name + "'").c_str());
    out[name] = native_value(*d, v);
  }
  for (const gbx::OptionDecl& d : gbx::option_decls())
    if (d.on(gbx::kNative) && !out.count(d.name))
      if (auto v = gbx::default_on(d, gbx::kNative)) out[d.name] = *v;
  return out;
}

}  // namespace

Native::Native(const std::string& rom_spec, nb::bytes rom_bytes, const nb::kwargs& options) {
  gbx::OptionValues opts = native_options(options);
  if (rom_bytes.size() > 0) {
    const auto* p = static_cast<const uint8_t*>(rom_bytes.data());
    rom_ = unwrap(gbx::rom_from_bytes(rom_spec.empty() ? "bytes" : rom_spec,
                                      std::vector<uint8_t>(p, p + rom_bytes.size())));
  } else {
    rom_ = unwrap(gbx::load_rom(rom_spec));
  }
  gbx::BackendConfig cfg;
  check(gbx::apply_options(opts, gbx::kNative, rom_, cfg));
  gather_addrs_ = cfg.gather_addrs;
  const std::string backend = std::get<std::string>(opts["backend"]);
  if (backend == "mgba" &&
      (!cfg.reward_expr.empty() || !cfg.done_expr.empty() || !cfg.track.empty()))
    throw nb::value_error(
        "the mgba backend runs no generated kernel, so it has no reward/done expressions");
  const int num_envs = cfg.num_envs;
  if (num_envs < 1)
    throw nb::value_error(
        ("num_envs must be at least 1 (got " + std::to_string(num_envs) + ")").c_str());
  // The env state is sized up front (check_env_count); an allocation that still fails (an
  // address-space limit, say) is a MemoryError, not a crash.
  std::string out_of_memory;
  {
    nb::gil_scoped_release release;  // compiling a kernel takes seconds
    try {
      auto b = gbx::make_backend(backend, rom_, cfg);
      if (b)
        backend_ = std::move(b.value());
      else
        pending_ = b.take_error();
    } catch (const std::bad_alloc& e) {
      out_of_memory = e.what();
    }
  }
  if (!out_of_memory.empty()) raise_out_of_memory(num_envs, out_of_memory.c_str());
  raise_pending();
  cpu_ = dynamic_cast<gbx::CpuBackend*>(backend_.get());
  n_ = backend_->num_envs();
  frames_per_step_ = cfg.frames_per_step;
  try {
    bind_outputs(cfg);
  } catch (const std::bad_alloc& e) {
    raise_out_of_memory(num_envs, e.what());
  }
}

void Native::reset(uint64_t seed) {
  {
    nb::gil_scoped_release release;
    check_nogil(backend_->reset(seed));
    if (pending_) check_nogil(refresh(std::vector<uint8_t>((size_t)n_, 1)));
  }
  raise_pending();
  gather();
}

// The masked envs to their reset state (power-on), the others untouched: the backend's own
// reset(mask), then their outputs are refreshed from the new state (every backend: cpu and
// cuda give the same first observation).
void Native::reset_envs(MaskIn mask, bool gather_now) {
  if ((int)mask.shape(0) != n_)
    throw nb::value_error(("reset mask has " + std::to_string(mask.shape(0)) + " entries for " +
                           std::to_string(n_) + " envs")
                              .c_str());
  std::vector<uint8_t> m(mask.data(), mask.data() + n_);
  {
    nb::gil_scoped_release release;
    check_nogil(backend_->reset(m));
    if (pending_) check_nogil(refresh(m));
  }
  raise_pending();
  if (gather_now) gather();
}

// gather_now false: the host block is left as it was (a later call, or gather_outputs(),
// brings it up to date): one copy of the block per VecEnv.step even with resets and no-ops.
void Native::step(ActionsIn actions, bool gather_now) {
  if ((int)actions.shape(0) != n_)
    throw nb::value_error(("step: " + std::to_string(actions.shape(0)) + " actions for " +
                           std::to_string(n_) + " envs")
                              .c_str());
  actions_.assign(actions.data(), actions.data() + n_);
  {
    nb::gil_scoped_release release;
    check_nogil(backend_->step(actions_));
    if (pending_) check_nogil(backend_->sync());
  }
  raise_pending();
  if (gather_now) gather();
}

// Env i runs frames[i] frames with actions[i] (0: refresh its outputs only; < 0: not
// touched), all in one backend call (Backend::step_frames); the outputs are gathered.
void Native::step_frames(ActionsIn actions, FramesIn frames, bool gather_now) {
  if ((int)actions.shape(0) != n_ || (int)frames.shape(0) != n_)
    throw nb::value_error("step_frames: actions and frames need one entry per env");
  actions_.assign(actions.data(), actions.data() + n_);
  std::vector<int32_t> f(frames.data(), frames.data() + n_);
  {
    nb::gil_scoped_release release;
    check_nogil(backend_->step_frames(actions_, f));
    if (pending_) check_nogil(backend_->sync());
  }
  raise_pending();
  if (gather_now) gather();
}

// cuda tiered start: "fast" | "optimized" | "fast (the optimized compile failed: ...)";
// "optimized" on the other backends (they have one kernel from the start).
std::string Native::start_tier() const {
  auto* c = dynamic_cast<gbx::CudaBackend*>(backend_.get());
  return c ? c->start_tier() : "optimized";
}

void Native::finish_tier_up() {
  {
    nb::gil_scoped_release release;  // a compile takes seconds
    check_nogil(backend_->finish_tier_up());
  }
  raise_pending();
}

void Native::raise_pending() {
  if (pending_) return;
  const gbx::Error e = pending_.take_error();
  pending_ = gbx::ok_status();
  raise(e);
}

// The masked envs' outputs from their current state: the stage epilog alone (0 frames).
gbx::Status Native::refresh(const std::vector<uint8_t>& mask) {
  std::vector<int32_t> frames(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) frames[i] = mask[i] ? 0 : -1;
  return backend_->step_frames({}, frames);
}

// Non-cpu backends' outputs into the host block: one bulk copy where the backend has an
// output block (cuda), else env by env (mgba, the checking backend).
void Native::gather() {
  if (cpu_) return;
  if (bulk_) {
    const gbx::OutputBlock b = unwrap(backend_->outputs());
    std::memcpy(host_block_.data(), b.data, std::min(b.bytes, host_block_.size()));
    return;
  }
  const gbx::OutputSection* obs = find_section("obs_v0");
  const gbx::OutputSection* rew = find_section("reward");
  const gbx::OutputSection* gat = find_section("gather");
  for (int e = 0; e < n_; ++e) {
    auto o = unwrap(backend_->read_obs(e));
    if (obs && o.size() == (size_t)kObsDim)
      std::memcpy(host_block_.data() + obs->offset + (size_t)e * obs->bytes_per_env, o.data(),
                  sizeof(float) * kObsDim);
    const float r = unwrap(backend_->read_reward(e));
    std::memcpy(host_block_.data() + rew->offset + (size_t)e * sizeof(float), &r, sizeof r);
    if (gat)
      for (size_t k = 0; k < gather_addrs_.size(); ++k) {
        const uint32_t a = gather_addrs_[k];
        host_block_[gat->offset + (size_t)e * gat->bytes_per_env + k] =
            unwrap(backend_->read_memory(e, a, a + 1))[0];
      }
  }
}

// One output section as a numpy view [num_envs, *shape] of the block (the cpu backend's
// own buffer; a host copy for the others), overwritten by the next step or reset.
nb::ndarray<nb::numpy> Native::output(const std::string& name) {
  const gbx::OutputSection* s = find_section(name);
  if (!s) throw nb::value_error(("this env has no '" + name + "' output").c_str());
  std::vector<size_t> shape{(size_t)n_};
  for (int d : s->shape) shape.push_back((size_t)d);
  const nb::dlpack::dtype dt = s->dtype == "f32"   ? nb::dtype<float>()
                               : s->dtype == "u32" ? nb::dtype<uint32_t>()
                                                   : nb::dtype<uint8_t>();
  return nb::ndarray<nb::numpy>(const_cast<uint8_t*>(block_) + s->offset, shape.size(),
                                shape.data(), nb::find(this), nullptr, dt);
}

std::vector<std::string> Native::output_names() const {
  std::vector<std::string> v;
  for (const auto& s : sections_) v.push_back(s.name);
  return v;
}

// Where outputs are read from: the cpu backend's block itself; a host copy of the block
// for the others.
void Native::bind_outputs(const gbx::BackendConfig& cfg) {
  if (cpu_) {
    const gbx::OutputBlock b = unwrap(cpu_->outputs());
    block_ = b.data;
    sections_ = b.sections;
    return;
  }
  auto b = backend_->outputs();
  if (b) {
    bulk_ = true;
    sections_ = b.value().sections;
    host_block_.assign(b.value().data, b.value().data + b.value().bytes);
  } else {
    if (cfg.obs != gbx::ObsKind::Vec)
      throw nb::value_error(
          ("the " + backend_->name() + " backend has no pixels output (use obs vec)").c_str());
    host_block_.assign(gbx::output_layout(cfg, n_, sections_), 0);
  }
  block_ = host_block_.data();
  gather();
}

const gbx::OutputSection* Native::find_section(const std::string& name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

void Native::check_index(int env) const {
  if (env < 0 || env >= n_)
    throw nb::index_error(
        ("env " + std::to_string(env) + " out of range (0.." + std::to_string(n_ - 1) + ")")
            .c_str());
}

std::vector<uint8_t> Native::to_vector(const nb::bytes& b) {
  const auto* p = static_cast<const uint8_t*>(b.data());
  return std::vector<uint8_t>(p, p + b.size());
}

void bind_env(NativeClass& c) {
  c.def(
      "__init__",
      [](Native* self, const std::string& rom, nb::bytes rom_bytes, const nb::kwargs& options) {
        new (self) Native(rom, rom_bytes, options);
      },
      "rom"_a, "rom_bytes"_a = nb::bytes(""), "options"_a,
      "The options: gbx/runtime/backends/options.h's declaration, native surface "
      "(gbx._native.OPTIONS).");
  c.def("reset", &Native::reset, "seed"_a = 0);
  c.def("reset_envs", &Native::reset_envs, "mask"_a, "gather"_a = true);
  c.def("step", &Native::step, "actions"_a, "gather"_a = true);
  c.def("step_frames", &Native::step_frames, "actions"_a, "frames"_a, "gather"_a = true);
  c.def("gather_outputs", &Native::gather_outputs);
  c.def_prop_ro("obs", &Native::obs);
  c.def_prop_ro("reward", &Native::reward);
  c.def_prop_ro("done", &Native::done);
  c.def_prop_ro("name", &Native::name);
  c.def_prop_ro("kernel_key", &Native::kernel_key);
  c.def_prop_ro("start_tier", &Native::start_tier);
  c.def_prop_ro("specialize_status", &Native::specialize_status);
  c.def("finish_tier_up", &Native::finish_tier_up);
  c.def_prop_ro("rom_name", &Native::rom_name);
  c.def_prop_ro("rom_sha256", &Native::rom_sha256);
  c.def_prop_ro("rom_warnings", &Native::rom_warnings);
  c.def_prop_ro("num_envs", &Native::num_envs);
  c.def_prop_ro("frames_per_step", &Native::frames_per_step);
  c.def_prop_ro("obs_dim", &Native::obs_dim);
  c.def("output", &Native::output, "name"_a);
  c.def_prop_ro("output_names", &Native::output_names);
}

}  // namespace gbx::py
