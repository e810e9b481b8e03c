"""Per-env random streams: what makes a sharded vector env equal the unsharded one.

Every env draws its reset no-op frames and sticky-action coins from its own counter-based
stream, keyed by ``(seed, global env index)`` and advanced only by that env's own draws. So
env ``i`` sees the same random numbers whether it is env ``i`` of one VecEnv or env
``i - offset`` of a shard that starts at ``offset`` (``gbx.distributed``), and whatever the
other envs do (a plain generator shared by all envs would hand out different numbers as soon
as two shards reset different envs). The generator is SplitMix64 (Steele, Lea, Flood 2014),
vectorised over envs in numpy's wrapping uint64 arithmetic.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_KIND = {
    "noop": np.uint64(0x6E6F6F70),
    "sticky": np.uint64(0x73746B79),
    "pool": np.uint64(0x706F6F6C),  # which reset state of a pool (VecEnv reset_states)
}


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _entropy() -> int:
    return int(np.random.SeedSequence().entropy) & (2**64 - 1)


class EnvStreams:
    """Streams for envs ``offset .. offset + num_envs - 1`` of a vector env seeded ``seed``."""

    def __init__(self, seed: int | None, num_envs: int, offset: int = 0):
        if seed is None:
            seed = _entropy()
        self.seed = int(seed) & (2**64 - 1)
        with np.errstate(over="ignore"):
            index = np.arange(offset, offset + num_envs, dtype=np.uint64)
            self._key = _mix(np.uint64(self.seed) ^ _mix(index * _GOLDEN + _GOLDEN))
        self._count = {k: np.zeros(num_envs, dtype=np.uint64) for k in _KIND}

    def reseed(self, seeds: list) -> None:
        """Per-env seeds (``reset(seed=[...])``): env i's stream restarts keyed by ``seeds[i]``
        alone, so two envs given the same seed draw the same numbers wherever they sit (a
        per-env seed names that env's stream, as Gymnasium's sub-env seeds do); ``None`` keeps
        that env's stream as it is."""
        for i, s in enumerate(seeds):
            if s is None:
                continue
            with np.errstate(over="ignore"):
                self._key[i] = _mix(np.uint64(int(s) & (2**64 - 1)) ^ _mix(_GOLDEN))
            for c in self._count.values():
                c[i] = 0

    def uniform(self, kind: str, mask: np.ndarray | None = None) -> np.ndarray:
        """One float64 in [0, 1) per env; only envs in ``mask`` (all if None) advance."""
        count = self._count[kind]
        with np.errstate(over="ignore"):
            x = _mix(self._key ^ _KIND[kind] * _GOLDEN + count * _GOLDEN)
        if mask is None:
            count += np.uint64(1)
        else:
            count[mask] += np.uint64(1)
        return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def integers(self, kind: str, high: int, mask: np.ndarray | None = None) -> np.ndarray:
        """One int in [0, high] per env (the envs outside ``mask`` get 0 and do not advance)."""
        v = np.minimum((self.uniform(kind, mask) * (high + 1)).astype(np.int64), high)
        return v if mask is None else np.where(mask, v, 0)
