#!/usr/bin/env bash
# CPU backend vs mGBA on ALU_LOOP, in one go: builds gbx-run if needed, sweeps the cpu
# backend with 1 and 2 threads and the mgba baseline (one core per env over all cores), then
# `gbx-run report` prints the table, frames/s per core and the ratio to mGBA, and draws the PNG.
# About 1-2 minutes on a 2-core machine.
#   GBX_BENCH_ENVS   env counts        (default 1,8,64,512,2048)
#   GBX_BENCH_SECS   seconds per point (default 2)
#   GBX_BUILD_DIR    build directory   (default build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_BUILD_DIR:-$root/build}
envs=${GBX_BENCH_ENVS:-1,8,64,512,2048}
secs=${GBX_BENCH_SECS:-2}

if [ ! -f "$build/CMakeCache.txt" ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" --target gbx-run gbx-synth -j "$(nproc)"
gbx="$build/tools/gbx-run"

out="$root/artifacts/bench-cpu/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
common=(--rom builtin:ALU_LOOP --envs "$envs" --seconds "$secs" --frames-per-step 1
        --stage full_step)
"$gbx" bench --backend cpu --threads 1 "${common[@]}" --json "$out/cpu-t1.json"
"$gbx" bench --backend cpu --threads 2 "${common[@]}" --json "$out/cpu-t2.json"
# The ROM-specialized kernel (README "ROM-specialized kernels"): profile, then the same sweep.
"$build/tools/gbx-synth" profile --rom builtin:ALU_LOOP --frames 120 --out "$out/profile.json"
"$gbx" bench --backend cpu --threads 1 --specialize "profile:$out/profile.json" \
  --label cpu-spec-t1 "${common[@]}" --json "$out/cpu-spec-t1.json"
"$gbx" bench --backend mgba "${common[@]}" --json "$out/mgba.json"
echo
"$gbx" report "$out/cpu-t1.json" "$out/cpu-spec-t1.json" "$out/cpu-t2.json" "$out/mgba.json" --baseline mgba --out "$out"
