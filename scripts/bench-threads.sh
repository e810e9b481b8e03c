#!/usr/bin/env bash
# 1 vs 2 threads of the cpu backend, next to what two cores of this machine give at all.
#  1. `gbx-run bench-stages`: emulate_only on 1 and on 2 threads at each env count, timed in
#     interleaved rounds (t1, t2, t1, t2, ...); prints the ratio of the totals, the median of the
#     per-round ratios and frames per CPU-second. With GBX_POOL_STATS=1 the 2-thread pools
#     print per-thread timing when they go (busy time, chunks, stolen chunks, handoff waits).
#  2. The control, at each env count: the same work as independent processes of one thread
#     each, one process alone vs two at once (no memory, no pool, nothing shared but the
#     machine), and as one 2-thread process, all timed by the wall clock in the same rounds.
#     If two processes lose as much per frame as two threads do, the loss is the machine's
#     (the vCPUs sharing a host core, memory, or clock), not the pool's.
# Prints the load average before and after: on a shared machine compare one run's numbers only.
#   GBX_THREADS_ENVS   env counts              (default 64,256,1024)
#   GBX_THREADS_ROM    ROM                     (default builtin:ALU_LOOP)
#   GBX_THREADS_ROUNDS interleaved rounds      (default 10; the control runs half as many)
#   GBX_THREADS_FPS    frames per step         (default 24)
#   GBX_BUILD_DIR      build directory         (default build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_BUILD_DIR:-$root/build}
envs=${GBX_THREADS_ENVS:-64,256,1024}
rom=${GBX_THREADS_ROM:-builtin:ALU_LOOP}
rounds=${GBX_THREADS_ROUNDS:-10}
fps=${GBX_THREADS_FPS:-24}
gbx="$build/tools/gbx-run"
[ -x "$gbx" ] || { echo "error: $gbx not built (scripts/build.sh)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)  ($(nproc) CPUs)"
"$gbx" bench-stages --backend cpu --rom "$rom" --envs "$envs" --frames-per-step "$fps" \
  --rounds "$rounds" --steps-per-round 1 --warmup-steps 1 --variants emulate_only@t1 \
  emulate_only@t2
echo "load after bench-stages: $(cut -d' ' -f1-3 /proc/loadavg)"

# Control at every env count, timed by the wall clock from launch to exit (process start and a
# cached kernel load included, the same in every arm), the three arms back to back in each
# round: one 1-thread process of half the envs alone; two such processes at once (nothing
# shared but the machine); one 2-thread process of all the envs (the pool). The rates each
# process reports itself are not summed: the process that finishes first leaves the other
# running alone, which inflates a sum. "pool / processes" is the per-round ratio of the last
# two arms: how much of what the two cores give at that moment the pool gets.
bench() {  # envs threads steps
  "$gbx" bench --backend cpu --rom "$rom" --envs "$1" --threads "$2" --frames-per-step "$fps" \
    --stage emulate_only --steps "$3" --warmup-steps 1 >/dev/null 2>&1
}
now() { date +%s.%N; }
control_rounds=$((rounds / 2 > 2 ? rounds / 2 : 2))
IFS=, read -r -a env_list <<<"$envs"
for n in "${env_list[@]}"; do
  half=$(((n + 1) / 2))
  steps=$((4096 / n > 2 ? 4096 / n : 2))
  times=()
  for _ in $(seq 1 "$control_rounds"); do
    t0=$(now); bench "$half" 1 "$steps"; t1=$(now)
    bench "$half" 1 "$steps" & pa=$!
    bench "$half" 1 "$steps" & pb=$!
    wait "$pa" "$pb"; t2=$(now)
    bench "$((2 * half))" 2 "$steps"; t3=$(now)
    times+=("$t0,$t1,$t2,$t3")
  done
  python3 - "$half" "${times[@]}" <<'EOF'
import statistics, sys
half = int(sys.argv[1])
rounds = [[float(x) for x in r.split(",")] for r in sys.argv[2:]]
procs = [2 * (b - a) / (c - b) for a, b, c, d in rounds]
threads = [2 * (b - a) / (d - c) for a, b, c, d in rounds]
pool = [t / p for t, p in zip(threads, procs)]
def show(v):
    return f"median {statistics.median(v):.3f}x ({' '.join(f'{r:.3f}' for r in v)})"
print(f"control at {2 * half} envs, wall clock vs one 1-thread process of {half} envs alone, "
      f"{len(rounds)} rounds:")
print(f"  two 1-thread processes at once: {show(procs)}")
print(f"  one 2-thread process:           {show(threads)}")
print(f"  pool / processes:               {show(pool)}")
EOF
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
