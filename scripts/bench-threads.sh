#!/usr/bin/env bash
# 1 vs 2 threads of the cpu backend, next to what two cores of this machine give at all.
#  1. `gbx-run bench-stages`: emulate_only on 1 and on 2 threads at each env count, timed in
#     interleaved rounds (t1, t2, t1, t2, ...); prints the ratio of the totals, the median of the
#     per-round ratios and frames per CPU-second. With GBX_POOL_STATS=1 the 2-thread pools
#     print per-thread timing when they go (busy time, chunks, stolen chunks, handoff waits).
#  2. The control: the same work as independent processes of one thread each, one process
#     alone vs two at once (no memory, no pool, nothing shared but the machine). If two
#     processes lose as much per frame as two threads do, the loss is the machine's (the
#     vCPUs sharing a host core, memory, or clock), not the pool's.
# Prints the load average before and after: on a shared machine compare one run's numbers only.
#   GBX_THREADS_ENVS   env counts              (default 64,256,1024)
#   GBX_THREADS_ROM    ROM                     (default builtin:ALU_LOOP)
#   GBX_THREADS_ROUNDS interleaved rounds      (default 10)
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

# Control at the first env count: each process steps half the envs on one thread.
first=${envs%%,*}
half=$(((first + 1) / 2))
steps=$((4096 / first > 2 ? 4096 / first : 2))
one() {
  "$gbx" bench --backend cpu --rom "$rom" --envs "$half" --threads 1 --frames-per-step "$fps" \
    --stage emulate_only --steps "$steps" --warmup-steps 1 --json "$1" >/dev/null 2>&1
}
rate() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['frames_per_sec'])" "$1"; }
ratios=()
for r in $(seq 1 "$((rounds / 2 > 2 ? rounds / 2 : 2))"); do
  one "$out/alone.json"
  one "$out/a.json" & pa=$!
  one "$out/b.json" & pb=$!
  wait "$pa" "$pb"
  ratios+=("$(python3 -c "import sys; a,x,y=map(float,sys.argv[1:]); print(f'{(x+y)/a:.3f}')" \
    "$(rate "$out/alone.json")" "$(rate "$out/a.json")" "$(rate "$out/b.json")")")
done
python3 - "$half" "${ratios[@]}" <<'EOF'
import statistics, sys
half, ratios = sys.argv[1], [float(x) for x in sys.argv[2:]]
print(f"control: two 1-thread processes of {half} envs at once vs one alone (frames/s, summed): "
      f"median {statistics.median(ratios):.3f}x over {len(ratios)} rounds "
      f"({' '.join(f'{r:.3f}' for r in ratios)})")
EOF
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
