"""gbx.distributed: one vector env made of K ``gbx.VecEnv`` shards running as Ray actors.

    import ray, gbx
    from gbx.distributed import ShardedVecEnv

    ray.init()                                   # or ray.init(address="auto") on a cluster
    env = ShardedVecEnv("builtin:ARROWS", num_envs=8192, num_shards=4, device="cuda", seed=0)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

Shard k holds envs ``[offset_k, offset_k + n_k)`` (the envs split as evenly as possible) in a
Ray actor that owns one ``VecEnv``; ``step`` sends each actor its slice of the actions, all
actors step at once, and the results come back through Ray's object store and are
concatenated in env order. The object is a Gymnasium ``VectorEnv`` with the same API as
``VecEnv`` (spaces, ``reset(seed=, options={"reset_mask": m})``, ``step``, ``close``,
NEXT_STEP autoreset, ``info["episode"]``), and for the same arguments and seed its outputs
equal those of one unsharded ``VecEnv``: each env draws its random numbers from its own stream
keyed by the seed and its global index (:mod:`gbx.env_streams`).

Placement: ``device="cuda"`` gives every actor one GPU (``num_gpus=1``; Ray sets
``CUDA_VISIBLE_DEVICES``, so the actor's VecEnv runs on ``cuda:0``, its own GPU);
``device="cpu"`` gives every actor a group of ``cpus_per_shard`` cores and runs its kernel on
that many threads. ``actor_options`` adds or overrides Ray actor options (e.g.
``{"resources": {...}}`` or a ``scheduling_strategy``). Every node needs ``gbx`` installed in
the Python that Ray's workers run (the same environment as the driver).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space


def _ray():
    try:
        import ray
    except ImportError as e:  # an optional extra
        raise ImportError("gbx.distributed needs Ray: pip install 'gbx[ray]'") from e
    return ray


class _Shard:
    """The actor: one VecEnv over envs [offset, offset + num_envs) of the whole vector env."""

    def __init__(self, rom, num_envs: int, offset: int, kwargs: dict):
        import gbx

        self.env = gbx.VecEnv(rom, num_envs, env_offset=offset, **kwargs)

    def spaces(self):
        return self.env.single_observation_space, self.env.single_action_space

    # Ray copies what an actor returns into its object store when the call returns, so the
    # VecEnv's views of its buffers (copy=False) could be returned as they are; shards keep
    # the VecEnv default (copy=True) unless the caller passes copy.
    def reset(self, seed, mask):
        options = None if mask is None else {"reset_mask": mask}
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        return self.env.step(actions)

    def call(self, name: str, args: tuple, kwargs: dict):
        return getattr(self.env, name)(*args, **kwargs)

    def get(self, name: str):
        return getattr(self.env, name)

    def close(self):
        self.env.close()


def _concat(parts: list) -> Any:
    """Concatenates per-shard batches (arrays, or dicts of them) along the env axis."""
    if isinstance(parts[0], dict):
        return {k: _concat([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts, axis=0)


def _merge_infos(infos: list[dict], sizes: list[int]) -> dict:
    """Gymnasium vector infos (per-env arrays plus ``_key`` masks) of shards -> one info.

    A key missing from a shard's info is absent for its envs: zeros, mask False."""
    keys: list[str] = []
    for info in infos:
        keys += [k for k in info if k not in keys]
    out: dict = {}
    for k in keys:
        present = [info for info in infos if k in info]
        sample = present[0][k]
        if isinstance(sample, dict):
            out[k] = _merge_infos([info.get(k, {}) for info in infos], sizes)
            continue
        parts = []
        for info, n in zip(infos, sizes):
            if k in info:
                parts.append(np.asarray(info[k]))
            else:
                s = np.asarray(sample)
                parts.append(np.zeros((n,) + s.shape[1:], dtype=s.dtype))
        out[k] = np.concatenate(parts, axis=0)
    return out


def split_envs(num_envs: int, num_shards: int) -> list[int]:
    """Envs per shard, as even as possible (the first shards take the remainder)."""
    base, extra = divmod(num_envs, num_shards)
    return [base + (k < extra) for k in range(num_shards)]


class ShardedVecEnv(gym.vector.VectorEnv):
    """``num_envs`` Game Boys in ``num_shards`` Ray actors, one ``gbx.VecEnv`` each.

    Arguments: ``rom`` and ``num_envs`` as for ``VecEnv``; ``num_shards`` (K actors);
    ``device`` ("cpu" or "cuda"; each cuda actor gets its own GPU); ``cpus_per_shard``
    (cpu: cores reserved for and used by each actor); ``seed``; ``actor_options`` (extra Ray
    actor options); every other keyword goes to each shard's ``VecEnv`` unchanged
    (``frames_per_step``, ``actions``, ``obs``, ``reward``, ``done``, ``noop_max``, ...).
    Call ``ray.init(...)`` first (without it Ray starts a local instance).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        rom: str | bytes,
        num_envs: int,
        num_shards: int = 2,
        device: str = "cpu",
        cpus_per_shard: int = 1,
        seed: int | None = None,
        actor_options: dict | None = None,
        **env_kwargs,
    ):
        ray = _ray()
        if not isinstance(num_shards, (int, np.integer)) or num_shards < 1:
            raise ValueError(f"num_shards must be an int >= 1 (got {num_shards!r})")
        if not isinstance(num_envs, (int, np.integer)) or num_envs < num_shards:
            raise ValueError(
                f"num_envs must be an int >= num_shards ({num_shards}), got {num_envs!r}"
            )
        if device not in ("cpu", "cuda"):
            raise ValueError(
                f"device must be 'cpu' or 'cuda' (each cuda shard gets its own GPU), got {device!r}"
            )
        if cpus_per_shard < 1:
            raise ValueError(f"cpus_per_shard must be >= 1 (got {cpus_per_shard})")
        for k in ("env_offset", "num_envs"):
            if k in env_kwargs:
                raise ValueError(f"{k} is set per shard by ShardedVecEnv")
        if seed is None:  # one seed for all shards, so their envs' streams fit together
            seed = int(np.random.SeedSequence().entropy) & (2**63 - 1)
        self.num_envs = int(num_envs)
        self.num_shards = int(num_shards)
        self.device = device
        self.sizes = split_envs(self.num_envs, self.num_shards)
        self.offsets = [int(o) for o in np.cumsum([0] + self.sizes[:-1])]

        options: dict[str, Any] = {"num_cpus": cpus_per_shard}
        shard_kwargs = dict(env_kwargs, seed=seed)
        if device == "cuda":
            options["num_gpus"] = 1
            shard_kwargs["device"] = "cuda:0"  # the actor sees only its own GPU
        else:
            shard_kwargs["device"] = "cpu"
            shard_kwargs.setdefault("threads", cpus_per_shard)
        options.update(actor_options or {})
        actor = ray.remote(_Shard).options(**options)
        self._ray = ray
        self._actors = [
            actor.remote(rom, n, off, shard_kwargs) for n, off in zip(self.sizes, self.offsets)
        ]
        # Constructing a VecEnv compiles (or loads) its kernel; errors surface here.
        obs_space, act_space = ray.get([a.spaces.remote() for a in self._actors])[0]
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)

    def _slices(self):
        return [slice(o, o + n) for o, n in zip(self.offsets, self.sizes)]

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        """As :meth:`gbx.VecEnv.reset`, every shard at once (per-env seeds sliced per shard)."""
        mask = None if not options else options.get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), "
                    f"got {mask.dtype} {mask.shape}"
                )
        seeds = [seed] * self.num_shards
        if isinstance(seed, (list, tuple, np.ndarray)):
            # Per-env seeds key each env's stream alone (gbx.env_streams): a slice per shard.
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"reset(seed=[...]) needs one seed per env ({self.num_envs}), got {len(seed)}"
                )
            seeds = [list(seed[s]) for s in self._slices()]
        refs = [
            a.reset.remote(sd, None if mask is None else mask[s])
            for a, s, sd in zip(self._actors, self._slices(), seeds)
        ]
        results = self._ray.get(refs)
        obs = _concat([r[0] for r in results])
        return obs, _merge_infos([r[1] for r in results], self.sizes)

    def step(self, actions):
        """As :meth:`gbx.VecEnv.step`: each shard steps its slice of ``actions`` in parallel."""
        actions = np.asarray(actions)
        if actions.shape[:1] != (self.num_envs,):
            raise ValueError(
                f"actions must have {self.num_envs} rows (one per env), got shape {actions.shape}"
            )
        refs = [a.step.remote(actions[s]) for a, s in zip(self._actors, self._slices())]
        results = self._ray.get(refs)
        obs = _concat([r[0] for r in results])
        reward = np.concatenate([r[1] for r in results])
        terminated = np.concatenate([r[2] for r in results])
        truncated = np.concatenate([r[3] for r in results])
        return obs, reward, terminated, truncated, _merge_infos([r[4] for r in results], self.sizes)

    def call_shards(self, name: str, *args, **kwargs) -> list:
        """``VecEnv.name(*args, **kwargs)`` on every shard at once; the results in shard order."""
        return self._ray.get([a.call.remote(name, args, kwargs) for a in self._actors])

    def read_memory(self, lo: int, hi: int) -> np.ndarray:
        """Bytes [lo, hi) of every env, uint8[num_envs, hi - lo] (as ``VecEnv.read_memory``)."""
        return np.concatenate(self.call_shards("read_memory", lo, hi), axis=0)

    def close_extras(self, **kwargs):
        """Stops the shard actors."""
        actors, self._actors = getattr(self, "_actors", []), []
        if actors:
            try:
                self._ray.get([a.close.remote() for a in actors])
            finally:
                for a in actors:
                    self._ray.kill(a)
