// GBX CUDA double: the vector clocks of streams, events and the host, the race checker over
// device accesses, host synchronisation (where async copies into page-locked memory land),
// and the stream and event calls.
#include <cstring>

#include "cuda_double.h"

namespace gbx_double {

Stream* stream_of(CUstream s) {
  State& S = st();
  const uintptr_t v = reinterpret_cast<uintptr_t>(s);
  if (v == 0 || v == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY)) return &S.streams[0];
  if (v == reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD))
    die("the per-thread default stream is not modelled (GBX uses the legacy one)");
  const size_t id = v - 0x100;
  if (id >= S.streams.size() || !S.streams[id].live)
    die("use of stream handle %p that was never created or is destroyed", (void*)s);
  return &S.streams[id];
}

Op begin_op(Stream* s) {
  State& S = st();
  Op op{s, s->clock};
  join(op.clock, S.host);  // everything the host has waited for precedes what it issues now
  // Legacy default stream semantics: it waits for all blocking streams and they wait for it;
  // CU_STREAM_NON_BLOCKING streams take part in neither.
  if (s->id == 0) {
    for (const Stream& o : S.streams)
      if (o.live && !o.non_blocking) join(op.clock, o.clock);
  } else if (!s->non_blocking) {
    join(op.clock, S.streams[0].clock);
  }
  if (op.clock.size() <= (size_t)s->id) op.clock.resize(s->id + 1, 0);
  op.clock[s->id] = at(s->clock, s->id) + 1;
  return op;
}

void end_op(const Op& op) { op.stream->clock = op.clock; }

std::string stream_name(int id) {
  if (id == 0) return "the legacy default stream";
  return "stream " + std::to_string(id) +
         (st().streams[id].non_blocking ? " (CU_STREAM_NON_BLOCKING)" : "");
}

void access(const Op& op, Allocation& a, size_t begin, size_t end, bool write,
            const std::string& what) {
  State& S = st();
  // Accesses the host has seen complete are ordered before everything issued from now on.
  auto& acc = a.accesses;
  acc.erase(std::remove_if(acc.begin(), acc.end(),
                           [&](const Access& x) { return at(S.host, x.stream) >= x.epoch; }),
            acc.end());
  for (const Access& x : acc) {
    if (x.end <= begin || end <= x.begin || (!x.write && !write)) continue;
    if (at(op.clock, x.stream) >= x.epoch) continue;  // ordered after it
    die("race on device memory [%s, %s): %s on %s is not ordered after %s on %s (no stream "
        "order, event or host synchronisation between them); on a GPU they may run at the "
        "same time",
        hex(a.base + std::max(begin, x.begin)).c_str(), hex(a.base + std::min(end, x.end)).c_str(),
        what.c_str(), stream_name(op.stream->id).c_str(), x.what.c_str(),
        stream_name(x.stream).c_str());
  }
  acc.push_back(Access{begin, end, write, op.stream->id, at(op.clock, op.stream->id), what});
}

// The host now knows everything in `c` has completed: copies into page-locked memory that
// were waiting for it land, and copies out of it must have seen the source untouched.
void host_waits_for(const Clock& c) {
  State& S = st();
  join(S.host, c);
  auto& l = S.landings;
  for (auto it = l.begin(); it != l.end();) {
    if (at(S.host, it->stream) < it->epoch) {
      ++it;
      continue;
    }
    std::memcpy(it->dst, it->bytes.data(), it->bytes.size());
    it = l.erase(it);
  }
  auto& ps = S.pinned_sources;
  for (auto it = ps.begin(); it != ps.end();) {
    if (at(S.host, it->stream) < it->epoch) {
      ++it;
      continue;
    }
    if (std::memcmp(it->src, it->snapshot.data(), it->snapshot.size()) != 0)
      die("the host rewrote page-locked memory at %p while %s on %s was still reading it (no "
          "synchronisation in between); on a GPU the copy may send the new bytes",
          (const void*)it->src, it->what.c_str(), stream_name(it->stream).c_str());
    it = ps.erase(it);
  }
}

// A sync point: a pending kernel fault surfaces here, as an asynchronous error does on a GPU.
CUresult sync_result() {
  State& S = st();
  if (S.pending_fault) {
    S.pending_fault = false;
    S.sticky = CUDA_ERROR_LAUNCH_FAILED;
  }
  return S.sticky;
}

// ---- streams, events, context synchronisation ---------------------------------------------

CUresult d_cuCtxSynchronize() {
  LOCK();
  NEED_CONTEXT();
  for (const Stream& s : st().streams) host_waits_for(s.clock);
  return sync_result();
}

CUresult d_cuStreamCreate(CUstream* s, unsigned flags) {
  LOCK();
  NEED_CONTEXT();
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~unsigned(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  State& S = st();
  Stream n;
  n.id = (int)S.streams.size();
  n.non_blocking = flags & CU_STREAM_NON_BLOCKING;
  S.streams.push_back(n);
  *s = reinterpret_cast<CUstream>(uintptr_t(0x100 + n.id));
  return CUDA_SUCCESS;
}

CUresult d_cuStreamDestroy(CUstream s) {
  LOCK();
  Stream* x = stream_of(s);
  if (x->id == 0) return CUDA_ERROR_INVALID_HANDLE;
  x->live = false;  // its pending work still completes; its clock stays for ordering checks
  return CUDA_SUCCESS;
}

CUresult d_cuStreamSynchronize(CUstream s) {
  LOCK();
  NEED_CONTEXT();
  Stream* x = stream_of(s);
  Clock c = x->clock;
  if (x->id == 0)  // the legacy stream waits for the blocking streams' earlier work
    for (const Stream& o : st().streams)
      if (!o.non_blocking) join(c, o.clock);
  host_waits_for(c);
  return sync_result();
}

CUresult d_cuEventCreate(CUevent* e, unsigned) {
  LOCK();
  NEED_CONTEXT();
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  st().events.push_back(std::make_unique<Event>());
  *e = reinterpret_cast<CUevent>(st().events.back().get());
  return CUDA_SUCCESS;
}

Event* event_of(CUevent e) {
  for (auto& x : st().events)
    if (reinterpret_cast<CUevent>(x.get()) == e) return x.get();
  die("use of event handle %p that was never created or is destroyed", (void*)e);
}

CUresult d_cuEventDestroy(CUevent e) {
  LOCK();
  auto& ev = st().events;
  for (auto it = ev.begin(); it != ev.end(); ++it)
    if (reinterpret_cast<CUevent>(it->get()) == e) {
      ev.erase(it);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult d_cuEventRecord(CUevent e, CUstream s) {
  LOCK();
  NEED_CONTEXT();
  Event* x = event_of(e);
  Op op = begin_op(stream_of(s));  // an empty operation: it completes after the stream's work
  end_op(op);
  x->clock = op.clock;
  return CUDA_SUCCESS;
}

CUresult d_cuStreamWaitEvent(CUstream s, CUevent e, unsigned) {
  LOCK();
  NEED_CONTEXT();
  Event* x = event_of(e);
  join(stream_of(s)->clock, x->clock);
  return CUDA_SUCCESS;
}

CUresult d_cuEventSynchronize(CUevent e) {
  LOCK();
  NEED_CONTEXT();
  host_waits_for(event_of(e)->clock);
  return sync_result();
}

}  // namespace gbx_double
