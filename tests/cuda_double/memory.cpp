// GBX CUDA double: device memory (a fake address range backed by guarded host pages),
// page-locked host memory, copies and memsets, each recorded for the race checker.
#include <cstdio>
#include <cstring>

#include "cuda_double.h"

namespace gbx_double {

State& st() {
  static State* s = new State();  // never destroyed: callers may outlive static destructors
  return *s;
}

thread_local bool t_context_current = false;

Allocation* find_alloc(uint64_t addr) {
  State& S = st();
  auto it = S.allocations.upper_bound(addr);
  if (it == S.allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  return addr - a.base < std::max<size_t>(a.size, 1) ? &a : nullptr;
}

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

namespace {

// A device range for a copy: inside one live allocation, else CUDA_ERROR_INVALID_VALUE.
Allocation* device_range(uint64_t addr, size_t bytes, const char* call) {
  Allocation* a = find_alloc(addr);
  if (!a || bytes > a->size - (addr - a->base)) {
    note("%s: device range [%s, +%zu) is not inside one live allocation", call, hex(addr).c_str(),
         bytes);
    return nullptr;
  }
  return a;
}

// The page-locked allocation holding [p, p + bytes), or nullptr for pageable memory.
const std::pair<const uintptr_t, size_t>* pinned_range(const void* p, size_t bytes) {
  State& S = st();
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  auto it = S.pinned.upper_bound(v);
  if (it == S.pinned.begin()) return nullptr;
  --it;
  if (v - it->first >= it->second) return nullptr;
  if (bytes > it->second - (v - it->first))
    die("a copy of %zu bytes at %p runs past the end of its page-locked allocation", bytes, p);
  return &*it;
}

}  // namespace

CUresult d_cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  LOCK();
  NEED_CONTEXT();
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& S = st();
  if (injection().hit("oom", true) || bytes > kDeviceMemory - S.allocated)
    return CUDA_ERROR_OUT_OF_MEMORY;
  Allocation a;
  a.base = S.next_base;
  a.size = bytes;
  a.backing = std::make_unique<Backing>();
  if (!a.backing->create(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(a.host(), 0xA5, bytes);  // device memory is not zeroed
  S.next_base += (bytes + kGap - 1) / kGap * kGap + kGap;
  if (S.next_base >= kDeviceEnd) die("fake device address range exhausted");
  S.allocated += bytes;
  *p = (CUdeviceptr)a.base;
  S.allocations.emplace(a.base, std::move(a));
  return CUDA_SUCCESS;
}

CUresult d_cuMemFree(CUdeviceptr p) {
  LOCK();
  NEED_CONTEXT();
  State& S = st();
  auto it = S.allocations.find((uint64_t)p);
  if (it == S.allocations.end()) {
    note("cuMemFree(%s): not the base of a live allocation", hex(p).c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  // cuMemFree synchronises the device before freeing: nothing may still use the memory.
  for (const Stream& s : S.streams) host_waits_for(s.clock);
  S.allocated -= it->second.size;
  S.allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult d_cuMemHostAlloc(void** p, size_t bytes, unsigned flags) {
  LOCK();
  NEED_CONTEXT();
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags != 0) die("cuMemHostAlloc flags %u are not modelled (GBX asks for 0)", flags);
  if (injection().hit("oom", true)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(m, 0xA5, bytes);
  st().pinned[reinterpret_cast<uintptr_t>(m)] = bytes;
  *p = m;
  return CUDA_SUCCESS;
}

CUresult d_cuMemFreeHost(void* p) {
  LOCK();
  NEED_CONTEXT();
  State& S = st();
  auto it = S.pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == S.pinned.end()) {
    note("cuMemFreeHost(%p): not a page-locked allocation", p);
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (const Landing& l : S.landings)
    if (l.dst >= b && l.dst < b + it->second)
      die("cuMemFreeHost(%p) while a copy into it on %s is not known to be complete", p,
          stream_name(l.stream).c_str());
  for (const PinnedSource& x : S.pinned_sources)
    if (x.src >= b && x.src < b + it->second)
      die("cuMemFreeHost(%p) while %s on %s may still read it", p, x.what.c_str(),
          stream_name(x.stream).c_str());
  munmap(p, it->second);
  S.pinned.erase(it);
  return CUDA_SUCCESS;
}

std::atomic<uint64_t> g_copied_h2d{0}, g_copied_d2h{0};

namespace {

CUresult copy_h2d(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, bool sync) {
  LOCK();
  NEED_CONTEXT();
  if (bytes == 0) return CUDA_SUCCESS;
  g_copied_h2d += bytes;
  if (!src) return CUDA_ERROR_INVALID_VALUE;
  Allocation* a = device_range(dst, bytes, sync ? "cuMemcpyHtoD" : "cuMemcpyHtoDAsync");
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(sync ? nullptr : stream);
  // From pageable memory the call returns once the source is staged: the copy itself may
  // still be in flight, so the host learns nothing about its completion.
  if (sync) host_waits_for(st().streams[0].clock);
  Op op = begin_op(s);
  const size_t off = dst - a->base;
  const std::string what = std::string(sync ? "cuMemcpyHtoD" : "cuMemcpyHtoDAsync") + " of " +
                           std::to_string(bytes) + " bytes";
  access(op, *a, off, off + bytes, true, what);
  std::memcpy(a->host() + off, src, bytes);
  end_op(op);
  if (!sync && pinned_range(src, bytes)) {
    // Not staged: the GPU reads the source when the copy runs.
    const auto* p = static_cast<const uint8_t*>(src);
    st().pinned_sources.push_back(
        PinnedSource{s->id, at(op.clock, s->id), p, std::vector<uint8_t>(p, p + bytes), what});
  }
  return CUDA_SUCCESS;
}

CUresult copy_d2h(void* dst, CUdeviceptr src, size_t bytes, CUstream stream, bool sync) {
  LOCK();
  NEED_CONTEXT();
  if (bytes == 0) return CUDA_SUCCESS;
  g_copied_d2h += bytes;
  if (!dst) return CUDA_ERROR_INVALID_VALUE;
  Allocation* a = device_range(src, bytes, sync ? "cuMemcpyDtoH" : "cuMemcpyDtoHAsync");
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(sync ? nullptr : stream);
  Op op = begin_op(s);
  const size_t off = src - a->base;
  access(op, *a, off, off + bytes, false,
         std::string(sync ? "cuMemcpyDtoH" : "cuMemcpyDtoHAsync") + " of " + std::to_string(bytes) +
             " bytes");
  if (!sync && pinned_range(dst, bytes)) {
    // Truly asynchronous: the bytes are the device's now, but they reach the host only when
    // the host synchronises past this copy.
    const uint8_t* from = a->host() + off;
    st().landings.push_back(
        Landing{s->id, at(op.clock, s->id), static_cast<uint8_t*>(dst), {from, from + bytes}});
    std::memset(dst, 0xCD, bytes);
  } else {
    std::memcpy(dst, a->host() + off, bytes);
  }
  end_op(op);
  if (sync) {
    host_waits_for(op.clock);  // returns when the data is in host memory
    return sync_result();
  }
  return CUDA_SUCCESS;
}

CUresult memset_d8(CUdeviceptr d, unsigned char v, size_t n, CUstream stream, const char* call) {
  LOCK();
  NEED_CONTEXT();
  if (n == 0) return CUDA_SUCCESS;
  Allocation* a = device_range(d, n, call);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  Op op = begin_op(stream_of(stream));
  const size_t off = d - a->base;
  access(op, *a, off, off + n, true, std::string(call) + " of " + std::to_string(n) + " bytes");
  std::memset(a->host() + off, v, n);
  end_op(op);
  return CUDA_SUCCESS;
}

}  // namespace

CUresult d_cuMemcpyHtoD(CUdeviceptr d, const void* h, size_t n) {
  return copy_h2d(d, h, n, nullptr, true);
}
CUresult d_cuMemcpyHtoDAsync(CUdeviceptr d, const void* h, size_t n, CUstream s) {
  return copy_h2d(d, h, n, s, false);
}
CUresult d_cuMemcpyDtoH(void* h, CUdeviceptr d, size_t n) {
  return copy_d2h(h, d, n, nullptr, true);
}
CUresult d_cuMemcpyDtoHAsync(void* h, CUdeviceptr d, size_t n, CUstream s) {
  return copy_d2h(h, d, n, s, false);
}

CUresult d_cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  return memset_d8(d, v, n, nullptr, "cuMemsetD8");
}
CUresult d_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return memset_d8(d, v, n, s, "cuMemsetD8Async");
}

}  // namespace gbx_double
