"""Save states of a :class:`gbx.VecEnv` (its methods, from :class:`SaveStates`): saving and
loading one env's machine, copying one env into others on the device, and what resets return
envs to (one state, one per env, or a pool drawn from each env's random stream).

A state holds the env's two framebuffers (the screen and the frame in progress) and says
whether they are real: :func:`state_has_screen`. An env whose kernel draws nothing (no pixel
observation, no ``render_mode``) does not keep them, so its states say they hold no screen; a
drawing env given one warns (:class:`ScreenlessStateWarning`) and shows the framebuffer the
state holds until it has drawn a frame whole (docs/guide/states.md)."""

from __future__ import annotations

import warnings

import numpy as np

# Save-state blob layout (runtime/include/gbx/runtime/states/save_state.h): a 56-byte header (magic
# at 0, payload kind at 45: 0 = kernel fields), then a u32 record count and the records.
_HEADER = 56
_KIND_KERNEL = 0
# lcd_flags bits (templates/hw/lcd.h): GBX_LCD_FLAG_NO_SCREEN.
_LCD_FLAG_NO_SCREEN = 0x08


class ScreenlessStateWarning(UserWarning):
    """A state that holds no screen (saved after a kernel that draws nothing ran the env)
    given to an env that draws: its first observations show the framebuffer the state
    holds, not the screen at that point (docs/guide/states.md)."""


def state_has_screen(blob) -> bool | None:
    """Whether save state ``blob`` holds the screen a drawing env showed at that point: True
    for a state saved by an env that draws (pixel observations or ``render_mode``), or made
    by :func:`gbx.games.start_state`, or the power-on state; False once a kernel that draws
    nothing has run the env (its framebuffers were left as they were); None for a state that
    holds no GBX framebuffer (``device="mgba"``). Raises ValueError for bytes that are not a
    GBX save state."""
    data = _as_blob(blob)
    if len(data) < _HEADER + 4 or data[:4] != b"GBXS":
        raise ValueError("not a GBX save state (no GBXS header)")
    if data[45] != _KIND_KERNEL:
        return None
    pos, count = _HEADER + 4, int.from_bytes(data[_HEADER : _HEADER + 4], "little")
    for _ in range(count):
        if pos >= len(data):
            break
        name_len = data[pos]
        name = data[pos + 1 : pos + 1 + name_len]
        pos += 1 + name_len
        size = int.from_bytes(data[pos : pos + 4], "little")
        pos += 4
        if name == b"lcd_flags" and size >= 1 and pos < len(data):
            return not data[pos] & _LCD_FLAG_NO_SCREEN
        pos += size
    raise ValueError("not a GBX save state (truncated, or no lcd_flags record)")


class SaveStates:
    """The save-state methods of :class:`gbx.VecEnv` (a mixin: it uses the env's backend,
    episode counters and random streams).

    A state is a self-describing blob (runtime/include/gbx/runtime/states/save_state.h): it names
    the ROM (SHA-256), the state ABI and the backend kind, and loading refuses one that does
    not match with a ValueError, leaving the env untouched."""

    def save_state(self, i: int) -> bytes:
        """Env ``i``'s whole machine state as bytes."""
        return self._live().save_state(self._index(i))

    def save_states(self) -> list[bytes]:
        """Every env's state, in env order."""
        return self._live().save_states()

    def load_state(self, i: int, blob: bytes) -> None:
        """Puts ``blob`` into env ``i`` (the others are untouched) and starts a new episode
        there: its return and length restart, a pending autoreset is cancelled, its outputs
        (the arrays from the last step/reset, which are views) are refreshed from the loaded
        state and its frame stack is refilled."""
        i = self._index(i)
        blob = _as_blob(blob)
        self._live().load_state(i, blob)
        self._warn_screenless([blob], f"load_state({i})")
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[i] = True
        self._clear_episode(mask)
        self._needs_reset[i] = False
        self._obs.observe(fresh=mask, stepped=False)

    def copy_state(self, src: int, dst_mask) -> None:
        """Env ``src``'s whole machine state into every env where ``dst_mask`` (bool[num_envs])
        is set, on the backend itself (cpu: memory copies; cuda: one copy kernel on the
        device, no host copy): go-explore and "swarm" restarts. ``src`` itself is never
        overwritten. Each destination starts a new episode as after :meth:`load_state`; its
        outputs and frame stack are refreshed. cpu and cuda devices."""
        native = self._live()
        src = self._index(src)
        mask = np.asarray(dst_mask)
        if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
            raise ValueError(
                f"copy_state: dst_mask must be a bool array of shape ({self.num_envs},), "
                f"got {mask.dtype} {mask.shape}"
            )
        mask = mask.copy()
        mask[src] = False
        native.copy_state(src, mask.astype(np.uint8))
        self._clear_episode(mask)
        self._needs_reset[mask] = False
        self._obs.observe(fresh=mask, stepped=False)

    def set_reset_state(self, blobs, pool: bool = False) -> None:
        """What resets (``reset()`` and autoreset) return envs to from now on: ``None`` = the
        power-on state, one blob = every env, a list of ``num_envs`` blobs = one each. Every
        blob is checked before any is kept. Nothing is reset now.

        ``pool=True``: ``blobs`` (one or more) is a pool; each reset puts every reset env into
        one of them drawn from that env's random stream (so from the seed; reproducible and
        the same in a shard). The backend holds one reset image per env: when a draw changes
        an env's entry, every env's image is set again (one decode each; on cuda one upload
        of all of them), a host cost per reset that a device-side pool would not have."""
        native = self._live()
        if pool:
            if isinstance(blobs, (bytes, bytearray, memoryview)):
                blobs = [blobs]
            pool_blobs = [_as_blob(b) for b in (blobs or [])]
            if not pool_blobs:
                raise ValueError("set_reset_state(pool=True) needs at least one state")
            # Checked by the backend, num_envs at a time (every blob decoded before any is
            # kept; a pool larger than num_envs in several such groups).
            n, k = self.num_envs, len(pool_blobs)
            for first in range(0, k, n):
                group = [pool_blobs[(first + i) % k] for i in range(n)]
                try:
                    native.set_reset_state(group if n > 1 else group[:1])
                except ValueError as e:
                    raise ValueError(f"reset state pool ({k} states): {e}") from None
            self._pool, self._pool_index = pool_blobs, None
            self._warn_screenless(pool_blobs, f"reset state pool ({k} states)")
            return
        self._pool = self._pool_index = None
        if blobs is None:
            blobs = []
        elif isinstance(blobs, (bytes, bytearray, memoryview)):
            blobs = [blobs]
        else:
            blobs = list(blobs)
            if len(blobs) not in (1, self.num_envs):
                raise ValueError(
                    f"set_reset_state takes one blob or {self.num_envs} (one per env), got {len(blobs)}"
                )
        blobs = [_as_blob(b) for b in blobs]
        native.set_reset_state(blobs)
        self._warn_screenless(blobs, "set_reset_state")

    def _warn_screenless(self, blobs: list[bytes], what: str) -> None:
        """A :class:`ScreenlessStateWarning` when this env draws and some of ``blobs`` (already
        accepted by the backend) hold no screen."""
        if not self._draws:
            return
        bad = sum(1 for b in blobs if state_has_screen(b) is False)
        if bad:
            which = "the state holds" if len(blobs) == 1 else f"{bad} of {len(blobs)} states hold"
            warnings.warn(
                f"{what}: {which} no screen (gbx.state_has_screen: an env that draws nothing "
                "ran it, or it was imported), so the observations show the framebuffer it "
                "holds until this env has drawn a frame whole (1 or 2 frames on); make the "
                "state with an env that draws to start on its screen (docs/guide/states.md)",
                ScreenlessStateWarning,
                stacklevel=3,
            )

    def _draw_reset_states(self, mask: np.ndarray | None) -> None:
        """reset_states: each env in ``mask`` (None: all) draws its pool entry for this reset;
        the backend's per-env reset images are set again when a draw changed one."""
        if self._pool is None:
            return
        if mask is None:
            mask = np.ones(self.num_envs, dtype=bool)
        drawn = self._streams.integers("pool", len(self._pool) - 1, mask)
        index = (
            np.zeros(self.num_envs, dtype=np.int64)
            if self._pool_index is None
            else self._pool_index.copy()
        )
        index[mask] = drawn[mask]
        if self._pool_index is not None and np.array_equal(index, self._pool_index):
            return
        self._live().set_reset_state([self._pool[k] for k in index])
        self._pool_index = index


def _as_blob(b) -> bytes:
    if not isinstance(b, (bytes, bytearray, memoryview)):
        raise TypeError(f"a save state is bytes, got {type(b).__name__}")
    return bytes(b)
