// gbx._native Backend: the cuda backend's outputs as they are on the device
// (python/gbx/cuda_arrays.py wraps them in __cuda_array_interface__ / __dlpack__ (kDLCUDA) on
// the backend's stream; host arrays are the output views of native_env.cpp, filled by the
// backend's one page-locked bulk copy), and every env's registers in one call.
#include "native.h"

namespace gbx::py {

using namespace nb::literals;

namespace {

// One field of every env's CpuState as a numpy array that owns its memory.
template <typename T, typename F>
nb::ndarray<nb::numpy, T, nb::ndim<1>> column(const std::vector<gbx::CpuState>& st, F get) {
  auto* v = new std::vector<T>(st.size());
  for (size_t i = 0; i < st.size(); ++i) (*v)[i] = (T)get(st[i]);
  nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(v->data(), {v->size()}, owner);
}

}  // namespace

// (name, device address, shape [num_envs, *per-env], dtype) of every output section.
nb::list Native::cuda_outputs() {
  const gbx::OutputBlock b = cuda()->device_outputs();
  nb::list out;
  for (const gbx::OutputSection& sec : b.sections) {
    nb::list shape;
    shape.append(n_);
    for (int d : sec.shape) shape.append(d);
    out.append(nb::make_tuple(sec.name, (uint64_t)(uintptr_t)(b.data + sec.offset),
                              nb::tuple(shape), sec.dtype));
  }
  return out;
}

// One section as a DLPack capsule ("dltensor", kDLCUDA); the caller orders streams first.
nb::ndarray<> Native::cuda_view(const std::string& name) {
  const gbx::OutputBlock b = cuda()->device_outputs();
  const gbx::OutputSection* sec = b.find(name);
  if (!sec) throw nb::value_error(("this env has no '" + name + "' output").c_str());
  std::vector<size_t> shape{(size_t)n_};
  for (int d : sec->shape) shape.push_back((size_t)d);
  const nb::dlpack::dtype dt = sec->dtype == "f32" ? nb::dtype<float>() : nb::dtype<uint8_t>();
  return nb::ndarray<>(const_cast<uint8_t*>(b.data + sec->offset), shape.size(), shape.data(),
                       nb::find(this), nullptr, dt, nb::device::cuda::value,
                       cuda()->context().index());
}

// `consumer` (a CUstream; 0 = the legacy default stream) waits on the device, through an
// event, for the work enqueued on the backend's stream so far; the host does not wait.
void Native::cuda_stream_wait(uint64_t consumer) {
  check(cuda()->stream_wait(reinterpret_cast<CUstream>((uintptr_t)consumer)));
}

// Every env's registers and counters, one array each (cuda: one launch, one copy).
nb::dict Native::registers() {
  std::vector<gbx::CpuState> st;
  {
    nb::gil_scoped_release release;
    auto r = backend_->cpu_states();
    if (r)
      st = std::move(r.value());
    else
      check_nogil(r.take_error());
  }
  raise_pending();
  nb::dict out;
  using S = const gbx::CpuState&;
  out["pc"] = column<uint16_t>(st, [](S c) { return c.pc; });
  out["sp"] = column<uint16_t>(st, [](S c) { return c.sp; });
  out["a"] = column<uint8_t>(st, [](S c) { return c.a; });
  out["f"] = column<uint8_t>(st, [](S c) { return c.f; });
  out["b"] = column<uint8_t>(st, [](S c) { return c.b; });
  out["c"] = column<uint8_t>(st, [](S c) { return c.c; });
  out["d"] = column<uint8_t>(st, [](S c) { return c.d; });
  out["e"] = column<uint8_t>(st, [](S c) { return c.e; });
  out["h"] = column<uint8_t>(st, [](S c) { return c.h; });
  out["l"] = column<uint8_t>(st, [](S c) { return c.l; });
  out["ime"] = column<uint8_t>(st, [](S c) { return c.ime; });
  out["run_state"] = column<uint8_t>(st, [](S c) { return c.run_state; });
  out["cycle_count"] = column<int64_t>(st, [](S c) { return c.cycle_count; });
  out["instr_count"] = column<int64_t>(st, [](S c) { return c.instr_count; });
  out["trap_kind"] = column<uint8_t>(st, [](S c) { return c.trap_kind; });
  return out;
}

gbx::CudaBackend* Native::cuda() const {
  auto* c = dynamic_cast<gbx::CudaBackend*>(backend_.get());
  if (!c)
    throw nb::value_error(
        ("device arrays need the cuda backend (this is " + backend_->name() + ")").c_str());
  return c;
}

void bind_cuda(NativeClass& c) {
  c.def("cuda_outputs", &Native::cuda_outputs);
  c.def("cuda_view", &Native::cuda_view, "name"_a);
  c.def_prop_ro("cuda_device", &Native::cuda_device);
  c.def_prop_ro("cuda_stream", &Native::cuda_stream);
  c.def("cuda_stream_wait", &Native::cuda_stream_wait, "consumer"_a);
  c.def("registers", &Native::registers);
}

}  // namespace gbx::py
