// The worker pool alone on a synthetic env loop: each env owns `bytes` of private state and a
// step does `work` rounds of dependent integer work with loads and stores into it (about what
// a Game Boy env does: a serial chain of byte-sized reads and writes to its own memory).
// Times 1 and 2 threads in interleaved rounds at each env count and prints the median ratio.
// Build: cmake --build build --target pool-bench, or without the project's dependencies (on
// another machine): g++ -O2 -std=c++17 -pthread -Iruntime/include tools/pool_bench.cpp
// runtime/src/backends/worker_pool.cpp -o pool-bench
// Run:   taskset -c 0,1 pool-bench [work per env and step, default 400000] [rounds, default 10]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gbx/runtime/backends/worker_pool.h"

namespace {

constexpr size_t kBytes = 0x4200;  // an env's writable memory (dmg memory model)

uint32_t step_env(uint8_t* mem, uint32_t seed, long work) {
  uint32_t x = seed, a = 0;
  for (long i = 0; i < work; ++i) {
    x = x * 1664525u + 1013904223u;
    const size_t at = (x >> 8) % 0x2000 + 0x2000;  // WRAM-like window
    a = (a + mem[at]) ^ (x >> 24);
    mem[(at + 1) % kBytes] = (uint8_t)a;
  }
  return a;
}

double run_step(gbx::WorkerPool& pool, std::vector<uint8_t>& mem, std::vector<uint32_t>& out,
                int envs, long work) {
  const auto t0 = std::chrono::steady_clock::now();
  pool.run(envs, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = step_env(&mem[(size_t)i * kBytes], out[i], work);
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const long work = argc > 1 ? std::atol(argv[1]) : 400000;  // ~1 ms per env and step
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  gbx::WorkerPool one(1), two(2);
  for (int envs : {8, 64, 256, 1024}) {
    std::vector<uint8_t> mem((size_t)envs * kBytes, 1);
    std::vector<uint32_t> out((size_t)envs, 7);
    const long w = work * 64 / std::max(64, envs);  // keep a step near the same length
    run_step(one, mem, out, envs, w);
    run_step(two, mem, out, envs, w);
    std::vector<double> ratios;
    double t1 = 0, t2 = 0;
    for (int r = 0; r < rounds; ++r) {
      const double a = run_step(one, mem, out, envs, w);
      const double b = run_step(two, mem, out, envs, w);
      t1 += a;
      t2 += b;
      ratios.push_back(a / b);
    }
    std::sort(ratios.begin(), ratios.end());
    const size_t m = ratios.size();
    const double median = m % 2 ? ratios[m / 2] : 0.5 * (ratios[m / 2 - 1] + ratios[m / 2]);
    std::printf(
        "envs %5d  1 thread %.3f s  2 threads %.3f s  total %.3fx  median %.3fx  (min %.3f, "
        "max %.3f)\n",
        envs, t1, t2, t1 / t2, median, ratios.front(), ratios.back());
  }
  return 0;
}
