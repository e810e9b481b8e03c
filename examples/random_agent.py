#!/usr/bin/env python3
"""Random agent: steps a gbx.VecEnv with random actions and prints env-steps/s and frames/s.

python examples/random_agent.py --envs 256 --steps 200
python examples/random_agent.py --rom game.gb --state mid.gbxstate   # from a save state
"""

import argparse
import sys
import time

import gbx


def progress(done: int, total: int, started: float, frames: int) -> None:
    width = 30
    filled = width * done // total
    el = max(time.perf_counter() - started, 1e-9)
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} steps  "
        f"{frames / el:,.0f} frames/s"
    )
    sys.stderr.flush()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rom", default="builtin:ALU_LOOP")
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--frames-per-step", type=int, default=24)
    ap.add_argument("--threads", type=int, default=0, help="0 = all cores")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--obs",
        default="pixels",
        choices=("pixels", "vec"),
        help="pixels (the screen, VecEnv's default) or vec (obs_v0, what "
        "`gbx-run bench` writes; scripts/bench-python.sh compares with it)",
    )
    ap.add_argument(
        "--state",
        help="GBX save state every env starts (and resets) from, e.g. "
        "one written by `gbx-run run --save-state`",
    )
    args = ap.parse_args()

    t0 = time.perf_counter()
    env = gbx.VecEnv(
        args.rom,
        num_envs=args.envs,
        device=args.device,
        frames_per_step=args.frames_per_step,
        release_after_frames=0,
        threads=args.threads,
        seed=args.seed,
        obs=args.obs,
    )
    if args.state:
        with open(args.state, "rb") as f:
            env.set_reset_state(f.read())
    env.reset(seed=args.seed)
    print(f"env ready in {time.perf_counter() - t0:.2f} s (kernel {env.kernel_key[:16]})")
    env.action_space.seed(args.seed)
    env.step(env.action_space.sample())  # warm-up, not timed
    started = time.perf_counter()
    for i in range(args.steps):
        env.step(env.action_space.sample())
        if (i + 1) % max(1, args.steps // 50) == 0 or i + 1 == args.steps:
            progress(i + 1, args.steps, started, (i + 1) * args.envs * args.frames_per_step)
    seconds = time.perf_counter() - started
    sys.stderr.write("\n")
    env_steps = args.steps * args.envs
    print(
        f"envs {args.envs}  steps {args.steps}  frames/step {args.frames_per_step}  "
        f"seconds {seconds:.3f}"
    )
    print(
        f"env-steps/s {env_steps / seconds:,.0f}  "
        f"frames/s {env_steps * args.frames_per_step / seconds:,.0f}"
    )
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
