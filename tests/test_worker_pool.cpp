// The worker pool behind the cpu backend: every index exactly once per run for any thread
// count and grain, no deadlock over many runs or at destruction, exceptions and misuse, tail
// stealing when one participant is stuck; and the cpu backend stepping the same states on 1,
// 2 and 3 threads (with and without a mask); phased runs, and steps in parts that compose into
// exactly the whole step.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/backends/cpu_backend.h"
#include "gbx/runtime/backends/worker_pool.h"
#include "gbx/runtime/roms/asm.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/roms/rom_builder.h"

using namespace gbx;

namespace {

// Runs `runs` times over n indices and checks each index was visited exactly `runs` times and
// every chunk was non-empty, in range and at most `grain` long (when given).
void check_exactly_once(WorkerPool& pool, int64_t n, int64_t grain, int runs) {
  std::vector<std::atomic<int>> hits((size_t)n);
  std::atomic<bool> bad_chunk{false};
  for (int r = 0; r < runs; ++r)
    pool.run(
        n,
        [&](int64_t b, int64_t e) {
          if (b < 0 || e > n || b >= e || (grain > 0 && e - b > grain)) bad_chunk = true;
          for (int64_t i = b; i < e; ++i) hits[(size_t)i].fetch_add(1);
        },
        grain);
  CHECK_FALSE(bad_chunk.load());
  int wrong = 0;
  for (auto& h : hits) wrong += h.load() != runs;
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("every index exactly once, any thread count and grain") {
  for (int threads : {0, 1, 2, 3, 8, 17}) {
    WorkerPool pool(threads);
    CHECK(pool.threads() == std::max(1, threads));
    for (int64_t n : {1, 2, 5, 64, 1000})
      for (int64_t grain : {0, 1, 7}) {
        CAPTURE(threads);
        CAPTURE(n);
        CAPTURE(grain);
        check_exactly_once(pool, n, grain, 20);
      }
  }
}

TEST_CASE("n = 0 calls nothing") {
  WorkerPool pool(2);
  bool called = false;
  pool.run(0, [&](int64_t, int64_t) { called = true; });
  CHECK_FALSE(called);
}

TEST_CASE("many short runs, then destruction, do not deadlock") {
  // Runs shorter than the spin, and runs separated by more than the longest spin (2 ms:
  // workers asleep, then spinning short), so both the spinning and the blocking hand-over
  // are taken.
  WorkerPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 5000; ++r) pool.run(8, [&](int64_t b, int64_t e) { sum += e - b; });
  CHECK(sum.load() == 5000 * 8);
  for (int r = 0; r < 20; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.run(8, [&](int64_t b, int64_t e) { sum += e - b; });
  }
  CHECK(sum.load() == 5020 * 8);
}

TEST_CASE("pools created and destroyed with and without runs") {
  for (int i = 0; i < 200; ++i) {
    WorkerPool pool(1 + i % 5);
    if (i % 2) check_exactly_once(pool, 1 + i % 13, 0, 1 + i % 3);
  }
}

TEST_CASE("an exception stops the run and is rethrown; the pool stays usable") {
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    WorkerPool pool(threads);
    std::vector<std::atomic<int>> hits(100);
    CHECK_THROWS_WITH_AS(pool.run(
                             100,
                             [&](int64_t b, int64_t e) {
                               for (int64_t i = b; i < e; ++i) {
                                 hits[(size_t)i]++;
                                 if (i == 37) throw std::runtime_error("env 37 failed");
                               }
                             },
                             1),
                         "env 37 failed", std::runtime_error);
    for (auto& h : hits) CHECK(h.load() <= 1);
    CHECK(hits[37].load() == 1);
    check_exactly_once(pool, 100, 0, 5);
  }
}

TEST_CASE("run from inside fn is refused") {
  WorkerPool pool(2);
  CHECK_THROWS_AS(pool.run(4, [&](int64_t, int64_t) { pool.run(1, [](int64_t, int64_t) {}); }),
                  std::logic_error);
  check_exactly_once(pool, 4, 0, 3);  // still usable
}

TEST_CASE("a stuck participant holds up only its own chunk: the others steal the rest") {
  // The first chunk a worker thread (not the caller) takes blocks until every other index is
  // done, which can only happen if the caller steals the rest of that worker's range. The
  // caller's first chunk waits for the worker to arrive (so that it does not simply finish
  // everything first on a busy machine). Every wait has a timeout the test fails on.
  const int64_t n = 64;
  WorkerPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int64_t> done{0};
  std::atomic<bool> worker_in{false}, caller_waited{false}, timed_out{false};
  auto wait_for = [&](auto cond) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!cond())
      if (std::chrono::steady_clock::now() > until) {
        timed_out = true;
        return;
      }
  };
  pool.run(
      n,
      [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() == caller) {
          if (!caller_waited.exchange(true)) wait_for([&] { return worker_in.load(); });
        } else if (!worker_in.exchange(true)) {
          wait_for([&] { return done.load() == n - (e - b); });
        }
        done += e - b;
      },
      1);
  CHECK(done.load() == n);
  CHECK(worker_in.load());
  CHECK_FALSE(timed_out.load());
}

TEST_CASE("cpu backend: same states on 1, 2 and 3 threads, masked and not") {
  auto rom = load_rom("builtin:MEM_RWB");
  REQUIRE(rom.ok());
  const int n = 37;
  std::vector<CpuState> want;
  std::vector<std::vector<uint8_t>> want_mem;
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    BackendConfig cfg;
    cfg.num_envs = n;
    cfg.threads = threads;
    cfg.frames_per_step = 1;
    cfg.stage = Stage::FullStep;
    auto b = CpuBackend::create(rom.value(), cfg);
    REQUIRE(b.ok());
    CHECK(b.value()->threads() == threads);
    std::vector<uint8_t> mask((size_t)n);
    for (int i = 0; i < n; ++i) mask[(size_t)i] = i % 3 != 1;
    std::vector<int32_t> actions((size_t)n);
    for (int s = 0; s < 4; ++s) {
      for (int i = 0; i < n; ++i) actions[(size_t)i] = (i * 7 + s) & 0xff;
      REQUIRE(b.value()->step(actions).ok());
      REQUIRE(b.value()->step_envs(actions, 1 + s % 2, mask).ok());
    }
    for (int i = 0; i < n; ++i) {
      auto st = b.value()->get_cpu_state(i);
      auto mem = b.value()->read_memory(i, 0xC000, 0xC100);
      REQUIRE(st.ok());
      REQUIRE(mem.ok());
      if (threads == 1) {
        want.push_back(st.value());
        want_mem.push_back(mem.value());
      } else {
        CAPTURE(i);
        CHECK(st.value().pc == want[(size_t)i].pc);
        CHECK(st.value().cycle_count == want[(size_t)i].cycle_count);
        CHECK(st.value().instr_count == want[(size_t)i].instr_count);
        CHECK(mem.value() == want_mem[(size_t)i]);
      }
    }
    // Masked envs ran more frames than the others: the mask was honoured.
    CHECK(want[0].cycle_count > want[1].cycle_count);
  }
}

TEST_CASE("GBX_POOL_STATS: per-thread counts add up to the work done") {
  ::setenv("GBX_POOL_STATS", "1", 1);
  WorkerPool pool(2);
  ::unsetenv("GBX_POOL_STATS");
  REQUIRE(pool.timing());
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 5; ++r)
    pool.run(100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  CHECK(sum.load() == 5 * 4950);
  const auto s = pool.stats();
  REQUIRE(s.size() == 2);
  CHECK(s[0].runs == 5);  // the caller takes part in every run; a worker may miss a short one
  CHECK(s[1].runs <= 5);
  CHECK(s[0].items + s[1].items == 500);
  CHECK(s[0].chunks + s[1].chunks >= 5);
  CHECK(s[0].busy_ns > 0);
  WorkerPool quiet(2);
  CHECK_FALSE(quiet.timing());
  CHECK(quiet.stats().empty());
}

TEST_CASE("run_phased: every index and phase once, each index's phases in order") {
  for (int threads : {1, 2, 3, 8}) {
    WorkerPool pool(threads);
    for (int64_t n : {1, 5, 16, 37}) {
      for (int phases : {1, 2, 3, 5}) {
        CAPTURE(threads);
        CAPTURE(n);
        CAPTURE(phases);
        std::vector<std::atomic<int>> last((size_t)n);  // last phase done, -1: none
        for (auto& l : last) l = -1;
        std::atomic<int> calls{0}, out_of_order{0};
        pool.run_phased(n, phases, [&](int64_t i, int k) {
          if (last[(size_t)i].exchange(k) != k - 1) ++out_of_order;
          ++calls;
        });
        CHECK(calls.load() == n * phases);
        CHECK(out_of_order.load() == 0);
        int unfinished = 0;
        for (auto& l : last) unfinished += l.load() != phases - 1;
        CHECK(unfinished == 0);
      }
    }
  }
}

TEST_CASE("run_phased: an exception reaches the caller; the pool stays usable") {
  WorkerPool pool(2);
  CHECK_THROWS_AS(pool.run_phased(8, 3,
                                  [&](int64_t i, int k) {
                                    if (i == 5 && k == 1) throw std::runtime_error("boom");
                                  }),
                  std::runtime_error);
  std::atomic<int> calls{0};
  pool.run_phased(8, 3, [&](int64_t, int) { ++calls; });
  CHECK(calls.load() == 24);
}

namespace {

// Starts an OAM DMA over and over, each after a delay read from the joypad (so every env,
// given its own random buttons, starts them at its own times), from a source that changes
// every round, with objects on: the DMAs' set-up M-cycles fall on many part boundaries.
std::vector<uint8_t> dma_loop_rom() {
  Asm a;
  a.op("LD SP,d16", 0xFFFE);
  a.op("LD HL,d16", "hram_code").op("LD DE,d16", 0xFF80).op("LD B,d8", 10);
  a.label("copy").op("LD A,(HL+)").op("LD (DE),A").op("INC DE").op("DEC B").op("JR NZ,r8", "copy");
  a.op("LD A,d8", 0x93).op("LDH (a8),A", 0x40);  // LCD, background and objects on
  a.label("main");
  a.op("LD A,d8", 0x20).op("LDH (a8),A", 0x00).op("LDH A,(a8)", 0x00);  // the d-pad
  a.op("AND d8", 0x0F).op("INC A").op("LD B,A");
  a.label("delay").op("DEC B").op("JR NZ,r8", "delay");
  a.op("LD HL,d16", 0xC000).op("INC (HL)").op("LD L,d8", 0x05).op("DEC (HL)");
  a.op("CALL a16", 0xFF80).op("JR r8", "main");
  // At FF80: LD A,C0; LDH (46),A; LD A,28; loop: DEC A; JR NZ,loop; RET.
  a.label("hram_code").db({0x3E, 0xC0, 0xE0, 0x46, 0x3E, 0x28, 0x3D, 0x20, 0xFD, 0xC9});
  RomSpec spec;
  spec.title = "DMALOOP";
  REQUIRE(a.place(spec).ok());
  return build_rom(spec);
}

}  // namespace

TEST_CASE("cpu backend: steps in parts on 2 threads are the whole steps of 1 thread") {
  // Pixels (every drawn frame reads OAM), the CPU, WRAM, OAM and the I/O page after every
  // step, with random buttons released mid-step, and hooks counted across the parts.
  auto made = rom_from_bytes("dma_loop", dma_loop_rom());
  REQUIRE(made.ok());
  const Rom& rom = made.value();
  const int n = 16, steps = 40;
  std::vector<std::vector<std::vector<uint8_t>>> want((size_t)steps);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    BackendConfig cfg;
    cfg.num_envs = n;
    cfg.threads = threads;
    cfg.frames_per_step = 24;
    cfg.release_after_frames = 8;
    cfg.stage = Stage::FullStep;
    cfg.obs = ObsKind::Pixels;
    auto b = CpuBackend::create(rom, cfg);
    REQUIRE(b.ok());
    std::vector<int32_t> actions((size_t)n);
    uint32_t x = 12345;
    for (int s = 0; s < steps; ++s) {
      for (auto& act : actions) act = (int32_t)((x = x * 1664525u + 1013904223u) >> 24);
      REQUIRE(b.value()->step(actions).ok());
      CHECK(b.value()->last_step_parts() == (threads == 1 ? 1 : 3));
      std::vector<std::vector<uint8_t>> got;
      for (int i = 0; i < n; ++i) {
        const CpuState c = b.value()->get_cpu_state(i).value();
        got.push_back({c.a, c.f, c.b, c.c, (uint8_t)c.pc, (uint8_t)(c.pc >> 8),
                       (uint8_t)c.cycle_count, (uint8_t)(c.cycle_count >> 8),
                       (uint8_t)c.instr_count});
        for (auto [lo, hi] :
             {std::pair<uint32_t, uint32_t>{0xC000, 0xC0A0}, {0xFE00, 0xFEA0}, {0xFF00, 0x10000}})
          got.push_back(b.value()->read_memory(i, lo, hi).value());
        got.push_back(b.value()->read_pixels(i).value());
      }
      if (threads == 1)
        want[(size_t)s] = got;
      else {
        CAPTURE(s);
        int differ = 0;
        for (size_t k = 0; k < got.size(); ++k) differ += got[k] != want[(size_t)s][k];
        CHECK(differ == 0);
      }
    }
  }
}
