// gbx._native Backend: one env's memory, registers, serial output and screen; save states
// (save, load, copy between envs, the reset state); every env's memory in one call.
#include "native.h"

namespace gbx::py {

using namespace nb::literals;

namespace {

template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<2>> to_array(const T* src, std::array<size_t, 2> shape) {
  auto* buf = new T[shape[0] * shape[1]];
  std::memcpy(buf, src, sizeof(T) * shape[0] * shape[1]);
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<2>>(buf, 2, shape.data(), owner);
}

}  // namespace

nb::bytes Native::read_memory(int env, uint32_t lo, uint32_t hi) {
  auto v = unwrap(backend_->read_memory(env, lo, hi));
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

nb::dict Native::cpu_state(int env) {
  const gbx::CpuState s = unwrap(backend_->get_cpu_state(env));
  nb::dict d;
  d["pc"] = s.pc;
  d["sp"] = s.sp;
  d["a"] = s.a;
  d["f"] = s.f;
  d["b"] = s.b;
  d["c"] = s.c;
  d["d"] = s.d;
  d["e"] = s.e;
  d["h"] = s.h;
  d["l"] = s.l;
  d["ime"] = s.ime;
  d["run_state"] = s.run_state;
  d["cycle_count"] = s.cycle_count;
  d["instr_count"] = s.instr_count;
  d["trap_kind"] = s.trap_kind;
  return d;
}

// env's last complete frame, uint8[144, 160] shade indices 0-3 (a copy).
nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>> Native::screen(int env) {
  check_index(env);
  auto v = unwrap(backend_->read_screen(env));
  if (v.size() != 144 * 160)
    throw std::runtime_error("the " + backend_->name() + " backend returned a screen of " +
                             std::to_string(v.size()) + " bytes, not 144x160");
  return to_array<uint8_t>(v.data(), {144, 160});
}

nb::bytes Native::save_state(int env) {
  check_index(env);
  auto v = unwrap(backend_->save_state(env));
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

nb::list Native::save_states() {
  nb::list out;
  for (int e = 0; e < n_; ++e) out.append(save_state(e));
  return out;
}

// Loads the blob into env and refreshes env's outputs from it (every backend), so the next
// observation read describes the loaded state.
void Native::load_state(int env, nb::bytes blob) {
  check_index(env);
  check(backend_->load_state(env, to_vector(blob)));
  std::vector<uint8_t> m((size_t)n_, 0);
  m[env] = 1;
  check(refresh(m));
  check(backend_->sync());
  gather();
}

// Env src's state into the masked envs on the backend (cuda: no host copy), then their
// outputs refreshed from it.
void Native::copy_state(int src, MaskIn mask) {
  check_index(src);
  if ((int)mask.shape(0) != n_)
    throw nb::value_error(("copy_state: mask has " + std::to_string(mask.shape(0)) +
                           " entries for " + std::to_string(n_) + " envs")
                              .c_str());
  std::vector<uint8_t> m(mask.data(), mask.data() + n_);
  m[src] = 0;
  {
    nb::gil_scoped_release release;
    check_nogil(backend_->copy_state(src, m));
    if (pending_) check_nogil(refresh(m));
    if (pending_) check_nogil(backend_->sync());
  }
  raise_pending();
  gather();
}

void Native::set_reset_state(const std::vector<nb::bytes>& blobs) {
  std::vector<std::vector<uint8_t>> v;
  for (const auto& b : blobs) v.push_back(to_vector(b));
  check(backend_->set_reset_state(v));
}

// Bytes [lo, hi) of every env's bus view in one call: uint8[num_envs, hi - lo].
nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>> Native::read_memory_all(int64_t lo, int64_t hi) {
  if (lo < 0 || hi > 0x10000 || lo >= hi)
    throw nb::value_error(("memory range must satisfy 0 <= lo < hi <= 0x10000 (got " +
                           std::to_string(lo) + ".." + std::to_string(hi) + ")")
                              .c_str());
  const size_t w = (size_t)(hi - lo);
  auto* buf = new uint8_t[(size_t)n_ * w];
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  {
    nb::gil_scoped_release release;
    for (int e = 0; e < n_ && pending_; ++e) {
      if (cpu_) {
        check_nogil(
            cpu_->state().read_memory(e, (uint32_t)lo, (uint32_t)hi, false, buf + (size_t)e * w));
      } else {
        auto r = backend_->read_memory(e, (uint32_t)lo, (uint32_t)hi);
        if (!r)
          check_nogil(r.take_error());
        else
          std::memcpy(buf + (size_t)e * w, r.value().data(), w);
      }
    }
  }
  raise_pending();
  const size_t shape[2] = {(size_t)n_, w};
  return nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>>(buf, 2, shape, owner);
}

void bind_states(NativeClass& c) {
  c.def("read_memory", &Native::read_memory, "env"_a, "lo"_a, "hi"_a);
  c.def("cpu_state", &Native::cpu_state, "env"_a);
  c.def("serial", &Native::serial, "env"_a);
  c.def("screen", &Native::screen, "env"_a);
  c.def("save_state", &Native::save_state, "env"_a);
  c.def("save_states", &Native::save_states);
  c.def("load_state", &Native::load_state, "env"_a, "blob"_a);
  c.def("set_reset_state", &Native::set_reset_state, "blobs"_a);
  c.def("copy_state", &Native::copy_state, "src"_a, "mask"_a);
  c.def("read_memory_all", &Native::read_memory_all, "lo"_a, "hi"_a);
}

}  // namespace gbx::py
