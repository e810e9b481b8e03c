#!/usr/bin/env python3
"""PPO (CleanRL-style, one file, PyTorch) over gbx for any game profile (gbx.games).

    python examples/ppo.py --game 2048 --rom ../shared/games/2048.gb --minutes 20
    python examples/ppo.py --game arrows --obs pixels --minutes 3
    python examples/ppo.py --game 2048 --rom 2048.gb --device cuda   # DLPack observations

The env is ``gbx.make(game, num_envs, rom=...)``: the profile's reward (compiled into the
kernel), action set, episode end and start recipe. Observations are the profile's RAM bytes
(``--obs ram``, default: each byte through a learned 256-entry embedding, then an MLP) or the
screen (``--obs pixels``: the 72x80 ``half`` screen, Nature-CNN). Rewards are scaled by a
running estimate of the discounted return's standard deviation (as Gymnasium's
NormalizeReward) for learning; every reported score is the raw episode return.

It first measures the random policy (``--eval-envs`` envs, seed ``--eval-seed``, each env's
first episode), trains for ``--minutes`` (or ``--total-steps``), then measures the trained
policy (actions sampled) on the same seeds, and prints::

    random policy: mean score X over N episodes
    trained policy: mean score Y over N episodes (Z x random) after S env-steps, M min

``--device cuda``: the envs run on the GPU and the observations reach the networks as DLPack
views of the backend's device buffers (``env.device_arrays()``), copied on the device into
the rollout buffer. Actions go to the env from the host (VecEnv.step takes numpy), and the
rewards and done flags are read on the host (VecEnv.step's bookkeeping and the running
reward scale need them there). Not yet run on a GPU.
"""

from __future__ import annotations

import argparse
import os
import time

import gbx
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--game", default="2048", help="a gbx.games profile name")
    p.add_argument("--rom", default=None, help="the cartridge (default: ../shared/games/<file>)")
    p.add_argument("--obs", choices=["ram", "pixels"], default="ram")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (env and networks)")
    p.add_argument("--envs", type=int, default=32)
    p.add_argument("--steps", type=int, default=64, help="rollout length per env")
    p.add_argument("--minutes", type=float, default=20.0, help="training wall-clock budget")
    p.add_argument("--total-steps", type=int, default=0, help="stop after this many env-steps")
    p.add_argument("--lr", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-envs", type=int, default=64)
    p.add_argument("--eval-seed", type=int, default=12345)
    p.add_argument("--threads", type=int, default=0, help="emulator threads (0: all cores)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--log-every", type=int, default=10, help="updates between log lines")
    return p.parse_args(argv)


def default_rom(profile):
    if profile.sha1 is None:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "shared", "games", profile.rom or "")
    return path if os.path.isfile(path) else None


def make_env(args, num_envs, seed):
    profile = gbx.games.get(args.game)
    rom = args.rom or default_rom(profile)
    obs = "ram" if args.obs == "ram" else {"pixels": "half"}
    return gbx.make(
        profile,
        num_envs,
        rom=rom,
        obs=obs,
        seed=seed,
        threads=args.threads,
        device="cuda" if args.device.startswith("cuda") else "cpu",
    )


# -- networks --------------------------------------------------------------------------------


def layer(m, std=2**0.5, bias=0.0):
    nn.init.orthogonal_(m.weight, std)
    nn.init.constant_(m.bias, bias)
    return m


class RamAgent(nn.Module):
    """Each RAM byte (0..255) through a shared 16-d embedding (bytes are codes, not amounts),
    then an MLP trunk with policy and value heads."""

    def __init__(self, n_bytes, n_actions):
        super().__init__()
        self.embed = nn.Embedding(256, 16)
        self.trunk = nn.Sequential(
            layer(nn.Linear(16 * n_bytes, 256)), nn.Tanh(), layer(nn.Linear(256, 256)), nn.Tanh()
        )
        self.pi = layer(nn.Linear(256, n_actions), std=0.01)
        self.v = layer(nn.Linear(256, 1), std=1.0)

    def features(self, x):
        return self.trunk(self.embed(x.long()).flatten(1))


class PixelAgent(nn.Module):
    """Nature-CNN over the 72x80 screen (shades 0..3)."""

    def __init__(self, shape, n_actions):
        super().__init__()
        self.net = nn.Sequential(
            layer(nn.Conv2d(1, 32, 8, stride=4)),
            nn.ReLU(),
            layer(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n = self.net(torch.zeros(1, 1, *shape)).shape[1]
        self.trunk = nn.Sequential(layer(nn.Linear(n, 256)), nn.ReLU())
        self.pi = layer(nn.Linear(256, n_actions), std=0.01)
        self.v = layer(nn.Linear(256, 1), std=1.0)

    def features(self, x):
        return self.trunk(self.net(x.float().unsqueeze(1) / 3.0))


def act(agent, x, action=None):
    h = agent.features(x)
    dist = Categorical(logits=agent.pi(h))
    if action is None:
        action = dist.sample()
    return action, dist.log_prob(action), dist.entropy(), agent.v(h).squeeze(-1)


# -- the env on either device ----------------------------------------------------------------


class Obs:
    """Observations as torch tensors on ``device``: on cuda, DLPack views of the env's device
    output block (no host-to-device copy); on cpu, the numpy arrays VecEnv returns."""

    def __init__(self, env, device):
        self.env, self.device = env, device
        self.cuda = device.type == "cuda"

    def obs(self, obs_np):
        if not self.cuda:
            return torch.from_numpy(np.asarray(obs_np))
        arrays = self.env.device_arrays()
        name = "gather" if "gather" in arrays and obs_np.ndim == 2 else "pixels"
        t = torch.from_dlpack(arrays[name])
        return t.reshape(obs_np.shape)

    def reward(self, reward_np):
        return torch.as_tensor(reward_np, dtype=torch.float32, device=self.device)


# -- evaluation ------------------------------------------------------------------------------


def evaluate(args, policy, device):
    """Mean raw return of each env's first episode (``--eval-envs`` envs, ``--eval-seed``);
    ``policy(obs_tensor) -> actions`` (None: uniformly random, from a generator seeded alike)."""
    env = make_env(args, args.eval_envs, args.eval_seed)
    obs, _ = env.reset(seed=args.eval_seed)
    rng = np.random.default_rng(args.eval_seed)
    n_actions = env.single_action_space.n
    done = np.zeros(env.num_envs, bool)
    scores = np.zeros(env.num_envs)
    while not done.all():
        if policy is None:
            a = rng.integers(0, n_actions, env.num_envs)
        else:
            with torch.no_grad():
                a = policy(torch.as_tensor(np.asarray(obs), device=device)).cpu().numpy()
        obs, r, term, trunc, info = env.step(a)
        if "episode" in info:
            fresh = info["_episode"] & ~done
            scores[fresh] = info["episode"]["r"][fresh]
            done |= info["_episode"]
    env.close()
    return float(scores.mean()), len(scores)


# -- training --------------------------------------------------------------------------------


def train(args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    device = torch.device(args.device)
    t_start = time.time()
    random_score, n_eval = evaluate(args, None, device)
    print(f"random policy: mean score {random_score:.1f} over {n_eval} episodes", flush=True)

    env = make_env(args, args.envs, args.seed)
    obs_np, _ = env.reset(seed=args.seed)
    n_actions = env.single_action_space.n
    shape = env.single_observation_space.shape
    agent = (
        RamAgent(shape[0], n_actions) if args.obs == "ram" else PixelAgent(shape, n_actions)
    ).to(device)
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    io = Obs(env, device)

    T, N = args.steps, args.envs
    obs_buf = torch.zeros((T, N) + shape, dtype=torch.uint8, device=device)
    act_buf = torch.zeros((T, N), dtype=torch.long, device=device)
    logp_buf = torch.zeros((T, N), device=device)
    rew_buf = torch.zeros((T, N), device=device)
    done_buf = torch.zeros((T, N), device=device)
    val_buf = torch.zeros((T, N), device=device)
    # running std of the discounted return, for reward scaling (NormalizeReward)
    ret_run = np.zeros(N)
    ret_count, ret_mean, ret_m2 = 1e-4, 0.0, 0.0

    next_obs = io.obs(obs_np).to(device)
    next_done = torch.zeros(N, device=device)
    steps, update, recent = 0, 0, []
    budget = args.minutes * 60.0
    t_train = time.time()
    while True:
        if args.total_steps and steps >= args.total_steps:
            break
        if not args.total_steps and time.time() - t_train >= budget:
            break
        update += 1
        for t in range(T):
            obs_buf[t] = next_obs
            done_buf[t] = next_done
            with torch.no_grad():
                a, logp, _, v = act(agent, next_obs)
            act_buf[t], logp_buf[t], val_buf[t] = a, logp, v
            obs_np, r, term, trunc, info = env.step(a.cpu().numpy())
            steps += N
            d = term | trunc
            # reward scaling by the running std of the discounted return
            ret_run = ret_run * args.gamma + r
            for x in ret_run:
                ret_count += 1
                delta = x - ret_mean
                ret_mean += delta / ret_count
                ret_m2 += delta * (x - ret_mean)
            ret_run[d] = 0.0
            scale = np.sqrt(ret_m2 / ret_count) + 1e-8
            rew_buf[t] = io.reward(np.clip(r / scale, -10, 10))
            next_obs = io.obs(obs_np).to(device)
            next_done = torch.as_tensor(d, dtype=torch.float32, device=device)
            if "episode" in info:
                recent += info["episode"]["r"][info["_episode"]].tolist()
        # GAE. NEXT_STEP autoreset: the step after an episode's end is its reset step (reward
        # 0); done_buf[t] marks the first step of an episode, so nothing bootstraps across.
        with torch.no_grad():
            next_v = act(agent, next_obs)[3]
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(N, device=device)
            for t in reversed(range(T)):
                nonterm = 1.0 - (next_done if t == T - 1 else done_buf[t + 1])
                nv = next_v if t == T - 1 else val_buf[t + 1]
                delta = rew_buf[t] + args.gamma * nv * nonterm - val_buf[t]
                last = delta + args.gamma * args.gae_lambda * nonterm * last
                adv[t] = last
            ret = adv + val_buf
        b_obs = obs_buf.reshape((-1,) + shape)
        b_act, b_logp = act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv, b_ret, b_val = adv.reshape(-1), ret.reshape(-1), val_buf.reshape(-1)
        idx = np.arange(T * N)
        mb = T * N // args.minibatches
        for _ in range(args.epochs):
            np.random.shuffle(idx)
            for s in range(0, T * N, mb):
                j = torch.as_tensor(idx[s : s + mb], device=device)
                _, logp, ent, v = act(agent, b_obs[j], b_act[j])
                ratio = (logp - b_logp[j]).exp()
                a = b_adv[j]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                v_clip = b_val[j] + (v - b_val[j]).clamp(-args.clip, args.clip)
                vl = 0.5 * torch.max((v - b_ret[j]) ** 2, (v_clip - b_ret[j]) ** 2).mean()
                loss = pg - args.ent_coef * ent.mean() + args.vf_coef * vl
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
        if update % args.log_every == 0:
            mean = np.mean(recent[-200:]) if recent else float("nan")
            el = time.time() - t_train
            print(
                f"update {update}: {steps} env-steps, {steps / el:.0f} steps/s, {el / 60:.1f} min, "
                f"mean episode score (last 200) {mean:.1f}",
                flush=True,
            )
    env.close()
    minutes = (time.time() - t_train) / 60.0

    def policy(x):
        return act(agent, x)[0]

    trained, n_eval = evaluate(args, policy, device)
    ratio = trained / random_score if random_score else float("inf")
    print(
        f"trained policy: mean score {trained:.1f} over {n_eval} episodes ({ratio:.2f} x random) "
        f"after {steps} env-steps, {minutes:.1f} min of training "
        f"({(time.time() - t_start) / 60:.1f} min in all)",
        flush=True,
    )
    return {
        "random": random_score,
        "trained": trained,
        "ratio": ratio,
        "steps": steps,
        "minutes": minutes,
        "agent": agent,
    }


if __name__ == "__main__":
    train(parse())
