#!/usr/bin/env bash
# What each class of SM83 code costs GBX against PyBoy 2.8.1, apart from any game's mix: the
# micro-ROMs of scripts/class_roms.py (ALU, copies, calls, CB ops, JP HL, I/O reads, MBC
# writes, a Pokemon-Red-style banked call through a home-bank trampoline, ...), each looping
# over one class with interrupts off. Per ROM, in interleaved rounds (one process per column
# per round):
#   interp  GBX cpu backend, the interpreter, 8 envs on one thread, emulate_only, 24 frames a
#           step, no input
#   spec    the same with --specialize auto:60
#   pyboy   PyBoy 2.8.1 headless, one instance, tick(24, False)
# and prints frames/s (medians), the ratios, and ns per instruction (instructions per frame
# from the ROM's loop: every frame runs the same code). A class where GBX's ratio is low is a
# place where a game that leans on it (a commercial game's banked calls, CB flag tests, jump
# tables) gets less of GBX's speed than the games in ../shared/games show.
#   GBX_CLASSES_ROUNDS  rounds (default 3)
#   GBX_CLASSES_SECS    seconds per column a round (default 2)
#   GBX_CLASSES_NAMES   classes to run (default: all)
#   GBX_CLASSES_COLUMNS default "interp spec pyboy"
#   GBX_BUILD_DIR       build directory (default build/)
# Writes artifacts/bench-classes/<utc>/ (the ROMs, results.txt, table.md; git-ignored).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_BUILD_DIR:-$root/build}
gbx="$build/tools/gbx-run"
[ -x "$gbx" ] || { echo "bench-classes: build first (scripts/build.sh)" >&2; exit 2; }
rounds=${GBX_CLASSES_ROUNDS:-3}
secs=${GBX_CLASSES_SECS:-2}
columns=${GBX_CLASSES_COLUMNS:-interp spec pyboy}
out="$root/artifacts/bench-classes/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out/roms"
python3 "$root/scripts/class_roms.py" build "$out/roms" >"$out/loops.txt"
names=${GBX_CLASSES_NAMES:-$(cut -d' ' -f1 "$out/loops.txt" | tr '\n' ' ')}
echo "bench-classes: $(date -u +%FT%TZ) on $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
  "load $(cut -d' ' -f1 /proc/loadavg); $rounds rounds x ${secs}s" | tee "$out/log.txt"

gbx_rate() {  # ROM, extra gbx-run options...: frames/s
  local rom=$1 j="$out/last.json"
  shift
  "$gbx" bench --backend cpu --rom "$rom" --envs 8 --threads 1 --frames-per-step 24 \
    --stage emulate_only --actions none --seconds "$secs" --json "$j" "$@" >/dev/null 2>>"$out/log.txt"
  python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['results'][0]['frames_per_sec']))" "$j"
}

for name in $names; do
  rom="$out/roms/$name.gb"
  for r in $(seq "$rounds"); do
    for c in $columns; do
      case $c in
        interp) v=$(gbx_rate "$rom") ;;
        spec) v=$(gbx_rate "$rom" --specialize auto:60) ;;
        pyboy) v=$(python3 "$root/scripts/class_roms.py" pyboy "$rom" "$secs" 2>>"$out/log.txt" | tail -n 1) ;;
        *) echo "bench-classes: unknown column $c" >&2; exit 2 ;;
      esac
      echo "$name $r $c $v" >>"$out/results.txt"
    done
  done
  echo "bench-classes: $name done" >&2
done

python3 - "$out" <<'EOF' | tee "$out/table.md"
import collections, statistics, sys
out = sys.argv[1]
loops = {l.split()[0]: (int(l.split()[1]), int(l.split()[2])) for l in open(f"{out}/loops.txt")}
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(f"{out}/results.txt"):
    name, _, col, v = line.split()
    runs[name][col].append(float(v))
print("| class | instr/frame | PyBoy fps | interp fps | spec fps | interp / PyBoy | spec / PyBoy |"
      " interp ns/instr | spec ns/instr | PyBoy ns/instr |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, cols in runs.items():
    instrs, cycles = loops[name]
    ipf = 70224 * instrs / cycles
    med = {c: statistics.median(v) for c, v in cols.items()}
    def ratio(c):
        if c not in med or "pyboy" not in med:
            return "-"
        r = [a / b for a, b in zip(cols[c], cols["pyboy"])]  # per round, then the median
        return f"{statistics.median(r):.2f}x [{min(r):.2f}-{max(r):.2f}]"
    ns = lambda c: f"{1e9 / (med[c] * ipf):.1f}" if c in med else "-"
    fps = lambda c: f"{med[c]:.0f}" if c in med else "-"
    print(f"| {name} | {ipf:.0f} | {fps('pyboy')} | {fps('interp')} | {fps('spec')} |"
          f" {ratio('interp')} | {ratio('spec')} | {ns('interp')} | {ns('spec')} | {ns('pyboy')} |")
EOF
echo "bench-classes: $out" >&2
