#!/usr/bin/env bash
# Per-core frames/s on the same ROMs, in one run: the cpu interpreter vs mGBA vs PyBoy (each
# on one thread / one process), then, timed interleaved, the cpu backend on 1 vs 2 threads and
# the interpreter vs the specialized kernel on one thread.
# Prints one table per ROM with the ratios, and the machine's load before and after (the
# machine may be shared: compare numbers from one run only).
#   GBX_BENCH_ROMS     ROM files or builtin:NAME   (default: ALU_LOOP, ARROWS (the learning
#                                                   game) and, when sdcc built it,
#                                                   build/roms/cpu_heavy.gb)
#   GBX_BENCH_ENVS     envs per point              (default 64)
#   GBX_BENCH_SECS     seconds per point           (default 3)
#   GBX_BENCH_FPS      frames per step             (default 24, what RL runs use)
#   GBX_BENCH_ACTIONS  random | none | FILE        (default random)
#   GBX_BENCH_COLUMNS  columns to run              (default "interp spec mgba pyboy"; spec: the
#                                                   ROM-specialized kernel, profiled first)
#   GBX_BENCH_PYBOY    0 skips PyBoy (it is pip-installed into artifacts/.venv-pyboy on first use)
#   GBX_BUILD_DIR      build directory             (default build/)
# A column is a function bench_<name> ROM JSON that writes one `gbx-run bench` sweep (one
# thread) to JSON; add one by writing the function and naming it in GBX_BENCH_COLUMNS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_BUILD_DIR:-$root/build}
envs=${GBX_BENCH_ENVS:-64}
secs=${GBX_BENCH_SECS:-3}
fps=${GBX_BENCH_FPS:-24}
actions=${GBX_BENCH_ACTIONS:-random}
columns=${GBX_BENCH_COLUMNS:-interp spec mgba pyboy}
[ "${GBX_BENCH_PYBOY:-1}" = 0 ] && columns=${columns//pyboy/}

if [ ! -f "$build/CMakeCache.txt" ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" --target gbx-run gbx-synth -j "$(nproc)"
cmake --build "$build" --target gbx_c_roms -j "$(nproc)" 2>/dev/null || true
gbx="$build/tools/gbx-run"

out="$root/artifacts/bench-cpu/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out/roms"
# Every column runs the same ROM file (PyBoy takes files only).
"$gbx" rom build --out "$out/roms" >/dev/null
roms=${GBX_BENCH_ROMS:-"$out/roms/ALU_LOOP.gb $out/roms/ARROWS.gb"}
if [ -z "${GBX_BENCH_ROMS:-}" ] && [ -f "$build/roms/cpu_heavy.gb" ]; then
  roms="$roms $build/roms/cpu_heavy.gb"
fi

common=(--envs "$envs" --seconds "$secs" --frames-per-step "$fps" --stage emulate_only
        --threads 1 --actions "$actions")
bench_interp() { "$gbx" bench --backend cpu --label interp --rom "$1" "${common[@]}" --json "$2"; }
# README "ROM-specialized kernels": profile 120 frames, then the kernel for that hot set.
bench_spec() {
  "$build/tools/gbx-synth" profile --rom "$1" --frames 120 --out "$2.profile" 2>/dev/null &&
    "$gbx" bench --backend cpu --label spec --specialize "profile:$2.profile" --rom "$1" \
      "${common[@]}" --json "$2"
}
bench_mgba() { "$gbx" bench --backend mgba --label mgba --rom "$1" "${common[@]}" --json "$2"; }
# PyBoy steps without inputs (its sweep records actions "none"); 8 envs in one process is a
# per-core rate like the others', and keeps the run short.
bench_pyboy() {
  local rom=$1
  if [[ $rom == builtin:* ]]; then  # PyBoy needs a file: write the built-in ROMs out once
    [ -d "$out/roms" ] || "$gbx" rom build --out "$out/roms" >/dev/null
    rom="$out/roms/${rom#builtin:}.gb"
  fi
  python3 "$root/scripts/bench_pyboy.py" --rom "$rom" --envs 8 --cores 1 --steps 40 \
    --warmup-steps 8 --frames-per-step "$fps" --gbx-run "$gbx" --json "$2"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for rom in $roms; do
  name=$(basename "$rom" .gb)
  for col in $columns; do
    echo "== $name: $col" >&2
    "bench_$col" "$rom" "$out/${name}_$col.json" >/dev/null ||
      echo "bench-cpu: column $col failed on $name" >&2
  done
done

# Interleaved, in one process each (so that noise hits both arms alike): 1 vs 2 threads of
# the interpreter and, where the spec column ran, the interpreter vs the specialized kernel on
# one thread (its profile). A round lasts about 0.15 s of the faster arm's measured rate (a ROM
# that mostly halts, as ARROWS does, steps thousands of times a second).
steps_for() {  # sweep JSON -> steps per round
  python3 - "$1" "$envs" "$fps" <<'EOF'
import json, sys
try:
    fps = max(r["frames_per_sec"] for r in json.load(open(sys.argv[1]))["results"])
except (OSError, KeyError, ValueError):
    fps = 0
print(max(2, round(0.15 * fps / (int(sys.argv[2]) * int(sys.argv[3])))))
EOF
}
interleaved_log="$out/interleaved.txt"
stages=(--backend cpu --envs "$envs" --frames-per-step "$fps" --rounds 10 --warmup-steps 2
        --actions "$actions")
for rom in $roms; do
  name=$(basename "$rom" .gb)
  "$gbx" bench-stages "${stages[@]}" --rom "$rom" \
    --steps-per-round "$(steps_for "$out/${name}_interp.json")" \
    --variants emulate_only@t1 emulate_only@t2 | tee -a "$interleaved_log"
  if [ -f "$out/${name}_spec.json.profile" ]; then
    "$gbx" bench-stages "${stages[@]}" --rom "$rom" \
      --steps-per-round "$(steps_for "$out/${name}_spec.json")" \
      --specialize "profile:$out/${name}_spec.json.profile" \
      --variants emulate_only@t1 emulate_only@t1@spec | tee -a "$interleaved_log"
  fi
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# The table: frames/s per core of each column (sweep results carry threads used), ratios to
# the interpreter and to PyBoy.
python3 - "$out" $columns <<'EOF'
import glob, json, os, sys
out, cols = sys.argv[1], sys.argv[2:]
roms = sorted({os.path.basename(p).rsplit("_", 1)[0] for p in glob.glob(f"{out}/*_*.json")})
for rom in roms:
    rate = {}
    for c in cols:
        try:
            s = json.load(open(f"{out}/{rom}_{c}.json"))
        except OSError:
            continue
        best = max(s["results"], key=lambda r: r["frames_per_sec"])
        rate[c] = best["frames_per_sec"] / max(1, best.get("threads", 1))
    print(f"{rom}: frames/s per core ({', '.join(cols)}; one thread or process each)")
    print(f"  {'column':<14}{'frames/s/core':>14}{'vs interp':>11}{'vs pyboy':>10}")
    for c in cols:
        if c not in rate:
            print(f"  {c:<14}{'-':>14}")
            continue
        vi = f"{rate[c] / rate['interp']:.2f}x" if "interp" in rate else "-"
        vp = f"{rate[c] / rate['pyboy']:.2f}x" if "pyboy" in rate else "-"
        print(f"  {c:<14}{rate[c]:>14.0f}{vi:>11}{vp:>10}")
    print()
EOF
echo "sweeps and logs: $out"
