"""PufferLib 3 adapter: a gbx vector env as a native ``pufferlib.PufferEnv``.

    import gbx.pufferlib
    env = gbx.pufferlib.PufferEnv("2048", num_envs=64, rom="2048.gb", obs="ram")
    obs, infos = env.reset(seed=0)
    obs, rew, term, trunc, infos = env.step(env.action_space.sample())

    import pufferlib.vector                        # PufferLib's own vectorization
    vecenv = pufferlib.vector.make(gbx.pufferlib.env_creator("2048"), num_envs=2,
                                   backend=pufferlib.vector.Serial,
                                   env_kwargs=dict(num_envs=64, rom="2048.gb", obs="ram"))

Every Game Boy is one of the PufferEnv's ``num_agents`` agents: ``single_observation_space``
is one env's (a ``Box``: the ``ram`` or ``pixels`` obs, not a Dict spec), ``single_action_space``
the profile's ``Discrete`` action set. PufferLib hands the env its buffers (``buf``: the
``observations``, ``rewards``, ``terminals``, ``truncations``, ``masks``, ``actions`` arrays,
shared memory under its Multiprocessing backend); each ``step`` writes straight into them:
the gbx env runs with ``copy=False`` (its outputs are views of the emulator's own output
block), and one ``np.copyto`` per array moves each into PufferLib's buffer, with no other
array made on the way. The emulator cannot write into a foreign buffer itself (its output
block is its own), so that one copy remains.

Like PufferLib's native envs, an env whose episode ended is reset in the same step: its
``terminals``/``truncations`` flag is set and its observation is already the next episode's
first. ``infos`` is a list with one dict of means (``episode_return``, ``episode_length``,
``episodes``) when episodes ended in the step, else empty.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import pufferlib as _puffer
    from pufferlib import PufferEnv as _PufferEnv
except ImportError as e:  # pragma: no cover - exercised only without PufferLib
    raise ImportError(
        "gbx.pufferlib needs PufferLib 3 (pip install --no-build-isolation pufferlib: its "
        f"build imports numpy and torch); importing it failed: {e}"
    ) from None

from ._adapters import same_step_reset, wrap_env


class PufferEnv(_PufferEnv):
    """``PufferEnv(game, num_envs, buf=None, seed=0, **make_kwargs)`` (``gbx.make``) or
    ``PufferEnv(gbx_env, buf=None)`` for a VecEnv made with ``copy=False``."""

    def __init__(
        self, env: Any, num_envs: int | None = None, buf=None, seed: int = 0, **make_kwargs
    ):
        self.venv = v = wrap_env(
            env, num_envs, make_kwargs, "gbx.pufferlib.PufferEnv", {"copy": False, "seed": seed}
        )
        from gymnasium import spaces

        if not isinstance(v.single_observation_space, spaces.Box):
            raise ValueError(
                "PufferLib's native envs take a Box observation: use obs='ram', 'pixels' or a "
                f"one-key spec (got {v.single_observation_space})"
            )
        self.single_observation_space = v.single_observation_space
        self.single_action_space = v.single_action_space
        self.num_agents = v.num_envs
        self._seed = seed
        super().__init__(buf)

    def reset(self, seed: int | None = None):
        """Resets every env and writes the observations into PufferLib's buffer."""
        obs, _ = self.venv.reset(seed=self._seed if seed is None else seed)
        np.copyto(self.observations, obs)
        self.rewards.fill(0)
        self.terminals.fill(False)
        self.truncations.fill(False)
        return self.observations, []

    def step(self, actions):
        """Steps every env, writing observations, rewards, terminals and truncations into
        PufferLib's buffers (ended envs reset in the same call); returns them and the infos."""
        st = same_step_reset(self.venv, actions, reward_out=self.rewards)
        infos: list[dict] = []
        if st.episode is not None:
            ended = st.ended
            infos.append(
                {
                    "episode_return": float(st.episode["r"][ended].mean()),
                    "episode_length": float(st.episode["l"][ended].mean()),
                    "episodes": int(ended.sum()),
                }
            )
        np.copyto(self.observations, st.obs)
        np.copyto(self.terminals, st.terminated)
        np.copyto(self.truncations, st.truncated)
        return self.observations, self.rewards, self.terminals, self.truncations, infos

    def close(self):
        """Closes the underlying :class:`gbx.VecEnv`."""
        self.venv.close()


def env_creator(game: str):
    """A creator for ``pufferlib.vector.make``: ``creator(buf=None, seed=0, **kwargs)``."""

    def make(buf=None, seed=0, **kwargs):
        return PufferEnv(game, buf=buf, seed=seed, **kwargs)

    return make


__all__ = ["PufferEnv", "env_creator"]
_ = _puffer  # the package itself (its version: gbx.pufferlib._puffer.__version__)
