"""stable-baselines3 adapter: a gbx vector env as SB3's own ``VecEnv``.

    import gbx.sb3
    from stable_baselines3 import PPO
    venv = gbx.sb3.VecEnv("2048", num_envs=16, rom="2048.gb", obs="ram")   # gbx.make(...)
    venv = gbx.sb3.VecEnv(gbx.VecEnv(rom, 16, ...))                          # or any gbx.VecEnv
    PPO("MlpPolicy", venv).learn(100_000)

SB3's vector API (``reset``/``step_async``/``step_wait``/``close``/``get_attr``/``set_attr``/
``env_method``/``env_is_wrapped``/``seed``/``get_images``) over one gbx env of ``num_envs``
Game Boys. Differences from Gymnasium that this class handles:

- SB3 resets an env in the same step its episode ends: the returned observation is the next
  episode's first, the last one is ``infos[i]["terminal_observation"]``, ``dones`` is
  terminated or truncated, ``infos[i]["TimeLimit.truncated"]`` says which (gbx's autoreset is
  Gymnasium's NEXT_STEP, so the ended envs are reset here with a masked ``reset``).
- ``infos[i]["episode"] = {"r", "l", "t"}`` at an episode's end (what SB3's Monitor writes,
  so ``ep_info_buffer`` and the ``rollout/ep_rew_mean`` log work without a Monitor).
- ``seed(s)`` keys env i's random stream with ``s + i`` at the next ``reset``.

``get_attr``/``set_attr``/``env_method`` reach the one gbx env (one value per index, all the
same object: the Game Boys share it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv as _SB3VecEnv
except ImportError as e:  # pragma: no cover - exercised only without SB3
    raise ImportError(
        f"gbx.sb3 needs stable-baselines3 (pip install stable-baselines3); importing it failed: {e}"
    ) from None

from ._adapters import same_step_reset, wrap_env


class VecEnv(_SB3VecEnv):
    """SB3 ``VecEnv`` over a gbx env: ``VecEnv(gbx_env)`` or ``VecEnv(game, num_envs, **kw)``
    (``gbx.make``'s arguments)."""

    def __init__(self, env: Any, num_envs: int | None = None, **make_kwargs):
        self.venv = v = wrap_env(env, num_envs, make_kwargs, "gbx.sb3.VecEnv")
        super().__init__(v.num_envs, v.single_observation_space, v.single_action_space)
        self.render_mode = v.render_mode
        self._actions = None
        self._obs = None
        self._t0 = time.time()

    # -- SB3 API -------------------------------------------------------------------------------

    def reset(self):
        """Resets every env (seeded by :meth:`seed` if it was called); returns the observations."""
        seeds = list(self._seeds) if any(s is not None for s in self._seeds) else None
        obs, _ = self.venv.reset(seed=seeds)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        self._obs = obs
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Takes the actions the next :meth:`step_wait` steps with."""
        self._actions = np.asarray(actions)

    def step_wait(self):
        """Steps every env; ended envs are reset in the same call, their last observation in
        ``infos[i]["terminal_observation"]`` (SB3's convention). Returns (obs, rewards, dones, infos)."""
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        st = same_step_reset(self.venv, self._actions, terminal_obs=True)
        self._actions = None
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        if st.done.any():
            now, ep = round(time.time() - self._t0, 6), st.episode
            for i, last in st.terminal_obs.items():
                infos[i]["terminal_observation"] = last
                infos[i]["TimeLimit.truncated"] = bool(st.truncated[i] and not st.terminated[i])
                if ep is not None:
                    infos[i]["episode"] = {"r": float(ep["r"][i]), "l": int(ep["l"][i]), "t": now}
        self._obs = st.obs
        return st.obs, np.asarray(st.reward, np.float32), st.done, infos

    def close(self) -> None:
        """Closes the underlying :class:`gbx.VecEnv`."""
        self.venv.close()

    def get_attr(self, attr_name: str, indices=None) -> list:
        """The underlying env's attribute, once per index (all envs share one VecEnv)."""
        return [getattr(self.venv, attr_name) for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        """Sets an attribute of the underlying env (shared by every index)."""
        self._indices(indices)
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list:
        """Calls a method of the underlying env once per index; the results in index order."""
        fn = getattr(self.venv, method_name)
        return [fn(*method_args, **method_kwargs) for _ in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        """False for every index: the envs are not Gymnasium-wrapped."""
        return [False for _ in self._indices(indices)]

    def seed(self, seed: int | None = None) -> Sequence[None | int]:
        """Seeds the next :meth:`reset`: env i gets ``seed + i`` (a random base if None)."""
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        self._seeds = [seed + i for i in range(self.num_envs)]
        return self._seeds

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Env 0's screen as RGB when the env renders (``render_mode="rgb_array"``), else None."""
        img = self.venv.render() if self.venv.render_mode == "rgb_array" else None
        return [img] + [None] * (self.num_envs - 1)

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            indices = [int(indices)]
        out = [int(i) for i in indices]
        for i in out:
            if not 0 <= i < self.num_envs:
                raise IndexError(f"env index {i} out of range (0..{self.num_envs - 1})")
        return out
