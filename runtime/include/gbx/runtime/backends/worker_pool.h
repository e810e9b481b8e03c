#pragma once
// A persistent pool of threads that runs one index range at a time, for the backends' env
// loops (one kernel call per env range, once per step).
//
// Why not an OpenMP region per step: a step is short (tens of microseconds to a few
// milliseconds), so waking threads dominates unless they stay warm, and with one static share
// per thread a single descheduled thread stalls the whole step on a shared machine.
//
// How: [0, n) is split into one contiguous range per participant (the caller is participant
// 0), so a thread steps the same envs every step and keeps their state in its cache. Each
// participant claims small chunks from the front of its own range; when that is empty it
// steals chunks from the back of the range with the most left. A thread that is late or
// descheduled thus holds up at most the one chunk it is running. Between runs workers spin,
// then block: for 2 ms while the caller starts each run within 0.5 ms of the last one's end
// (a tight step loop), for 0.1 ms after a longer gap (an RL policy runs between steps and
// may want the cores).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gbx {

class WorkerPool {
 public:
  // Calls fn(begin, end) on chunks of [0, n).
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  // `threads` participants in every run, the calling thread included (< 1 is taken as 1:
  // then run() is a plain loop on the caller).
  explicit WorkerPool(int threads);
  ~WorkerPool();  // joins the workers; no run() may be in progress
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return (int)workers_.size() + 1; }

  // Runs fn over chunks that cover [0, n) exactly once, on all participants, and returns when
  // every chunk is done. `grain`: the largest chunk (0 = chosen from n and the thread count).
  // If fn throws, chunks not yet started are skipped, the others finish, and run() rethrows
  // the first exception; the pool stays usable. One run() at a time: calling it from two
  // threads at once, or from inside fn, throws std::logic_error.
  void run(int64_t n, const RangeFn& fn, int64_t grain = 0);

  // Runs fn(i, phase) for every i in [0, n) and phase in [0, phases), phase by phase for each
  // i (fn(i, k) returns before fn(i, k + 1) starts; different i run in any order and at the
  // same time). Each participant runs phase 0 of its own range, then phase 1, and so on, so
  // the work left at the end of a run is last phases of many indices, which the participants
  // that finish first share (they steal an index's next phase from the back of the other
  // ranges and go on with its later phases). With one participant: fn(i, 0..phases-1) for
  // each i in turn. Same rules as run() otherwise.
  using PhaseFn = std::function<void(int64_t index, int phase)>;
  void run_phased(int64_t n, int phases, const PhaseFn& fn);

  // Per-participant timing, recorded only when the environment variable GBX_POOL_STATS is set
  // when the pool is made (then the pool prints them to stderr when it goes): enough to tell
  // an uneven split, time lost handing a run over or waiting at its end, and a thread that was
  // descheduled (wall time in chunks above its CPU time) apart.
  struct ParticipantStats {
    int64_t runs = 0;      // runs this participant took part in
    int64_t chunks = 0;    // chunks run, stolen ones included
    int64_t stolen = 0;    // chunks taken from another participant's range
    int64_t items = 0;     // indices run
    int64_t busy_ns = 0;   // wall time inside fn
    int64_t cpu_ns = 0;    // thread CPU time while taking part (fn and claiming)
    int64_t enter_ns = 0;  // workers: from a run's start to taking part in it
    int64_t wait_ns = 0;   // the caller: from its last chunk to every worker's leaving
  };
  bool timing() const { return timing_; }
  std::vector<ParticipantStats> stats() const;  // empty unless timing()

 private:
  // One participant's share: [front, back) packed into one word so that the owner (taking
  // from the front) and thieves (taking from the back) claim with one compare-and-swap.
  struct alignas(64) Share {
    std::atomic<uint64_t> bounds{0};
    // Written by its participant only, read when no run is going; on its own cache line so
    // that timing does not slow the thieves reading `bounds`.
    alignas(64) ParticipantStats stats;
  };

  // run_phased: per index, 2 * (phases done) + 1 while a phase of it runs.
  bool phase_claim(int64_t i, int phase);
  void phase_run(int self, int64_t i, int phase);  // runs it, then the later phases it can
  void participate_phased(int self);
  int owner_of(int64_t i) const;  // the participant whose range holds index i
  void run_job();                 // runs the job set up by run() or run_phased()
  std::unique_ptr<std::atomic<uint8_t>[]> phase_state_;
  int64_t phase_capacity_ = 0;
  int64_t phase_n_ = 0;
  int phases_ = 0;
  const PhaseFn* phase_fn_ = nullptr;

  template <class F>
  void run_chunk(ParticipantStats& st, int64_t items, bool stolen, F&& work);
  bool claim_own(int self, int64_t* b, int64_t* e);
  bool steal(int self, int64_t* b, int64_t* e);
  void participate(int self);
  void worker_main(int self);
  void wait_for_workers();
  void print_stats() const;

  std::vector<std::thread> workers_;
  std::unique_ptr<Share[]> shares_;
  const RangeFn* fn_ = nullptr;
  int64_t grain_ = 1;
  bool timing_ = false;
  int64_t run_start_ns_ = 0;  // timing: when the current run was opened
  // The caller's time between its last two runs (from one's return to the next one's start):
  // workers spin long after a short gap (worker_pool.cpp, kTightGapNs).
  int64_t last_run_end_ns_ = 0;
  std::atomic<int64_t> caller_gap_ns_{INT64_MAX};

  // The current job: generation (high 32 bits), CLOSED and STOP flags, and the number of
  // workers inside it (low bits). Workers enter only an open job of the generation they woke
  // for, so one that wakes late never touches a finished job.
  std::atomic<uint64_t> job_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::mutex error_mu_;
  std::atomic<bool> running_{false};

  // Blocking after the spin: workers wait for a new generation, the caller for the last one
  // to leave. The counters say whether anyone is (about to be) asleep, so the fast path never
  // touches the mutex.
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
};

}  // namespace gbx
