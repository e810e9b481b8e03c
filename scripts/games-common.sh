# shellcheck shell=bash
# Sourced by scripts/bench-games.sh and scripts/bench-gpu --games: the game-shaped workloads
# and their mid-game states, defined once so the cpu and the GPU numbers start from the same
# machine state.
#   gbx_games_roms BUILD ROOT        the default ROM list: BUILD/roms/game_loop.gb (when sdcc
#                                    built it), then every ../shared/games/*.gb
#   gbx_games_schedule SEED SEGMENTS HOLD BIN JSON
#                                    the input schedule from the seed alone: one random joypad
#                                    byte per segment (BIN, what `gbx-run run --actions FILE`
#                                    takes) and the same as [[action, frames], ...] (JSON, for
#                                    PyBoy)
#   gbx_games_state GBX BACKEND ROM BIN SEGMENTS HOLD STATE
#                                    plays the schedule from power-on (the post-boot state) on
#                                    one env, one step per segment, and saves the state at its end
# States are made at run time, never stored: the ROMs are not ours to ship.

gbx_games_roms() {
  local build=$1 root=$2 roms="" f
  [ -f "$build/roms/game_loop.gb" ] && roms="$build/roms/game_loop.gb"
  # Every game in ../shared/games, taken from the folder (a game added there is measured).
  for f in "$root"/../shared/games/*.gb; do
    [ -f "$f" ] && roms="$roms $f"
  done
  echo "$roms"
}

gbx_games_schedule() {
  python3 - "$1" "$2" "$3" "$4" > "$5" <<'PY'
import json, random, sys
seed, segs, hold = (int(x) for x in sys.argv[1:4])
rng = random.Random(seed)
actions = [rng.randrange(256) for _ in range(segs)]
open(sys.argv[4], "wb").write(bytes(actions))
print(json.dumps([[a, hold] for a in actions]))
PY
}

gbx_games_state() {
  local gbx=$1 backend=$2 rom=$3 bin=$4 segments=$5 hold=$6 state=$7
  "$gbx" run --backend "$backend" --rom "$rom" --envs 1 --threads 1 --stage emulate_only \
    --frames $((segments * hold)) --frames-per-step "$hold" --actions "$bin" \
    --save-state "$state" >/dev/null
}
