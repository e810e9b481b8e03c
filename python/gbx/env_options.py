"""The :class:`gbx.VecEnv` constructor's arguments: their checks (one ``ValueError`` each, before
anything is built), the device string and the ``hooks=`` entries."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import _native


class RomWarning(UserWarning):
    """A ROM that runs but is not what its header says (e.g. a wrong header checksum)."""


class CacheWarning(UserWarning):
    """The kernel cache could not be used as it is: its directory is refused (another user's,
    or writable by group or others), or an entry was rejected or corrupt and is recompiled.
    The env runs either way (docs/internals/synthesis.md, "Kernel cache")."""


def warn_cache(stacklevel: int = 3) -> None:
    """Turns the native layer's pending kernel cache warnings into :class:`CacheWarning`."""
    import warnings

    for w in _native.take_cache_warnings():
        warnings.warn(w, CacheWarning, stacklevel=stacklevel)


def check_counts(num_envs, frames_per_step, release_after_frames, noop_max, max_episode_frames):
    """Raises ValueError for a bad env count or frame count of :class:`gbx.VecEnv`."""
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool):
        raise ValueError(f"num_envs must be an int, got {type(num_envs).__name__}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be at least 1 (got {num_envs})")
    if not isinstance(frames_per_step, (int, np.integer)) or frames_per_step < 1:
        raise ValueError(f"frames_per_step must be an int >= 1 (got {frames_per_step!r})")
    if release_after_frames < 0:
        raise ValueError(f"release_after_frames must be >= 0 (got {release_after_frames})")
    if noop_max < 0:
        raise ValueError(f"noop_max must be >= 0 (got {noop_max})")
    if max_episode_frames is not None and max_episode_frames < 1:
        raise ValueError(f"max_episode_frames must be >= 1 or None (got {max_episode_frames})")


def check_modes(sticky_actions, render_mode, env_offset) -> None:
    """Raises ValueError for a bad ``sticky_actions``, ``render_mode`` or ``env_offset``."""
    if not 0.0 <= sticky_actions <= 1.0:
        raise ValueError(f"sticky_actions must be a probability in [0, 1] (got {sticky_actions})")
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"render_mode must be None or 'rgb_array' (got {render_mode!r})")
    if (
        isinstance(env_offset, bool)
        or not isinstance(env_offset, (int, np.integer))
        or env_offset < 0
    ):
        raise ValueError(f"env_offset must be an int >= 0 (got {env_offset!r})")


def check_expressions(track: Sequence[str], reward, done, seen_capacity) -> list[str]:
    """Raises ValueError for too many ``track`` expressions, an empty ``reward``/``done`` or
    a bad ``seen_capacity`` (the expressions themselves are checked by the backend); returns
    ``track`` as a list."""
    track = list(track)
    if len(track) > _native.USER_TRACK_MAX:
        raise ValueError(f"at most {_native.USER_TRACK_MAX} tracked values (got {len(track)})")
    for name, expr in (("reward", reward), ("done", done)):
        if expr is not None and (not isinstance(expr, str) or not expr.strip()):
            raise ValueError(f"{name} must be a non-empty C++ expression string or None")
    if (
        isinstance(seen_capacity, bool)
        or not isinstance(seen_capacity, (int, np.integer))
        or not 1 <= seen_capacity <= _native.SEEN_CAPACITY_MAX
    ):
        raise ValueError(
            f"seen_capacity must be an int in 1..{_native.SEEN_CAPACITY_MAX} "
            f"(got {seen_capacity!r})"
        )
    return track


def parse_device(device: str) -> tuple[str, int]:
    """``"cpu"``, ``"mgba"``, ``"cuda"`` or ``"cuda:N"`` as (backend, device index)."""
    if device == "cpu":
        return "cpu", 0
    if device == "mgba":  # the reference emulator (libmgba), for checking the kernels
        return "mgba", 0
    if isinstance(device, str) and device.startswith("cuda"):
        rest = device[4:]
        if rest == "":
            return "cuda", 0
        if rest.startswith(":") and rest[1:].isdigit():
            return "cuda", int(rest[1:])
    raise ValueError(f"unknown device {device!r} (cpu, cuda, cuda:N or mgba)")


def parse_hooks(hooks) -> list[tuple[int, int]]:
    """``hooks=[...]`` entries as (bank, address) pairs, bank -1 for any: an int address,
    ``"bank:addr"`` (both hexadecimal, e.g. ``"3:4A10"``; a ``0x`` prefix is allowed), a plain
    hexadecimal string, or a ``(bank, addr)`` tuple. Ranges are checked by the backend."""
    if isinstance(hooks, (str, bytes, int)):
        raise ValueError(f"hooks must be a list of addresses (got {hooks!r})")
    out = []
    for i, h in enumerate(hooks):
        bank, addr = -1, None
        try:
            if isinstance(h, (int, np.integer)) and not isinstance(h, bool):
                addr = int(h)
            elif isinstance(h, str):
                parts = h.strip().split(":")
                if len(parts) > 2:
                    raise ValueError
                if len(parts) == 2:
                    bank = int(parts[0], 16)
                addr = int(parts[-1], 16)
            elif (
                isinstance(h, tuple)
                and len(h) == 2
                and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in h)
            ):
                bank, addr = int(h[0]), int(h[1])
            else:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"hooks[{i}] = {h!r}: an address is an int, 'addr' or 'bank:addr' (hex), "
                f"or a (bank, addr) tuple"
            ) from None
        if not 0 <= addr <= 0xFFFF:
            raise ValueError(f"hooks[{i}] = {h!r}: address {addr:#x} is outside 0x0000-0xFFFF")
        if bank < -1 or (isinstance(h, str) and bank < 0 and ":" in h) or bank > 0x1FF:
            raise ValueError(f"hooks[{i}] = {h!r}: bank {bank} is not a ROM bank (0-0x1FF)")
        out.append((bank, addr))
    if len(out) > _native.MAX_HOOKS:
        raise ValueError(f"at most {_native.MAX_HOOKS} hooks (got {len(out)})")
    return out
