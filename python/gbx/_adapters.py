"""What the trainer adapters (:mod:`gbx.sb3`, :mod:`gbx.pufferlib`) share: the gbx env they
wrap, and a step in the trainers' convention.

gbx's own autoreset is Gymnasium's NEXT_STEP (the step after an episode's end resets the env);
SB3 and PufferLib reset an env in the same step its episode ends. :func:`same_step_reset`
steps the gbx env and resets the envs that ended with one masked ``reset``, taking what the
reset would overwrite (the reward, the ended envs' last observations) before it: with
``copy=False`` the arrays ``step`` returns are views of the backend's buffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import games
from .vec_env import VecEnv


def wrap_env(
    env: Any, num_envs: int | None, make_kwargs: dict, who: str, defaults: dict | None = None
) -> VecEnv:
    """``env`` itself when it is a :class:`gbx.VecEnv` (then neither ``num_envs`` nor options
    may be given), else ``gbx.make(env, num_envs, **defaults, **make_kwargs)`` (``make_kwargs``
    win); ``who`` names the adapter in the errors."""
    if isinstance(env, VecEnv):
        if num_envs is not None or make_kwargs:
            raise ValueError("pass either a gbx.VecEnv or a game with num_envs and options")
        return env
    if num_envs is None:
        raise ValueError(f"{who}(game, num_envs, ...) needs num_envs")
    return games.make(env, num_envs, **{**(defaults or {}), **make_kwargs})


@dataclass
class Step:
    """One :func:`same_step_reset` step. ``obs``: the next observation of every env (the next
    episode's first where ``done``); ``episode``: gbx's ``info["episode"]`` (``r``, ``l``,
    valid where ``ended``) or None; ``terminal_obs``: env index -> its last observation (a
    copy), for the ended envs when asked for."""

    obs: Any
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    episode: dict | None
    ended: np.ndarray | None
    terminal_obs: dict[int, Any]


def same_step_reset(
    venv: VecEnv, actions, reward_out: np.ndarray | None = None, terminal_obs: bool = False
) -> Step:
    """Steps ``venv`` with ``actions`` and resets the envs whose episode ended in the same
    call. ``reward_out``: a buffer the reward is copied into (and returned as), before the
    reset; without one the reward is copied only when the reset would overwrite it.
    ``terminal_obs``: keep a copy of each ended env's last observation."""
    obs, reward, term, trunc, info = venv.step(np.asarray(actions))
    done = term | trunc
    if reward_out is not None:
        np.copyto(reward_out, reward)
        reward = reward_out
    last: dict[int, Any] = {}
    if done.any():
        if reward_out is None and not venv.copy:
            reward = reward.copy()  # the reset rewrites the backend's reward buffer
        if terminal_obs:
            last = {int(i): _row(obs, i) for i in np.flatnonzero(done)}
        obs, _ = venv.reset(options={"reset_mask": done})
    return Step(obs, reward, term, trunc, done, info.get("episode"), info.get("_episode"), last)


def _row(obs, i):
    if isinstance(obs, dict):
        return {k: np.array(v[i]) for k, v in obs.items()}
    return np.array(obs[i])
