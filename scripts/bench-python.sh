#!/usr/bin/env bash
# The Python layer's cost: examples/random_agent.py (gbx.VecEnv, random actions) against
# `gbx-run bench` (the same cpu kernel driven from C++), same ROM, env count, frames per step,
# release schedule, stage, observation (obs_v0) and threads, run alternately in one invocation
# so both see the same machine load. Prints each round's frames/s and the ratio python / C++, then the median ratio.
#
#   scripts/bench-python.sh [--envs 256] [--threads 2] [--steps 40] [--rounds 3]
#                           [--rom builtin:ALU_LOOP] [--python PY]
# PY is an interpreter with gbx installed (default: build/pyvenv/bin/python, what
# scripts/test.sh installs). GBX_CACHE_DIR is honoured; both sides then load the same cached
# kernel, so no compile time is measured.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
envs=256 threads=2 steps=40 rounds=3 rom=builtin:ALU_LOOP fps=24
py="$root/build/pyvenv/bin/python"
gbx_run="${GBX_BUILD_DIR:-$root/build}/tools/gbx-run"
while [ $# -gt 0 ]; do
  case "$1" in
    --envs) envs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --rom) rom=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    *) echo "error: unknown option '$1' (--envs --threads --steps --rounds --rom --python)" >&2; exit 2 ;;
  esac
done
[ -x "$py" ] || { echo "error: no Python with gbx at '$py' (run scripts/test.sh, or pass --python)" >&2; exit 2; }
[ -x "$gbx_run" ] || { echo "error: no gbx-run at '$gbx_run' (run scripts/build.sh)" >&2; exit 2; }
"$py" -c 'import gbx' 2>/dev/null || { echo "error: '$py' cannot import gbx" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "rom $rom  envs $envs  frames/step $fps  release_after_frames 0  threads $threads  steps $steps"
# Warm the kernel cache (and the page cache) once, untimed.
"$py" "$root/examples/random_agent.py" --rom "$rom" --envs "$envs" --threads "$threads" \
  --frames-per-step "$fps" --steps 1 --obs vec >/dev/null 2>&1
ratios=()
for r in $(seq 1 "$rounds"); do
  py_fps=$("$py" "$root/examples/random_agent.py" --rom "$rom" --envs "$envs" \
    --threads "$threads" --frames-per-step "$fps" --steps "$steps" --obs vec 2>/dev/null |
    sed -n 's/.*frames\/s \([0-9,]*\).*/\1/p' | tr -d ,)
  "$gbx_run" bench --backend cpu --rom "$rom" --envs "$envs" --threads "$threads" \
    --frames-per-step "$fps" --release-after-frames 0 --steps "$steps" --warmup-steps 1 \
    --json "$tmp/c.json" >/dev/null
  c_fps=$("$py" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["results"][0]["frames_per_sec"]))' "$tmp/c.json")
  ratio=$("$py" -c "print(f'{$py_fps / $c_fps:.3f}')")
  ratios+=("$ratio")
  echo "round $r: python $py_fps frames/s  gbx-run bench $c_fps frames/s  ratio $ratio"
done
"$py" -c "import statistics,sys; print('median ratio python / gbx-run bench:', f'{statistics.median(map(float, sys.argv[1:])):.3f}')" "${ratios[@]}"
