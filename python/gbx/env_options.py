"""The :class:`gbx.VecEnv` constructor's arguments: their checks (one ``ValueError`` each, a
``TypeError`` for a ``rom`` of another type, before anything is built), the ROM source, seeds,
the device string and the ``hooks=`` entries."""

from __future__ import annotations

import os
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


# The native layer's counts are C ints.
_INT_MAX = 2**31 - 1
# Seeds key 64-bit streams (gbx.env_streams); Gymnasium refuses negative seeds, and a larger
# one would wrap onto a smaller one's stream.
_SEED_MAX = 2**64 - 1


def rom_source(rom) -> tuple[str, bytes]:
    """``rom`` of :class:`gbx.VecEnv` as (spec, contents): a path (str or os.PathLike) or
    ``builtin:NAME`` with no contents, or a ROM's contents (bytes, bytearray, memoryview)
    with the spec ``"bytes"``. Raises TypeError for another type and ValueError for an empty
    path or empty contents (never a file named after the type)."""
    if isinstance(rom, (str, os.PathLike)):
        spec = os.fspath(rom)
        if isinstance(spec, bytes):
            spec = os.fsdecode(spec)
        if not spec:
            raise ValueError("rom is an empty path: pass a .gb path, 'builtin:NAME' or its bytes")
        return spec, b""
    if isinstance(rom, (bytes, bytearray, memoryview)):
        data = bytes(rom)
        if not data:
            raise ValueError(
                "rom is empty bytes: pass a cartridge's contents, a .gb path or 'builtin:NAME'"
            )
        return "bytes", data
    raise TypeError(
        "rom must be a path (str or os.PathLike), 'builtin:NAME' or a cartridge's bytes, "
        f"got {type(rom).__name__}"
    )


def check_seed(seed, what: str = "seed") -> None:
    """Raises ValueError unless ``seed`` is None or an int in [0, 2**64 - 1] (Gymnasium's
    rule, seeds >= 0, with the 64 bits the streams are keyed by)."""
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"{what} must be an int or None, got {seed!r}")
    if not 0 <= int(seed) <= _SEED_MAX:
        raise ValueError(f"{what} must be in [0, 2**64 - 1] (got {int(seed)})")


def check_counts(
    num_envs, frames_per_step, release_after_frames, noop_max, max_episode_frames, threads=0
):
    """Raises ValueError for a bad env count, frame count or thread count of
    :class:`gbx.VecEnv`."""
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool):
        raise ValueError(f"num_envs must be an int, got {type(num_envs).__name__}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be at least 1 (got {num_envs})")
    if num_envs > _INT_MAX:
        raise ValueError(f"num_envs must be at most {_INT_MAX} (got {num_envs})")
    if (
        isinstance(threads, bool)
        or not isinstance(threads, (int, np.integer))
        or not 0 <= threads <= _INT_MAX
    ):
        raise ValueError(f"threads must be an int >= 0 (0: all cores), got {threads!r}")
    if (
        isinstance(frames_per_step, bool)
        or not isinstance(frames_per_step, (int, np.integer))
        or not 1 <= frames_per_step <= _INT_MAX
    ):
        raise ValueError(f"frames_per_step must be an int >= 1 (got {frames_per_step!r})")
    if not 0 <= release_after_frames <= _INT_MAX:
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
