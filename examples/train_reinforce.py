#!/usr/bin/env python3
"""REINFORCE on the ARROWS micro-game, from pixels, in numpy only.

    python examples/train_reinforce.py                 # 100 updates of 32 envs x 16 steps
    python examples/train_reinforce.py --updates 30    # what tests/python/test_learning.py runs
    python examples/train_reinforce.py --specialize auto   # on the ROM-specialized kernel

The game (builtin:ARROWS, README "The ARROWS game") shows one of four big arrows; pressing the
matching direction scores a point (a u16 at 0xC000). The reward is the score's increase,
computed in the kernel (``track=["ram16(0xC000)"], reward="val(0) - prev(0)"``). The policy is
a softmax over the 8 ``pokemon8`` actions of a linear function of the screen (the 72x80
``half`` pixels observation, averaged over 4x4 blocks); it is trained by REINFORCE with a
per-time-step baseline and Adam. A random policy scores 1/8 point a step (one action in
eight is the arrow's direction); the optimum is 1.

Prints one line per 10 updates and ends with ``mean reward/step: X`` (the last evaluation:
the trained policy, sampled, on ``--eval-steps`` steps of every env) and ``random policy: Y``.
"""

from __future__ import annotations

import argparse
import sys
import time

import gbx
import numpy as np

SCORE = 0xC000  # ARROWS: u16 score (runtime/include/gbx/runtime/roms/arrows_rom.h)
NUM_ACTIONS = 8  # pokemon8: noop, A, B, START, UP, DOWN, LEFT, RIGHT


def make_env(args, seed: int) -> gbx.VecEnv:
    # 4 frames a step, buttons held for the first 2: each step is one press, and the new
    # arrow (drawn in the VBlank after the press) is on the screen the step returns.
    return gbx.VecEnv(
        "builtin:ARROWS",
        num_envs=args.envs,
        frames_per_step=4,
        release_after_frames=2,
        actions="pokemon8",
        obs={"pixels": "half"},
        track=[f"ram16({SCORE:#x})"],
        reward="val(0) - prev(0)",
        max_episode_frames=4 * args.episode_steps,
        noop_max=30,
        seed=seed,
        threads=args.threads,
        specialize=args.specialize,
    )


# -- the only pixel preprocessing: screen -> feature vector ---------------------------------


def features(obs) -> np.ndarray:
    """uint8[N, 72, 80] shades 0-3 -> float32[N, 18 * 20 + 1]: 4x4 block means in [0, 1]
    and a constant 1 (the bias)."""
    px = obs["pixels"] if isinstance(obs, dict) else obs
    n = px.shape[0]
    x = px.reshape(n, 18, 4, 20, 4).mean(axis=(2, 4), dtype=np.float32) / 3.0
    return np.concatenate([x.reshape(n, -1), np.ones((n, 1), np.float32)], axis=1)


# -- policy ---------------------------------------------------------------------------------


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def sample(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    u = rng.random((probs.shape[0], 1))
    return np.minimum((probs.cumsum(axis=1) < u).sum(axis=1), probs.shape[1] - 1)


class Adam:
    def __init__(self, shape, lr: float, b1=0.9, b2=0.999, eps=1e-8):
        self.m = np.zeros(shape)
        self.v = np.zeros(shape)
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0

    def step(self, w: np.ndarray, grad: np.ndarray) -> None:  # gradient ascent
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad * grad
        mh = self.m / (1 - self.b1**self.t)
        vh = self.v / (1 - self.b2**self.t)
        w += self.lr * mh / (np.sqrt(vh) + self.eps)


def evaluate(env, w, steps: int, rng, policy: str = "trained") -> float:
    """Mean reward per env-step over `steps` steps from a fresh reset."""
    obs, _ = env.reset()
    total = 0.0
    for _ in range(steps):
        if policy == "random":
            act = rng.integers(0, NUM_ACTIONS, env.num_envs)
        else:
            act = sample(softmax(features(obs) @ w), rng)
        obs, reward, _, _, _ = env.step(act)
        total += float(reward.sum())
    return total / (steps * env.num_envs)


def train(args) -> dict:
    rng = np.random.default_rng(args.seed)
    env = make_env(args, args.seed)
    obs, _ = env.reset(seed=args.seed)
    dim = features(obs).shape[1]
    w = np.zeros((dim, NUM_ACTIONS))
    opt = Adam(w.shape, args.lr)
    started = time.perf_counter()
    env_steps = 0
    history = []
    for update in range(1, args.updates + 1):
        xs, acts, probs, rewards = [], [], [], []
        for _ in range(args.rollout):
            x = features(obs)
            p = softmax(x @ w)
            a = sample(p, rng)
            obs, r, term, trunc, _ = env.step(a)
            xs.append(x)
            acts.append(a)
            probs.append(p)
            rewards.append(np.array(r, dtype=np.float64))
        env_steps += args.rollout * args.envs
        # Discounted returns within the rollout, baseline = their mean over envs per step.
        # (A step's reward belongs to its own press; gamma > 0 lets a policy learn that a
        # press is worth more than waiting.)
        ret = np.zeros((args.rollout, args.envs))
        g = np.zeros(args.envs)
        for t in reversed(range(args.rollout)):
            g = rewards[t] + args.gamma * g
            ret[t] = g
        adv = ret - ret.mean(axis=1, keepdims=True)
        adv /= ret.std() + 1e-6
        x = np.concatenate(xs)
        p = np.concatenate(probs)
        onehot = np.eye(NUM_ACTIONS)[np.concatenate(acts)]
        grad = x.T @ ((onehot - p) * adv.reshape(-1, 1)) / len(x)
        opt.step(w, grad)
        mean_r = float(np.mean(rewards))
        history.append(mean_r)
        if update % 10 == 0 or update == args.updates:
            el = time.perf_counter() - started
            print(
                f"update {update:4d}  mean reward/step {mean_r:.3f}  "
                f"env-steps {env_steps}  {env_steps / el:,.0f} env-steps/s  {el:.1f} s",
                flush=True,
            )
    train_seconds = time.perf_counter() - started
    eval_rng = np.random.default_rng(args.seed + 1)
    trained = evaluate(env, w, args.eval_steps, eval_rng)
    rand = evaluate(env, w, args.eval_steps, eval_rng, policy="random")
    env.close()
    print(f"trained for {train_seconds:.1f} s ({env_steps} env-steps)")
    print(f"mean reward/step: {trained:.3f}")
    print(f"random policy: {rand:.3f}")
    return {
        "trained": trained,
        "random": rand,
        "seconds": train_seconds,
        "history": history,
        "weights": w,
    }


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=32)
    ap.add_argument("--updates", type=int, default=100)
    ap.add_argument("--rollout", type=int, default=16, help="steps per env per update")
    ap.add_argument("--episode-steps", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.5)
    ap.add_argument("--eval-steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0, help="kernel threads (0 = all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--specialize",
        default="off",
        help="off | auto[:N] | profile:FILE: the ROM-specialized kernel (README); "
        "the same trajectories, faster steps",
    )
    return ap.parse_args(argv)


def main(argv=None) -> int:
    train(parse(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
