// cuda backend, ROM specialization: the profiling tier and the background tier-up.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>

#include "cuda_backend_internal.h"
#include "gbx/engine/specialize.h"
#include "gbx/runtime/backends/cuda_backend.h"
#include "gbx/runtime/states/save_state.h"
#include "gbx/runtime/states/state_fields.h"

namespace gbx {

using cuda_detail::shared_kernel;

// ---- ROM specialization ---------------------------------------------------------------------
// The cuda side of ROM specialization (docs/internals/specialization.md), from the same
// generated source as the cpu backend's (NVRTC instead of clang). cfg.specialize: the specialized
// kernel from the start. auto: the profiling interpreter (a cached kernel of its own) counts
// instructions per ROM offset on the device for the first N frames; the counts come back in one
// copy and the plan is made on the host; then a background thread compiles (NVRTC) and loads the
// specialized kernel while steps go on with the profiling kernel, counting off. The first step that
// finds it ready swaps the function for the next launch: launches are ordered on one stream and the
// state ABI is the same, so nothing is copied and no step waits for the compile.

Status CudaBackend::check_specialize(const Rom& rom, const BackendConfig& cfg) {
  if (cfg.specialize && cfg.specialize->rom != rom.bytes)
    return make_error(ErrorKind::Usage, "the specialized kernel was made for another ROM (sha256 " +
                                            cfg.specialize->rom_sha256.substr(0, 16) + ")");
  if (cfg.specialize_auto_frames > 0 &&
      (cfg.specialize || cfg.memory_model != MemoryModel::Dmg || cfg.run_mode != RunMode::Frames))
    return make_error(ErrorKind::Usage,
                      "specialize auto needs no other plan, memory model dmg, run mode frames");
  return ok_status();
}

SynthParams CudaBackend::first_tier_params(const BackendConfig& cfg) {
  SynthParams p = synth_params_for(cfg, Device::Cuda, kObsDim);
  if (cfg.specialize_auto_frames > 0) p.profile = true;
  return p;
}

Status CudaBackend::start_profiling() {
  const size_t bytes = rom_.bytes.size() * sizeof(uint32_t);
  auto buf = DeviceBuffer::alloc(*ctx_, bytes);
  if (!buf) {
    Error e = buf.take_error();
    e.message = "allocating " + std::to_string(bytes) +
                " bytes of device memory for the profile counters: " + e.message;
    return e;
  }
  profile_buf_ = std::move(*buf);
  if (Status st = profile_buf_.fill(0, stream_.get()); !st) return st;
  profiling_ = true;
  tier_.start(cfg_.specialize_auto_frames);
  return ok_status();
}

std::string CudaBackend::start_tier() const {
  if (!start_fast_) return "optimized";
  if (optimized_step_ >= 0) return "optimized";
  if (!start_error_.empty()) return "fast (the optimized compile failed: " + start_error_ + ")";
  return "fast";
}

std::function<Result<CudaBackend::TierKernel>(TemplateBundle, SynthParams)>
CudaBackend::tier_builder() const {
  return [ctx = ctx_, sm = ctx_->sm()](TemplateBundle b, SynthParams p) -> Result<TierKernel> {
    KernelCache cache;
    auto k = build_cuda_kernel_for_device(b, p, cache, sm);
    if (!k) return k.take_error();
    // Loaded here too (the driver's context is per thread): the step thread only swaps.
    if (Status st = ctx->make_current(); !st) return st.take_error();
    auto loaded = shared_kernel(*ctx, *k);
    if (!loaded) return loaded.take_error();
    return TierKernel{std::move(*k), std::move(*loaded)};
  };
}

void CudaBackend::compile_optimized_in_background(TemplateBundle bundle, SynthParams p) {
  optimized_compile_ = std::async(
      std::launch::async, [build = tier_builder(), b = std::move(bundle), p = std::move(p)]() {
        return build(std::move(b), std::move(p));
      });
}

void CudaBackend::use_tier_kernel(TierKernel k) {
  kernel_ = std::move(k.kernel);
  loaded_ = std::move(k.loaded);
  if (start_fast_ && optimized_step_ < 0) {
    optimized_step_ = steps_;
    optimized_after_s_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
  }
}

void CudaBackend::specialization_failed(const std::string& why) {
  tier_.fail(why);
  // A quick-compiled kernel is no place to stay: the optimized interpreter follows instead.
  if (!start_fast_ || optimized_step_ >= 0) return;
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  if (!bundle) {
    start_error_ = bundle.error().message;
    return;
  }
  compile_optimized_in_background(std::move(*bundle),
                                  synth_params_for(cfg_, Device::Cuda, kObsDim));
}

Status CudaBackend::finish_tier_up() {
  if (tier_.state() == TierState::Compiling) {
    if (auto k = tier_.take_ready(true)) use_tier_kernel(std::move(*k));
    if (tier_.state() == TierState::Failed) specialization_failed(tier_.failure());
  }
  // After a quick start: the optimized interpreter (also in place of a failed specialization).
  take_optimized(true);
  return tier_.outcome();
}

void CudaBackend::take_optimized(bool wait) {
  if (!optimized_compile_.valid()) return;
  if (!wait && optimized_compile_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return;
  Result<TierKernel> k = optimized_compile_.get();
  if (!k) {
    start_error_ = k.error().message;
    return;
  }
  use_tier_kernel(std::move(*k));
}

void CudaBackend::tier_after_step() {
  if (tier_.profile_done_after(cfg_.frames_per_step)) {
    // The one read of the counters: ordered after the step just enqueued.
    std::vector<uint32_t> counts(rom_.bytes.size());
    Status st =
        profile_buf_.download(counts.data(), counts.size() * sizeof(uint32_t), 0, stream_.get());
    if (st) st = stream_.synchronize();
    profiling_ = false;  // later launches get no counters; the ones that had them are done
    profile_buf_ = DeviceBuffer();
    if (!st) return specialization_failed(st.error().message);
    tier_.compile(rom_.bytes, counts, synth_params_for(cfg_, Device::Cuda, kObsDim),
                  tier_builder());
    if (tier_.state() == TierState::Failed) specialization_failed(tier_.failure());
    return;
  }
  if (tier_.state() == TierState::Compiling) {
    if (auto k = tier_.take_ready(false)) return use_tier_kernel(std::move(*k));
    if (tier_.state() == TierState::Failed) return specialization_failed(tier_.failure());
  }
  take_optimized(false);
}

}  // namespace gbx
