#!/usr/bin/env python3
"""Steps one vector env made of Ray actors (gbx.distributed.ShardedVecEnv) with random actions.

python examples/ray_shards.py                          # local Ray, 2 actors of 1 core
python examples/ray_shards.py --address auto --device cuda --shards 8 --envs 65536
                                                       # a Ray cluster: one actor per GPU
"""

import argparse
import sys
import time

import numpy as np
import ray
from gbx.distributed import ShardedVecEnv


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join ('auto' on a cluster node); default: a local Ray",
    )
    ap.add_argument("--cpus", type=int, default=2, help="local Ray only: cores it may use")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--cpus-per-shard", type=int, default=1)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rom", default="builtin:ARROWS")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.cpus, include_dashboard=False)
    t0 = time.perf_counter()
    env = ShardedVecEnv(
        args.rom,
        args.envs,
        num_shards=args.shards,
        device=args.device,
        cpus_per_shard=args.cpus_per_shard,
        seed=args.seed,
        frames_per_step=24,
        track=["ram16(0xC000)"],
        reward="val(0) - prev(0)",
    )
    env.reset(seed=args.seed)
    print(
        f"{args.shards} actors ({'+'.join(map(str, env.sizes))} envs) ready in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    total = 0.0
    for _ in range(args.steps):
        _, reward, _, _, _ = env.step(rng.integers(0, 8, args.envs))
        total += float(reward.sum())
    seconds = time.perf_counter() - started
    env_steps = args.steps * args.envs
    print(
        f"steps {args.steps}  env-steps/s {env_steps / seconds:,.0f}  "
        f"frames/s {env_steps * 24 / seconds:,.0f}  mean reward/step {total / env_steps:.3f}"
    )
    env.close()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
