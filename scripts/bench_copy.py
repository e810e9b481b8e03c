#!/usr/bin/env python3
"""What copy=False (zero-copy views) saves over the default copy=True (fresh arrays).

Two gbx.VecEnv with the same arguments but `copy`, the same kernel (cached), stepped in
alternating rounds so both see the same machine load; prints each round's env-steps/s and
the median ratio view/copy.

    build/pyvenv/bin/python scripts/bench_copy.py --envs 256 --frames-per-step 1 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import gbx
import numpy as np


def rate(env, steps: int, acts: np.ndarray) -> float:
    env.step(acts)  # warm (first touch of the arrays)
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(acts)
    return steps * env.num_envs / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rom", default="builtin:ARROWS")
    ap.add_argument("--envs", type=int, default=256)
    ap.add_argument("--frames-per-step", type=int, default=1)
    ap.add_argument("--obs", default="pixels", help="pixels | vec | half (pixels half)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    obs = {"pixels": "half"} if args.obs == "half" else args.obs
    kw = dict(
        device=args.device,
        frames_per_step=args.frames_per_step,
        obs=obs,
        threads=args.threads,
        seed=0,
    )
    envs = {c: gbx.VecEnv(args.rom, args.envs, copy=c, **kw) for c in (True, False)}
    for e in envs.values():
        e.reset(seed=0)
    acts = np.zeros(args.envs, dtype=np.int64)
    ratios = []
    for r in range(args.rounds):
        # ABBA order: a load that drifts during a round favours neither.
        if r % 2 == 0:
            copy_rate = rate(envs[True], args.steps, acts)
            view_rate = rate(envs[False], args.steps, acts)
        else:
            view_rate = rate(envs[False], args.steps, acts)
            copy_rate = rate(envs[True], args.steps, acts)
        ratios.append(view_rate / copy_rate)
        print(
            f"round {r + 1}: copy=True {copy_rate:,.0f}  copy=False {view_rate:,.0f} "
            f"env-steps/s  ratio {ratios[-1]:.3f}"
        )
    obs_bytes = sum(
        np.asarray(v).nbytes
        for v in (
            envs[True].step(acts)[0].values()
            if isinstance(obs, dict)
            else [envs[True].step(acts)[0]]
        )
    )
    # The work copy=True adds, timed alone: one copy of the observation (and the reward).
    view = envs[False].step(acts)[0]
    parts = list(view.values()) if isinstance(view, dict) else [view]
    reps = 200
    t0 = time.perf_counter()
    for _ in range(reps):
        for v in parts:
            v.copy()
    copy_us = (time.perf_counter() - t0) / reps * 1e6
    step_us = (
        1e6 * args.envs / statistics.median([rate(envs[False], args.steps, acts) for _ in range(1)])
    )
    print(
        f"{args.obs} obs, {obs_bytes / args.envs:,.0f} bytes/env/step, envs {args.envs}, "
        f"frames/step {args.frames_per_step}: median ratio copy=False/copy=True "
        f"{statistics.median(ratios):.3f}; the copy alone {copy_us:,.0f} us a step "
        f"({100 * copy_us / step_us:.2f}% of a {step_us / 1e3:,.1f} ms copy=False step)"
    )
    for e in envs.values():
        e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
