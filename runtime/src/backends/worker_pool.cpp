#include "gbx/runtime/backends/worker_pool.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace gbx {
namespace {

constexpr uint64_t kStop = 1ull << 31;
constexpr uint64_t kClosed = 1ull << 30;
constexpr uint64_t kCountMask = kClosed - 1;

// How long a worker spins for the next run before it blocks. A worker's wait is the other
// participants' last chunks (an env step: 0.1 to 1 ms in the game benchmarks) plus the
// caller's gap between runs. Blocking costs a futex wake-up when the run comes (tens of
// microseconds on a VM: 3.7% of a 2048 step at 8 envs a thread, measured with
// GBX_POOL_STATS). So while the caller's gaps are short (a tight step loop) workers spin
// long enough to span the other threads' last chunks; once a gap is longer (an RL policy
// between steps) they spin briefly, so as not to take a core the policy could use. The caller
// spins long for its workers: it has nothing else to do then.
constexpr auto kSpinShort = std::chrono::microseconds(100);
constexpr auto kSpinLong = std::chrono::microseconds(2000);
constexpr int64_t kTightGapNs = 500000;  // caller gaps below this: a tight loop

uint32_t generation(uint64_t job) { return (uint32_t)(job >> 32); }
uint64_t inside(uint64_t job) { return job & kCountMask; }

uint64_t pack(uint64_t front, uint64_t back) { return front << 32 | back; }
int64_t front_of(uint64_t w) { return (int64_t)(w >> 32); }
int64_t back_of(uint64_t w) { return (int64_t)(w & 0xffffffffu); }

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or `spin` is over; true if done() held.
template <class Done>
bool spin_until(Done done, std::chrono::microseconds spin) {
  const auto until = std::chrono::steady_clock::now() + spin;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() >= until) return false;
      // More threads than free cores: let the ones with work run.
      std::this_thread::yield();
    }
  }
}

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// One run at a time: marks a run in progress for its scope, and refuses a second one (from
// another thread, or from inside fn).
class RunGuard {
 public:
  explicit RunGuard(std::atomic<bool>& running) : running_(running) {
    if (running_.exchange(true))
      throw std::logic_error("WorkerPool::run called while a run is in progress");
  }
  ~RunGuard() { running_.store(false); }
  RunGuard(const RunGuard&) = delete;
  RunGuard& operator=(const RunGuard&) = delete;

 private:
  std::atomic<bool>& running_;
};

}  // namespace

WorkerPool::WorkerPool(int threads) {
  const int t = std::max(1, threads);
  const char* env = std::getenv("GBX_POOL_STATS");
  timing_ = env && *env && std::string(env) != "0";
  shares_.reset(new Share[(size_t)t]);
  for (int i = 1; i < t; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

WorkerPool::~WorkerPool() {
  if (timing_) print_stats();
  job_.fetch_or(kStop);
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::run(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  if (n > (int64_t)0xffffffffu) throw std::length_error("WorkerPool::run: range over 2^32");
  const RunGuard guard(running_);

  const int t = threads();
  if (t == 1) {
    ParticipantStats& st = shares_[0].stats;
    const int64_t w0 = timing_ ? wall_ns() : 0, c0 = timing_ ? thread_cpu_ns() : 0;
    if (grain <= 0) {
      fn(0, n);
      st.chunks += 1;
    } else {
      for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain));
      st.chunks += (n + grain - 1) / grain;
    }
    if (timing_) {
      st.runs += 1;
      st.items += n;
      st.busy_ns += wall_ns() - w0;
      st.cpu_ns += thread_cpu_ns() - c0;
    }
    return;
  }
  grain_ = grain > 0 ? grain : std::max<int64_t>(1, n / ((int64_t)t * 32));
  for (int i = 0; i < t; ++i)
    shares_[i].bounds.store(pack((uint64_t)(n * i / t), (uint64_t)(n * (i + 1) / t)),
                            std::memory_order_relaxed);
  fn_ = &fn;
  run_job();
}

void WorkerPool::run_phased(int64_t n, int phases, const PhaseFn& fn) {
  if (n <= 0 || phases <= 0) return;
  const RunGuard guard(running_);
  if (phases > 127) throw std::length_error("WorkerPool::run_phased: over 127 phases");
  if (threads() == 1) {
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < phases; ++k) fn(i, k);
    return;
  }
  if (n > phase_capacity_) {
    phase_state_.reset(new std::atomic<uint8_t>[(size_t)n]);
    phase_capacity_ = n;
  }
  for (int64_t i = 0; i < n; ++i) phase_state_[i].store(0, std::memory_order_relaxed);
  phase_n_ = n;
  phases_ = phases;
  phase_fn_ = &fn;
  run_job();
}

int WorkerPool::owner_of(int64_t i) const {
  const int t = threads();
  int p = (int)((i * t) / phase_n_);  // a guess, then the exact share (n * p / t bounds)
  while (p > 0 && i < phase_n_ * p / t) --p;
  while (p + 1 < t && i >= phase_n_ * (p + 1) / t) ++p;
  return p;
}

void WorkerPool::run_job() {
  const int64_t start_ns = wall_ns();
  if (last_run_end_ns_ > 0)
    caller_gap_ns_.store(start_ns - last_run_end_ns_, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  if (timing_) run_start_ns_ = start_ns;

  // Opening the next generation publishes the job (the shares, fn_ or the phase state;
  // seq_cst store: see worker_main for why the sleepers check after it cannot miss a worker
  // going to sleep).
  job_.store((uint64_t)(generation(job_.load()) + 1) << 32);
  if (sleeping_workers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  participate(0);
  job_.fetch_or(kClosed);
  const int64_t wait0 = timing_ ? wall_ns() : 0;
  wait_for_workers();
  if (timing_) shares_[0].stats.wait_ns += wall_ns() - wait0;
  fn_ = nullptr;
  phase_fn_ = nullptr;
  last_run_end_ns_ = wall_ns();
  if (error_) std::rethrow_exception(error_);
}

bool WorkerPool::claim_own(int self, int64_t* b, int64_t* e) {
  std::atomic<uint64_t>& s = shares_[self].bounds;
  uint64_t w = s.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = front_of(w), back = back_of(w);
    if (front >= back) return false;
    const int64_t end = std::min(back, front + grain_);
    if (s.compare_exchange_weak(w, pack((uint64_t)end, (uint64_t)back))) {
      *b = front;
      *e = end;
      return true;
    }
  }
}

bool WorkerPool::steal(int self, int64_t* b, int64_t* e) {
  const int t = threads();
  for (;;) {
    int victim = -1;
    int64_t most = 0;
    for (int i = 0; i < t; ++i) {
      if (i == self) continue;
      const uint64_t w = shares_[i].bounds.load(std::memory_order_relaxed);
      if (back_of(w) - front_of(w) > most) {
        most = back_of(w) - front_of(w);
        victim = i;
      }
    }
    if (victim < 0) return false;
    std::atomic<uint64_t>& s = shares_[victim].bounds;
    uint64_t w = s.load(std::memory_order_relaxed);
    const int64_t front = front_of(w), back = back_of(w);
    if (front >= back) continue;
    const int64_t begin = std::max(front, back - grain_);
    if (s.compare_exchange_strong(w, pack((uint64_t)front, (uint64_t)begin))) {
      *b = begin;
      *e = back;
      return true;
    }
  }
}

// One chunk of work: an exception is kept for the caller (the first one) and stops the run.
template <class F>
void WorkerPool::run_chunk(ParticipantStats& st, int64_t items, bool stolen, F&& work) {
  const int64_t w0 = timing_ ? wall_ns() : 0;
  try {
    work();
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true, std::memory_order_relaxed);
  }
  if (timing_) {
    st.busy_ns += wall_ns() - w0;
    st.chunks += 1;
    st.stolen += stolen;
    st.items += items;
  }
}

bool WorkerPool::phase_claim(int64_t i, int phase) {
  uint8_t want = (uint8_t)(2 * phase);
  return phase_state_[i].compare_exchange_strong(want, (uint8_t)(want + 1));
}

void WorkerPool::phase_run(int self, int64_t i, int phase) {
  ParticipantStats& st = shares_[self].stats;
  for (;;) {
    run_chunk(st, 1, false, [&] { (*phase_fn_)(i, phase); });
    phase_state_[i].store((uint8_t)(2 * phase + 2));
    // A thief goes on with the index's later phases (its state is in this core's cache); the
    // owner's passes take them phase by phase.
    if (self == owner_of(i) || ++phase >= phases_ || failed_.load(std::memory_order_relaxed) ||
        !phase_claim(i, phase))
      return;
  }
}

void WorkerPool::participate_phased(int self) {
  ParticipantStats& st = shares_[self].stats;
  const int t = threads();
  const int64_t n = phase_n_;
  const int64_t begin = n * self / t, end = n * (self + 1) / t;
  for (int phase = 0; phase < phases_; ++phase)
    for (int64_t i = begin; i < end; ++i) {
      if (failed_.load(std::memory_order_relaxed)) return;
      if (phase_claim(i, phase)) phase_run(self, i, phase);
    }
  // Then the others' ranges, from their backs: any index whose next phase is free. Until a
  // whole scan finds none: whoever finishes a phase goes on with it (a thief) or reaches it
  // in a later pass (its owner), so nothing is left when every participant has left.
  for (bool found = true; found && !failed_.load(std::memory_order_relaxed);) {
    found = false;
    for (int k = 1; k <= t; ++k) {
      const int other = (self + k) % t;
      for (int64_t i = n * (other + 1) / t - 1; i >= n * other / t; --i) {
        const uint8_t s = phase_state_[i].load(std::memory_order_relaxed);
        if (s % 2 || s >= 2 * phases_) continue;
        if (!phase_claim(i, s / 2)) continue;
        if (other != self) st.stolen += 1;
        phase_run(self, i, s / 2);
        found = true;
      }
    }
  }
}

void WorkerPool::participate(int self) {
  ParticipantStats& st = shares_[self].stats;
  const int64_t c0 = timing_ ? thread_cpu_ns() : 0;
  if (timing_ && self != 0) st.enter_ns += wall_ns() - run_start_ns_;
  if (phase_fn_) {
    participate_phased(self);
  } else {
    int64_t b = 0, e = 0;
    for (;;) {
      if (failed_.load(std::memory_order_relaxed)) break;
      bool stolen = false;
      if (!claim_own(self, &b, &e)) {
        if (!steal(self, &b, &e)) break;
        stolen = true;
      }
      run_chunk(st, e - b, stolen, [&] { (*fn_)(b, e); });
    }
  }
  if (timing_) {
    st.runs += 1;
    st.cpu_ns += thread_cpu_ns() - c0;
  }
}

void WorkerPool::worker_main(int self) {
  uint32_t seen = 0;
  auto spin = kSpinShort;
  for (;;) {
    uint64_t w = job_.load();
    auto news = [&] {
      w = job_.load();
      return generation(w) != seen || (w & kStop);
    };
    if (!news() && !spin_until(news, spin)) {
      // Announce the sleep before the last check (seq_cst both sides): either run() sees the
      // count and notifies under the mutex, or this check sees run()'s new generation.
      sleeping_workers_.fetch_add(1);
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, news);
      }
      sleeping_workers_.fetch_sub(1);
    }
    spin = caller_gap_ns_.load(std::memory_order_relaxed) < kTightGapNs ? kSpinLong : kSpinShort;
    if (w & kStop) return;
    seen = generation(w);
    // Enter only the open job of this generation; a closed one is finished without us.
    while (!(w & (kClosed | kStop)) && generation(w) == seen) {
      if (!job_.compare_exchange_weak(w, w + 1)) continue;
      participate(self);
      const uint64_t before = job_.fetch_sub(1);
      if (inside(before) == 1 && caller_sleeping_.load()) {
        std::lock_guard<std::mutex> lock(mu_);
        done_.notify_one();
      }
      break;
    }
  }
}

void WorkerPool::wait_for_workers() {
  auto all_out = [&] { return inside(job_.load()) == 0; };
  if (all_out() || spin_until(all_out, kSpinLong)) return;
  caller_sleeping_.store(true);
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, all_out);
  }
  caller_sleeping_.store(false);
}

std::vector<WorkerPool::ParticipantStats> WorkerPool::stats() const {
  std::vector<ParticipantStats> out;
  if (timing_)
    for (int i = 0; i < threads(); ++i) out.push_back(shares_[i].stats);
  return out;
}

void WorkerPool::print_stats() const {
  const std::vector<ParticipantStats> all = stats();
  std::fprintf(stderr, "pool stats: %d threads, %lld runs\n", threads(), (long long)all[0].runs);
  for (size_t i = 0; i < all.size(); ++i) {
    const ParticipantStats& s = all[i];
    const double runs = (double)std::max<int64_t>(1, s.runs);
    std::fprintf(stderr,
                 "  thread %zu: %lld runs, %lld items, %lld chunks (%lld stolen), busy %.3f ms, "
                 "cpu %.3f ms, busy/cpu %.3f, per run: enter %.1f us, wait %.1f us\n",
                 i, (long long)s.runs, (long long)s.items, (long long)s.chunks, (long long)s.stolen,
                 s.busy_ns * 1e-6, s.cpu_ns * 1e-6,
                 s.cpu_ns > 0 ? (double)s.busy_ns / (double)s.cpu_ns : 0.0,
                 s.enter_ns * 1e-3 / runs, s.wait_ns * 1e-3 / runs);
  }
}

}  // namespace gbx
