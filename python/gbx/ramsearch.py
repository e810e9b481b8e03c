"""Find the RAM bytes a reward should read, by narrowing candidates across snapshots.

The way cheat finders work: take a snapshot, play, then keep only the addresses whose byte
changed the way the thing you care about did (the score went up: ``increased``; a life was
lost: ``decreased``; nothing happened: ``equal``). Each filter compares the current bytes
with the previous snapshot, keeps the addresses where the comparison holds **in every
searched env**, and makes the current bytes the next baseline. ::

    env = gbx.VecEnv(rom, num_envs=16)
    env.reset(seed=0)
    rs = gbx.RamSearch(env, 0xC000, 0xE000)    # WRAM; every address is a candidate
    env.step(actions_that_score)
    rs.increased()                             # the score went up
    env.step(noop)
    rs.equal()                                 # nothing happened
    print(rs)                                  # RamSearch: 3 candidates: 0xC0A0=0x12 ...
    rs.candidates                              # array of bus addresses
    rs.values()                                # uint8[num_envs, len(candidates)], now

Comparisons are unsigned bytes; ``equal(v)`` / ``changed(by=d)`` / ``increased(by=d)`` /
``decreased(by=d)`` take an exact value or difference (modulo 256). Reads go through
``env.read_memory`` (the memory view, no side effects), one native call per snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RamSearch:
    """Candidate bus addresses in [lo, hi) of ``env``, narrowed by the filters below.

    ``envs``: the env indices whose bytes must all satisfy a filter (default: every env).
    """

    def __init__(self, env, lo: int = 0xC000, hi: int = 0xE000, envs: Sequence[int] | None = None):
        if not 0 <= lo < hi <= 0x10000:
            raise ValueError(f"range must satisfy 0 <= lo < hi <= 0x10000 (got {lo:#x}:{hi:#x})")
        self.env = env
        self.lo, self.hi = int(lo), int(hi)
        n = env.num_envs
        if envs is None:
            self.envs = np.arange(n)
        else:
            self.envs = np.asarray(list(envs), dtype=np.int64)
            if self.envs.size == 0 or self.envs.min() < 0 or self.envs.max() >= n:
                raise ValueError(f"envs must be a non-empty list of indices in 0..{n - 1}")
        self._offsets = np.arange(self.hi - self.lo)  # candidates, as offsets from lo
        self._prev = self._read()
        self.history: list[tuple[str, int]] = [("start", len(self))]

    # -- filters: each keeps the candidates where the comparison holds in every env, makes
    # the current bytes the new baseline, and returns the remaining candidates ------------

    def equal(self, value: int | None = None) -> np.ndarray:
        """Unchanged since the last snapshot, or (``value``) equal to that byte now."""
        if value is None:
            return self._narrow("equal", lambda new, old: new == old)
        v = _byte(value)
        return self._narrow(f"equal {v:#04x}", lambda new, old: new == v)

    def changed(self, by: int | None = None) -> np.ndarray:
        """Different from the last snapshot (by exactly ``by``, mod 256, if given)."""
        if by is None:
            return self._narrow("changed", lambda new, old: new != old)
        d = _byte(by)
        return self._narrow(f"changed by {d}", lambda new, old: (new - old) % 256 == d)

    def increased(self, by: int | None = None) -> np.ndarray:
        """Greater than at the last snapshot (or exactly ``by`` more, mod 256)."""
        if by is None:
            return self._narrow("increased", lambda new, old: new > old)
        d = _byte(by)
        return self._narrow(f"increased by {d}", lambda new, old: (new - old) % 256 == d)

    def decreased(self, by: int | None = None) -> np.ndarray:
        """Less than at the last snapshot (or exactly ``by`` less, mod 256)."""
        if by is None:
            return self._narrow("decreased", lambda new, old: new < old)
        d = _byte(by)
        return self._narrow(f"decreased by {d}", lambda new, old: (old - new) % 256 == d)

    def snapshot(self) -> None:
        """A new baseline without narrowing (e.g. after steps that should not count)."""
        self._prev = self._read()

    # -- results ---------------------------------------------------------------------------

    @property
    def candidates(self) -> np.ndarray:
        """The remaining bus addresses, ascending (int64)."""
        return self._offsets + self.lo

    def values(self) -> np.ndarray:
        """The candidates' bytes now, uint8[len(envs), len(candidates)]."""
        return self._read()[:, self._offsets]

    def __len__(self) -> int:
        return int(self._offsets.size)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{a:#06x}={v:#04x}"
            for a, v in zip(self.candidates[:8], self._prev[0, self._offsets[:8]])
        )
        more = " ..." if len(self) > 8 else ""
        return (
            f"RamSearch: {len(self)} candidates in [{self.lo:#06x}, {self.hi:#06x}): {shown}{more}"
        )

    # -- internals -------------------------------------------------------------------------

    def _read(self) -> np.ndarray:
        # int16 so that differences need no wrap-around care.
        return self.env.read_memory(self.lo, self.hi)[self.envs].astype(np.int16)

    def _narrow(self, name: str, keep) -> np.ndarray:
        new = self._read()
        ok = keep(new[:, self._offsets], self._prev[:, self._offsets]).all(axis=0)
        self._offsets = self._offsets[ok]
        self._prev = new
        self.history.append((name, len(self)))
        return self.candidates


def _byte(v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= 255:
        raise ValueError(f"a byte value or difference is an int in 0..255 (got {v!r})")
    return int(v)
