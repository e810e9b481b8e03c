#!/usr/bin/env bash
# Game-shaped workloads measured the way RL runs them: every env starts from a mid-game save
# state, 24 frames a step, a random action per env per step held for the first frames of the
# step. Per game, in interleaved rounds (one process per column per round: interp, spec, mgba,
# pyboy, then the next round), env-steps/s and frames/s per core of:
#   interp  GBX cpu backend, the interpreter, one thread
#   threads2  the interpreter on two threads with twice the envs (each thread keeps the envs
#           of the one-thread columns: how an RL run adds cores); its total rate over interp's
#           is the two-thread scaling (goal 1.9x). Left out on a machine of one core.
#   procs2  a control for threads2: two interp processes at once, their rates summed; its
#           total over interp's is what the two cores give two independent emulators at that
#           moment, so threads2 / procs2 is the pool's own share of the scaling (on a shared
#           VM the cores' capacity moves by more than the 1.9x goal's margin).
#   spec    GBX cpu backend, the ROM-specialized kernel (--specialize auto:N, profiled from the
#           state; the tier-up, profile + compile, is reported apart, cold and cached)
#   mgba    the mgba reference backend (libmgba, stepped one instruction at a time), one thread
#   pyboy   PyBoy 2.8.1 headless, one process (scripts/bench_pyboy.py)
# and the ratios per round (median, min-max over rounds), each state's instructions per frame
# and halted share beside them (gbx-synth profile --report). Writes the sweeps, summary.json and
# games.png under artifacts/bench-games/<utc>/ (git-ignored).
#
# Mid-game states are made here, at run time, never stored: from power-on, a seeded input
# schedule (GBX_GAMES_SEGMENTS segments of GBX_GAMES_HOLD frames, each a random joypad byte)
# played by `gbx-run run --load-state/--save-state` segment by segment, once on the cpu
# backend (a GBX state, for interp and spec) and once on the mgba backend (an mgba state).
# PyBoy cannot load either: it plays the same schedule from power-on after its boot ROM
# (untimed), so it starts from the same inputs but not the same machine state.
#
#   GBX_GAMES_ROMS      ROM files (default: build/roms/game_loop.gb if sdcc built it, then
#                       every ../shared/games/*.gb: scripts/games-common.sh)
#   GBX_GAMES_ROUNDS    interleaved rounds          (default 3)
#   GBX_GAMES_SECS      seconds per column a round  (default 2)
#   GBX_GAMES_ENVS      envs per column             (default 8; PyBoy: 8 instances, 1 process)
#   GBX_GAMES_FPS       frames per step             (default 24)
#   GBX_GAMES_RELEASE   frames a step's buttons are held (default 8; -1: the whole step)
#   GBX_GAMES_SEED      seed of the schedule and the random actions (default 1)
#   GBX_GAMES_SEGMENTS  schedule segments           (default 75: 600 frames)
#   GBX_GAMES_HOLD      frames per segment          (default 8)
#   GBX_GAMES_PROFILE   frames profiled for spec    (default 120)
#   GBX_GAMES_COLUMNS   default "interp threads2 procs2 spec mgba pyboy" (threads2 and
#                       procs2 with 2+ cores)
#   GBX_GAMES_COLD      1 (default): time one tier-up on an empty kernel cache first
#   GBX_GAMES_REPORT    frames of each state traced by `gbx-synth profile --report` for its
#                       instructions per frame and halted share (default 48, rounded up to
#                       whole steps; 0: none)
#   GBX_BUILD_DIR       build directory             (default build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_BUILD_DIR:-$root/build}
rounds=${GBX_GAMES_ROUNDS:-3}
secs=${GBX_GAMES_SECS:-2}
envs=${GBX_GAMES_ENVS:-8}
fps=${GBX_GAMES_FPS:-24}
release=${GBX_GAMES_RELEASE:-8}
seed=${GBX_GAMES_SEED:-1}
segments=${GBX_GAMES_SEGMENTS:-75}
hold=${GBX_GAMES_HOLD:-8}
profile=${GBX_GAMES_PROFILE:-120}
default_columns="interp threads2 procs2 spec mgba pyboy"
[ "$(nproc)" -ge 2 ] || default_columns="interp spec mgba pyboy"
columns=${GBX_GAMES_COLUMNS:-$default_columns}
cold=${GBX_GAMES_COLD:-1}
report_frames=$(( (${GBX_GAMES_REPORT:-48} + fps - 1) / fps * fps ))
gbx="$build/tools/gbx-run"
[ -x "$gbx" ] || { echo "bench-games: build first (scripts/build.sh)" >&2; exit 2; }

. "$root/scripts/games-common.sh"
roms=${GBX_GAMES_ROMS:-$(gbx_games_roms "$build" "$root")}
[ -n "${roms// /}" ] || { echo "bench-games: no ROMs" >&2; exit 2; }

out="$root/artifacts/bench-games/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
log() { echo "$*" | tee -a "$out/log.txt" >&2; }
log "bench-games: $(date -u +%FT%TZ) on $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
log "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log "envs $envs, $fps frames/step, buttons held $release frames, seed $seed, $rounds rounds x ${secs}s"

# The input schedule (schedule.bin for gbx-run, schedule.json for PyBoy) and the states made
# from it: scripts/games-common.sh.
gbx_games_schedule "$seed" "$segments" "$hold" "$out/schedule.bin" "$out/schedule.json"
make_state() { gbx_games_state "$gbx" "$1" "$2" "$out/schedule.bin" "$segments" "$hold" "$3"; }

run_opts=(--frames-per-step "$fps" --release-after-frames "$release" --stage emulate_only
          --actions random --seed "$seed" --warmup-steps 2)
common=(--envs "$envs" --threads 1 "${run_opts[@]}")
common2=(--envs "$((2 * envs))" --threads 2 "${run_opts[@]}")  # threads2
for rom in $roms; do
  name=$(basename "$rom" .gb)
  log "== $name: making mid-game states ($segments x $hold frames from power-on)"
  make_state cpu "$rom" "$out/$name.gbx.state"
  [[ " $columns " == *" mgba "* ]] && make_state mgba "$rom" "$out/$name.mgba.state"
  if [ "$report_frames" -gt 0 ]; then
    # What the state's code does: instructions per frame, halted share (beside the ratios).
    "$build/tools/gbx-synth" profile --report --no-plan --rom "$rom" \
      --load-state "$out/$name.gbx.state" --frames "$report_frames" --frames-per-step "$fps" \
      --release-after-frames "$release" --seed "$seed" --out "$out/$name.report.json" \
      > "$out/$name.report.txt" 2>>"$out/log.txt" || log "bench-games: profile --report failed on $name"
  fi
  if [ "$cold" = 1 ] && [[ " $columns " == *" spec "* ]]; then
    # Tier-up on an empty cache: profile + a cold compile of the specialized kernel.
    GBX_CACHE_DIR="$out/cold-cache" "$gbx" bench --backend cpu --rom "$rom" "${common[@]}" \
      --load-state "$out/$name.gbx.state" --specialize "auto:$profile" --steps 3 \
      --label spec-cold --json "$out/${name}_spec-cold.json" >/dev/null 2>>"$out/log.txt" ||
      log "bench-games: cold tier-up failed on $name"
  fi
done
rm -rf "$out/cold-cache"

pyboy_steps=() # per ROM index: steps for about $secs seconds, from the previous round
for ((r = 1; r <= rounds; r++)); do
  i=0
  for rom in $roms; do
    name=$(basename "$rom" .gb)
    for col in $columns; do
      j="$out/${name}_${col}_r$r.json"
      case $col in
        interp) "$gbx" bench --backend cpu --label interp --rom "$rom" "${common[@]}" \
                  --seconds "$secs" --load-state "$out/$name.gbx.state" --json "$j" ;;
        threads2) "$gbx" bench --backend cpu --label threads2 --rom "$rom" "${common2[@]}" \
                    --seconds "$secs" --load-state "$out/$name.gbx.state" --json "$j" ;;
        procs2) for half in a b; do
                  "$gbx" bench --backend cpu --label "procs2$half" --rom "$rom" "${common[@]}" \
                    --seconds "$secs" --load-state "$out/$name.gbx.state" \
                    --json "$out/${name}_procs2${half}_r$r.json" &
                done
                wait
                python3 "$root/scripts/bench_games_report.py" --sum-sweeps "$j" \
                  "$out/${name}_procs2a_r$r.json" "$out/${name}_procs2b_r$r.json" ;;
        spec) "$gbx" bench --backend cpu --label spec --rom "$rom" "${common[@]}" \
                --seconds "$secs" --load-state "$out/$name.gbx.state" \
                --specialize "auto:$profile" --json "$j" ;;
        mgba) "$gbx" bench --backend mgba --label mgba --rom "$rom" "${common[@]}" \
                --seconds "$secs" --load-state "$out/$name.mgba.state" --json "$j" ;;
        pyboy) python3 "$root/scripts/bench_pyboy.py" --rom "$rom" --envs "$envs" --cores 1 \
                 --steps "${pyboy_steps[$i]:-20}" --warmup-steps 2 --frames-per-step "$fps" \
                 --actions random --seed "$seed" --release-after-frames "$release" \
                 --schedule "$out/schedule.json" --skip-boot --gbx-run "$gbx" --json "$j"
               pyboy_steps[$i]=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(max(3, round(float(sys.argv[2]) * r["total_sps"] / r["num_envs"])))' "$j" "$secs") ;;
        *) log "bench-games: unknown column $col"; continue ;;
      esac >/dev/null 2>>"$out/log.txt" || log "bench-games: $col failed on $name (round $r)"
    done
    i=$((i + 1))
  done
  log "round $r/$rounds done ($(date -u +%TZ), load $(cut -d' ' -f1 /proc/loadavg))"
done
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Debian's python has matplotlib (python3-matplotlib) for the plot.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" "$root/scripts/bench_games_report.py" "$out" --rounds "$rounds" $columns | tee -a "$out/log.txt"
echo "sweeps, states, summary.json, games.png: $out"

